"""``Sessions``: this user's sessions in a workspace's ledger, kept warm by id, and the
history lane each gives a turn of its session."""

from __future__ import annotations

from collections.abc import Sequence

from engine._workspace._notes import Notes
from engine._workspace._state import State
from engine.core import (
    BudgetUnreachableError,
    HistoryLane,
    NotFoundError,
    SaveResult,
    Scope,
    SessionState,
    StepRole,
)
from engine.memory import LaneSettings, Session, changes_text, end_session
from indexers import sha256_text
from overlays import Hunk

# The history lane's share of a session turn's budget (the goal's cost comes off first):
# the rest stays for code evidence, which the history lane must not crowd out.
HISTORY_SHARE = 0.4
INSTRUCTION_TOKENS = 64  # the fixed instruction and lane headers, about


class Sessions:
    """The sessions this process has read, by id: each keeps its steps' facts warm."""

    def __init__(self, state: State, notes: Notes) -> None:
        self._state = state
        self._notes = notes
        self._open: dict[str, Session] = {}
        # Each session's working-tree diff when a recorded call last saw it: a second edit
        # to the files already changed is journaled again (their names alone are the same).
        self._diffs: dict[str, str] = {}
        self._purge = 0  # the newest purge when the warm sessions were read (see ``get``)

    def get(self, session_id: str) -> Session:
        """The session ``session_id`` (see ``Workspace.session``)."""
        state = self._state
        purge = state.journal.last_purge() if state.has_journal() else 0
        with state.lazy:
            if purge != self._purge:  # a forget (here or in another process) cut texts
                self._open.clear()
                self._purge = purge
            found = self._open.get(session_id)
            if found is None and not state.manifest.exists():
                # Steps may come before the first index (an agent's hooks): the state folder
                # is made a cortex folder, as indexing would, so it opens and indexes later.
                state.manifest.write()
            if found is None:
                found = self._open[session_id] = Session(state.journal, session_id,
                                                         state.counter)  # fmt: skip
            return found

    def end(self, session_id: str, scope: Scope | str) -> SaveResult:
        """Save session ``session_id``'s summary as a memory note (see
        ``Workspace.end_session``)."""
        session = self.get(session_id)
        if not session.exists():
            raise NotFoundError(f"no session {session_id!r} here (for this user) to end")
        return end_session(self._notes.memory, session, self._state.counter, scope)

    def history(self, state: SessionState, goal: str, query: str, diff: Sequence[Hunk],
                budget: int, upto: int | None, *, record: bool = True) -> HistoryLane:  # fmt: skip
        """The session's history lane for this call, in its share of what the goal leaves;
        first journals the files the working tree changed since the session last saw it
        (new files included; a tree back to clean as a ``changes`` step with no path),
        when the call is recorded and has room: a refused or side-effect-free call
        journals nothing."""
        session = self.get(state.session)
        counter = self._state.counter
        goal_cost = counter.count(f"{goal}\n{chr(10).join(state.constraints)}\n"
                                  f"{chr(10).join(state.subgoals)}")  # fmt: skip
        room = min(int(budget * HISTORY_SHARE), budget - goal_cost - INSTRUCTION_TOKENS)
        if room < 1:
            raise BudgetUnreachableError(
                f"budget of {budget} tokens leaves no room for session {state.session}'s "
                f"history after the goal ({goal_cost} tokens); raise the budget",
                goal_cost + INSTRUCTION_TOKENS, budget,
            )  # fmt: skip
        if upto is None and record and self._state.config.ledger:
            self._journal_changes(session, diff)
        return session.lane(room, query=query or goal, upto=upto, settings=LaneSettings())

    def _journal_changes(self, session: Session, diff: Sequence[Hunk]) -> None:
        """Journal the changed files when they differ from the session's last ``changes``
        step (none: a clean tree), or when this process saw their diff change since."""
        paths = changes_text(h.path for h in diff)
        seen = sha256_text("\n".join(f"{h.path}\n{h.text}" for h in diff))
        last = next((i for i in reversed(session.items()) if i.role is StepRole.CHANGES), None)
        before = self._diffs.get(session.id)
        if (last.text if last else "") != paths or (before is not None and before != seen):
            session.add("changes", paths)
        self._diffs[session.id] = seen
