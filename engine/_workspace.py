"""``Workspace``: the public entry point over one folder and its ``.cortex`` state.

The composition root: it builds segments (``engine.index``), composes them into a View
(``overlays``), loads the tokenizer and the embedder, and hands plain data to retrieval,
packing and memory, which never see one another's state.
"""

from __future__ import annotations

import difflib
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from engine.core import (
    DEFAULT_BUNDLE_BUDGET,
    MAX_ATTEST_CITATIONS,
    MAX_BUDGET_TOKENS,
    MAX_BUNDLE_BUDGET,
    MIN_BUDGET_TOKENS,
    PINNED_FLOOR,
    BudgetUnreachableError,
    Bundle,
    BundleItem,
    CodeLink,
    Config,
    ConfigError,
    ContextPack,
    ContextSettings,
    EmbeddingModelError,
    FeedbackResult,
    FileHit,
    ForgetReport,
    GcReport,
    HistoryLane,
    IndexBusyError,
    IndexNotBuiltError,
    IndexReport,
    IndexStateError,
    Learned,
    LedgerStateError,
    MemoryStateError,
    NoteType,
    NotFoundError,
    PastOutcome,
    Progress,
    Recalled,
    Replay,
    Resolved,
    SaveResult,
    Scope,
    SearchHit,
    SearchMode,
    SessionState,
    Status,
    Tier,
    ToolSignal,
    UnknownReplayKeyError,
    WorkspaceError,
    WorkspaceNotFoundError,
)
from engine.index import (
    Layers,
    Manifest,
    WriterLock,
    combined_report,
    forget_in_segment,
    locate,
    matches_path,
    segment_dirs,
    status_of,
)
from engine.memory import (
    LEARN_POOL,
    Candidate,
    CitedRef,
    CodeAccess,
    FeatureRow,
    Inputs,
    Journal,
    LaneSettings,
    LedgerPurge,
    Memory,
    NoteStore,
    OutcomeIndex,
    RecentCitations,
    RecentFeatures,
    SalienceState,
    SalienceTables,
    Session,
    TokenBucket,
    check_attest,
    check_citations,
    cited_keys,
    ema_step,
    end_session,
    file_lines,
    item_changes,
    rules_sections,
    session_uri,
    split_rows,
    still_matches,
    weights_payload,
)
from engine.packing import Request, build_pack, fit_bundle, retrieve
from engine.retrieval import (
    LEARNED_FEATURES,
    Scored,
    dense_hits,
    file_hits,
    ranked_hits,
    resolve_in,
)
from engine.segment import Segment
from indexers import TiktokenCounter, TokenCounter, decode, redact, sha256_text
from ledger import JSON, ToolResult, TurnRecord
from overlays import Hunk, View, git_tracks, working_diff

if TYPE_CHECKING:
    from engine.embed import Embedder, EmbeddingCache

