"""``Workspace``: the public entry point over one folder and its ``.cortex`` state."""

from __future__ import annotations

import difflib
import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from engine._build import ContextSettings, build_pack
from engine._config import Config
from engine._context import ContextPack, FeedbackResult, SessionState
from engine._errors import (
    ConfigError,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    IndexStateError,
    UnknownReplayKeyError,
    WorkspaceError,
    WorkspaceNotFoundError,
)
from engine._indexer import IndexReport, Progress
from engine._journal import Inputs, Journal
from engine._layers import GcReport, Layers
from engine._lock import WriterLock
from engine._query import ToolSignal
from engine._rerank import Scored
from engine._search import FUSION_DEPTH, SearchHit, SearchMode, fuse
from engine._segment import Hit
from engine._status import Resolved, Status, combined_report, resolve_in, status_of
from indexers import TiktokenCounter, TokenCounter, sha256_text, span_text
from ledger import LedgerError, ToolResult, TurnRecord
from overlays import Hunk, View, git_tracks, working_diff

if TYPE_CHECKING:
    from engine._embed import Embedder, EmbeddingCache

__all__ = ["Replay", "Resolved", "Status", "Workspace"]

MANIFEST_SCHEMA = 2  # 2: bases + per-branch overlays (1 had one segment)
# Turns whose citations are kept in memory for ``feedback`` with the ledger off (the
# ledger keeps them all). Only the citation refs are kept, not whole packs: hundreds of
# packs' objects made each full garbage collection a 60-110 ms pause inside a call.
_RECENT_PACKS = 256
_Ref = tuple[int, str, int, int, str]  # a citation: id, uri, first and last line, sha256
_CITATION = re.compile(r"^\s*\[?\s*(\d{1,6})\s*\]?\s*$")


@dataclass(frozen=True, slots=True)
class Replay:
    """A recorded turn's prompt, byte for byte, and (with rebuild) today's difference."""

    replay_key: str
    turn_id: str
    time: str
    text: str
    tokens_used: int
    diff: str = ""  # unified diff recorded -> rebuilt; "" when identical or not rebuilt


