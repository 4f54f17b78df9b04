"""A planner's session, journaled in the evidence ledger.

Each step (a user message, the model's turn, a tool's output, a decision, a build_context
request, the files changed between turns) is one ``session`` journal entry in the one hash
chain; its text is a blob stored once by sha256, so a 50 MB log costs one blob however
often the lane masks it. Steps are numbered by their place in the chain, so two processes
appending to one session at once get one order and lose nothing. Sessions are per user:
the ledger key of a session is derived from the user and the id, and every entry is
stamped with the user, so one user never reads another's.

A session id names a new session on its first step; reading an id that has no step yet
raises ``NotFoundError``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.core import (
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    Compaction,
    ConfigError,
    HistoryLane,
    NotFoundError,
    Step,
    StepRole,
    check_k,
    check_step,
    check_steps,
    check_text,
    step_role,
)
from engine.memory._compact import compact
from engine.memory._free_text import name_text
from engine.memory._history import Memo
from engine.memory._journal import Journal
from engine.memory._lane import LaneSettings, build_lane
from engine.memory._lines import search_items
from engine.memory._terminal import terminal_text
from indexers import TokenCounter, redact
from ledger import JSON, JournalEntry, RecordKind

__all__ = ["SESSION_ID", "Session", "clean_text", "session_uri"]

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
_URI = re.compile(r"session:([A-Za-z0-9][A-Za-z0-9._:@-]{0,127})#([0-9]{1,9})")  # "٣" is no 3
MAX_EVIDENCE = 64  # evidence ids one decision may cite


def clean_text(text: str | bytes) -> str:
    """Text as the ledger can store it: bytes decoded as UTF-8 (invalid bytes replaced),
    lone surrogates replaced, NUL bytes dropped (binary output is kept readable)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ConfigError(f"session text must be text, not {type(text).__name__}")
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "") if "\x00" in text else text


def _scrub(text: str) -> str:
    """``text`` with any credential in it redacted, as goals and tool output are."""
    return redact(text).text if text else text


def session_uri(uri: str) -> tuple[str, int] | None:
    """(session id, step) of a ``session:ID#N`` uri, or None for any other uri."""
    found = _URI.fullmatch(uri)
    return (found.group(1), int(found.group(2))) if found else None


def _check_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise ConfigError(
            f"session id must be 1-128 letters, digits or . _ : @ - (starting with a letter "
            f"or digit), not {session_id!r}"
        )
    if _scrub(session_id) != session_id:  # it names the session in the ledger and the lane
        raise ConfigError("a session id must not hold a credential: choose another name")
    return session_id


@dataclass(frozen=True, slots=True)
class _Stored:
    seq: int
    item: Step


