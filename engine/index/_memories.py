"""The Views' in-memory BM25 sides, one per base folder, overlay folder and base contents,
each saved in its overlay folder so that another process starts from it.

``memory.npz`` holds ``overlays.OverlayMemory``'s sides. A refresh (under the writer lock)
brings them up to the branch's View and saves them; a new process reads the file and then
only the paths whose documents changed since. It is derived from the indexed text, so
``forget`` removes every one; a file that is missing, unreadable or of another base is
built again from the documents.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

from engine.core import Progress
from engine.segment import Segment
from overlays import OverlayMemory

__all__ = ["MEMORY_FILE", "Memories"]

MEMORY_FILE = "memory.npz"


class Memories:
    """The in-memory sides of one workspace's Views, by (base folder, overlay folder)."""

    def __init__(self) -> None:
        self._held: dict[tuple[Path, Path], OverlayMemory] = {}

    def of(self, base_dir: Path, overlay_dir: Path, base: Segment) -> OverlayMemory:
        """The side of the Views over ``base`` (in ``base_dir``) and the overlay in
        ``overlay_dir``: a new one when the base's contents changed (its commit, its
        generation, its chunker), which does not read another base's file."""
        ident = f"{base_dir.name}:{base.meta.generation}:{base.meta.get_info('chunker') or ''}"
        memory = self._held.get((base_dir, overlay_dir))
        if memory is None or memory.ident != ident:
            memory = self._held[(base_dir, overlay_dir)] = OverlayMemory(
                overlay_dir / MEMORY_FILE, ident
            )
        return memory

    def prepare(
        self,
        base_dir: Path,
        overlay_dir: Path,
        segments: tuple[Segment, Segment],
        overlay_paths: Collection[str],
        tombstones: Collection[str],
        progress: Progress | None,
    ) -> None:
        """Bring the side up to the View of ``overlay_paths`` and ``tombstones`` over the
        (base, overlay) ``segments`` and save it (``OverlayMemory.prepare``)."""
        if progress is not None:
            progress.stage("overlay memory", None, "paths")
        paths = frozenset(overlay_paths)
        read = self.of(base_dir, overlay_dir, segments[0]).prepare(
            *segments, paths, paths | frozenset(tombstones)
        )
        if progress is not None:
            progress.advance(read)
            progress.end()

    def values(self) -> Iterator[OverlayMemory]:
        """Every side held."""
        return iter(list(self._held.values()))

    def forget(self, directory: Path | None = None) -> None:
        """Drop the sides over ``directory`` (a base or an overlay folder), or every one."""
        self._held = {k: v for k, v in self._held.items()
                      if directory is not None and directory not in k}  # fmt: skip
