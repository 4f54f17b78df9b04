"""``Workspace``: the public entry point over one folder and its ``.cortex`` state.

The composition root: it builds segments (``engine.index``), composes them into a View
(``overlays``), loads the tokenizer and the embedder, and hands plain data to retrieval,
packing and memory, which never see one another's state. The facade wires one
collaborator per concept (``State``, ``Indexer``, ``Ranker``, ``Contexts``, ``Notes``,
``Sessions``, ``Forgetter``, ``Learning``) and delegates to them.
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from engine._workspace._context import Contexts
from engine._workspace._forget import Forgetter
from engine._workspace._index import Indexer
from engine._workspace._learning import Learning
from engine._workspace._notes import Notes
from engine._workspace._search import Ranker, search_mode
from engine._workspace._sessions import Sessions
from engine._workspace._state import State
from engine.core import (
    DEFAULT_BUNDLE_BUDGET,
    MAX_ATTEST_CITATIONS,
    MAX_ITEMS,
    SOURCE_URI,
    Bundle,
    CacheError,
    Config,
    ConfigError,
    ContextPack,
    ContextSettings,
    EmbeddingModelError,
    FeedbackResult,
    FileHit,
    FileRanking,
    ForgetReport,
    GcReport,
    HistoryLane,
    IndexReport,
    Learned,
    PastOutcome,
    Progress,
    Replay,
    Resolved,
    SaveResult,
    Scope,
    SearchHit,
    SearchMode,
    SessionState,
    Status,
    ToolSignal,
    UnknownReplayKeyError,
    WorkspaceClosedError,
    WorkspaceError,
    WorkspaceNotFoundError,
    check_budget,
    check_items,
    check_model_citations,
    check_text,
    check_total,
    check_type,
)
from engine.index import locate, status_of
from engine.memory import (
    CitedRef,
    Inputs,
    Journal,
    Memory,
    Session,
    check_citations,
    session_uri,
)
from engine.retrieval import (
    Scored,
    dense_hits,
    file_hits,
    inside_workspace,
    ranked_hits,
    resolve_in,
)
from indexers import TokenCounter, sha256_text
from ledger import ToolResult, TurnRecord
from overlays import View

if TYPE_CHECKING:
    from engine.embed import Embedder, EmbeddingCache
    from engine.index import Layers

__all__ = ["Workspace"]


class Workspace:
    """One folder, indexed under ``<root>/.cortex`` (configurable).

    Opening is cheap: no model, index or tokenizer is loaded until used.

    >>> ws = Workspace.open(".")  # doctest: +SKIP
    >>> ws.index()                # doctest: +SKIP
    >>> ws.search("register a hook", k=5)  # doctest: +SKIP
    """

    def __init__(self, root: Path, config: Config) -> None:
        self._state = State(root, config)
        self.root = root
        self.config = config
        self.state_dir = self._state.state_dir
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()  # SQLite handles and held locks must not cross a fork
        self._indexer = Indexer(self._state)
        self._ranker = Ranker(self._state, self._indexer)
        self._notes = Notes(self._state, self._indexer)
        self._sessions = Sessions(self._state, self._notes)
        self._learning = Learning(self._state, self._indexer, self._ranker, self._notes)
        self._forgetter = Forgetter(self._state, self._indexer, self._notes)
        self._contexts = Contexts(
            self._state, self._indexer, self._notes, self._sessions, self._learning
        )

    @classmethod
    def open(
        cls, path: str | Path, config: Config | None = None, *, check: bool = True
    ) -> Workspace:
        """Open the workspace at ``path`` (a folder); checks the state layout if present
        (``check=False``: not, for a caller about to ``index(rebuild=True)``)."""
        check_type("path", path, (str, os.PathLike), "a folder path (str or os.PathLike)")
        if not os.fspath(path).strip():  # Path("") is the current folder: never meant
            raise ConfigError("the workspace path is empty; name a folder (\".\" for this one)")
        if config is not None:
            check_type("config", config, Config)
        root = Path(path).expanduser().resolve()
        if not root.exists():
            raise WorkspaceNotFoundError(f"no such folder: {root}")
        if not root.is_dir():
            raise WorkspaceError(f"not a folder: {root}")
        ws = cls(root, config or Config.from_env())
        if check:
            ws._state.manifest.check()
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
        """Release indexes, models and files. A closed workspace refuses every later call
        with ``WorkspaceClosedError`` (open the folder again to go on); closing again does
        nothing. What was taken from it before (``memory``, ``journal``, a ``session``) is
        closed with it, and refuses too (``MemoryStateError``, ``LedgerStateError``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pid != os.getpid():  # a forked child: the handles are the parent's
                return
            self._learning.close()
            self._state.close()
            self._notes.close()

    def _check_open(self) -> None:
        """Refuse a call after ``close`` (it would silently open again what close released)
        and in a process forked from the one that opened it: SQLite says a connection must
        not cross ``fork()``, and a lock a parent thread held stays held in the child."""
        if self._pid != os.getpid():
            raise WorkspaceError(
                f"this Workspace of {self.root} was opened in process {self._pid}, before a "
                "fork: open the folder again (Workspace.open) in each process"
            )
        if self._closed:
            raise WorkspaceClosedError(
                f"this Workspace of {self.root} was closed; open the folder again "
                "(Workspace.open) to go on"
            )

    def __enter__(self) -> Workspace:
        self._check_open()
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
        self._check_open()
        return self._state.layers

    def view(self) -> tuple[View, tuple[str, ...]]:
        """The View a call reads, refreshed first when the working tree moved.

        With ``refresh = "advise"``, or while another call or process is refreshing, the
        View is answered as it is, with a note saying it is stale: reads never wait for a
        refresh they did not start. Raises ``IndexNotBuiltError`` before the first index.
        """
        self._check_open()
        return self._indexer.view()

    def defer_far_refresh(self, refresh: Callable[[], object] | None) -> None:
        """Where a call finds the working tree moved far (a new base to build, or more than
        ``QUICK_FILES`` files the index has not seen: a checkout, a pull), answer from the
        index as it was, with a note, and call ``refresh`` (a server's background index)
        instead of building first. None (the default): the call builds first."""
        self._indexer.far_refresh = refresh

    @property
    def counter(self) -> TokenCounter:
        """The token counter of the configured encoding."""
        self._check_open()
        return self._state.counter

    @property
    def embedder(self) -> Embedder | None:
        """The dense model (loaded on first embed), or None when dense search is off."""
        self._check_open()
        return self._state.embedder

    @property
    def cache(self) -> EmbeddingCache:
        """The content-addressed vector cache."""
        self._check_open()
        return self._state.cache

    # -- index ----------------------------------------------------------------------

    def index(self, *, progress: Progress | None = None, rebuild: bool = False) -> IndexReport:
        """Bring the index up to date with the folder; only what changed is re-done.

        The first run builds a base at the base commit (see ``Layers``); every run refreshes
        this branch's overlay: the files that differ from the base, and tombstones for the
        base files changed or deleted. The report covers both.
        One writer at a time: a second one gets ``IndexBusyError`` naming the holder.
        """
        self._check_open()
        return self._indexer.index(progress, rebuild=rebuild)

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Remove the overlays of branches and working trees that no longer exist, and the
        bases no overlay uses any more (``dry_run``: only say what would go)."""
        self._check_open()
        return self._indexer.gc(dry_run=dry_run)

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
        self._check_open()
        return self._forgetter.forget(paths, text, dry_run=dry_run, progress=progress)

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
        self._check_open()
        mode = search_mode(mode, k)
        check_text("query", query)
        check_text("goal", goal)
        if mode is SearchMode.DENSE:
            if not query.strip():  # as the other modes answer (every cosine would be 0)
                raise ConfigError("search needs a query")
            view, _ = self.view()
            embedder = self._ranker.dense_embedder(view)
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
        sections (a file's score: see ``FileHit``; ``Config.file_ranking`` chooses how)."""
        self._check_open()
        mode = search_mode(mode, k)
        check_text("query", query)
        check_text("goal", goal)
        if mode is SearchMode.DENSE:
            raise ConfigError("files are ranked by hybrid or bm25 search, not dense alone")
        return file_hits(self._ranked(query, goal, tool_signals, mode), k,
                         FileRanking(self._state.config.file_ranking))  # fmt: skip

    def _ranked(
        self, query: str, goal: str, tool_signals: Sequence[ToolSignal | str] | None,
        mode: SearchMode,
    ) -> list[Scored]:  # fmt: skip
        return self._ranker.ranked(query, goal, tool_signals, mode, None, self.learned)

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

        ``goal`` is the task, pinned verbatim (a line of it that would read as the prompt's
        frame, such as an issue's own ``## Description``, gets a backslash in front);
        ``query`` is what this step needs. Either may be empty, not both, and each defaults
        to the other (as on every surface).
        ``tool_signals`` are tool outputs (tracebacks, failing tests, compiler errors) as
        ``ToolSignal`` or plain strings. The result's ``render()`` never exceeds
        ``budget_tokens`` (default: the config's).

        Every call is recorded in the ledger (``record=False`` skips that, for library use
        that wants no side effect); if recording fails (full disk, read-only or damaged
        ledger) the pack is still returned and its advisory says the turn was not recorded.
        The memory lane and the offsets learned from outcomes are left out, with an
        advisory naming the file and what to do, when the memory store or the ledger cannot
        be read. A session's history is not optional: with ``state.session`` set, a ledger
        that cannot be read raises ``LedgerStateError``.
        """
        self._check_open()
        return self._contexts.build(
            goal, query, tool_signals, state, budget_tokens=budget_tokens, explain=explain,
            record=record, timings=timings, settings=settings, history_upto=history_upto,
        )  # fmt: skip

    # -- sessions and memory --------------------------------------------------------

    def session(self, session_id: str) -> Session:
        """The session ``session_id`` of this user in this workspace's ledger: ``add``,
        ``decide``, ``compact``, ``checkpoint``, ``load_checkpoint``, ``lane``, ``step``.
        An id with no step yet is a new session (created by its first ``add``)."""
        self._check_open()
        return self._sessions.get(session_id)

    def session_lane(self, session_id: str, budget_tokens: int, goal: str = "",
                     query: str = "") -> HistoryLane:  # fmt: skip
        """The history lane ``build_context`` would give session ``session_id``'s next turn
        at ``budget_tokens``: in the same room (40% of the budget at most, less what the
        goal takes), its recalled lines ranked by ``query`` (or the goal). Journals nothing.
        """
        self._check_open()
        check_budget(budget_tokens)
        check_text("goal", goal)
        check_text("query", query)
        state = SessionState(session=session_id)
        return self._sessions.history(state, goal, query, (), budget_tokens, None, record=False)

    def end_session(self, session_id: str, scope: Scope | str = Scope.PERSONAL) -> SaveResult:
        """Save session ``session_id``'s summary as a memory note (goal, decisions with
        their rationale, failures and their fixes, files changed; extracted, not generated)
        under the topic key ``session/<id>``: ending it again updates that note in place."""
        self._check_open()
        return self._sessions.end(session_id, scope)

    @property
    def memory(self) -> Memory:
        """This project's saved notes as this user sees them (``<state>/memory.sqlite``):
        ``save``, ``search``, ``get``, ``timeline``, ``relate``, ``graph``, ``forget``,
        ``archive``, ``stats``. Notes are recalled with the code's terms and embedder, and
        their code links are resolved in, and re-checked against, this user's View."""
        self._check_open()
        return self._notes.memory

    @property
    def project(self) -> str:
        """What names this project for memory: the repository (its common git folder, so
        every working tree of one repository shares its notes), else the folder."""
        return self._notes.project

    # -- ledger ---------------------------------------------------------------------

    @property
    def ledger_path(self) -> Path:
        """Where the evidence ledger lives (it exists once a turn was recorded)."""
        return self._state.ledger_path

    @property
    def journal(self) -> Journal:
        """The workspace's evidence ledger (opened, and created, on first use)."""
        self._check_open()
        return self._state.journal

    def recorded_journal(self) -> Journal:
        """The ledger for reading: a ``NotFoundError`` when nothing was ever recorded here
        (reading never creates state: a folder stays as it was)."""
        self._check_open()
        return self._state.recorded_journal()

    def replay(
        self,
        replay_key: str,
        *,
        rebuild: bool = False,
        user: str | None = None,
        all_users: bool = False,
    ) -> Replay:
        """The exact prompt recorded under ``replay_key`` (byte for byte), from the ledger.

        With ``rebuild``, retrieval runs again on the recorded inputs, with the settings the
        turn ran with, against the current index, and ``diff`` shows how today's context
        differs (empty when nothing changed; a turn recorded before its settings were runs
        with today's).

        Turns are read back per user (``Config.user``): an auditor names whose turn it is
        with ``user``, or reads anyone's with ``all_users``.
        """
        self._check_open()
        turn = self._state.turn(replay_key, user=user, all_users=all_users)
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
                settings=inputs.settings,
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

    def feedback(
        self,
        replay_key: str,
        model_citations: Sequence[int | str] = (),
        tool_results: Sequence[ToolResult | str] = (),
        outcome: str | None = None,
        reason: str | None = None,
    ) -> FeedbackResult:
        """Check the model's citations against the turn's evidence, and record them (none
        given: the model cited nothing, which is recorded as such); with
        an ``outcome`` (``success`` or ``failure``, and a ``reason`` for a failure only),
        learn from it: attest the cited items and move this workspace's rerank offsets. A
        ``FailureReason`` (``factual_error``, ``wrong_assumption``; however cased) takes the
        citations back; any other reason is free text that teaches nothing.

        Ids outside the turn's set (and malformed markers) are dropped and counted; a cited
        snippet whose source no longer matches its sha256 is flagged stale. The turn is
        found in the ledger (or, with the ledger off, among this process's recent turns).
        An outcome is journaled as one atomic pair (attest, then weights: see
        ``engine.memory``); one (user, intent) may attest once a second, five at once
        (``RateLimitedError`` past that, with nothing recorded).
        """
        self._check_open()
        check_model_citations(model_citations)
        check_items("model_citations", model_citations, MAX_ATTEST_CITATIONS)
        tool_results = check_items("tool_results", tool_results, MAX_ITEMS)
        for r in tool_results:
            check_type("tool_results items", r, (ToolResult, str), "ToolResult records or text")
        check_total("tool_results", (r if isinstance(r, str) else r.summary for r in tool_results))
        if outcome is not None:
            return self._learning.attest(replay_key, model_citations, tool_results, outcome, reason)
        if reason is not None:
            raise ConfigError("a reason goes with an outcome (success or failure)")
        turn: TurnRecord | None = None
        refs: Sequence[CitedRef]
        if self.config.ledger:
            turn = self._state.turn(replay_key)
            refs = CitedRef.of_turn(turn)
        else:
            recent = self._contexts.recent.get(replay_key)
            if recent is None:
                raise UnknownReplayKeyError(
                    f"unknown replay key {replay_key!r} (not built in this process)"
                )
            refs = recent
        result = check_citations(replay_key, refs, model_citations, self._notes.still_matches)
        if turn is not None:
            self._state.record_feedback(turn, result, tool_results, None)
        return result

    # -- learning -------------------------------------------------------------------

    def outcomes(self, goal: str, query: str = "", *, k: int = 3) -> list[PastOutcome]:
        """The outcomes tier: the ``k`` (1 to 10) earlier intents in this workspace most
        like this one, with what they cited and how they ended, most similar first. A pure
        read; empty before the first outcome (or with the ledger off)."""
        self._check_open()
        return self._learning.outcomes(goal, query, k)

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
        self._check_open()
        return self._learning.bundle(goal, objects, budget, state)

    def learned(self) -> Learned:
        """What this workspace learned from outcomes (salience per item, rerank offsets per
        feature): what ranking adds as the ``salience`` and ``learned`` features."""
        self._check_open()
        return self._learning.learned()

    def reset_learned(self, reason: str | None = None) -> Learned:
        """Forget what outcomes taught this workspace: every item's salience and every
        rerank offset go back to none, for every user of this ledger. The reset is a
        journal record like an outcome's (with ``reason``, scrubbed of secrets), so the
        ledger keeps the audit trail, earlier turns still replay, and later outcomes teach
        from zero. The outcomes tier (earlier intents and what they cited) is history and
        stays; ``forget`` removes text. Returns the state forgotten (empty, and nothing
        recorded, when nothing was learned)."""
        self._check_open()
        return self._learning.reset(reason)

    # -- resolve --------------------------------------------------------------------

    def resolve(self, uri: str, proof: Mapping[str, str] | None = None) -> Resolved:
        """The indexed text at ``uri`` (``path#La-Lb``, ``path#La`` or ``path``), only for a
        caller that proves it holds that content; anyone else gets metadata only.

        ``proof = {"path": ..., "sha256": ...}``: the sha256 of the file's bytes, or of the
        requested lines' text (what a citation carries), as this index holds them. Text
        comes from this user's View (base plus this user's overlay), never from another
        user's overlay, and never for a file the index skipped.

        ``memory:N`` (a saved note: its title, then its labelled fields) and
        ``session:ID#N`` (step N of a session) are this user's own records: their text
        comes back in full, no proof needed. A path outside the workspace (absolute, with
        ``..``, or in its state folder) is a ``ConfigError``, as on every surface, and so
        is a proof whose path is another than the uri's.
        """
        self._check_open()
        check_text("uri", uri)
        if proof is not None:
            check_type("proof", proof, Mapping)
        if uri.startswith("memory:"):  # a note this user may read: theirs in full
            note = self.memory.get(uri.removeprefix("memory:"))
            # Its title first, as a pack and a bundle show the note (a note may be a title)
            text = "\n".join(t for t in (note.title, note.text) if t)
            return Resolved(uri, uri, None, None, sha256_text(text), self.counter.count(text),
                            None, text, f"memory note ({note.type.value})")  # fmt: skip
        found = session_uri(uri)
        if found is None and uri.startswith("session:"):
            raise ConfigError(f"bad uri {uri!r}; use session:ID#N for step N of a session")
        if found is not None:  # a step of this user's session: theirs to read in full
            item = self.session(found[0]).step(found[1])
            return Resolved(uri, uri, None, None, sha256_text(item.text),
                            self.counter.count(item.text) if len(item.text) < 400_000 else None,
                            None, item.text, f"session step ({item.role.value})")  # fmt: skip
        match = SOURCE_URI.match(uri.strip())
        if match is None:
            return resolve_in(self.view()[0], uri, proof, self.counter)  # its bad-uri error
        rel, _ = inside_workspace(self.root, self.state_dir, match["path"])
        lines = uri.strip()[len(match["path"]) :]
        view, _ = self.view()
        return replace(resolve_in(view, rel + lines, proof, self.counter), uri=uri)

    # -- status ---------------------------------------------------------------------

    def status(self, *, check_files: bool = True) -> Status:
        """What is indexed (base, this branch's overlay); with ``check_files``, also how
        many files differ from the index now (a walk that reads every file)."""
        self._check_open()
        self._state.layers.check_base_ref()
        try:
            embedder = self.embedder
            configured = embedder.model_id if embedder is not None else None
        except (EmbeddingModelError, CacheError) as exc:
            st = status_of(self._state.layers, self.config, check_files=check_files)
            return replace(st, dense_problem=str(exc))
        st = status_of(self._state.layers, self.config, check_files=check_files,
                       model=configured, counter=self.counter)  # fmt: skip
        if configured and st.indexed and configured != st.dense_model:
            return replace(st, dense_problem=f"the configured model {configured} has no "
                           "vectors in this index: run `cortex index`")  # fmt: skip
        return st
