"""The hash-chained evidence ledger of every turn (not built yet)."""

__all__: list[str] = []