class Workspace:
    """One folder, indexed under ``<root>/.cortex`` (configurable).

    Opening is cheap: no model, index or tokenizer is loaded until used.

    >>> ws = Workspace.open(".")  # doctest: +SKIP
    >>> ws.index()                # doctest: +SKIP
    >>> ws.search("register a hook", k=5)  # doctest: +SKIP
    """

    def __init__(self, root: Path, config: Config) -> None:
        self.root = root
        self.config = config
        state = Path(config.state_dir).expanduser()
        self.state_dir = state if state.is_absolute() else root / state
        self._lock = threading.Lock()
        self._lazy = threading.RLock()  # lazy loaders: two first calls create one of each
        self._layers = Layers(root, self.state_dir, config)
        self._refreshing = threading.Lock()  # one index/refresh at a time in this process
        self._counter: TokenCounter | None = None
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._cache: EmbeddingCache | None = None
        self._recent: dict[str, tuple[_Ref, ...]] = {}  # replay key -> citation refs
        self._journal: Journal | None = None
        self._git_tracked: bool | None = None

    @classmethod
    def open(
        cls, path: str | Path, config: Config | None = None, *, check: bool = True
    ) -> Workspace:
        """Open the workspace at ``path`` (a folder); checks the state layout if present
        (``check=False``: not, for a caller about to ``index(rebuild=True)``)."""
        root = Path(path).expanduser().resolve()
        if not root.exists():
            raise WorkspaceNotFoundError(f"no such folder: {root}")
        if not root.is_dir():
            raise WorkspaceError(f"not a folder: {root}")
        ws = cls(root, config or Config.from_env())
        if check:
            ws._check_manifest()
        return ws

    def close(self) -> None:
        """Release indexes, models and files."""
        with self._lock:
            self._layers.close()
            if self._cache is not None:
                self._cache.close()
                self._cache = None
            if self._journal is not None:
                self._journal.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- state ----------------------------------------------------------------------

    @property
    def _manifest(self) -> Path:
        return self.state_dir / "manifest.json"

    def _check_manifest(self) -> None:
        if not self._manifest.exists():
            if self.state_dir.exists() and any(self.state_dir.iterdir()):
                raise IndexSchemaError(
                    f"{self.state_dir} exists but is not a cortex index (no manifest.json); "
                    "move it away or set CORTEX_STATE_DIR"
                )
            return
        try:
            manifest = json.loads(self._manifest.read_text("utf-8"))
            schema = int(manifest["schema"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexSchemaError(
                f"{self._manifest} is unreadable ({exc}); rebuild with `cortex index --rebuild`"
            ) from exc
        if schema != MANIFEST_SCHEMA:
            raise IndexSchemaError(
                f"{self.state_dir} was written with layout {schema}, this cortex uses "
                f"{MANIFEST_SCHEMA}; rebuild with `cortex index --rebuild`"
            )

    def _write_manifest(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # Never committed by accident (``git add -A``), so a checkout never deletes it.
        (self.state_dir / ".gitignore").write_text("# written by cortex\n*\n", "utf-8")
        body = {"schema": MANIFEST_SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        tmp = self._manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2) + "\n", "utf-8")
        tmp.replace(self._manifest)

    @property
    def layers(self) -> Layers:
        """The bases and overlays of this workspace."""
        return self._layers

    def view(self) -> tuple[View, tuple[str, ...]]:
        """The View a call reads, refreshed first when the working tree moved.

        With ``refresh = "advise"``, or while another call or process is refreshing, the
        View is answered as it is, with a note saying it is stale: reads never wait for a
        refresh they did not start. Raises ``IndexNotBuiltError`` before the first index.
        """
        info, token = self._layers.current()
        notes: tuple[str, ...] = ()
        if info.token != token:
            if self.config.refresh == "advise":
                notes = ("stale: the working tree changed since the last index; run "
                         "`cortex index` (answered from the index as it was)",)  # fmt: skip
            elif not self._refreshing.acquire(blocking=False):
                notes = ("stale: the working tree changed and a refresh is running; "
                         "answered from the index as it was",)  # fmt: skip
            else:
                try:
                    self._index_locked(None, rebuild=False)
                    info, token = self._layers.current()
                except IndexBusyError as exc:
                    notes = (f"stale: the working tree changed and another process is "
                             f"indexing ({exc}); answered from the index as it was",)  # fmt: skip
                finally:
                    self._refreshing.release()
        return self._layers.view(info), notes

    @property
    def counter(self) -> TokenCounter:
        """The token counter of the configured encoding."""
        with self._lazy:
            if self._counter is None:
                self._counter = TiktokenCounter(self.config.encoding)
            return self._counter

    @property
    def embedder(self) -> Embedder | None:
        """The dense model (loaded on first embed), or None when dense search is off."""
        with self._lazy:
            if not self._embedder_loaded:
                from engine._models import make_embedder

                self._embedder = make_embedder(self.config.dense_model, self.config)
                self._embedder_loaded = True
            return self._embedder

    @property
    def cache(self) -> EmbeddingCache:
        """The content-addressed vector cache."""
        with self._lazy:
            if self._cache is None:
                from engine._embed import EmbeddingCache

                path = self.config.embedding_cache or str(self.state_dir / "embeddings.sqlite")
                self._cache = EmbeddingCache(Path(path).expanduser())
            return self._cache

    # -- index ----------------------------------------------------------------------

    def index(self, *, progress: Progress | None = None, rebuild: bool = False) -> IndexReport:
        """Bring the index up to date with the folder; only what changed is re-done.

        The first run builds a base at the base commit (see ``Layers``); every run refreshes
        this branch's overlay: the files that differ from the base, and tombstones for the
        base files changed or deleted. The report covers both.
        One writer at a time: a second one gets ``IndexBusyError`` naming the holder.
        """
        with self._refreshing:
            return self._index_locked(progress, rebuild=rebuild)

    def _index_locked(self, progress: Progress | None, *, rebuild: bool) -> IndexReport:
        with WriterLock(self.state_dir / "lock"):
            if rebuild:  # whatever layout was there before, this one replaces it
                self._layers.close()
                for name in ("bases", "overlays", "segments", "checkout"):
                    _remove_tree(self.state_dir / name)
            if rebuild or not self._manifest.exists():
                self._write_manifest()
            else:
                self._check_manifest()
            embedder = self.embedder
            try:
                before = self._layers.view(self._layers.current()[0]).files()
            except IndexNotBuiltError:
                before = {}
            overlay, info, base = self._layers.refresh(
                counter=self.counter,
                embedder=embedder,
                cache=self.cache if embedder is not None else None,
                progress=progress,
            )
            skipped = self._layers.segment(self._layers.base_dir(info.base)).meta.skipped_counts()
            return combined_report(base, overlay, before, self._layers.view(info).files(), skipped)

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove the overlays of branches and working trees that no longer exist, and the
        bases no overlay uses any more (``dry_run``: only say what would go)."""
        with self._refreshing, WriterLock(self.state_dir / "lock"):
            return self._layers.gc(dry_run=dry_run)

    # -- search ---------------------------------------------------------------------

    def search(
        self, query: str, *, mode: SearchMode | str = SearchMode.HYBRID, k: int = 10
    ) -> list[SearchHit]:
        """Ranked sections for ``query``: BM25, dense (cosine), or both fused by RRF."""
        try:
            mode = SearchMode(mode)
        except ValueError as exc:
            raise ConfigError(f"unknown search mode {mode!r}; use bm25, dense or hybrid") from exc
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        view, _ = self.view()
        depth = k if mode is not SearchMode.HYBRID else max(k * FUSION_DEPTH, 50)
        bm25: list[Hit] = []
        dense: list[Hit] = []
        if mode is not SearchMode.DENSE:
            found = view.search_sections(query, depth)
            chunks = view.chunks([f.id for f in found])
            bm25 = [Hit(chunks[f.id], f.score) for f in found if f.id in chunks]
        if mode is not SearchMode.BM25:
            embedder = self.embedder
            if embedder is None:
                if mode is SearchMode.DENSE:
                    raise ConfigError("dense search is off (dense_model = none)")
            elif view.has_dense(embedder.model_id):
                vector = embedder.embed_query(query)
                dense = [Hit(c, s) for c, s in view.search_dense(vector, embedder.model_id, depth)]
        return fuse(bm25, dense, k)

    # -- context --------------------------------------------------------------------

    def build_context(
        self,
        goal: str,
        query: str = "",
        tool_signals: Sequence[ToolSignal | str] | None = None,
        state: SessionState | None = None,
        *,
        budget_tokens: int | None = None,
        explain: list[Scored] | None = None,
        record: bool = True,
        timings: dict[str, float] | None = None,
        settings: ContextSettings | None = None,
    ) -> ContextPack:
        """The context for the planner's next step (see ``engine._build``).

        ``query`` defaults to the goal; ``tool_signals`` are tool outputs (tracebacks,
        failing tests, compiler errors) as ``ToolSignal`` or plain strings. The result's
        ``render()`` never exceeds ``budget_tokens`` (default: the config's).

        Every call is recorded in the ledger (``record=False`` skips that, for library use
        that wants no side effect); if recording fails (full disk, read-only ledger) the
        pack is still returned and its advisory says the turn was not recorded.
        """
        budget = budget_tokens or self.config.budget_tokens
        if budget < 64:
            raise ConfigError(f"budget_tokens must be >= 64, got {budget}")
        if not goal.strip() and not query.strip():
            raise ConfigError("build_context needs a goal or a query")
        signals = tuple(
            s if isinstance(s, ToolSignal) else ToolSignal(str(s)) for s in tool_signals or ()
        )
        view, stale = self.view()
        embedder = self.embedder
        dense_ready = embedder is not None and view.has_dense(embedder.model_id)
        if self._git_tracked is None:
            self._git_tracked = git_tracks(self.root)
        diff = working_diff(self.root) if self._git_tracked else []
        inputs = Inputs(goal, query, signals, state or SessionState(), budget)
        pack = build_pack(
            view,
            goal=goal,
            query=query,
            tool_signals=signals,
            state=inputs.state,
            budget=budget,
            counter=self.counter,
            embedder=embedder if dense_ready else None,
            cache=self.cache if dense_ready else None,
            diff=diff,
            view_id=self._view_id(view, diff),
            settings=settings or self.config.context_settings(),
            scored_out=explain,
            timings=timings,
        )
        if stale:
            pack = replace(pack, advisory=(*pack.advisory, *stale))
        if record and self.config.ledger:
            started = time.perf_counter()
            try:
                self.journal.record_turn(pack, inputs)
            except (LedgerError, OSError) as exc:
                note = f"ledger: this turn was not recorded ({exc})"
                pack = replace(pack, advisory=(*pack.advisory, note))
            if timings is not None:
                timings["ledger"] = timings.get("ledger", 0.0) + time.perf_counter() - started
        if not self.config.ledger:
            refs = tuple((c.id, c.source_uri, c.span.start_line, c.span.end_line, c.sha256)
                         for c in pack.citations)  # fmt: skip
            with self._lock:
                self._recent[pack.replay_key] = refs
                while len(self._recent) > _RECENT_PACKS:
                    self._recent.pop(next(iter(self._recent)))
        return pack

    @property
    def journal(self) -> Journal:
        """The workspace's evidence ledger (opened on first use)."""
        with self._lazy:
            if self._journal is None:
                path = self.config.ledger_path or str(self.state_dir / "ledger.sqlite")
                self._journal = Journal(Path(path).expanduser())
            return self._journal

    def replay(self, replay_key: str, *, rebuild: bool = False) -> Replay:
        """The exact prompt recorded under ``replay_key`` (byte for byte), from the ledger.

        With ``rebuild``, retrieval runs again on the recorded inputs against the current
        index, and ``diff`` shows how today's context differs (empty when nothing changed).
        """
        turn = self._turn(replay_key)
        text = self.journal.text(turn.render_sha256)
        diff = ""
        if rebuild:
            inputs = Inputs.from_json(self.journal.text(turn.inputs_sha256))
            again = self.build_context(
                inputs.goal,
                inputs.query,
                inputs.tool_signals,
                inputs.state,
                budget_tokens=inputs.budget,
                record=False,
            )
            diff = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    again.render().splitlines(keepends=True),
                    "recorded",
                    "rebuilt",
                )
            )
        return Replay(replay_key, turn.turn_id, turn.time, text, turn.tokens_used, diff)

    def _turn(self, replay_key: str) -> TurnRecord:
        try:
            turn = self.journal.find(replay_key)
        except LedgerError as exc:
            raise IndexStateError(f"cannot read the ledger: {exc}") from exc
        if turn is None:
            raise UnknownReplayKeyError(
                f"unknown replay key {replay_key!r}: no turn recorded under it"
            )
        return turn

    def _view_id(self, view: View, diff: Sequence[Hunk]) -> str:
        """What the answer depends on besides the inputs: the View (base commit, overlay
        generation, working-tree token), the dense model, and the diff shown in the prompt."""
        diff_sha = sha256_text("\n".join(f"{h.path}\n{h.text}" for h in diff))[:16]
        return f"{view.ident}:{self.config.dense_model}:{diff_sha}"

    def feedback(
        self,
        replay_key: str,
        model_citations: Sequence[int | str],
        tool_results: Sequence[ToolResult | str] = (),
        outcome: str | None = None,
    ) -> FeedbackResult:
        """Check the model's citations against the turn's evidence, and record them.

        Ids outside the turn's set (and malformed markers) are dropped and counted; a cited
        snippet whose source no longer matches its sha256 is flagged stale. The turn is
        found in the ledger (or, with the ledger off, among this process's recent packs).
        """
        refs: list[_Ref]
        turn: TurnRecord | None = None
        if self.config.ledger:
            turn = self._turn(replay_key)
            refs = [(r.local_id, r.source_uri, r.start_line, r.end_line, r.sha256)
                    for r in turn.snippets]  # fmt: skip
        else:
            with self._lock:
                recent = self._recent.get(replay_key)
            if recent is None:
                raise UnknownReplayKeyError(
                    f"unknown replay key {replay_key!r} (not built in this process)"
                )
            refs = list(recent)
        by_id = {r[0]: r for r in refs}
        valid: list[int] = []
        dropped: list[str] = []
        for raw in model_citations:
            n = _citation_number(raw)
            if n is None or n not in by_id:
                dropped.append(str(raw))
            elif n not in valid:
                valid.append(n)
        stale = [n for n in valid if not self._still_matches(*by_id[n][1:])]
        result = FeedbackResult(replay_key, tuple(valid), tuple(dropped), tuple(stale))
        if turn is not None:
            results = [r if isinstance(r, ToolResult) else ToolResult("tool", True, str(r))
                       for r in tool_results]  # fmt: skip
            try:
                self.journal.record_feedback(turn, result, results, outcome)
            except LedgerError as exc:
                raise IndexStateError(f"feedback was checked but not recorded: {exc}") from exc
        return result

    def _still_matches(self, source_uri: str, start: int, end: int, sha256: str) -> bool:
        path = (self.root / source_uri.split("#", 1)[0]).resolve()
        if not path.is_relative_to(self.root):
            return False
        try:
            data = path.read_bytes()
        except OSError:
            return False
        text = span_text(data, start, end)
        return text is not None and sha256_text(text) == sha256

    # -- resolve --------------------------------------------------------------------

    def resolve(self, uri: str, proof: Mapping[str, str] | None = None) -> Resolved:
        """The indexed text at ``uri`` (``path#La-Lb``, ``path#La`` or ``path``), only for a
        caller that proves it holds that content; anyone else gets metadata only.

        ``proof = {"path": ..., "sha256": ...}``: the sha256 of the file's bytes, or of the
        requested lines' text (what a citation carries), as this index holds them. Text
        comes from this user's View (base plus this user's overlay), never from another
        user's overlay, and never for a file the index skipped.
        """
        view, _ = self.view()
        return resolve_in(view, uri, proof, self.counter)

    # -- status ---------------------------------------------------------------------

    def status(self, *, check_files: bool = True) -> Status:
        """What is indexed (base, this branch's overlay); with ``check_files``, also how
        many files differ from the index now (a walk that reads every file)."""
        return status_of(self._layers, self.config, check_files=check_files)


def _citation_number(raw: int | str) -> int | None:
    """``3``, ``"3"`` and ``"[3]"`` are citation 3; anything else is malformed."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    match = _CITATION.match(str(raw))
    return int(match.group(1)) if match else None


def _remove_tree(path: Path) -> None:
    import shutil

    if path.exists():
        shutil.rmtree(path)
