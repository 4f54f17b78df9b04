"""A session's end: its summary saved as a memory note, extracted from its steps (never
generated), so the next session can find what this one decided and learned.

``session_summary`` reads the steps once: the goal (the first user message, and the last
few that followed it), the decisions with their rationale and evidence, the failure chains
(what failed, the edits after it, the run that passed, or that it still fails), the tests
that failed and later passed, and the files changed. ``end_session`` saves it as a
``note`` under the topic key ``session/<id>`` in the user's personal scope (sessions are
per user): ending a session again updates that one note in place and counts a revision;
ending it with nothing new is a no-op. The changed files go in ``where``, so the note links
to that code and is flagged stale when it changes.

Every line names the steps it came from (``#N``; ``session:<id>#N`` resolves one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.core import (
    MAX_BODY_CHARS,
    MAX_TITLE_CHARS,
    NoteType,
    NotFoundError,
    SaveResult,
    Scope,
    Step,
    StepRole,
)
from engine.memory._history import Memo, _decision, changed_paths
from engine.memory._memory import Memory
from engine.memory._runs import chains, verdicts
from engine.memory._session import Session
from indexers import TokenCounter

__all__ = ["SUMMARY_TYPE", "SessionSummary", "end_session", "session_summary", "summary_key"]

SUMMARY_TYPE = NoteType.NOTE  # a record of work done: it ranks below explicit decisions
_GOAL_CHARS = 300  # the goal as its first user message states it, on one line
_LATER_ASKS = 3  # user messages after the first that the summary keeps (the latest)
_ASK_CHARS = 160  # each of those, on one line
_MAX_FILES = 60  # changed files named (a sweeping refactor names the first ones)
_KEY_CHARS = 120  # a failed command as a lesson names it


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session's summary as a note's fields (see the module docstring)."""

    session: str
    title: str
    what: str  # the goal and what was asked after it
    why: str  # decisions with their rationale and evidence
    where: str  # files changed
    learned: str  # failures and their fixes, tests that failed then passed
    steps: int

    @property
    def topic_key(self) -> str:
        """The note's topic key: one note per session."""
        return summary_key(self.session)


def summary_key(session_id: str) -> str:
    """The topic key a session's summary is saved under."""
    return f"session/{session_id}"


def _line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fit(lines: Sequence[str], limit: int = MAX_BODY_CHARS) -> str:
    """Lines joined under ``limit`` characters; what does not fit is counted, not cut."""
    out: list[str] = []
    used = 0
    for i, ln in enumerate(lines):
        more = f"- and {len(lines) - i} more (see the session's steps)"
        if used + len(ln) + 1 + len(more) > limit:
            out.append(more)
            break
        out.append(ln)
        used += len(ln) + 1
    return "\n".join(out)


def session_summary(session_id: str, items: Sequence[Step], memo: Memo) -> SessionSummary:
    """The summary of ``items`` (a session's steps, oldest first); the same steps give the
    same summary on every machine."""
    if not items:
        raise NotFoundError(f"no session {session_id!r} here (for this user) to summarise")
    asks = [i for i in items if i.role is StepRole.USER and i.text.strip()]
    goal = asks[0] if asks else None
    title = f"Session {session_id}: " + (_line(goal.text, _GOAL_CHARS) if goal else "no goal")
    title = _line(title, MAX_TITLE_CHARS)
    what = []
    if goal is not None:
        what.append(f"Goal [{goal.ref}]: {_line(goal.text, _GOAL_CHARS)}")
        later = asks[1:][-_LATER_ASKS:]
        what += [f"Then [{a.ref}]: {_line(a.text, _ASK_CHARS)}" for a in later]
    what.append(f"{len(items)} steps, #{items[0].step}-#{items[-1].step}.")
    why = ["- " + _decision(i).split("] ", 1)[1] + f" [{i.ref}]"
           for i in items if i.role is StepRole.DECISION]  # fmt: skip
    learned = []
    for chain in chains(items, memo):
        tried = ", ".join(f"#{s}" for s in chain.attempts[:6])
        edits = f" → edits {tried}" if tried else ""
        end = f" → passed #{chain.passed_at}" if chain.passed_at else " → still failing"
        learned.append(f"- `{_line(chain.key, _KEY_CHARS)}` failed #{chain.failed_at}: "
                       f"{chain.what}{edits}{end}")  # fmt: skip
    changed: dict[str, list[int]] = {}
    for item in items:
        if item.role is StepRole.ASSISTANT:
            wrote: Sequence[str] = memo.observe(item).writes
        elif item.role is StepRole.CHANGES:
            wrote = changed_paths(item.text)
        else:
            continue
        for path in wrote:
            changed.setdefault(path, []).append(item.step)
    results = verdicts(items, memo)
    learned += [f"- test {v.test} failed #{v.failed_at}, passed #{v.passed_at}"
                for v in results if v.passed_at]  # fmt: skip
    learned += [f"- test {v.test} still failing (#{v.failed_at}"
                + (f", passed #{v.passed_before} before)" if v.passed_before else ")")
                for v in results if not v.passed_at]  # fmt: skip
    where = [f"{p} (#{', #'.join(str(s) for s in steps[:4])})"
             for p, steps in list(changed.items())[:_MAX_FILES]]  # fmt: skip
    if len(changed) > _MAX_FILES:
        where.append(f"and {len(changed) - _MAX_FILES} more files")
    return SessionSummary(session_id, title, _fit(what), _fit(why), _fit(where), _fit(learned),
                          len(items))  # fmt: skip


def end_session(
    memory: Memory, session: Session, counter: TokenCounter, scope: Scope | str = Scope.PERSONAL
) -> SaveResult:
    """Save ``session``'s summary in ``memory`` (topic key ``session/<id>``): created on
    the first end, updated in place (revision counted) when the session grew since, the
    same note (``duplicate``) when it did not."""
    summary = session_summary(session.id, session.items(), Memo(counter))
    return memory.save(
        summary.title,
        SUMMARY_TYPE,
        what=summary.what,
        why=summary.why,
        where=summary.where,
        learned=summary.learned,
        topic_key=summary.topic_key,
        scope=scope,
    )
