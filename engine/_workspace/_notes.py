"""``Notes``: a workspace's saved memory notes, wired to its code: the store (opened on
first use), the memory lane a context shows, and the code links notes are checked against."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from contextlib import suppress
from functools import cached_property
from pathlib import Path

from engine._workspace._index import Indexer
from engine._workspace._state import State
from engine.core import (
    CodeLink,
    IndexNotBuiltError,
    IndexStateError,
    LedgerStateError,
    NotFoundError,
    Recalled,
)
from engine.index import Manifest
from engine.memory import (
    Candidate,
    CitedRef,
    CodeAccess,
    Memory,
    NoteStore,
    file_lines,
    recall_query,
    still_matches,
)
from indexers import decode, git_overrides, redact, sha256_text
from overlays import View

# The memory lane's share of a turn's budget, and the notes it may show: a few facts the
# agent saved, never enough to crowd out the code evidence.
MEMORY_SHARE = 0.15
MEMORY_NOTES = 5


class Notes:
    """This project's saved notes as this user sees them (``<state>/memory.sqlite``)."""

    def __init__(self, state: State, indexer: Indexer) -> None:
        self._state = state
        self._indexer = indexer
        self._memory: Memory | None = None

    def close(self) -> None:
        """Close the store, if it was opened."""
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    @property
    def path(self) -> Path:
        """Where the notes live: the state folder's ``memory.sqlite``; in a linked git
        working tree whose state folder is its own (a relative ``state_dir``), the main
        working tree's, so every working tree of a repository shares one store (a linked
        tree that already has a store of its own, made before, keeps it: nothing saved
        there goes missing)."""
        own = self._state.state_dir / "memory.sqlite"
        common = self._common_dir
        config_dir = Path(self._state.config.state_dir)
        if common is None or config_dir.is_absolute() or common.name != ".git" or own.exists():
            return own
        main = common.parent
        if main.resolve() == self._state.root.resolve() or not main.is_dir():
            return own
        return main / config_dir / "memory.sqlite"

    @cached_property
    def _common_dir(self) -> Path | None:
        """The repository's common git folder (None outside git); asked once."""
        try:
            out = subprocess.run(
                ["git", "-C", str(self._state.root), "rev-parse", "--path-format=absolute",
                 "--git-common-dir"], capture_output=True, text=True, timeout=10, check=False,
                env={**os.environ, **git_overrides()},
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return Path(out.stdout.strip()).resolve() if out.returncode == 0 and out.stdout.strip() \
            else None  # fmt: skip

    def exists(self) -> bool:
        """Whether a store is open or on disk (reading never creates one)."""
        return self._memory is not None or self.path.exists()

    @property
    def memory(self) -> Memory:
        """The notes (see ``Workspace.memory``), opened, and created, on first use."""
        state = self._state
        with state.lazy:
            if self._memory is None:
                from engine.segment import code_terms

                if not state.manifest.exists():  # the state folder stays one cortex knows
                    state.manifest.write()
                shared = Manifest(self.path.parent)  # the main working tree's, when shared
                if shared.state_dir != state.state_dir and not shared.exists():
                    shared.check()  # a folder of something else is refused, not written into
                    shared.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                    shared.write()

                store = NoteStore(
                    self.path,
                    project=self.project,
                    user=state.layers.user,
                    terms=code_terms,
                    embedder=state.embedder,
                    code=CodeAccess(self._link_entities, self.text_now),
                )
                self._memory = Memory(store)
            return self._memory

    def recalled(self, query: str, budget: int) -> tuple[Recalled, ...]:
        """The memory lane: saved notes relevant to ``query``, best first, in their share of
        the budget (none when nothing was ever saved here: reading creates no store). A
        request longer than a memory search takes is recalled by its leading part."""
        if not self.exists():
            return ()
        counter = self._state.counter
        room, used, out = int(budget * MEMORY_SHARE), 0, []
        for item in self.memory.items(recall_query(query), MEMORY_NOTES):
            for text in (item.shown, item.shown_short):  # whole, else its preview
                head = f"[99] {item.hit.title}\nSource: {item.hit.uri}\n"
                tokens = counter.count(head + text) + 2
                if used + tokens <= room:
                    used += tokens
                    out.append(Recalled(item.hit.uri, item.hit.title, text, sha256_text(text),
                                        item.hit.score, tokens))  # fmt: skip
                    break
        return tuple(out)

    def still_matches(self, ref: CitedRef) -> bool:
        """Whether a cited source still shows what it showed: a file's lines, or a note's
        text as the memory lane would show it now."""
        if not ref.source_uri.startswith("memory:"):
            if still_matches(self._state.root, ref):
                return True
            shown = None  # the snippet as packed (the ledger keeps it): see still_matches
            if self._state.config.ledger and self._state.has_journal():
                with suppress(LookupError, ValueError, LedgerStateError):
                    shown = self._state.journal.text(ref.sha256)
            return shown is not None and still_matches(self._state.root, ref, shown)
        try:
            item = self.memory.item(ref.source_uri.removeprefix("memory:"))
        except NotFoundError:
            return False
        return ref.sha256 in (sha256_text(item.shown), sha256_text(item.shown_short))

    @property
    def project(self) -> str:
        """What names this project for memory: the repository (its common git folder, so
        every working tree of one repository shares its notes), else the folder."""
        common = self._common_dir
        return sha256_text(str(common if common is not None else self._state.root))[:16]

    def text_now(self, path: str) -> str | None:
        """A workspace file's text as this user's View holds it (secrets redacted), or None
        when it is gone or outside the workspace."""
        root = self._state.root
        full = (root / path).resolve()
        if not full.is_relative_to(root) or not full.is_file():
            return None
        try:
            return redact(decode(full.read_bytes()), path).text
        except OSError:
            return None

    def _link_entities(self, entities: Sequence[Candidate]) -> list[CodeLink | None]:
        """The indexed lines each of a note's entities names, against one View (one check
        of the working tree for the note, not one per entity); all None before an index."""
        try:
            view, _ = self._indexer.view()
        except (IndexNotBuiltError, IndexStateError):
            return [None] * len(entities)
        return [self._link_entity(view, e) for e in entities]

    def _link_entity(self, view: View, entity: Candidate) -> CodeLink | None:
        """The indexed lines a note's entity names (a file, ``path:line`` or a symbol), with
        their sha256 as the caller sees them now; None when it names nothing indexed."""
        if entity.kind == "symbol":
            names = [entity.value, entity.value.rsplit(".", 1)[-1]]
            found = view.defining(list(dict.fromkeys(names)), limit=1)
            ids = next((found[n] for n in names if found.get(n)), [])
            chunk = next(iter(view.chunks(ids[:1]).values()), None)
            if chunk is None:
                return None
            path, start, end = chunk.path, chunk.span.start_line, chunk.span.end_line
        else:
            paths = view.paths_like(entity.value, 2)
            if not paths or (len(paths) > 1 and paths[0] != entity.value):
                return None
            path, start, end = paths[0], entity.start_line, entity.end_line
            if entity.kind == "place":
                near = [c for c in view.chunks_near(path, start, end)
                        if c.span.start_line <= start and end <= c.span.end_line]  # fmt: skip
                if near:
                    best = min(near, key=lambda c: c.span.end_line - c.span.start_line)
                    start, end = best.span.start_line, best.span.end_line
        text = self.text_now(path)
        if text is None:
            return None
        lines = file_lines(text)
        if entity.kind == "path":
            start, end = 1, max(1, len(lines))
        if not 1 <= start <= end <= len(lines):
            return None
        name = entity.key.split(":", 1)[1]
        return CodeLink(name, path, start, end, sha256_text("\n".join(lines[start - 1 : end])))
