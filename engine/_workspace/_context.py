"""``Contexts``: the context a planner's turn gets: its request checked and scrubbed, the
View, the active diff, the history and memory lanes, the pack, and the turn recorded."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from engine._workspace._diff import clean_diff, new_file_hunks
from engine._workspace._index import Indexer
from engine._workspace._learning import Learning
from engine._workspace._notes import Notes
from engine._workspace._sessions import Sessions
from engine._workspace._state import State, scrubbed
from engine.core import (
    ConfigError,
    ContextPack,
    ContextSettings,
    Learned,
    LedgerStateError,
    MemoryStateError,
    SessionState,
    ToolSignal,
    check_budget,
    check_state,
    check_step,
    check_text,
    check_type,
    signals_of,
)
from engine.memory import Inputs, RecentCitations
from engine.packing import build_pack
from engine.retrieval import Scored
from indexers import sha256_text
from overlays import Hunk, View, git_tracks, working_diff


class Contexts:
    """``Workspace.build_context``, over the parts a turn's context reads."""

    def __init__(
        self, state: State, indexer: Indexer, notes: Notes, sessions: Sessions, learning: Learning
    ) -> None:
        self._state = state
        self._indexer = indexer
        self._notes = notes
        self._sessions = sessions
        self._learning = learning
        self.recent = RecentCitations()  # with the ledger off: what feedback checks against
        self._git_tracked: bool | None = None
        # The working-tree diff by the tree's token: `git diff HEAD` over 500 changed files
        # took ~200 ms of every call though nothing had moved since the last one.
        # The token of the tree last diffed, its tracked hunks and its new files' hunks.
        self._diff: tuple[str, tuple[Hunk, ...], tuple[Hunk, ...]] = ("", (), ())

    def build(
        self,
        goal: str,
        query: str,
        tool_signals: Sequence[ToolSignal | str] | None,
        state: SessionState | None,
        *,
        budget_tokens: int | None,
        explain: list[Scored] | None,
        record: bool,
        timings: dict[str, float] | None,
        settings: ContextSettings | None,
        history_upto: int | None,
    ) -> ContextPack:
        """The context for the planner's next step (see ``Workspace.build_context``)."""
        shared = self._state
        budget = shared.config.budget_tokens if budget_tokens is None else budget_tokens
        check_budget(budget)  # 1000.5 or True is no number of tokens
        check_text("goal", goal)
        check_text("query", query)
        if state is not None:
            check_state(state)
        if settings is not None:
            check_type("settings", settings, ContextSettings)
        check_type("record", record, bool)
        check_step("history_upto", history_upto)
        if not goal.strip() and not query.strip():
            raise ConfigError("build_context needs a goal or a query")
        goal = goal if goal.strip() else query
        signals = signals_of(tool_signals)
        # Credentials in what the caller sent never reach the prompt, the key or the ledger.
        goal, query, signals, state = scrubbed(goal, query, signals, state or SessionState())
        view, stale = self._indexer.view()
        embedder = shared.embedder
        dense_ready = embedder is not None and view.has_dense(embedder.model_id)
        if self._git_tracked is None:
            self._git_tracked = git_tracks(shared.root)
        token = self._indexer.seen_token
        if not self._git_tracked:
            diff, new = [], []
        elif token and self._diff[0] == token:
            diff, new = list(self._diff[1]), list(self._diff[2])
        else:
            options = shared.config.walk_options()
            diff = clean_diff(shared.root, working_diff(shared.root), options)
            new = clean_diff(shared.root, new_file_hunks(shared.root, options), options)
            self._diff = (token, tuple(diff), tuple(new))
        history = None
        if state.session:
            # The agent's new files are changes a session journals; the diff lane shows
            # tracked changes only (a new file's text is the index's to show: a forgotten
            # string in it stays out of every prompt until the file changes).
            history = self._sessions.history(state, goal, query, [*diff, *new], budget,
                                             upto=history_upto, record=record)  # fmt: skip
        settings = settings or shared.config.context_settings()
        inputs = Inputs(goal, query, signals, state, budget, history.upto if history else 0,
                        settings)  # fmt: skip
        # The memory lane and what outcomes taught are extras: a store or a ledger that
        # cannot be read leaves them out, and the advisory says which file and what to do.
        extras: list[str] = []
        try:
            recalled = self._notes.recalled(query if query.strip() else goal, budget)
        except MemoryStateError as exc:
            recalled = ()
            extras.append(f"memory: no saved notes recalled ({exc})")
        try:
            learned = self._learning.learned()
        except (LedgerStateError, MemoryStateError) as exc:
            learned = Learned()
            extras.append(f"ledger: ranked without what outcomes taught ({exc})")
        scored: list[Scored] = explain if explain is not None else []
        pack = build_pack(
            view,
            goal=goal,
            query=query,
            tool_signals=signals,
            state=inputs.state,
            budget=budget,
            counter=shared.counter,
            embedder=embedder if dense_ready else None,
            cache=shared.cache if dense_ready else None,
            diff=diff,
            view_id=self._view_id(view, diff),
            settings=settings,
            scored_out=scored,
            timings=timings,
            history=history,
            memory=recalled,
            learned=learned,
        )
        if shared.config.ledger and record:
            self._learning.remember(pack.replay_key, scored)
        if stale or extras:
            pack = replace(pack, advisory=(*pack.advisory, *stale, *extras))
        if record and shared.config.ledger:
            started = time.perf_counter()
            try:
                shared.journal.record_turn(pack, inputs)
            except (LedgerStateError, OSError) as exc:
                note = f"ledger: this turn was not recorded ({exc})"
                pack = replace(pack, advisory=(*pack.advisory, note))
            if timings is not None:
                timings["ledger"] = timings.get("ledger", 0.0) + time.perf_counter() - started
        if not shared.config.ledger:
            self.recent.remember(pack.replay_key, pack.citations)
        elif not record:
            shared.unrecorded.remember(pack.replay_key, pack.citations)
        if state.session and record:
            # By source, not by number: a later prompt's history lane shows this step, and
            # its own evidence numbers [n] mean other snippets.
            shown = "".join(f"\n- {s.source_uri}" for s in pack.citations)
            head = "\nevidence shown:" if shown else ""
            self._sessions.get(state.session).add("request", f"{query}{head}{shown}")
        return pack

    def _view_id(self, view: View, diff: Sequence[Hunk]) -> str:
        """What the answer depends on besides the inputs: the View (base commit, overlay
        generation, working-tree token), the dense model, and the diff shown in the prompt."""
        diff_sha = sha256_text("\n".join(f"{h.path}\n{h.text}" for h in diff))[:16]
        return f"{view.ident}:{self._state.config.dense_model}:{diff_sha}"
