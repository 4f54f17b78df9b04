"""The workspace's side of the evidence ledger: recording turns and feedback, replaying.

``ledger/`` stores plain records; this module decides what a turn records (the rendered
prompt, every snippet's exact text, and the call's inputs, all by sha256) and translates
ledger errors at the boundary: every ``ledger.LedgerError`` leaves here as
``LedgerStateError`` (the original chained).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.core import (
    ConfigError,
    ContextPack,
    ContextSettings,
    FeedbackResult,
    LedgerStateError,
    SessionState,
    SignalKind,
    ToolSignal,
    Turn,
    canonical,
    from_canonical,
)
from engine.memory._free_text import payload_text, shown_payload
from engine.memory._purge import LedgerPurge, purge_ledger
from engine.memory._salience import salience_path
from indexers import sha256_text
from ledger import (
    JSON,
    FeedbackDraft,
    JournalEntry,
    Ledger,
    LedgerCorruptError,
    LedgerError,
    LedgerWriteError,
    OpenLock,
    PreviousLedger,
    RecordKind,
    Rotation,
    SnippetRef,
    ToolResult,
    TurnDraft,
    TurnRecord,
    VerifyReport,
)

__all__ = ["Inputs", "Journal"]

# Said when a read that checks what it returns (a replay, a stored text) finds it altered.
_ALTERED = (
    "the ledger was altered after it was written, and cortex will not read it as it is; "
    "run `cortex ledger verify` to name the first bad record"
)
# How long an attest waits for another process's to end (each takes milliseconds).
_LEARN_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class Inputs:
    """A build_context call's inputs, as recorded (enough to run it again)."""

    goal: str
    query: str
    tool_signals: tuple[ToolSignal, ...]
    state: SessionState
    budget: int
    history_upto: int = 0  # in a session: the last step its history lane covered
    # The settings the turn ran with (config and the call's own), so that a rebuild or a
    # feedback's re-ranking runs as the turn did; None in turns recorded before they were.
    settings: ContextSettings | None = None

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, compact), so equal inputs have one sha256."""
        body = {
            "goal": self.goal,
            "query": self.query,
            "tool_signals": [[s.kind.value, s.text] for s in self.tool_signals],
            "recent_turns": [[t.role, t.text] for t in self.state.recent_turns],
            "constraints": list(self.state.constraints),
            "subgoals": list(self.state.subgoals),
            "budget": self.budget,
        }
        if self.state.session:  # inputs without a session keep their old encoding
            body["session"] = self.state.session
            body["history_upto"] = self.history_upto
        if self.settings is not None:
            body["settings"] = json.loads(canonical(self.settings))
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Inputs:
        """Inverse of ``to_json``."""
        raw: dict[str, Any] = json.loads(text)
        return cls(
            goal=raw["goal"],
            query=raw["query"],
            tool_signals=tuple(ToolSignal(t, SignalKind(k)) for k, t in raw["tool_signals"]),
            state=SessionState(
                recent_turns=tuple(Turn.recorded(r, t) for r, t in raw["recent_turns"]),
                constraints=tuple(raw["constraints"]),
                subgoals=tuple(raw["subgoals"]),
                session=str(raw.get("session", "")),
            ),
            budget=int(raw["budget"]),
            history_upto=int(raw.get("history_upto", 0)),
            settings=_settings(raw.get("settings")),
        )


def _settings(raw: object) -> ContextSettings | None:
    """A recorded turn's settings; None when it recorded none, or ones a newer cortex wrote
    that this one cannot read (a rebuild then runs with this process's settings)."""
    if raw is None:
        return None
    try:
        return from_canonical(raw)
    except ConfigError:
        return None


class Journal:
    """A workspace's ledger, opened on first use; safe to share between threads.

    Turns are stamped with ``user``, and read back for that user only: with a state
    folder shared by several users, one never replays, lists or gives feedback on
    another's turns by mistake (turns from before users were recorded, stamped "", stay
    readable). An auditor's reads name another ``user``, or ``all_users``."""

    def __init__(self, path: Path, user: str = "") -> None:
        self.path = path
        self.user = user
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        self._closed = False

    @contextmanager
    def _held(self) -> Iterator[Ledger]:
        """The open ledger, under the lock; ledger errors leave as ``LedgerStateError``."""
        with self._lock:
            if self._closed:  # opening it again would leak the handle close released
                raise LedgerStateError(f"ledger {self.path}: closed (with its workspace)")
            try:
                if self._ledger is None:
                    self._ledger = self._open()
                yield self._ledger
            except LedgerError as exc:
                raise LedgerStateError(f"ledger {self.path}: {exc}") from exc

    def _open(self) -> Ledger:
        """The ledger, for writing; a ledger no one may write here (a read-only copy being
        audited) opens for reading: replay, verify and the log answer, and a write says
        the ledger is read-only."""
        try:
            return Ledger.open(self.path, create=True)
        except LedgerWriteError:
            if not self.path.exists():
                raise
            return Ledger.open(self.path, read_only=True)

    @contextmanager
    def _checked(self) -> Iterator[Ledger]:
        """``_held`` for reads that check what they return: a record or text that fails
        its check says the ledger was altered and how to find where."""
        with self._held() as ledger:
            try:
                yield ledger
            except LedgerCorruptError as exc:
                raise LedgerStateError(f"ledger {self.path}: {exc}; {_ALTERED}") from exc

    def close(self) -> None:
        """Close the ledger file; later calls raise ``LedgerStateError``."""
        with self._lock:
            self._closed = True
            if self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    def record_turn(self, pack: ContextPack, inputs: Inputs) -> TurnRecord:
        """Store the prompt, snippet texts and inputs, then append the turn (one chain link)."""
        texts = [pack.render(), inputs.to_json(), *(s.text for s in pack.citations)]
        with self._held() as ledger:
            opened = ledger.file_id()
            render_sha, inputs_sha = (ledger.put_text(t) for t in texts[:2])
            for text in texts[2:]:
                ledger.put_text(text)
            draft = TurnDraft(
                turn_id=uuid.uuid4().hex,
                goal_ref=sha256_text(inputs.goal),
                tokens_used=pack.tokens_used,
                budget=pack.budget_tokens,
                snippets=tuple(
                    SnippetRef(
                        s.id,
                        s.source_uri,
                        s.span.start_line,
                        s.span.end_line,
                        s.sha256,
                        s.license,
                        s.reason_tag,
                    )
                    for s in pack.citations
                ),
                replay_key=pack.replay_key,
                render_sha256=render_sha,
                inputs_sha256=inputs_sha,
                user=self.user,
            )
            try:
                return ledger.append_turn(draft)
            except ValueError:
                if ledger.file_id() == opened:
                    raise
            # The ledger was rotated between the texts and the turn: the texts went to the
            # file moved aside, so they are stored again, in the new one, with the turn.
            for text in texts:
                ledger.put_text(text)
            return ledger.append_turn(draft)

    def find(
        self, replay_key: str, *, user: str | None = None, all_users: bool = False
    ) -> TurnRecord | None:
        """The latest turn this user recorded under ``replay_key`` (an auditor's reads:
        ``user``'s, or with ``all_users`` anyone's), checked against its record hash and
        its links in the chain; None when there is none."""
        with self._checked() as ledger:
            return ledger.turn_by_replay_key(replay_key, self._owners(user, all_users))

    def recorder(self, replay_key: str) -> str | None:
        """Who recorded the latest turn under ``replay_key``, whoever it was (None: no one),
        so that a read of one's own turns that finds none can say it is another's."""
        turn = self.find(replay_key, all_users=True)
        return None if turn is None else turn.user

    def _owners(self, user: str | None, all_users: bool) -> frozenset[str] | None:
        """Whose turns a read returns: this user's, or ``user``'s, and those from before
        users were recorded (stamped ""); None: every user's."""
        if all_users:
            return None
        return frozenset(("", self.user if user is None else user))

    def _mine(self, turn: TurnRecord) -> bool:
        return not turn.user or turn.user == self.user

    def text(self, sha256: str) -> str:
        """A stored text (verified against its hash on read); once ``forget`` purged it,
        what the purge left (the removed parts marked ``[PURGED]``), only when a purge
        record in the chain names it."""
        with self._checked() as ledger:
            return ledger.get_stored(sha256)[0]

    def free_text(self, payload: JSON, name: str) -> str | None:
        """The free text ``name`` (``rationale``, ``reason``) of a journal entry's payload:
        the stored text it names by sha256 (read as ``text`` reads it: ``[PURGED]`` where
        ``forget`` cut it), or what an entry written before holds inline; None if none."""
        return payload_text(payload, name, self.text)

    def stored(self, sha256: str) -> tuple[str, bool]:
        """(text, purged): a stored text, or what a purge left of it (parts marked), checked
        as ``text`` is."""
        with self._checked() as ledger:
            return ledger.get_stored(sha256)

    def purge(
        self,
        *,
        in_paths: Callable[[str], bool] | None = None,
        text: str | None = None,
        note: dict[str, JSON] | None = None,
        dry_run: bool = False,
    ) -> LedgerPurge:
        """Remove a file's snippet texts and/or a string from every stored text, with one
        purge record in the chain (``purge_ledger``); every user's turns are covered."""
        with self._held() as ledger:
            return purge_ledger(ledger, in_paths=in_paths, text=text, note=note, dry_run=dry_run)

    def record_feedback(
        self,
        turn: TurnRecord,
        result: FeedbackResult,
        tool_results: Sequence[ToolResult],
        outcome: str | None,
    ) -> None:
        """Append what the model cited and what happened."""
        with self._held() as ledger:
            ledger.append_feedback(
                FeedbackDraft(
                    turn_id=turn.turn_id,
                    cited=result.valid,
                    dropped=result.dropped,
                    stale=result.stale,
                    tool_results=tuple(tool_results),
                    outcome=outcome,
                )
            )

    def append_entry(self, kind: RecordKind, key: str, payload: JSON,
                     texts: Sequence[str] = ()) -> JournalEntry:  # fmt: skip
        """Store ``texts`` (by sha256), then append a journal entry under ``key``."""
        with self._held() as ledger:
            opened = ledger.file_id()
            for text in texts:
                ledger.put_text(text)
            entry = ledger.append(kind, key, payload)
            if texts and ledger.file_id() != opened:  # rotated in between: see record_turn
                for text in texts:
                    ledger.put_text(text)
            return entry

    def entries(self, kind: RecordKind, key: str, after: int = 0) -> list[JournalEntry]:
        """The journal entries of ``kind`` under ``key`` after record ``after``, in order."""
        with self._held() as ledger:
            return [r for r in ledger.records(kind, key, after) if isinstance(r, JournalEntry)]

    def append_pair(self, turn_id: str | None, attest: JSON, weights: JSON,
                    texts: Sequence[str] = ()) -> list[JournalEntry]:  # fmt: skip
        """The attest record (seq N) and the weights record (N+1), in one transaction with
        the ``texts`` the attest names by sha256: a crash leaves all or none (``turn_id``
        None: a reset, of no turn)."""
        with self._held() as ledger:
            return ledger.append_entries(
                [(RecordKind.SALIENCE, turn_id, attest), (RecordKind.WEIGHTS, turn_id, weights)],
                texts=texts,
            )

    def later(self, turn_id: str) -> list[Any]:
        """What was recorded about the turn after it (feedback, attest and weights records),
        oldest first; an attest shows the reason it names by sha256 under ``reason``."""
        with self._checked() as ledger:

            def read(sha256: str) -> str:  # (``text`` would take the lock held here)
                return ledger.get_stored(sha256)[0]

            found = [r for r in ledger.records(None, turn_id) if r.kind != RecordKind.TURN]
            return [replace(r, payload=shown_payload(r.payload, read))
                    if isinstance(r, JournalEntry) else r for r in found]  # fmt: skip

    @contextmanager
    def learning(self, wait: float = _LEARN_WAIT_S) -> Iterator[None]:
        """One outcome at a time on this ledger, across processes: an exclusive ``flock``
        on ``<ledger>.learn`` held around an attest's check for an earlier one and its
        records, so two processes sending one turn's outcome at once teach it once (the
        kernel drops the lock when its holder dies)."""
        lock = OpenLock(self.path, create=True, suffix=".learn",
                        doing="learn from an outcome on", holder="learning from an outcome")
        try:
            try:
                lock.take(exclusive=True, wait=wait)
            except LedgerError as exc:
                raise LedgerStateError(f"{exc}; try again") from exc
            yield
        finally:
            lock.release()

    def attested(self, turn_id: str) -> tuple[str, tuple[int, ...]] | None:
        """The outcome and citations of this user's first attest of the turn (None when
        it has none)."""
        for entry in self.entries(RecordKind.SALIENCE, turn_id):
            body = entry.payload
            if isinstance(body, dict) and body.get("user") == self.user:
                cited = body.get("cited")
                numbers = tuple(n for n in cited if isinstance(n, int)) if isinstance(
                    cited, list) else ()  # fmt: skip
                return str(body.get("outcome")), numbers
        return None

    def turn(self, turn_id: str) -> TurnRecord | None:
        """The turn with this id (None when absent or another user's)."""
        with self._held() as ledger:
            turn = ledger.turn(turn_id)
        return turn if turn is not None and self._mine(turn) else None

    def learning_records(self, after: int = 0) -> list[JournalEntry]:
        """The attest and weights records after record ``after``, in seq order."""
        with self._held() as ledger:
            found = [
                r
                for kind in (RecordKind.SALIENCE, RecordKind.WEIGHTS)
                for r in ledger.records(kind, None, after)
                if isinstance(r, JournalEntry)
            ]
        return sorted(found, key=lambda r: r.seq)

    def verify(
        self, *, blobs: bool = True, anchor: tuple[int, str] | None = None, previous: bool = False
    ) -> VerifyReport:
        """Walk the chain (and the stored texts; and, given one, check the anchor; with
        ``previous``, the file a rotated chain continues)."""
        with self._held() as ledger:
            return ledger.verify(blobs=blobs, anchor=anchor, previous=previous)

    def head(self) -> tuple[int, str]:
        """(records, last record hash): the anchor to keep elsewhere."""
        with self._held() as ledger:
            return ledger.head()

    def last_purge(self) -> int:
        """The seq of the newest purge (0: none yet). A cache of the ledger's texts (warm
        sessions, the outcomes tier) reads them again when it moved: another process's
        ``forget`` cut some."""
        with self._held() as ledger:
            return ledger.latest(RecordKind.PURGE)

    def continues(self) -> PreviousLedger | None:
        """The ledger this one's chain continues (its first record, once a rotation made
        it), or None."""
        with self._held() as ledger:
            first = next(ledger.records(RecordKind.CONTINUES), None)
        if not isinstance(first, JournalEntry) or first.seq != 1:
            return None
        try:
            return PreviousLedger.from_payload(first.payload)
        except ValueError:  # verify names a malformed one; here it is simply not said
            return None

    def file_id(self) -> tuple[int, int] | None:
        """Which file the ledger is now (another once it was rotated): what a cache of
        what was folded from it keys on."""
        with self._held() as ledger:
            return ledger.file_id()

    def rotate(self, *, broken: bool = False, anchor: tuple[int, str] | None = None) -> Rotation:
        """Move the ledger and its salience tables aside and start a new chain that names
        it (``ledger.Ledger.rotate``): ``broken`` for one that fails its check (kept as
        evidence), else it must verify (against ``anchor`` when given)."""
        with self._lock:
            if self._closed:
                raise LedgerStateError(f"ledger {self.path}: closed (with its workspace)")
            if self._ledger is not None:  # no connection of ours stays on the moved file
                self._ledger.close()
                self._ledger = None
            try:
                return Ledger.rotate(self.path, broken=broken, anchor=anchor,
                                     also=(salience_path(self.path),))  # fmt: skip
            except LedgerError as exc:
                raise LedgerStateError(f"ledger {self.path}: {exc}") from exc

    def log(self, n: int, *, user: str | None = None, all_users: bool = False) -> list[Any]:
        """The last ``n`` records, oldest first, of this user's (``user``'s; with
        ``all_users``, everyone's): other users' turns, the feedback on them and their
        session steps are left out; journal records of no user are kept."""
        who = self._owners(user, all_users)

        def mine(owner: str) -> bool:
            return who is None or owner in who

        with self._held() as ledger:
            records = list(ledger.last(n))
            owners: dict[str, bool] = {}
            kept = []
            for record in records:
                if isinstance(record, JournalEntry) and isinstance(record.payload, dict):
                    owner = record.payload.get("user")  # a session's steps and checkpoints
                    if isinstance(owner, str) and not mine(owner):
                        continue
                turn_id = getattr(record, "turn_id", None)
                if isinstance(record, TurnRecord):
                    owners[record.turn_id] = mine(record.user)
                elif turn_id and turn_id not in owners:
                    turn = ledger.turn(turn_id)
                    owners[turn_id] = turn is None or mine(turn.user)
                if not turn_id or owners.get(turn_id, True):
                    kept.append(record)
            return kept
