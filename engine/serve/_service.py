"""The service both servers (``cortex mcp``, ``cortex serve``) translate to.

``Service`` is one ``Workspace`` per process, opened and
warmed once, with input limits, JSON-ready answers and background refreshes. The MCP SDK
is imported inside ``build_mcp_server``, so importing this module loads none of it.

Thread safety (the servers call ``Service`` from a pool of worker threads): the workspace's
SQLite stores, ledger, caches and lazy loaders each hold their own lock, tantivy and faiss
searches are safe to run at once, and ``Service`` loads every lazy part of the workspace
once, under one lock, before the first call. Refreshes write through a second
``Workspace`` of their own, because an index update patches the in-memory faiss index and
holds the metadata connection for its whole transaction: readers keep answering from the
last committed index and pick up the new generation on their next call.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from engine._workspace import Workspace
from engine.core import (
    DEFAULT_BUNDLE_BUDGET,
    MAX_BUDGET_TOKENS,
    MAX_ITEMS,
    MAX_K,
    MAX_TEXT_BYTES,
    Bundle,
    Compaction,
    Config,
    ConfigError,
    ContextPack,
    CortexError,
    Edge,
    FeedbackResult,
    FileHit,
    HistoryLane,
    IndexBusyError,
    IndexNotBuiltError,
    MemoryStats,
    Note,
    NoteGraph,
    NoteHit,
    NotFoundError,
    PayloadTooLargeError,
    Replay,
    SaveResult,
    SearchHit,
    SessionState,
    Step,
    check_items,
    check_k,
    check_model_citations,
    check_text,
    signals_of,
    unknown_replay_key,
    whole_number,
)
from engine.serve._encode import JSON, to_json
from engine.serve._once import Once
from engine.serve._progress import StageProgress, StageRecorder
from engine.serve._requests import Proof
from engine.serve._resolve import RECORD_SCHEMES, resolve_checked
from ledger import ToolResult

if TYPE_CHECKING:
    import anyio

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MAX_K",
    "MAX_TEXT_BYTES",
    "REQUEST_TIMEOUT_S",
    "WATCH_INTERVAL_S",
    "Service",
    "check_k",
    "forget_json",
    "learned_json",
    "reset_json",
]

# A session step's text over the servers (a long test log fits, JSON-escaped, in a body of
# MAX_BODY_BYTES); a bigger one goes in through the CLI or the library, which take any size.
MAX_STEP_BYTES = 768 << 10
REQUEST_TIMEOUT_S = 60.0  # one call; a cold build on a big repository takes a few seconds
READ_THREADS = 4  # reads at once; most of a build holds the GIL, so more threads buy little
WATCH_INTERVAL_S = 60.0  # re-index check: walking and hashing a big tree costs ~1 s
# Longest an `index` call with wait blocks (not REQUEST_TIMEOUT_S: a first index of the
# standard library takes ~150 s on 2 cores); past it the build goes on, followed in status.
REFRESH_WAIT_S = 600.0
WAIT_POLL_S = 0.5  # how often a waiting `index` call looks (and tells MCP's progress)
_WARM_QUERY = "warm up"
_T = TypeVar("_T")


class Service:
    """One warm workspace behind the servers; every method is safe to call from threads."""

    def __init__(self, ws: Workspace, *, watch: float = 0.0) -> None:
        self.ws = ws
        self._warm_lock = threading.Lock()
        self._warm = False
        self._refresh_lock = threading.Lock()  # guards the fields below, never held long
        self._refresher: threading.Thread | None = None
        self._running = False  # set and cleared under the lock, so no request is lost
        self._again = False
        self._first_build = False  # calls wait for it: an empty index would answer nothing
        self._building_elsewhere = False  # that first build is another process's (the lock)
        self._progress = StageRecorder()  # the running refresh's latest stage, for status
        self._writer: Workspace | None = None
        self._last: dict[str, JSON] = {}
        self._stop = threading.Event()
        self._limiter: anyio.CapacityLimiter | None = None
        self._once = Once()
        # A far move (a pull, a checkout) is indexed in the background, never inside a
        # request: one waited 53 s on Django, and 60 s (a 504) on the standard library.
        ws.defer_far_refresh(lambda: self.refresh())
        if watch > 0:
            threading.Thread(target=self._watch, args=(watch,), daemon=True).start()

    @classmethod
    def open(cls, path: str | Path, config: Config, *, watch: float = 0.0) -> Service:
        """Open the workspace and load its index and models; a workspace never indexed gets
        its first index in the background (calls say so until it is ready)."""
        ws = Workspace.open(path, config)
        service = cls(ws, watch=watch)
        if not ws.status(check_files=False).indexed:
            service._first_build = True
            service.refresh()
        else:
            service.warm()
        return service

    def close(self) -> None:
        """Stop watching and release both workspaces."""
        self._stop.set()
        with self._refresh_lock:
            writer, self._writer = self._writer, None
        self.ws.close()
        if writer is not None:
            writer.close()

    def warm(self) -> None:
        """Load every lazy part once, under a lock, so first calls in parallel never race."""
        with self._warm_lock:
            if self._warm:
                return
            ws = self.ws
            ws.counter.count(_WARM_QUERY)
            _ = ws.journal
            if ws.embedder is not None:
                _ = ws.cache
            try:
                ws.build_context(_WARM_QUERY, budget_tokens=256, record=False)
            except IndexNotBuiltError:
                return  # the first index is still being built: warm up on a later call
            except CortexError as exc:
                print(f"cortex: warm-up skipped ({exc})", file=sys.stderr)
            self._warm = True

    async def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``fn`` on the read pool, giving up (TimeoutError) after ``REQUEST_TIMEOUT_S``."""
        import anyio

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(READ_THREADS)
        with anyio.fail_after(REQUEST_TIMEOUT_S):
            # The thread cannot be killed: on timeout it finishes unseen and its answer is lost.
            return await anyio.to_thread.run_sync(
                partial(fn, *args, **kwargs), limiter=self._limiter, abandon_on_cancel=True
            )

    async def call_once(
        self, once: tuple[str, str] | None, fn: Callable[..., _T], *args: Any, **kwargs: Any
    ) -> _T:
        """``call``, made once per idempotency key: ``once`` = (key, fingerprint of the
        request). The first call under a key runs ``fn``; a retry with the same key gets its
        answer, waiting for it (up to ``REQUEST_TIMEOUT_S`` again) while it still runs, even
        after the first answered 504 (see ``engine.serve._once``)."""
        import anyio

        if once is None:
            return await self.call(fn, *args, **kwargs)
        key, fingerprint = once
        future, first = self._once.claim(key, fingerprint)
        if first:

            def run() -> None:  # settles the future even when no one waits any more
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    self._once.settle(key, future, None, exc)
                else:
                    self._once.settle(key, future, result, None)

            await self.call(run)
        if not future.done():  # a retry while the first call runs: wait for its answer
            with anyio.fail_after(REQUEST_TIMEOUT_S):
                await anyio.to_thread.run_sync(future.exception, abandon_on_cancel=True)
        result: _T = future.result()
        return result

    def _ready(self) -> Workspace:
        if self._first_build and (why := self._not_ready()):
            raise IndexNotBuiltError(why)
        self.warm()
        return self.ws

    def _not_ready(self) -> str:
        """Why code cannot be read yet, and where the first build is (it clears the wait
        when another process's build has finished, and retries when that one gave up)."""
        with self._refresh_lock:
            elsewhere = self._building_elsewhere and not self._running
        if elsewhere:
            if self.ws.status(check_files=False).indexed:
                with self._refresh_lock:
                    self._first_build = self._building_elsewhere = False
                return ""
            self.refresh()  # takes the lock if that process is gone, else finds it busy again
            return ("the first index of this workspace is being built by another process "
                    "(cortex index, or another server); call again when it is done")  # fmt: skip
        shown = self._progress.snapshot()
        where = f" ({shown.line()})" if shown is not None else ""
        return (f"the first index of this workspace is being built{where}; call again then: "
                "status shows its progress, and index with wait=true waits for it")  # fmt: skip

    # -- reads ------------------------------------------------------------------------

    def context(
        self,
        goal: str = "",
        query: str = "",
        tool_signals: Sequence[str] = (),
        budget_tokens: int | None = None,
        state: SessionState | None = None,
    ) -> ContextPack:
        """``Workspace.build_context`` (its input limits are the library's, so every
        surface refuses a request with the same message)."""
        return self._ready().build_context(
            goal, query, tool_signals=tool_signals, state=state, budget_tokens=budget_tokens
        )

    def feedback(
        self,
        replay_key: str,
        model_citations: Sequence[int | str] = (),
        tool_results: Sequence[ToolResult | str] = (),
        outcome: str | None = None,
        reason: str | None = None,
    ) -> FeedbackResult:
        """``Workspace.feedback``; an unknown key raises ``UnknownReplayKeyError``."""
        check_model_citations(model_citations)  # before the key: a bad list is a 400
        if outcome is not None:
            check_text("outcome", outcome)
        if reason is not None:
            check_text("reason", reason)
        ws = self._ready()
        if ws.config.ledger:
            self._known(replay_key)
        return ws.feedback(replay_key, model_citations, tool_results, outcome, reason)

    def bundle(
        self,
        goal: str,
        objects: Sequence[str] = (),
        budget: int = DEFAULT_BUNDLE_BUDGET,
        state: SessionState | None = None,
    ) -> Bundle:
        """``Workspace.bundle`` (the library's input limits): ``state``'s constraints and
        sub-goals join the pinned tier."""
        return self._ready().bundle(goal, objects, budget, state=state)

    def search(
        self, query: str, mode: str = "hybrid", k: int = 10, goal: str = "",
        tool_signals: Sequence[str] = (),
    ) -> list[SearchHit]:  # fmt: skip
        """``Workspace.search`` with the servers' input limits."""
        self._check_search(query, goal, k, tool_signals)
        return self._ready().search(query, goal=goal, tool_signals=tool_signals, mode=mode, k=k)

    def search_files(
        self, query: str, mode: str = "hybrid", k: int = 10, goal: str = "",
        tool_signals: Sequence[str] = (),
    ) -> list[FileHit]:  # fmt: skip
        """``Workspace.search_files`` with the servers' input limits."""
        self._check_search(query, goal, k, tool_signals)
        return self._ready().search_files(query, goal=goal, tool_signals=tool_signals,
                                          mode=mode, k=k)  # fmt: skip

    @staticmethod
    def _check_search(query: str, goal: str, k: int, tool_signals: Sequence[str]) -> None:
        check_text("query", query)
        check_text("goal", goal)
        check_k(k)
        signals_of(tool_signals)  # the library's check, before waiting for an index

    def replay(self, replay_key: str) -> Replay:
        """The prompt recorded under ``replay_key``, byte for byte."""
        self._known(replay_key)
        return self.ws.replay(replay_key)

    def _known(self, replay_key: str) -> None:
        check_text("replay_key", replay_key)
        if self.ws.journal.find(replay_key) is None:
            raise unknown_replay_key(replay_key)

    def resolve(self, uri: str, proof: Proof | None = None) -> dict[str, JSON]:
        """``resolve_checked`` on this service's workspace (see there)."""
        check_text("uri", uri)
        # A note or a session step lives outside the index: readable before the first one.
        ws = self.ws if uri.strip().startswith(RECORD_SCHEMES) else self._ready()
        return resolve_checked(ws, uri, proof)

    def status(self, *, check_files: bool = True) -> dict[str, JSON]:
        """What is indexed and how stale it is, plus the state of background refreshes.
        Paths are relative to the workspace: a caller learns nothing of the machine's
        layout (where the state lives outside the workspace, only that it does)."""
        st = self.ws.status(check_files=check_files)
        body = to_json(st) | {"root": ".", "state_dir": _shown(st.state_dir, st.root)}
        return body | {"refresh": self._refresh_state()}

    # -- sessions -----------------------------------------------------------------------
    # A session lives in the ledger, not the index: these work before the first index.

    def session_add(
        self,
        session: str,
        role: str,
        text: str,
        tool: str | None = None,
        is_error: bool | None = None,
        exit_status: int | None = None,
    ) -> Step:
        """``Session.add`` with the servers' input limits."""
        check_text("session", session)
        if len(text.encode("utf-8", errors="replace")) > MAX_STEP_BYTES:
            raise PayloadTooLargeError(
                f"text is over {MAX_STEP_BYTES} bytes; add a step this large with "
                "`cortex session add` (TEXT - reads standard input)"
            )
        check_text("tool", tool or "")
        return self.ws.session(session).add(role, text, tool, is_error, exit_status)

    def session_decide(self, session: str, text: str, rationale: str = "",
                       evidence: Sequence[str | int] = ()) -> Step:  # fmt: skip
        """``Session.decide`` with the servers' input limits."""
        for name, value in (("session", session), ("text", text), ("rationale", rationale)):
            check_text(name, value)
        _check_items("evidence", evidence)
        return self.ws.session(session).decide(text, rationale, evidence)

    def session_show(self, session: str, step: int | None = None) -> dict[str, JSON]:
        """One step in full, or the session's steps without their text (``chars`` says
        how long each is): ``NotFoundError`` for a session with no step."""
        check_text("session", session)
        s = self.ws.session(session)
        if step is not None:
            return to_json(s.step(step))
        steps = s.items()
        if not steps:
            raise NotFoundError(f"no session {session!r} here (for this user)")
        listed: list[JSON] = []
        for item in steps:
            row = to_json(item)
            row["chars"] = len(item.text)
            del row["text"]
            listed.append(row)
        return {"session": session, "steps": listed}

    def session_compact(
        self,
        session: str,
        load_bearing: Sequence[int] = (),
        budget_tokens: int = 4000,
        step: int | None = None,
        in_context: Sequence[int] | None = None,
    ) -> Compaction:
        """``Session.compact``: journals a checkpoint; ``BudgetUnreachableError`` rather
        than truncate. ``in_context``: the steps the planner's context holds (None: all)."""
        check_text("session", session)
        _check_items("load_bearing", load_bearing)
        if in_context is not None:
            _check_items("in_context", in_context)
        return self.ws.session(session).compact(load_bearing, budget_tokens, step, in_context)

    def session_checkpoint(self, session: str, step: int | None = None, *, load: bool = False,
                           budget_tokens: int = 4000) -> Compaction:  # fmt: skip
        """Journal a checkpoint at ``step`` or, with ``load``, read the latest one there
        (no ``step``: the latest of all) back as written."""
        check_text("session", session)
        if load:
            return self.ws.session(session).load_checkpoint(step)
        if step is None:
            raise ConfigError("step is required")
        return self.session_compact(session, (), budget_tokens, step)

    def session_lane(self, session: str, budget_tokens: int, goal: str = "",
                     query: str = "") -> HistoryLane:  # fmt: skip
        """``Workspace.session_lane``: the history lane a context of ``budget_tokens``
        would give the session's next turn. A read: it journals nothing."""
        check_text("session", session)
        return self.ws.session_lane(session, budget_tokens, goal, query)

    def session_end(self, session: str, scope: str = "personal") -> SaveResult:
        """``Workspace.end_session``: the session's summary saved as a memory note (ending
        it again updates that note)."""
        check_text("session", session)
        return self.ws.end_session(session, scope)

    # -- memory -------------------------------------------------------------------------
    # Notes live in their own store, not the index: these work before the first index
    # (links to code resolve once there is one).

    def memory_save(
        self,
        title: str,
        type: str = "note",
        what: str = "",
        why: str = "",
        where: str = "",
        learned: str = "",
        topic_key: str | None = None,
        scope: str = "project",
        created: float | None = None,
    ) -> SaveResult:
        """``Memory.save`` (its limits are every surface's; ``created`` imports a dated
        history: seconds since the epoch, never in the future)."""
        return self.ws.memory.save(title, type, what=what, why=why, where=where,
                                   learned=learned, topic_key=topic_key, scope=scope,
                                   created=created)  # fmt: skip

    def memory_search(self, query: str, k: int = 10, types: Sequence[str] = (),
                      include_superseded: bool = False) -> list[NoteHit]:  # fmt: skip
        """``Memory.search``: titles and previews, best first."""
        _check_items("types", types)
        return self.ws.memory.search(query, k, types=types, include_superseded=include_superseded)

    def memory_get(self, note_id: int | str) -> Note:
        """``Memory.get``: one note in full, its code links re-checked."""
        return self.ws.memory.get(note_id)

    def memory_timeline(self, note_id: int | str, before: int = 5, after: int = 5) -> list[NoteHit]:
        """``Memory.timeline``: the notes saved around one, oldest first."""
        return self.ws.memory.timeline(note_id, before, after)

    def memory_relate(self, src: int | str, dst: int | str, kind: str) -> Edge:
        """``Memory.relate``: a typed edge between two live notes."""
        return self.ws.memory.relate(src, dst, kind)

    def memory_graph(self, note_id: int | str, depth: int = 1,
                     kinds: Sequence[str] = ()) -> NoteGraph:  # fmt: skip
        """``Memory.graph``: the notes within ``depth`` edges."""
        _check_items("kinds", kinds)
        return self.ws.memory.graph(note_id, depth, kinds)

    def memory_forget(self, note_id: int | str, hard: bool = False) -> dict[str, JSON]:
        """``forget_json`` of this workspace."""
        return forget_json(self.ws, note_id, hard=hard)

    def memory_archive(self, note_id: int | str, archived: bool = True) -> Note:
        """``Memory.archive``: out of search and the lane, still found by get."""
        return self.ws.memory.archive(note_id, archived)

    def learned(self, k: int = 20) -> dict[str, JSON]:
        """``learned_json`` of this workspace."""
        return learned_json(self.ws, k)

    def learned_reset(self, reason: str = "") -> dict[str, JSON]:
        """``reset_json`` of this workspace."""
        return reset_json(self.ws, reason)

    def memory_stats(self) -> MemoryStats:
        """``Memory.stats``: counts of what this caller can see; the store's path relative
        to the workspace, as ``status`` gives paths (a caller learns nothing of the
        machine's layout)."""
        stats = self.ws.memory.stats()
        return replace(stats, path=_shown(Path(stats.path), self.ws.root))

    def _refresh_state(self) -> dict[str, JSON]:
        """The background refresh: started_at, finished_at, report, error (of the last run),
        running, and while it runs its progress (``StageProgress``; null otherwise)."""
        with self._refresh_lock:
            state, running = dict(self._last), self._running
        shown = self._progress.snapshot() if running else None
        return state | {"running": running, "progress": None if shown is None else to_json(shown)}

    # -- refresh ----------------------------------------------------------------------

    def refresh(self, *, wait: bool = False) -> dict[str, JSON]:
        """Bring the index up to date in the background (one refresh at a time in-process;
        one asked for during a run makes one more run after it). ``wait`` blocks until done."""
        with self._refresh_lock:
            if self._running:
                self._again = True
            else:
                self._running = True
                self._refresher = threading.Thread(target=self._refresh_loop, daemon=True)
                self._refresher.start()
            thread = self._refresher
        if wait and thread is not None:
            thread.join(REFRESH_WAIT_S)
        return self._refresh_state()

    async def index(
        self,
        *,
        wait: bool = False,
        told: Callable[[StageProgress], Awaitable[None]] | None = None,
    ) -> dict[str, JSON]:
        """``refresh`` for the servers, outside ``call``'s ``REQUEST_TIMEOUT_S``: ``wait``
        waits for the refresh up to ``REFRESH_WAIT_S`` (``told`` hears each new stage count
        meanwhile), then ``TimeoutError`` says how far it got and that it goes on. Without
        ``wait`` it answers at once; ``status`` follows the refresh."""
        import anyio

        self.refresh()
        with self._refresh_lock:
            thread = self._refresher
        deadline = time.monotonic() + REFRESH_WAIT_S
        last: StageProgress | None = None
        while wait and thread is not None and thread.is_alive():
            shown = self._progress.snapshot()
            if time.monotonic() > deadline:
                where = f" ({shown.line()})" if shown is not None else ""
                raise TimeoutError(
                    f"the index is still being built after {REFRESH_WAIT_S:.0f} s{where}; it "
                    "goes on in the background: call status to follow it (refresh.running, "
                    "refresh.progress)"
                )
            if told is not None and shown is not None and shown != last:
                await told(shown)
            last = shown
            await anyio.sleep(WAIT_POLL_S)
        return self._refresh_state()

    def _refresh_loop(self) -> None:
        again = True
        while again:
            with self._refresh_lock:
                self._again = False
                self._last = {**self._last, "started_at": time.time()}
            self._progress.start()
            busy = False
            try:
                if self._writer is None:  # only this thread sets it, while _running
                    self._writer = Workspace.open(self.ws.root, self.ws.config)
                done = self._writer.index(progress=self._progress)
                report: dict[str, JSON] = {"report": to_json(done), "error": None}
            except Exception as exc:  # a thread's end: keep the error where status shows it
                report = {"report": None, "error": f"{type(exc).__name__}: {exc}"}
                busy = isinstance(exc, IndexBusyError)
            with self._refresh_lock:
                self._last = {**self._last, **report, "finished_at": time.time()}
                # Another process holds the lock: its build is the first one; calls say so
                # (they said "run `cortex index` first", the command that was then refused).
                self._building_elsewhere = self._first_build and busy
                self._first_build = self._building_elsewhere
                again = self._running = self._again

    def _watch(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                if self.ws.status(check_files=True).stale_files:
                    self.refresh()
            except Exception as exc:  # the watcher must outlive a bad moment (a file mid-write)
                print(f"cortex: watch: {exc}", file=sys.stderr)


def learned_json(ws: Workspace, k: int = 20) -> dict[str, JSON]:
    """What ``ws`` learned from outcomes, as every surface gives it: the rerank offsets per
    feature, the ``k`` most salient items (file, folder, symbol, note; best first) and how
    many there are, and the digest that replay keys carry ("" when nothing was learned)."""
    check_k(k)
    state = ws.learned()
    top = sorted(state.salience.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return {"weights": {name: value for name, value in state.weights},
            "salience": [{"item": key, "salience": value} for key, value in top],
            "items": len(state.salience), "digest": state.digest}  # fmt: skip


def forget_json(ws: Workspace, note_id: int | str, *, hard: bool = False) -> dict[str, JSON]:
    """``Memory.forget`` (soft delete; ``hard``: the row, text and edges removed), as every
    surface answers it: the note's id as a number, as every other note answer gives it (12
    for "memory:12"), whether this call forgot it, and ``hard``."""
    done = ws.memory.forget(note_id, hard=hard)  # raises for an id that names no note here
    if isinstance(note_id, str):  # so it is 12, " 12" or "memory:12"
        note_id = whole_number("note id", note_id.strip().removeprefix("memory:"))
    return {"id": note_id, "forgotten": done, "hard": hard}


def reset_json(ws: Workspace, reason: str = "") -> dict[str, JSON]:
    """``Workspace.reset_learned``, as every surface gives it: whether anything was
    forgotten, the offsets and the count of salient items forgotten, the digest they had,
    and the digest now ("" unless an outcome came in since)."""
    gone = ws.reset_learned(reason or None)
    return {"reset": bool(gone), "weights": {name: value for name, value in gone.weights},
            "items": len(gone.salience), "digest_before": gone.digest,
            "digest": ws.learned().digest}  # fmt: skip


def _check_items(name: str, items: Sequence[object]) -> None:
    check_items(name, items, MAX_ITEMS)


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to the workspace ``root``, or "(outside)"."""
    real, top = path.resolve(), root.resolve()
    return str(real.relative_to(top)) if real.is_relative_to(top) else "(outside)"