class Session:
    """One user's session in a workspace's ledger; safe to share between threads.

    >>> s = ws.session("fix-42")  # doctest: +SKIP
    >>> s.add("tool", pytest_output, tool="pytest")  # doctest: +SKIP
    >>> s.decide("keep the old API", rationale="plugins call it", evidence=["3"])  # +SKIP
    >>> s.lane(4000).text  # doctest: +SKIP
    """

    def __init__(self, journal: Journal, session_id: str, counter: TokenCounter) -> None:
        self.id = _check_id(session_id)
        self.user = journal.user
        self._journal = journal
        raw = f"{journal.user}\x00{session_id}".encode()
        self.key = "session:" + hashlib.sha256(raw).hexdigest()[:32]
        self._memo = Memo(counter)
        self._lock = threading.Lock()
        self._steps: list[_Stored] = []
        self._seen = 0  # the last ledger seq read

    # -- writing -------------------------------------------------------------------------

    def add(
        self,
        role: str,
        text: str | bytes,
        tool: str | None = None,
        is_error: bool | None = None,
        exit_status: int | None = None,
    ) -> Step:
        """Journal one step; returns it with its step number. ``role``: user, assistant,
        tool, request or changes (decisions go through ``decide``)."""
        kind = step_role(role)
        if is_error is not None and not isinstance(is_error, bool):
            raise ConfigError(f"is_error must be true or false, not {is_error!r}")
        if exit_status is not None and (type(exit_status) is not int):
            raise ConfigError(f"exit_status must be an integer, not {exit_status!r}")
        if tool is not None and not isinstance(tool, str):
            raise ConfigError(f"tool must be a name, not {tool!r}")
        extra = {"tool": _scrub(tool or "")[:128], "is_error": is_error,
                 "exit_status": exit_status}  # fmt: skip
        return self._append(kind, clean_text(text), extra)

    def decide(self, text: str, rationale: str = "", evidence: Sequence[str | int] = ()) -> Step:
        """Journal an explicit decision, why it was taken, and the evidence it rests on
        (citation numbers or ``session:ID#N`` refs)."""
        if not clean_text(text).strip():
            raise ConfigError("a decision needs its text")
        if isinstance(evidence, str | bytes) or len(evidence) > MAX_EVIDENCE:
            raise ConfigError(f"evidence must be a list of at most {MAX_EVIDENCE} ids")
        for e in evidence:  # None was journaled as the evidence "None"
            if isinstance(e, bool) or not isinstance(e, str | int):
                raise ConfigError(f"evidence must be citation numbers or session refs, "
                                  f"not {e!r}")  # fmt: skip
        refs = [_scrub(str(e).strip())[:200] for e in evidence if str(e).strip()]
        extra: dict[str, Any] = {"evidence": refs}
        why = name_text(extra, "rationale", _scrub(clean_text(rationale)))  # forget can cut it
        return self._append(StepRole.DECISION, clean_text(text), extra, why)

    def _append(self, role: StepRole, text: str, extra: dict[str, Any],
                texts: Sequence[str] = ()) -> Step:  # fmt: skip
        text = _scrub(text)
        shown = terminal_text(text)  # what the lane shows: no credential may appear there
        if shown is not text and _scrub(shown) != shown:  # one that colour codes split
            text = _scrub(shown)
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        payload: dict[str, Any] = {"session": self.id, "user": self.user, "role": role.value,
                                   "text_sha256": sha, "chars": len(text)}  # fmt: skip
        payload.update({k: v for k, v in extra.items() if v not in (None, "", [])})
        entry = self._journal.append_entry(RecordKind.SESSION, self.key, payload,
                                           [text, *texts])  # fmt: skip
        with self._lock:
            self._refresh()
            found = next((s.item for s in self._steps if s.seq == entry.seq), None)
        assert found is not None
        return found

    # -- reading -------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Read the steps appended since the last read (by anyone), in chain order."""
        for entry in self._journal.entries(RecordKind.SESSION, self.key, self._seen):
            self._steps.append(_Stored(entry.seq, self._item(len(self._steps) + 1, entry)))
            self._seen = entry.seq

    def _item(self, step: int, entry: JournalEntry) -> Step:
        p = entry.payload
        assert isinstance(p, dict)
        text = self._journal.text(str(p["text_sha256"]))
        evidence = p.get("evidence") or []
        assert isinstance(evidence, list)
        status = p.get("exit_status")
        error = p.get("is_error")
        return Step(step, StepRole(str(p["role"])), text, str(p.get("tool") or ""),
                    error if isinstance(error, bool) else None,
                    status if isinstance(status, int) else None,
                    self._journal.free_text(p, "rationale") or "",
                    tuple(str(e) for e in evidence))  # fmt: skip

    def items(self, upto: int | None = None) -> tuple[Step, ...]:
        """The session's steps, oldest first (up to step ``upto``)."""
        check_step("upto", upto)
        with self._lock:
            self._refresh()
            steps = self._steps if upto is None else self._steps[:upto]
            return tuple(s.item for s in steps)

    def exists(self) -> bool:
        """Whether the session has a step yet."""
        return bool(self.items())

    def step(self, n: int) -> Step:
        """One step in full (what ``session:ID#N`` resolves to)."""
        items = self.items()
        if not items:
            raise NotFoundError(f"no session {self.id!r} here (for this user)")
        if type(n) is not int or not 1 <= n <= len(items):
            raise NotFoundError(f"session {self.id!r} has steps 1-{len(items)}, not {n!r}")
        return items[n - 1]

    def show(self, step: int | None = None) -> tuple[Step, ...]:
        """Every step, or (``step``) that one in full; ``NotFoundError`` for a session with
        no step or a step it does not have."""
        if step is not None:
            return (self.step(step),)
        items = self.items()
        if not items:
            raise NotFoundError(f"no session {self.id!r} here (for this user)")
        return items

    def lane(self, room: int, *, query: str = "", upto: int | None = None,
             settings: LaneSettings | None = None) -> HistoryLane:  # fmt: skip
        """The history lane of the steps (up to ``upto``) in ``room`` tokens (a whole
        number, 1 or more: ``BudgetUnreachableError`` when even its shortest form does not
        fit)."""
        if type(room) is not int or room < 1:
            raise ConfigError(f"a lane's room is a number of tokens, 1 or more, not {room!r}")
        items = self.items(upto)
        with self._lock:
            return build_lane(items, room, self._memo, session=self.id, query=query,
                              settings=settings or LaneSettings())  # fmt: skip

    def search(self, query: str, k: int = 3) -> list[Step]:
        """The ``k`` steps that best match ``query`` (BM25 over their full text)."""
        check_text("query", query)
        k = check_k(k, None)
        items = self.items()
        with self._lock:
            return search_items(items, query, k, memo=self._memo)

    # -- compaction ----------------------------------------------------------------------

    def compact(self, load_bearing: Sequence[int] = (), budget: int = 4000,
                step: int | None = None, in_context: Sequence[int] | None = None,
                ) -> Compaction:  # fmt: skip
        """Compact the steps up to ``step`` (default: the last) into ``budget`` tokens, and
        journal the checkpoint. ``in_context``: the steps the planner's context holds now
        (default: all; the session's goal is pinned either way). Raises
        ``BudgetUnreachableError`` rather than truncate; a budget outside the range every
        surface takes is a ``ConfigError``."""
        if type(budget) is not int or not MIN_BUDGET_TOKENS <= budget <= MAX_BUDGET_TOKENS:
            raise ConfigError(f"budget_tokens must be within {MIN_BUDGET_TOKENS}.."
                              f"{MAX_BUDGET_TOKENS}, got {budget!r}")  # fmt: skip
        load_bearing = check_steps("load_bearing", load_bearing)
        if in_context is not None:
            in_context = check_steps("in_context", in_context)
        items = self.items()
        if not items:
            raise NotFoundError(f"no session {self.id!r} here (for this user) to compact")
        at = items[-1].step if step is None else step
        if type(at) is not int or not 1 <= at <= len(items):
            raise NotFoundError(f"session {self.id!r} has steps 1-{len(items)}, not {step!r}")
        if in_context is not None:
            held = set(in_context)
            if missing := sorted(s for s in held if not 1 <= s <= len(items)):
                raise NotFoundError(f"session {self.id!r} has no steps {missing}")
            goal = next((i.step for i in items if i.role is StepRole.USER), None)
            items = tuple(i for i in items if i.step in held or i.step == goal)
        with self._lock:
            result = compact(items, list(load_bearing), budget, at, self._memo, session=self.id)
        body: JSON = {"session": self.id, "user": self.user, "step": at,
                "checkpoint_sha256": result.checkpoint.sha256}  # fmt: skip
        self._journal.append_entry(RecordKind.CHECKPOINT, self.key, body,
                                   [result.checkpoint.encoded])  # fmt: skip
        return result

    def checkpoint(self, step: int, budget: int = 4000) -> Compaction:
        """Journal a checkpoint of the working set at ``step`` (nothing load-bearing but the
        goal); ``NotFoundError`` for a step the session does not have."""
        return self.compact((), budget, step)

    def load_checkpoint(self, step: int | None = None) -> Compaction:
        """The latest checkpoint journaled at ``step`` (default: the latest of all), read
        back as written: the partition is not recomputed."""
        found = [e for e in self._journal.entries(RecordKind.CHECKPOINT, self.key)
                 if isinstance(e.payload, dict)
                 and (step is None or e.payload.get("step") == step)]  # fmt: skip
        if not found:
            where = "" if step is None else f" at step {step}"
            raise NotFoundError(f"session {self.id!r} has no checkpoint{where}")
        payload = found[-1].payload
        assert isinstance(payload, dict)
        return Compaction.decode(self._journal.text(str(payload["checkpoint_sha256"])))