__all__ = ["Workspace"]


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
        self._manifest = Manifest(self.state_dir)
        self._refreshing = threading.Lock()  # one index/refresh at a time in this process
        self._counter: TokenCounter | None = None
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._cache: EmbeddingCache | None = None
        self._recent = RecentCitations()  # with the ledger off: what feedback checks against
        self._journal: Journal | None = None
        self._git_tracked: bool | None = None
        self._sessions: dict[str, Session] = {}  # by id: each keeps its steps' facts warm
        self._memory: Memory | None = None
        self._features = RecentFeatures()  # each recent turn's candidates, for learning
        self._attests = TokenBucket()  # per (actor, intent)
        self._salience: SalienceState | None = None  # the fold as of the ledger's head
        self._outcomes: OutcomeIndex | None = None  # earlier attested intents

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
            ws._manifest.check()
        return ws

    @staticmethod
    def find(start: str | Path = ".", config: Config | None = None) -> Path:
        """The workspace folder a call made in ``start`` means, found as git finds its
        repository: the nearest folder at or above ``start`` that holds an index or is the
        top of a git work tree; ``start`` itself when there is none."""
        folder = Path(start).expanduser()
        if not folder.is_dir():
            raise WorkspaceNotFoundError(f"no such folder: {folder}")
        return locate(folder, (config or Config.from_env()).state_dir)

    def close(self) -> None:
        """Release indexes, models and files."""
        with self._lock:
            self._layers.close()
            if self._cache is not None:
                self._cache.close()
                self._cache = None
            if self._journal is not None:
                self._journal.close()
            if self._memory is not None:
                self._memory.close()
                self._memory = None

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
                from engine.embed import make_embedder

                self._embedder = make_embedder(self.config.dense_model, self.config)
                self._embedder_loaded = True
            return self._embedder

    @property
    def cache(self) -> EmbeddingCache:
        """The content-addressed vector cache."""
        with self._lazy:
            if self._cache is None:
                from engine.embed import EmbeddingCache

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
            self._finish_swap()
            if rebuild and self._manifest.exists():
                return self._rebuild_beside(progress)
            if rebuild or not self._manifest.exists():
                self._manifest.write()
            else:
                self._manifest.check()
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

    def _rebuild_beside(self, progress: Progress | None) -> IndexReport:
        """A rebuild from scratch, made beside the index in use and swapped in when whole:
        until then (and after a kill at any point) the old index keeps answering."""
        staging = self.state_dir / _REBUILD_DIR
        _remove_tree(staging)  # what a killed rebuild left
        staging.mkdir(parents=True)
        embedder = self.embedder
        try:
            before = self._layers.view(self._layers.current()[0]).files()
        except (IndexNotBuiltError, IndexStateError):
            before = {}
        fresh = Layers(self.root, staging, self.config)
        fresh.inside = self._layers.inside  # the whole state folder stays out of the walk
        try:
            overlay, info, base = fresh.refresh(
                counter=self.counter,
                embedder=embedder,
                cache=self.cache if embedder is not None else None,
                progress=progress,
            )
        finally:
            fresh.close()
        # The swap: a few renames inside one folder. Readers that opened the old segments
        # keep reading them (POSIX keeps renamed and unlinked files alive while open).
        self._layers.close()
        replaced = self.state_dir / _REPLACED_DIR
        _remove_tree(replaced)
        replaced.mkdir()
        for name in _LAYOUT_DIRS:
            if (self.state_dir / name).exists():
                (self.state_dir / name).replace(replaced / name)
            if (staging / name).exists():
                (staging / name).replace(self.state_dir / name)
        self._manifest.write()
        _remove_tree(replaced)
        _remove_tree(staging)
        skipped = self._layers.segment(self._layers.base_dir(info.base)).meta.skipped_counts()
        return combined_report(base, overlay, before, self._layers.view(info).files(), skipped)

    def _finish_swap(self) -> None:
        """After a rebuild killed in the middle of its swap: put back what was moved out and
        not replaced (the old index, whole), and drop the leftovers."""
        replaced = self.state_dir / _REPLACED_DIR
        if not replaced.exists():
            return
        for name in _LAYOUT_DIRS:
            if (replaced / name).exists() and not (self.state_dir / name).exists():
                (replaced / name).replace(self.state_dir / name)
        _remove_tree(replaced)

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove the overlays of branches and working trees that no longer exist, and the
        bases no overlay uses any more (``dry_run``: only say what would go)."""
        with self._refreshing, WriterLock(self.state_dir / "lock"):
            return self._layers.gc(dry_run=dry_run)

    # -- forget ---------------------------------------------------------------------

    def forget(
        self,
        paths: Sequence[str] = (),
        text: str | None = None,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> ForgetReport:
        """Remove files' and a string's stored text from everything cortex keeps: every base
        and every user's overlay (chunks, lexical and dense indexes, rewritten so the bytes
        leave the disk), the vector cache, the ledger's stored texts (the chain keeps
        verifying; ``replay`` shows ``[PURGED]`` where they were) and the saved notes that
        hold the string (``[PURGED]`` in its place).

        ``paths`` are workspace-relative files or folders; ``text`` is matched exactly
        (at least ``FORGET_MIN_CHARS`` characters, so a purge cannot gut the index by
        accident). ``dry_run`` only counts. The working tree is not touched: files that
        still hold what was forgotten are listed in ``still_present``.
        """
        targets = sorted({self._relative(p) for p in paths})
        if text is not None and len(text.strip()) < FORGET_MIN_CHARS:
            raise ConfigError(
                f"the text to forget must have at least {FORGET_MIN_CHARS} characters "
                "besides spaces (a shorter one would match ordinary code)"
            )
        if not targets and not text:
            raise ConfigError("name the files to forget, the text to forget, or both")
        with self._refreshing, WriterLock(self.state_dir / "lock"):
            self._finish_swap()
            try:
                known = sorted(self.view()[0].files())
            except (IndexNotBuiltError, IndexStateError):
                known = []
            if not dry_run:  # leftovers of a killed build hold file text in clear
                for name in (_REBUILD_DIR, _REPLACED_DIR, "checkout"):
                    _remove_tree(self.state_dir / name)
            self._layers.close()
            files: set[str] = set()
            touched: set[str] = set()
            chunks = segments = 0
            keys: set[str] = set()
            for directory in segment_dirs(self.state_dir, skip=(_REBUILD_DIR, _REPLACED_DIR)):
                segment = Segment(directory)
                try:
                    found = forget_in_segment(
                        segment, paths=targets, text=text, dry_run=dry_run, progress=progress
                    )
                finally:
                    segment.close()
                files.update(found.files)
                touched.update(found.touched)
                chunks += found.chunks
                segments += 1 if found.chunks else 0
                keys |= found.vector_keys
            vectors = 0
            cache_path = self.config.embedding_cache or str(self.state_dir / "embeddings.sqlite")
            if keys and not dry_run and Path(cache_path).expanduser().exists():
                vectors = self.cache.delete(keys)
            purged = LedgerPurge(0, 0, 0)
            if self._journal is not None or self.ledger_path.exists():
                note: dict[str, JSON] = {"files": list(targets), "text": text is not None}
                purged = self.journal.purge(
                    in_paths=(lambda p: matches_path(p, targets)) if targets else None,
                    text=text, note=note, dry_run=dry_run,
                )  # fmt: skip
                if purged.texts and not dry_run:
                    with self._lazy:  # sessions keep their steps' texts: read them again
                        self._sessions.clear()
            notes = 0
            if text and (self._memory is not None or self._memory_path.exists()):
                notes = self.memory.store.purge(text, dry_run=dry_run)
            self._layers.close()
        present = [p for p in known if matches_path(p, targets) and (self.root / p).is_file()]
        if text:
            present += [p for p in known if p not in present and _holds(self.root / p, text)]
        return ForgetReport(
            dry_run, sorted(files), sorted(touched), chunks, segments, vectors, purged.texts,
            purged.turns, purged.chained, sorted(present), notes,
        )  # fmt: skip

    def _relative(self, path: str) -> str:
        """A workspace-relative '/'-separated path for ``path`` (relative or absolute)."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ConfigError(f"not a path: {path!r}")
        given = Path(path)
        absolute = given if given.is_absolute() else self.root / given
        try:
            rel = absolute.resolve().relative_to(self.root.resolve())
        except ValueError:
            raise ConfigError(f"{path} is outside the workspace {self.root}") from None
        if not rel.parts:
            raise ConfigError("forgetting the whole workspace: remove its state folder instead")
        return rel.as_posix()

    # -- search ---------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        goal: str = "",
        tool_signals: Sequence[ToolSignal | str] | None = None,
        mode: SearchMode | str = SearchMode.HYBRID,
        k: int = 10,
    ) -> list[SearchHit]:
        """The ``k`` best sections for ``query``, in the ranking ``build_context`` packs
        from (recall from every retriever, fusion, rerank); ``goal`` and ``tool_signals``
        steer it as they steer a context. ``mode``: ``hybrid`` (the default: every
        retriever), ``bm25`` (the same without the dense channel) or ``dense`` (the dense
        retriever alone, by cosine: for diagnosis)."""
        mode = _search_mode(mode, k)
        if mode is SearchMode.DENSE:
            view, _ = self.view()
            embedder = self._dense_embedder(view)
            return dense_hits(view, embedder.embed_query(query), embedder.model_id, k)
        return ranked_hits(self._ranked(query, goal, tool_signals, mode), k)

    def search_files(
        self,
        query: str,
        *,
        goal: str = "",
        tool_signals: Sequence[ToolSignal | str] | None = None,
        mode: SearchMode | str = SearchMode.HYBRID,
        k: int = 10,
    ) -> list[FileHit]:
        """The ``k`` best files for ``query`` in the same ranking, each with its best
        sections (a file's score is the sum of its three best sections' scores)."""
        mode = _search_mode(mode, k)
        if mode is SearchMode.DENSE:
            raise ConfigError("files are ranked by hybrid or bm25 search, not dense alone")
        return file_hits(self._ranked(query, goal, tool_signals, mode), k)

    def _ranked(
        self,
        query: str,
        goal: str,
        tool_signals: Sequence[ToolSignal | str] | None,
        mode: SearchMode,
        settings: ContextSettings | None = None,
    ) -> list[Scored]:
        if not query.strip():
            raise ConfigError("search needs a query")
        signals = tuple(
            s if isinstance(s, ToolSignal) else ToolSignal(str(s)) for s in tool_signals or ()
        )
        view, _ = self.view()
        embedder = self.embedder if mode is SearchMode.HYBRID else None
        if embedder is not None and not view.has_dense(embedder.model_id):
            embedder = None
        request = Request.parse(goal or query, query, signals)
        return retrieve(view, request, embedder, self.cache if embedder is not None else None,
                        settings or self.config.context_settings(),
                        learned=self.learned())  # fmt: skip

    def _dense_embedder(self, view: View) -> Embedder:
        embedder = self.embedder
        if embedder is None:
            raise ConfigError("dense search is off (dense_model = none)")
        if not view.has_dense(embedder.model_id):
            raise IndexStateError(
                f"the index has no vectors of {embedder.model_id}; run `cortex index`"
            )
        return embedder

    # -- context --------------------------------------------------------------------

    def build_context(
        self,
        goal: str = "",
        query: str = "",
        tool_signals: Sequence[ToolSignal | str] | None = None,
        state: SessionState | None = None,
        *,
        budget_tokens: int | None = None,
        explain: list[Scored] | None = None,
        record: bool = True,
        timings: dict[str, float] | None = None,
        settings: ContextSettings | None = None,
        history_upto: int | None = None,
    ) -> ContextPack:
        """The context for the planner's next step (see ``engine.packing``).

        ``goal`` is the task, pinned verbatim; ``query`` is what this step needs. Either
        may be empty, not both, and each defaults to the other (as on every surface).
        ``tool_signals`` are tool outputs (tracebacks, failing tests, compiler errors) as
        ``ToolSignal`` or plain strings. The result's ``render()`` never exceeds
        ``budget_tokens`` (default: the config's).

        Every call is recorded in the ledger (``record=False`` skips that, for library use
        that wants no side effect); if recording fails (full disk, read-only ledger) the
        pack is still returned and its advisory says the turn was not recorded.
        """
        budget = self.config.budget_tokens if budget_tokens is None else budget_tokens
        if not MIN_BUDGET_TOKENS <= budget <= MAX_BUDGET_TOKENS:
            raise ConfigError(f"budget_tokens must be between {MIN_BUDGET_TOKENS} and "
                              f"{MAX_BUDGET_TOKENS:,}, got {budget}")  # fmt: skip
        if not goal.strip() and not query.strip():
            raise ConfigError("build_context needs a goal or a query")
        goal = goal if goal.strip() else query
        signals = tuple(
            s if isinstance(s, ToolSignal) else ToolSignal(str(s)) for s in tool_signals or ()
        )
        # Credentials in what the caller sent never reach the prompt, the key or the ledger.
        goal, query, signals, state = _scrubbed(goal, query, signals, state or SessionState())
        view, stale = self.view()
        embedder = self.embedder
        dense_ready = embedder is not None and view.has_dense(embedder.model_id)
        if self._git_tracked is None:
            self._git_tracked = git_tracks(self.root)
        diff = working_diff(self.root) if self._git_tracked else []
        diff = [replace(h, text=redact(h.text, h.path).text) for h in diff]
        history = None
        if state.session:
            history = self._history(state, goal, query, diff, budget, upto=history_upto)
        inputs = Inputs(goal, query, signals, state, budget, history.upto if history else 0)
        recalled = self._recalled(query or goal, budget)
        scored: list[Scored] = explain if explain is not None else []
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
            scored_out=scored,
            timings=timings,
            history=history,
            memory=recalled,
            learned=self.learned(),
        )
        if self.config.ledger and record:
            self._features.remember(pack.replay_key, _feature_rows(scored))
        if stale:
            pack = replace(pack, advisory=(*pack.advisory, *stale))
        if record and self.config.ledger:
            started = time.perf_counter()
            try:
                self.journal.record_turn(pack, inputs)
            except (LedgerStateError, OSError) as exc:
                note = f"ledger: this turn was not recorded ({exc})"
                pack = replace(pack, advisory=(*pack.advisory, note))
            if timings is not None:
                timings["ledger"] = timings.get("ledger", 0.0) + time.perf_counter() - started
        if not self.config.ledger:
            self._recent.remember(pack.replay_key, pack.citations)
        if state.session and record:
            cited = "".join(f"\n[{s.id}] {s.source_uri}" for s in pack.citations)
            self.session(state.session).add("request", f"{query}{cited}")
        return pack

    def _history(self, state: SessionState, goal: str, query: str, diff: Sequence[Hunk],
                 budget: int, upto: int | None) -> HistoryLane:  # fmt: skip
        """The session's history lane for this call, in its share of what the goal leaves;
        first journals the files the working tree changed since the session last saw it."""
        session = self.session(state.session)
        if upto is None and self.config.ledger:
            paths = " ".join(sorted({h.path for h in diff}))
            last = next((i for i in reversed(session.items()) if i.role.value == "changes"), None)
            if paths and (last is None or last.text != paths):
                session.add("changes", paths)
        goal_cost = self.counter.count(f"{goal}\n{chr(10).join(state.constraints)}\n"
                                       f"{chr(10).join(state.subgoals)}")  # fmt: skip
        room = min(int(budget * _HISTORY_SHARE), budget - goal_cost - _INSTRUCTION_TOKENS)
        if room < 1:
            raise BudgetUnreachableError(
                f"budget of {budget} tokens leaves no room for session {state.session}'s "
                f"history after the goal ({goal_cost} tokens); raise the budget",
                goal_cost + _INSTRUCTION_TOKENS, budget,
            )  # fmt: skip
        return session.lane(room, query=query or goal, upto=upto, settings=LaneSettings())

    def session(self, session_id: str) -> Session:
        """The session ``session_id`` of this user in this workspace's ledger: ``add``,
        ``decide``, ``compact``, ``checkpoint``, ``load_checkpoint``, ``lane``, ``step``.
        An id with no step yet is a new session (created by its first ``add``)."""
        with self._lazy:
            found = self._sessions.get(session_id)
            if found is None and not self._manifest.exists():
                # Steps may come before the first index (an agent's hooks): the state folder
                # is made a cortex folder, as indexing would, so it opens and indexes later.
                self._manifest.write()
            if found is None:
                found = self._sessions[session_id] = Session(self.journal, session_id,
                                                             self.counter)  # fmt: skip
            return found

    def end_session(self, session_id: str, scope: Scope | str = Scope.PERSONAL) -> SaveResult:
        """Save session ``session_id``'s summary as a memory note (goal, decisions with
        their rationale, failures and their fixes, files changed; extracted, not generated)
        under the topic key ``session/<id>``: ending it again updates that note in place."""
        session = self.session(session_id)
        if not session.exists():
            raise NotFoundError(f"no session {session_id!r} here (for this user) to end")
        return end_session(self.memory, session, self.counter, scope)

    @property
    def ledger_path(self) -> Path:
        """Where the evidence ledger lives (it exists once a turn was recorded)."""
        return Path(self.config.ledger_path or str(self.state_dir / "ledger.sqlite")).expanduser()

    # -- memory -------------------------------------------------------------------------

    @property
    def memory(self) -> Memory:
        """This project's saved notes as this user sees them (``<state>/memory.sqlite``):
        ``save``, ``search``, ``get``, ``timeline``, ``relate``, ``graph``, ``forget``,
        ``archive``, ``stats``. Notes are recalled with the code's terms and embedder, and
        their code links are resolved in, and re-checked against, this user's View."""
        with self._lazy:
            if self._memory is None:
                from engine.segment import code_terms

                if not self._manifest.exists():  # the state folder stays one cortex knows
                    self._manifest.write()

                store = NoteStore(
                    self._memory_path,
                    project=self.project,
                    user=self._layers.user,
                    terms=code_terms,
                    embedder=self.embedder,
                    code=CodeAccess(self._link_entities, self._text_now),
                )
                self._memory = Memory(store)
            return self._memory

    def _recalled(self, query: str, budget: int) -> tuple[Recalled, ...]:
        """The memory lane: saved notes relevant to ``query``, best first, in their share of
        the budget (none when nothing was ever saved here: reading creates no store)."""
        if self._memory is None and not self._memory_path.exists():
            return ()
        room, used, out = int(budget * _MEMORY_SHARE), 0, []
        for item in self.memory.items(query, _MEMORY_NOTES):
            for text in (item.shown, item.shown_short):  # whole, else its preview
                head = f"[99] {item.hit.title}\nSource: {item.hit.uri}\n"
                tokens = self.counter.count(head + text) + 2
                if used + tokens <= room:
                    used += tokens
                    out.append(Recalled(item.hit.uri, item.hit.title, text, sha256_text(text),
                                        item.hit.score, tokens))  # fmt: skip
                    break
        return tuple(out)

    def _still_matches(self, ref: CitedRef) -> bool:
        """Whether a cited source still shows what it showed: a file's lines, or a note's
        text as the memory lane would show it now."""
        if not ref.source_uri.startswith("memory:"):
            return still_matches(self.root, ref)
        try:
            item = self.memory.item(ref.source_uri.removeprefix("memory:"))
        except NotFoundError:
            return False
        return ref.sha256 in (sha256_text(item.shown), sha256_text(item.shown_short))

    @property
    def _memory_path(self) -> Path:
        return self.state_dir / "memory.sqlite"

    @property
    def project(self) -> str:
        """What names this project for memory: the repository (its common git folder, so
        every working tree of one repository shares its notes), else the folder."""
        import subprocess

        where = str(self.root)
        try:
            out = subprocess.run(
                ["git", "-C", str(self.root), "rev-parse", "--path-format=absolute",
                 "--git-common-dir"], capture_output=True, text=True, timeout=10, check=False,
            )  # fmt: skip
            if out.returncode == 0 and out.stdout.strip():
                where = str(Path(out.stdout.strip()).resolve())
        except (OSError, subprocess.SubprocessError):
            pass
        return sha256_text(where)[:16]

    def _text_now(self, path: str) -> str | None:
        """A workspace file's text as this user's View holds it (secrets redacted), or None
        when it is gone or outside the workspace."""
        full = (self.root / path).resolve()
        if not full.is_relative_to(self.root) or not full.is_file():
            return None
        try:
            return redact(decode(full.read_bytes()), path).text
        except OSError:
            return None

    def _link_entities(self, entities: Sequence[Candidate]) -> list[CodeLink | None]:
        """The indexed lines each of a note's entities names, against one View (one check
        of the working tree for the note, not one per entity); all None before an index."""
        try:
            view, _ = self.view()
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
        text = self._text_now(path)
        if text is None:
            return None
        lines = file_lines(text)
        if entity.kind == "path":
            start, end = 1, max(1, len(lines))
        if not 1 <= start <= end <= len(lines):
            return None
        name = entity.key.split(":", 1)[1]
        return CodeLink(name, path, start, end, sha256_text("\n".join(lines[start - 1 : end])))

    @property
    def journal(self) -> Journal:
        """The workspace's evidence ledger (opened, and created, on first use)."""
        with self._lazy:
            if self._journal is None:
                self._journal = Journal(self.ledger_path, self._layers.user)
            return self._journal

    def recorded_journal(self) -> Journal:
        """The ledger for reading: a ``NotFoundError`` when nothing was ever recorded here
        (reading never creates state: a folder stays as it was)."""
        if self._journal is None and not self.ledger_path.exists():
            raise NotFoundError(f"no ledger at {self.ledger_path}: nothing recorded here yet")
        return self.journal

    def replay(self, replay_key: str, *, rebuild: bool = False) -> Replay:
        """The exact prompt recorded under ``replay_key`` (byte for byte), from the ledger.

        With ``rebuild``, retrieval runs again on the recorded inputs against the current
        index, and ``diff`` shows how today's context differs (empty when nothing changed).
        """
        turn = self._turn(replay_key)
        text, purged = self.journal.stored(turn.render_sha256)
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
                history_upto=inputs.history_upto,
            )
            diff = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    again.render().splitlines(keepends=True),
                    "recorded",
                    "rebuilt",
                )
            )
        return Replay(replay_key, turn.turn_id, turn.time, text, turn.tokens_used, diff, purged)

    def _turn(self, replay_key: str) -> TurnRecord:
        if self._journal is None and not self.ledger_path.exists():
            raise UnknownReplayKeyError(f"unknown replay key {replay_key!r}: nothing recorded")
        turn = self.journal.find(replay_key)
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
        reason: str | None = None,
    ) -> FeedbackResult:
        """Check the model's citations against the turn's evidence, and record them; with
        an ``outcome`` (``success`` or ``failure``, and a ``reason`` for a failure), learn
        from it: attest the cited items and move this workspace's rerank offsets.

        Ids outside the turn's set (and malformed markers) are dropped and counted; a cited
        snippet whose source no longer matches its sha256 is flagged stale. The turn is
        found in the ledger (or, with the ledger off, among this process's recent turns).
        An outcome is journaled as one atomic pair (attest, then weights: see
        ``engine.memory``); one (user, intent) may attest once a second, five at once
        (``RateLimitedError`` past that, with nothing recorded).
        """
        if len(model_citations) > MAX_ATTEST_CITATIONS:
            raise ConfigError(f"{len(model_citations)} citations: at most "
                              f"{MAX_ATTEST_CITATIONS} per feedback")  # fmt: skip
        if outcome is not None:
            return self._attest(replay_key, model_citations, tool_results, outcome, reason)
        if reason is not None:
            raise ConfigError("a reason goes with an outcome (success or failure)")
        turn: TurnRecord | None = None
        refs: Sequence[CitedRef]
        if self.config.ledger:
            turn = self._turn(replay_key)
            refs = CitedRef.of_turn(turn)
        else:
            recent = self._recent.get(replay_key)
            if recent is None:
                raise UnknownReplayKeyError(
                    f"unknown replay key {replay_key!r} (not built in this process)"
                )
            refs = recent
        result = check_citations(replay_key, refs, model_citations, self._still_matches)
        if turn is not None:
            self._record_feedback(turn, result, tool_results, None)
        return result

    def _record_feedback(
        self,
        turn: TurnRecord,
        result: FeedbackResult,
        tool_results: Sequence[ToolResult | str],
        outcome: str | None,
    ) -> None:
        results = [r if isinstance(r, ToolResult) else ToolResult("tool", True, str(r))
                   for r in tool_results]  # fmt: skip
        results = [replace(r, summary=_scrub(r.summary)) for r in results]
        try:
            self.journal.record_feedback(turn, result, results, outcome)
        except LedgerStateError as exc:
            raise LedgerStateError(f"feedback was checked but not recorded: {exc}") from exc

    def _attest(self, replay_key: str, model_citations: Sequence[int | str],
                tool_results: Sequence[ToolResult | str], outcome: str,
                reason: str | None) -> FeedbackResult:  # fmt: skip
        """Feedback with an outcome: checked, rate-limited, then the feedback record and
        the attest/weights pair; the salience tables catch up last."""
        if not self.config.ledger:
            raise ConfigError("learning from outcomes journals every update: turn the ledger "
                              "on (ledger = true) or give feedback without an outcome")  # fmt: skip
        turn = self._turn(replay_key)
        inputs = Inputs.from_json(self.journal.text(turn.inputs_sha256))
        intent = (inputs.query or inputs.goal).strip()
        checked = check_attest(outcome, reason, intent, len(model_citations))
        bucket = (self.journal.user, sha256_text(intent))
        self._attests.check(bucket)
        refs = CitedRef.of_turn(turn)
        result = check_citations(replay_key, refs, model_citations, self._still_matches)
        self._record_feedback(turn, result, tool_results, checked.value)
        by_id = {r.local_id: r for r in refs}
        live = [by_id[n] for n in result.valid if n not in result.stale]
        rows = self._features.get(replay_key)
        if rows is None:
            rows = self._rows_again(inputs)
        changes = item_changes(checked, reason, cited_keys(rows, live))
        hit, missed = split_rows(rows, [r for r in live if not r.source_uri.startswith("memory:")])
        state = self._salience_state()
        settings = self.config.learn_settings()
        after, skipped = ema_step(state.weights, hit, missed, checked, reason, settings)
        attest: JSON = {
            "user": self.journal.user,
            "intent": sha256_text(intent),
            "outcome": checked.value,
            "reason": reason,
            "cited": list(result.valid),
            "dropped": len(result.dropped),
            "stale": list(result.stale),
            "items": [[k, dc, da] for k, dc, da in changes],
        }
        weights = weights_payload(state.weights, after, settings.rate, skipped)
        try:
            self.journal.append_pair(turn.turn_id, attest, weights)
        except LedgerStateError as exc:
            raise LedgerStateError(f"feedback was recorded but not learned from: {exc}") from exc
        self._attests.take(bucket)
        tables = SalienceTables(self._salience_path)
        # A cache of the journal: when it lags, reads fold the records it lacks.
        with suppress(MemoryStateError):
            tables.catch_up(self.journal.learning_records(tables.load().seq))
        return result

    def _rows_again(self, inputs: Inputs) -> tuple[FeatureRow, ...]:
        """A recorded turn's candidates ranked again (when this process did not build it)."""
        view, _ = self.view()
        embedder = self.embedder
        if embedder is not None and not view.has_dense(embedder.model_id):
            embedder = None
        request = Request.parse(inputs.goal, inputs.query, inputs.tool_signals)
        scored = retrieve(view, request, embedder, self.cache if embedder is not None else None,
                          self.config.context_settings())  # fmt: skip
        return _feature_rows(scored)

    @property
    def _salience_path(self) -> Path:
        """The salience tables, beside the ledger they fold (one per ledger)."""
        return self.ledger_path.with_suffix(".salience.sqlite")

    def _salience_state(self) -> SalienceState:
        """The fold of every attest/weights pair in the ledger (the tables plus what they
        lack, folded in memory): a pure read, kept while the ledger's head stays put."""
        if not self.config.ledger or (self._journal is None and not self.ledger_path.exists()):
            return SalienceState()
        head = self.journal.head()[0]
        cached = self._salience
        if cached is not None and cached.seq == head:
            return cached
        tables = SalienceTables(self._salience_path)
        base = cached if cached is not None and cached.seq <= head else tables.load()
        if base.seq > head:  # tables from another ledger: fold from empty
            base = SalienceState()
        state = tables.state(self.journal.learning_records(base.seq), base)
        state.seq = head
        self._salience = state
        return state

    def outcomes(self, goal: str, query: str = "", *, k: int = 3) -> list[PastOutcome]:
        """The outcomes tier: the ``k`` (1 to 10) earlier intents in this workspace most
        like this one, with what they cited and how they ended, most similar first. A pure
        read; empty before the first outcome (or with the ledger off)."""
        if not 1 <= k <= MAX_OUTCOMES:
            raise ConfigError(f"k must be between 1 and {MAX_OUTCOMES}, got {k}")
        text = (query or goal).strip()
        if not text:
            raise ConfigError("outcomes needs a goal or a query")
        index = self._outcome_index()
        if index is None:
            return []
        try:
            top = [f.path for f in self.search_files(text, goal=goal, k=_OUTCOME_FILES)]
        except (IndexNotBuiltError, IndexStateError):
            top = []
        return index.rank(text, top, k, exclude=text)

    def _outcome_index(self) -> OutcomeIndex | None:
        """The earlier attested intents, caught up with the ledger (None without one)."""
        if not self.config.ledger or (self._journal is None and not self.ledger_path.exists()):
            return None
        with self._lazy:
            if self._outcomes is None:
                from engine.segment import code_terms

                self._outcomes = OutcomeIndex(code_terms)
        self._outcomes.update(self.journal)
        return self._outcomes

    def bundle(
        self,
        goal: str,
        objects: Sequence[str] | None = None,
        budget: int = DEFAULT_BUNDLE_BUDGET,
        *,
        state: SessionState | None = None,
    ) -> Bundle:
        """The cold-start bundle for ``goal``: the pinned tier (``state``'s constraints
        and goals, saved identity/constraint/goal notes, the repository's rules files), the
        outcomes tier (the most similar earlier intents, newest first) and the frame-relevant
        tier (code and notes for the goal and the ``objects`` it names: paths or symbols),
        deduplicated (pinned > outcomes > frame) and trimmed together by salience to
        ``budget`` tokens (at most 4,000), at least one item kept; what was left out is named
        by uri. A pure read."""
        started = time.perf_counter()
        if not goal.strip():
            raise ConfigError("bundle needs a goal")
        if not MIN_BUDGET_TOKENS <= budget <= MAX_BUNDLE_BUDGET:
            raise ConfigError(f"budget must be between {MIN_BUDGET_TOKENS} and "
                              f"{MAX_BUNDLE_BUDGET:,}, got {budget}")  # fmt: skip
        wanted = [o.strip() for o in objects or () if o.strip()]
        if len(wanted) > _BUNDLE_OBJECTS:
            raise ConfigError(f"at most {_BUNDLE_OBJECTS} objects, got {len(wanted)}")
        goal = _scrub(goal)
        state = state or SessionState()
        items: list[BundleItem] = []
        for n, text in enumerate(state.constraints, start=1):
            items.append(BundleItem(Tier.PINNED, f"state:constraint/{n}", "constraint",
                                    _scrub(text), 1.0))  # fmt: skip
        for n, text in enumerate(state.subgoals, start=1):
            items.append(BundleItem(Tier.PINNED, f"state:goal/{n}", "active goal",
                                    _scrub(text), 0.95))  # fmt: skip
        notes = self._memory is not None or self._memory_path.exists()
        if notes:
            kinds = (NoteType.IDENTITY, NoteType.CONSTRAINT, NoteType.GOAL)
            for hit in self.memory.search(goal, _PINNED_NOTES, types=kinds):
                sal = max(PINNED_FLOOR, 0.7 + 0.2 * hit.importance)
                title = f"{hit.type.value}: {hit.title}"
                items.append(BundleItem(Tier.PINNED, hit.uri, title, hit.preview, sal))
        learned = self.learned()
        for uri, title, text in rules_sections(self.root, goal):
            boost = learned.salience.get(f"file:{uri.split('#', 1)[0]}", 0.0)
            sal = PINNED_FLOOR + 0.1 * (1 + boost)
            items.append(BundleItem(Tier.PINNED, uri, title, text, sal))
        ask = " ".join([goal, *wanted])
        try:  # one ranking serves the frame tier and the outcomes tier's file match
            scored = self._ranked(ask, goal, None, SearchMode.HYBRID, _bundle_settings(self.config))
        except (IndexNotBuiltError, IndexStateError):
            scored = []
        index = self._outcome_index()
        past: list[PastOutcome] = []
        if index is not None:
            top_files = [f.path for f in file_hits(scored, _OUTCOME_FILES)]
            past = index.rank(ask, top_files, _BUNDLE_OUTCOMES, exclude=ask)
        top = max((p.score for p in past), default=1.0) or 1.0
        for p in sorted(past, key=lambda p: (p.time, p.turn_id), reverse=True):
            end = p.outcome + (f" ({p.reason})" if p.reason else "")
            cited = ", ".join(p.cited[:_BUNDLE_CITED]) or "nothing"
            said = " ".join(p.intent.split())[:_INTENT_CHARS]
            sal = 0.4 + 0.25 * p.score / top
            items.append(BundleItem(Tier.OUTCOMES, f"outcome:{p.turn_id}", f"{end}, {p.time}",
                                    f"{said}\ncited: {cited}", sal))  # fmt: skip
        hits = ranked_hits(scored, _BUNDLE_SECTIONS)
        best = max((h.score for h in hits), default=1.0) or 1.0
        named = set(wanted)
        for h in hits:
            c = h.chunk
            asked = c.path in named or c.symbol in named or c.symbol.rsplit(".", 1)[-1] in named
            uri = f"{c.path}#L{c.span.start_line}-L{c.span.end_line}"
            sal = min(0.69, 0.6 * max(0.0, h.score) / best + (0.09 if asked else 0.0))
            items.append(BundleItem(Tier.FRAME, uri, f"{c.path} {c.symbol}".strip(), c.text, sal))
        if notes:
            # Previews: the bundle names the note (resolve it for the whole); the full text
            # with every link re-checked is the memory lane's, at a context's cost.
            for hit in self.memory.search(goal, _BUNDLE_NOTES):
                sal = 0.3 + 0.2 * hit.importance
                items.append(BundleItem(Tier.FRAME, hit.uri, hit.title, hit.preview, sal))
        kept, overflow, text, tokens = fit_bundle(goal, items, budget, self.counter)
        latency = round((time.perf_counter() - started) * 1000, 3)
        return Bundle(goal, budget, kept, overflow, tokens, text, latency)

    def learned(self) -> Learned:
        """What this workspace learned from outcomes (salience per item, rerank offsets per
        feature): what ranking adds as the ``salience`` and ``learned`` features."""
        return self._salience_state().learned()

    # -- resolve --------------------------------------------------------------------

    def resolve(self, uri: str, proof: Mapping[str, str] | None = None) -> Resolved:
        """The indexed text at ``uri`` (``path#La-Lb``, ``path#La`` or ``path``), only for a
        caller that proves it holds that content; anyone else gets metadata only.

        ``proof = {"path": ..., "sha256": ...}``: the sha256 of the file's bytes, or of the
        requested lines' text (what a citation carries), as this index holds them. Text
        comes from this user's View (base plus this user's overlay), never from another
        user's overlay, and never for a file the index skipped.
        """
        if uri.startswith("memory:"):  # a note this user may read: theirs in full
            note = self.memory.get(uri.removeprefix("memory:"))
            return Resolved(uri, uri, None, None, sha256_text(note.text), None, None,
                            note.text, f"memory note ({note.type.value})")  # fmt: skip
        found = session_uri(uri)
        if found is not None:  # a step of this user's session: theirs to read in full
            item = self.session(found[0]).step(found[1])
            return Resolved(uri, uri, None, None, sha256_text(item.text),
                            self.counter.count(item.text) if len(item.text) < 400_000 else None,
                            None, item.text, f"session step ({item.role.value})")  # fmt: skip
        view, _ = self.view()
        return resolve_in(view, uri, proof, self.counter)

    # -- status ---------------------------------------------------------------------

    def status(self, *, check_files: bool = True) -> Status:
        """What is indexed (base, this branch's overlay); with ``check_files``, also how
        many files differ from the index now (a walk that reads every file)."""
        st = status_of(self._layers, self.config, check_files=check_files)
        try:
            embedder = self.embedder
        except EmbeddingModelError as exc:
            return replace(st, dense_problem=str(exc))
        configured = embedder.model_id if embedder is not None else None
        if configured and st.indexed and configured != st.dense_model:
            return replace(st, dense_problem=f"the configured model {configured} has no "
                           "vectors in this index: run `cortex index`")  # fmt: skip
        return st


