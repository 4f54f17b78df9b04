"""Per-branch copy-on-write overlays over a shared base index (not built yet)."""

__all__: list[str] = []
