"""``Forgetter``: removing files' and a string's stored text from everything a workspace
keeps (segments, vector cache, ledger texts, saved notes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine._workspace._index import REBUILD_DIR, REPLACED_DIR, Indexer, remove_tree
from engine._workspace._notes import Notes
from engine._workspace._state import State
from engine.core import (
    ConfigError,
    ForgetReport,
    IndexNotBuiltError,
    IndexStateError,
    Progress,
    check_items,
)
from engine.index import (
    MEMORY_FILE,
    WriterLock,
    forget_in_segment,
    matches_path,
    segment_dirs,
)
from engine.memory import LedgerPurge
from engine.segment import Segment
from ledger import JSON

FORGET_MIN_CHARS = 6  # shortest text ``forget`` takes: shorter ones match ordinary code


class Forgetter:
    """``Workspace.forget``, over the parts that hold stored text."""

    def __init__(self, state: State, indexer: Indexer, notes: Notes) -> None:
        self._state = state
        self._indexer = indexer
        self._notes = notes

    def forget(
        self,
        paths: Sequence[str],
        text: str | None,
        *,
        dry_run: bool,
        progress: Progress | None,
    ) -> ForgetReport:
        """Forget ``paths`` and ``text`` everywhere (see ``Workspace.forget``)."""
        state = self._state
        targets = sorted({self._relative(p) for p in check_items("paths", paths)})
        if text is not None and len(text.strip()) < FORGET_MIN_CHARS:
            raise ConfigError(
                f"the text to forget must have at least {FORGET_MIN_CHARS} characters "
                "besides spaces (a shorter one would match ordinary code)"
            )
        if not targets and not text:
            raise ConfigError("name the files to forget, the text to forget, or both")
        with self._indexer.refreshing, WriterLock(state.state_dir / "lock"):
            self._indexer.finish_swap()
            try:
                known = sorted(self._indexer.view()[0].files())
            except (IndexNotBuiltError, IndexStateError):
                known = []
            if not dry_run:  # leftovers of a killed build hold file text in clear
                for name in (REBUILD_DIR, REPLACED_DIR, "checkout"):
                    remove_tree(state.state_dir / name)
            state.layers.close()
            targets = _with_links(state.root, targets, known)
            files: set[str] = set()
            touched: set[str] = set()
            chunks = segments = 0
            keys: set[str] = set()
            held: list[str] = []  # files whose WAL a reader kept holding the dropped text
            if not dry_run:  # an overlay's saved memory holds its and its base's terms
                for saved in state.state_dir.rglob(MEMORY_FILE):
                    saved.unlink(missing_ok=True)
            for directory in segment_dirs(state.state_dir, skip=(REBUILD_DIR, REPLACED_DIR)):
                segment = Segment(directory)
                try:
                    found = forget_in_segment(
                        segment, paths=targets, text=text, dry_run=dry_run, progress=progress
                    )
                finally:
                    segment.close()
                if not found.cleared:
                    held.append(str(segment.meta.path))
                files.update(found.files)
                touched.update(found.touched)
                chunks += found.chunks
                segments += 1 if found.chunks else 0
                keys |= found.vector_keys
            vectors = 0
            if state.cache_path.exists():  # a dry run counts what would go
                if dry_run:
                    vectors = state.cache.held(keys)
                else:
                    vectors, cleared = state.cache.delete(keys)
                    held += [] if cleared else [str(state.cache_path)]
            purged = LedgerPurge(0, 0, ())
            if state.has_journal():
                note: dict[str, JSON] = {"files": list(targets), "text": text is not None}
                purged = state.journal.purge(
                    in_paths=(lambda p: matches_path(p, targets)) if targets else None,
                    text=text, note=note, dry_run=dry_run,
                )  # fmt: skip
                # (Warm sessions and the outcomes tier read their texts again when they
                # next see the purge record, in this process or any other.)
            left = held + ([] if purged.cleared else [str(self._state.ledger_path)])
            notes = 0
            if text and self._notes.exists():
                store = self._notes.memory.store
                notes, cleared = store.purge(text, dry_run=dry_run)
                left += [] if cleared else [str(store.path)]
            embedder = None if dry_run else state.embedder
            remote = state.layers.forget_remote(
                (lambda p: matches_path(p, targets)) if targets else None, text,
                dry_run=dry_run, embedder=embedder,
                cache=state.cache if embedder is not None else None,
            )  # fmt: skip
            state.layers.close()
        root = state.root
        present = [p for p in known if matches_path(p, targets) and (root / p).is_file()]
        if text:
            present += [p for p in known if p not in present and _holds(root / p, text)]
        return ForgetReport(
            dry_run, sorted(files), sorted(touched), chunks, segments, vectors, purged.texts,
            purged.turns, len(purged.chained), sorted(present), notes, remote,
            list(purged.chained), left,
        )  # fmt: skip

    def _relative(self, path: str) -> str:
        """A workspace-relative '/'-separated path for ``path`` (relative or absolute)."""
        root = self._state.root
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ConfigError(f"not a path: {path!r}")
        given = Path(path)
        absolute = given if given.is_absolute() else root / given
        # The folders resolved, the name kept: a symlinked file is indexed under its name.
        named = absolute.name not in ("", ".", "..")
        real = absolute.parent.resolve() / absolute.name if named else absolute.resolve()
        try:
            rel = real.relative_to(root.resolve())
        except ValueError:
            raise ConfigError(f"{path} is outside the workspace {root}") from None
        if not rel.parts:
            raise ConfigError("forgetting the whole workspace: remove its state folder instead")
        return rel.as_posix()


def _with_links(root: Path, targets: list[str], known: list[str]) -> list[str]:
    """``targets`` and every indexed path that reaches one through a symlink (a link to a
    forgotten file, or into a forgotten folder): the same bytes under another name."""
    if not targets:
        return targets
    base = root.resolve()
    real = [(root / t).resolve() for t in targets]
    more = []
    for path in known:
        if matches_path(path, targets):
            continue
        seen = (root / path).resolve()
        if seen.is_relative_to(base) and any(seen == r or seen.is_relative_to(r) for r in real):
            more.append(path)
    return sorted({*targets, *more})


def _holds(path: Path, text: str) -> bool:
    """Whether the file at ``path`` holds ``text`` (as UTF-8 bytes)."""
    try:
        return text.encode("utf-8") in path.read_bytes()
    except OSError:
        return False
