"""``Indexer``: keeping a workspace's index fresh (build, refresh, rebuild beside, gc) and
the View every read answers from."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from engine._workspace._state import State
from engine.core import (
    GcReport,
    IndexBusyError,
    IndexNotBuiltError,
    IndexReport,
    IndexStateError,
    Progress,
)
from engine.index import Layers, RefreshTooFar, WriterLock, combined_report
from overlays import View

LAYOUT_DIRS = ("bases", "overlays", "segments", "checkout")  # what a rebuild replaces
REBUILD_DIR = "rebuild"  # where a rebuild is made, beside the index in use
REPLACED_DIR = "replaced"  # where the old layout waits to be removed after the swap


class Indexer:
    """The one index/refresh at a time in this process, and the Views reads get."""

    def __init__(self, state: State) -> None:
        self._state = state
        self.refreshing = threading.Lock()  # one index/refresh at a time in this process
        # Who makes a refresh too big for a request (a new base, a checkout's worth of
        # files): None, the call itself (the library, the CLI); else this callback, in the
        # background (a server), while calls answer from the index as it was.
        self.far_refresh: Callable[[], object] | None = None
        self.seen_token = ""  # the working tree's token as the last view() read it

    def view(self) -> tuple[View, tuple[str, ...]]:
        """The View a call reads, refreshed first when the working tree moved (see
        ``Workspace.view``)."""
        layers = self._state.layers
        layers.check_base_ref()
        try:
            info, token = layers.current()
        except IndexNotBuiltError as exc:
            if not self._finish_killed_swap():
                # A first index under way (a server's, another shell's): say so, where
                # "run cortex index" sent the caller to a command then refused as busy.
                holder = WriterLock.holder(self._state.state_dir / "lock")
                if holder is None:
                    raise
                raise IndexNotBuiltError(
                    f"no index of {self._state.root} yet: the first one is being built by "
                    f"{holder}; try again when it is done"
                ) from exc
            info, token = layers.current()
        notes: tuple[str, ...] = ()
        if info.token != token:
            if self._state.config.refresh == "advise":
                notes = ("stale: the working tree changed since the last index; run "
                         "`cortex index` (answered from the index as it was)",)  # fmt: skip
            elif not self.refreshing.acquire(blocking=False):
                notes = ("stale: the working tree changed and a refresh is running; "
                         "answered from the index as it was",)  # fmt: skip
            else:
                try:
                    self.index_locked(None, rebuild=False, quick=self.far_refresh is not None)
                    info, token = layers.current()
                except RefreshTooFar as exc:
                    notes = (f"stale: {exc}; answered from the index as it was while it is "
                             "brought up to date in the background",)  # fmt: skip
                    if self.far_refresh is not None:
                        self.far_refresh()
                except IndexBusyError as exc:
                    notes = (f"stale: the working tree changed and another process is "
                             f"indexing ({exc}); answered from the index as it was",)  # fmt: skip
                finally:
                    self.refreshing.release()
        self.seen_token = token
        return layers.view(info), notes

    def index(self, progress: Progress | None, *, rebuild: bool) -> IndexReport:
        """Bring the index up to date with the folder (see ``Workspace.index``)."""
        with self.refreshing:
            return self.index_locked(progress, rebuild=rebuild)

    def index_locked(
        self, progress: Progress | None, *, rebuild: bool, quick: bool = False
    ) -> IndexReport:
        """``index``, for a caller holding ``refreshing`` (``quick``: see ``Layers.refresh``)."""
        state = self._state
        with WriterLock(state.state_dir / "lock"):
            self.finish_swap()
            if rebuild and state.manifest.exists():
                return self._rebuild_beside(progress)
            remove_tree(state.state_dir / REBUILD_DIR)  # what a killed rebuild left (its size)
            if rebuild or not state.manifest.exists():
                state.manifest.write()
            else:
                state.manifest.check()
            embedder = state.embedder
            try:
                before = state.layers.view(state.layers.current()[0]).files()
            except IndexNotBuiltError:
                before = {}
            overlay, info, base = state.layers.refresh(
                counter=state.counter,
                embedder=embedder,
                cache=state.cache if embedder is not None else None,
                progress=progress,
                quick=quick,
            )
            skipped = info.skipped_counts(state.layers.segment(state.layers.base_dir(info.base)))
            return combined_report(base, overlay, before, state.layers.view(info).files(), skipped)

    def _rebuild_beside(self, progress: Progress | None) -> IndexReport:
        """A rebuild from scratch, made beside the index in use and swapped in when whole:
        until then (and after a kill at any point) the old index keeps answering."""
        state = self._state
        staging = state.state_dir / REBUILD_DIR
        remove_tree(staging)  # what a killed rebuild left
        staging.mkdir(parents=True)
        embedder = state.embedder
        try:
            before = state.layers.view(state.layers.current()[0]).files()
        except (IndexNotBuiltError, IndexStateError):
            before = {}
        fresh = Layers(state.root, staging, state.config)
        fresh.inside = state.layers.inside  # the whole state folder stays out of the walk
        try:
            overlay, info, base = fresh.refresh(
                counter=state.counter,
                embedder=embedder,
                cache=state.cache if embedder is not None else None,
                progress=progress,
            )
        finally:
            fresh.close()
        # The swap: a few renames inside one folder. Readers that opened the old segments
        # keep reading them (POSIX keeps renamed and unlinked files alive while open).
        state.layers.close()
        replaced = state.state_dir / REPLACED_DIR
        remove_tree(replaced)
        replaced.mkdir()
        for name in LAYOUT_DIRS:
            if (state.state_dir / name).exists():
                (state.state_dir / name).replace(replaced / name)
            if (staging / name).exists():
                (staging / name).replace(state.state_dir / name)
        state.manifest.write()
        remove_tree(replaced)
        remove_tree(staging)
        skipped = info.skipped_counts(state.layers.segment(state.layers.base_dir(info.base)))
        return combined_report(base, overlay, before, state.layers.view(info).files(), skipped)

    def _finish_killed_swap(self) -> bool:
        """Whether a rebuild killed between the renames of its swap (the old index moved
        out, the new one not yet in) was put back for a reader: the next index would, but
        until then every call said there was no index."""
        if not (self._state.state_dir / REPLACED_DIR).exists():
            return False
        try:
            with self.refreshing, WriterLock(self._state.state_dir / "lock"):
                self.finish_swap()
        except IndexBusyError:
            return False  # a rebuild is swapping now: it will be whole in a moment
        self._state.layers.close()
        return True

    def finish_swap(self) -> None:
        """After a rebuild killed in the middle of its swap: put back what was moved out and
        not replaced (the old index, whole), and drop the leftovers."""
        state_dir = self._state.state_dir
        replaced = state_dir / REPLACED_DIR
        if not replaced.exists():
            return
        for name in LAYOUT_DIRS:
            if (replaced / name).exists() and not (state_dir / name).exists():
                (replaced / name).replace(state_dir / name)
        remove_tree(replaced)

    def gc(self, *, dry_run: bool) -> GcReport:
        """Remove the overlays and bases nothing uses any more (see ``Workspace.gc``)."""
        with self.refreshing, WriterLock(self._state.state_dir / "lock"):
            return self._state.layers.gc(dry_run=dry_run)


def remove_tree(path: Path) -> None:
    """Remove the folder at ``path`` and all in it, when there is one."""
    if path.exists():
        shutil.rmtree(path)
