"""The ledger's records: frozen values in (drafts), frozen values out (stored records).

Every stored record carries its place in the one chain: ``seq`` (1, 2, 3 … in append order),
``prev_hash`` (the previous record's hash, 64 zeros for the first) and ``record_hash``.
Drafts check what they are given (``ValueError`` on a malformed field), so nothing malformed
is ever hashed into the chain.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeAlias

__all__ = [
    "JSON",
    "FeedbackDraft",
    "FeedbackRecord",
    "JournalEntry",
    "PreviousLedger",
    "Record",
    "RecordKind",
    "RotateReason",
    "SnippetRef",
    "ToolResult",
    "TurnDraft",
    "TurnRecord",
    "VerifyReport",
    "check_sha256",
    "check_time",
]

JSON: TypeAlias = bool | int | float | str | list["JSON"] | dict[str, "JSON"] | None
"""A JSON value as ``json.loads`` returns it: the payload type of a journal entry."""

_SHA256 = re.compile(r"[0-9a-f]{64}")


class RecordKind(StrEnum):
    """What a record is; all kinds share one chain."""

    TURN = "turn"  # a context pack handed to the model
    FEEDBACK = "feedback"  # validated citations and tool results for a turn
    WEIGHTS = "weights"  # a rerank-weight update (replay re-applies it)
    CHECKPOINT = "checkpoint"  # a compaction checkpoint a later turn can reload
    SALIENCE = "salience"  # a salience change for cited or faulted items
    SESSION = "session"  # one step of a planner's session (its text is a blob)
    PURGE = "purge"  # stored texts removed (``Ledger.purge``): which, and what replaced them
    # The first record of a chain that continues a ledger moved aside (``Ledger.rotate``):
    # names that file and the last record of its chain that verifies. Only ever seq 1.
    CONTINUES = "continues"


class RotateReason(StrEnum):
    """Why a ledger was moved aside and a new chain started (``Ledger.rotate``)."""

    ROTATE = "rotate"  # it grew: its chain verified and is closed
    BROKEN = "broken"  # it failed its check: kept as evidence, its chain not continued


@dataclass(frozen=True, slots=True)
class SnippetRef:
    """One cited snippet of a turn: where it came from and the sha256 of its exact text.

    The text itself is a blob (``Ledger.put_text``) named by ``sha256``, so a replay does not
    depend on the workspace.
    """

    local_id: int  # the [n] the prompt shows, 1-based
    source_uri: str
    start_line: int
    end_line: int
    sha256: str
    license: str  # SPDX id, or "" when unknown
    reason_tag: str  # why the packer chose it

    def __post_init__(self) -> None:
        _check_int("local_id", self.local_id, low=1)
        _check_str("source_uri", self.source_uri, empty=False)
        _check_int("start_line", self.start_line, low=1)
        _check_int("end_line", self.end_line, low=self.start_line)
        check_sha256("sha256", self.sha256)
        _check_str("license", self.license)
        _check_str("reason_tag", self.reason_tag)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool the model ran reported: its name, whether it succeeded, a short summary."""

    name: str
    ok: bool
    summary: str
    # Where a stored record keeps the summary: the sha256 of a stored text, so a purge can
    # remove it ("" in records written before summaries were stored as texts: inline).
    summary_sha256: str = ""

    def __post_init__(self) -> None:
        _check_str("name", self.name, empty=False)
        if not isinstance(self.ok, bool):
            raise ValueError(f"ok must be a bool, not {self.ok!r}")
        _check_str("summary", self.summary)
        if self.summary_sha256:
            check_sha256("summary_sha256", self.summary_sha256)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDraft:
    """A turn to append: a ``TurnRecord`` without its chain fields.

    ``time`` is filled with the current UTC time when None. ``model_citations`` must be
    local ids of ``snippets``. The blobs named by ``render_sha256``, ``inputs_sha256`` and each
    snippet's ``sha256`` must be stored (``Ledger.put_text``) before the turn is appended.
    """

    turn_id: str
    goal_ref: str  # sha256 of the goal text
    tokens_used: int
    budget: int
    snippets: tuple[SnippetRef, ...]
    replay_key: str
    render_sha256: str  # of the exact rendered prompt (a blob)
    inputs_sha256: str  # of the canonical JSON of the call's inputs (a blob)
    model_citations: tuple[int, ...] = ()
    time: str | None = None
    user: str = ""  # whose turn it is ("" in ledgers written before users were recorded)

    def __post_init__(self) -> None:
        _check_str("turn_id", self.turn_id, empty=False)
        if self.time is not None:
            check_time(self.time)
        check_sha256("goal_ref", self.goal_ref)
        _check_int("tokens_used", self.tokens_used, low=0)
        _check_int("budget", self.budget, low=0)
        if not isinstance(self.snippets, tuple) or not all(
            isinstance(s, SnippetRef) for s in self.snippets
        ):
            raise ValueError("snippets must be a tuple of SnippetRef")
        ids = [s.local_id for s in self.snippets]
        if len(set(ids)) != len(ids):
            raise ValueError(f"snippet local ids repeat: {sorted(ids)}")
        _check_str("replay_key", self.replay_key, empty=False)
        check_sha256("render_sha256", self.render_sha256)
        check_sha256("inputs_sha256", self.inputs_sha256)
        _check_ints("model_citations", self.model_citations)
        unknown = set(self.model_citations) - set(ids)
        if unknown:
            raise ValueError(f"model_citations {sorted(unknown)} are not snippet local ids")


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One stored turn: what was packed, under which budget, and how to replay it."""

    turn_id: str
    time: str  # ISO 8601 UTC, ending in "Z"
    goal_ref: str
    tokens_used: int
    budget: int
    snippets: tuple[SnippetRef, ...]
    replay_key: str
    render_sha256: str
    inputs_sha256: str
    model_citations: tuple[int, ...] = ()
    user: str = ""  # whose turn: only they may replay it or see it in the log
    _: KW_ONLY
    seq: int
    prev_hash: str
    record_hash: str

    @property
    def kind(self) -> RecordKind:
        """Always ``RecordKind.TURN``."""
        return RecordKind.TURN


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackDraft:
    """Feedback to append for a stored turn, already validated by the caller.

    ``cited`` and ``stale`` must be local ids of the turn's snippets (the ledger checks);
    ``dropped`` keeps out-of-set or malformed markers exactly as the model wrote them.
    """

    turn_id: str
    cited: tuple[int, ...] = ()
    dropped: tuple[str, ...] = ()
    stale: tuple[int, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    outcome: str | None = None
    time: str | None = None

    def __post_init__(self) -> None:
        _check_str("turn_id", self.turn_id, empty=False)
        if self.time is not None:
            check_time(self.time)
        _check_ints("cited", self.cited)
        _check_ints("stale", self.stale)
        if not isinstance(self.dropped, tuple) or not all(isinstance(d, str) for d in self.dropped):
            raise ValueError("dropped must be a tuple of str")
        if not isinstance(self.tool_results, tuple) or not all(
            isinstance(t, ToolResult) for t in self.tool_results
        ):
            raise ValueError("tool_results must be a tuple of ToolResult")
        if self.outcome is not None:
            _check_str("outcome", self.outcome)


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    """Stored feedback for a turn: valid citations, dropped markers, stale ids, tool results."""

    turn_id: str
    time: str
    cited: tuple[int, ...]
    dropped: tuple[str, ...]
    stale: tuple[int, ...]
    tool_results: tuple[ToolResult, ...]
    outcome: str | None
    _: KW_ONLY
    seq: int
    prev_hash: str
    record_hash: str

    @property
    def kind(self) -> RecordKind:
        """Always ``RecordKind.FEEDBACK``."""
        return RecordKind.FEEDBACK


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """A stored record of a later kind (weights, checkpoint, salience) with a JSON payload.

    ``payload`` is exactly what ``json.loads`` gives back for the stored canonical text, so
    an entry returned by ``append`` equals the one read back later.
    """

    kind: RecordKind
    turn_id: str | None
    time: str
    payload: JSON
    _: KW_ONLY
    seq: int
    prev_hash: str
    record_hash: str


Record: TypeAlias = TurnRecord | FeedbackRecord | JournalEntry
"""Any stored record."""


@dataclass(frozen=True, slots=True)
class PreviousLedger:
    """The ledger a chain continues, as the chain's first record (``continues``) names it:
    the file moved aside (its name: it lies beside the ledger), the last record of its chain
    that verifies, the moved file's size and sha256, and whether and why not it verified.

    ``seq`` 0 (and ``hash`` all zeros) when no record of it could be read as sound."""

    file: str
    seq: int
    hash: str
    size: int
    sha256: str
    verified: bool
    reason: RotateReason
    problem: str = ""  # verify's reason when it did not verify

    def __post_init__(self) -> None:
        _check_str("file", self.file, empty=False)
        if "/" in self.file or self.file in (".", ".."):
            raise ValueError(f"file must be a file name beside the ledger, not {self.file!r}")
        _check_int("seq", self.seq, low=0)
        check_sha256("hash", self.hash)
        _check_int("size", self.size, low=0)
        check_sha256("sha256", self.sha256)
        if not isinstance(self.verified, bool):
            raise ValueError(f"verified must be a bool, not {self.verified!r}")
        RotateReason(self.reason)
        _check_str("problem", self.problem)

    def payload(self) -> JSON:
        """The ``continues`` record's payload."""
        return {"file": self.file, "seq": self.seq, "hash": self.hash, "size": self.size,
                "sha256": self.sha256, "verified": self.verified,
                "reason": RotateReason(self.reason).value, "problem": self.problem}  # fmt: skip

    @classmethod
    def from_payload(cls, payload: JSON) -> PreviousLedger:
        """Inverse of ``payload``; ``ValueError`` for a payload of another shape."""
        if not isinstance(payload, dict):
            raise ValueError("a continues record's payload is an object")
        try:
            body: Any = payload  # each field's type is checked by __post_init__
            return cls(body["file"], body["seq"], body["hash"], body["size"], body["sha256"],
                       body["verified"], RotateReason(body["reason"]), body["problem"])  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a continues record's payload lacks {exc}") from None

    def said(self) -> str:
        """One line: what this chain continues."""
        at = f"at seq {self.seq} hash {self.hash}"
        if self.verified:
            return f"continues {self.file} {at}"
        return (f"continues {self.file}, moved aside broken ({self.problem}); its last sound "
                f"record {at}")  # fmt: skip


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``Ledger.verify`` found.

    ``first_bad_seq`` is the first place the chain breaks (for a deleted record, the seq that
    is missing) and ``first_bad_turn`` the turn id of the record stored there (None when the
    record is gone or belongs to no turn). ``reason`` says what is wrong, in words.
    ``previous`` is the ledger a rotated chain continues, as its first record names it.
    """

    ok: bool
    checked: int  # records walked
    first_bad_seq: int | None
    first_bad_turn: str | None
    reason: str
    purged: int = 0  # texts a turn names that a purge record removed (checked with ``blobs``)
    previous: PreviousLedger | None = None  # the ledger this chain continues (``rotate``)


def check_sha256(name: str, value: object) -> None:
    """Raise ``ValueError`` unless ``value`` is 64 lowercase hex digits."""
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ValueError(f"{name} must be a sha256 as 64 lowercase hex digits, not {value!r}")


def check_time(value: object) -> None:
    """Raise ``ValueError`` unless ``value`` is an ISO 8601 UTC time ending in ``Z``."""
    if not isinstance(value, str) or not value.endswith("Z"):
        raise ValueError(f"time must be ISO 8601 UTC ending in 'Z', not {value!r}")
    try:
        parsed = datetime.fromisoformat(value[:-1])
    except ValueError:
        raise ValueError(f"time must be ISO 8601 UTC ending in 'Z', not {value!r}") from None
    if parsed.tzinfo is not None:
        raise ValueError(f"time must carry no offset besides 'Z', not {value!r}")


def _check_int(name: str, value: object, *, low: int) -> None:
    # bool is an int subclass; True as a line number is a bug, not a 1.
    if type(value) is not int or value < low:
        raise ValueError(f"{name} must be an int >= {low}, not {value!r}")


def _check_ints(name: str, value: object) -> None:
    if not isinstance(value, tuple) or not all(type(v) is int for v in value):
        raise ValueError(f"{name} must be a tuple of int, not {value!r}")


def _check_str(name: str, value: object, *, empty: bool = True) -> None:
    if not isinstance(value, str) or (not empty and not value):
        raise ValueError(f"{name} must be a {'' if empty else 'non-empty '}str, not {value!r}")