# The history lane's share of a session turn's budget (the goal's cost comes off first):
# the rest stays for code evidence, which the history lane must not crowd out.
_HISTORY_SHARE = 0.4
# The memory lane's share of a turn's budget, and the notes it may show: a few facts the
# agent saved, never enough to crowd out the code evidence.
_MEMORY_SHARE = 0.15
_MEMORY_NOTES = 5
_INSTRUCTION_TOKENS = 64  # the fixed instruction and lane headers, about
MAX_OUTCOMES = 10  # earlier intents one outcomes call may list
# The cold-start bundle's tiers before the trim: enough candidates of each that the trim
# by salience has a choice, few enough that a bundle stays a fast read.
_BUNDLE_OBJECTS = 64  # paths or symbols one bundle call may name
_PINNED_NOTES = 8  # identity, constraint and goal notes
_BUNDLE_OUTCOMES = 3  # the 1-3 earlier intents
_BUNDLE_CITED = 8  # cited uris shown per earlier intent
_INTENT_CHARS = 300  # an earlier intent's text as the bundle shows it
_BUNDLE_SECTIONS = 8  # code sections for the goal and objects
_BUNDLE_NOTES = 4  # saved notes for the goal
_BUNDLE_RECALL = 40  # sections recalled per retriever and reranked for a bundle
_BUNDLE_PAGES = 8  # pages whose best sections a bundle's recall pulls in
_OUTCOME_FILES = 20  # the request's best files an earlier intent's citations are matched to
FORGET_MIN_CHARS = 6  # shortest text ``forget`` takes: shorter ones match ordinary code
_LAYOUT_DIRS = ("bases", "overlays", "segments", "checkout")  # what a rebuild replaces
_REBUILD_DIR = "rebuild"  # where a rebuild is made, beside the index in use
_REPLACED_DIR = "replaced"  # where the old layout waits to be removed after the swap


def _bundle_settings(config: Config) -> ContextSettings:
    """The ranking a bundle reads: build_context's, over a narrower net (a handful of
    sections to start from, not a context's evidence), so a bundle stays a quick read."""
    base = config.context_settings()
    recall = replace(base.recall, bm25_sections=_BUNDLE_RECALL, dense_sections=_BUNDLE_RECALL,
                     pages=_BUNDLE_PAGES)  # fmt: skip
    return replace(base, recall=recall, rerank_depth=_BUNDLE_RECALL)


def _feature_rows(scored: Sequence[Scored]) -> tuple[FeatureRow, ...]:
    """The best candidates' rerank features (without the learned ones), for learning."""
    return tuple(
        FeatureRow(s.chunk.path, s.chunk.span.start_line, s.chunk.span.end_line, s.chunk.symbol,
                   tuple((c.feature, c.value) for c in s.contributions
                         if c.feature not in LEARNED_FEATURES))
        for s in scored[:LEARN_POOL]
    )  # fmt: skip


def _search_mode(mode: SearchMode | str, k: int) -> SearchMode:
    try:
        checked = SearchMode(mode)
    except ValueError as exc:
        raise ConfigError(f"unknown search mode {mode!r}; use hybrid, bm25 or dense") from exc
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    return checked


def _holds(path: Path, text: str) -> bool:
    """Whether the file at ``path`` holds ``text`` (as UTF-8 bytes)."""
    try:
        return text.encode("utf-8") in path.read_bytes()
    except OSError:
        return False


def _remove_tree(path: Path) -> None:
    import shutil

    if path.exists():
        shutil.rmtree(path)


def _scrub(text: str) -> str:
    """``text`` with any credential in it redacted."""
    return redact(text).text if text else text


def _scrubbed(
    goal: str, query: str, signals: tuple[ToolSignal, ...], state: SessionState
) -> tuple[str, str, tuple[ToolSignal, ...], SessionState]:
    """A request with every credential the caller sent redacted (goal, query, tool output,
    earlier turns, constraints, sub-goals)."""
    return (
        _scrub(goal),
        _scrub(query),
        tuple(replace(s, text=_scrub(s.text)) for s in signals),
        SessionState(
            tuple(replace(t, text=_scrub(t.text)) for t in state.recent_turns),
            tuple(_scrub(c) for c in state.constraints),
            tuple(_scrub(g) for g in state.subgoals),
            state.session,
        ),
    )
