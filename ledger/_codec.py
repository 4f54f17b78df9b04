"""Canonical bytes, record hashes, and records to and from their stored JSON payloads.

A record's hash is the sha256 of the canonical JSON (sorted keys, no spaces, UTF-8 as is)
of ``{kind, seq, turn_id, time, payload, prev_hash}``. The payload's canonical text is what
the row stores, and ``canonical_record`` splices those stored bytes in verbatim, so
verification hashes exactly what is on disk, never a re-encoding of a decoded value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ledger._errors import LedgerCorruptError
from ledger._records import (
    JSON,
    FeedbackDraft,
    FeedbackRecord,
    JournalEntry,
    Record,
    RecordKind,
    SnippetRef,
    ToolResult,
    TurnDraft,
    TurnRecord,
    check_sha256,
    check_time,
)

__all__ = [
    "GENESIS_HASH",
    "canonical_json",
    "canonical_record",
    "check_json",
    "decode_row",
    "feedback_payload",
    "now_utc",
    "record_hash",
    "text_sha256",
    "turn_payload",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first record."""

_SNIPPET_KEYS = ("local_id", "source_uri", "start_line", "end_line", "sha256", "license",
                 "reason_tag")  # fmt: skip


def now_utc() -> str:
    """The current UTC time as ISO 8601 with microseconds and a ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_json(value: JSON) -> bytes:
    """The canonical UTF-8 bytes of a JSON value (``ValueError`` for NaN, lone surrogates …)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def canonical_record(
    kind: str, seq: int, turn_id: str | None, time: str, payload: bytes, prev_hash: str
) -> bytes:
    """The canonical bytes of a record, with the stored payload bytes spliced in verbatim.

    Equal to ``canonical_json({"kind": …, "seq": …, "turn_id": …, "time": …, "payload": …,
    "prev_hash": …})`` whenever ``payload`` is canonical (a test checks this); the keys are
    written here in sorted order.
    """
    return b"".join((
        b'{"kind":', _string(kind),
        b',"payload":', payload,
        b',"prev_hash":', _string(prev_hash),
        b',"seq":', b"%d" % seq,
        b',"time":', _string(time),
        b',"turn_id":', b"null" if turn_id is None else _string(turn_id),
        b"}",
    ))  # fmt: skip


def record_hash(
    kind: str, seq: int, turn_id: str | None, time: str, payload: bytes, prev_hash: str
) -> str:
    """The hex sha256 of ``canonical_record(...)``."""
    canonical = canonical_record(kind, seq, turn_id, time, payload, prev_hash)
    return hashlib.sha256(canonical).hexdigest()


def _string(value: str) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


# -- payloads -------------------------------------------------------------------------------
# turn_id and time live in the record's envelope (they are hashed there), not in the payload.


def turn_payload(draft: TurnDraft) -> JSON:
    """The JSON payload of a turn (``user`` only when set: older payloads hash as before)."""
    body: dict[str, JSON] = {
        "goal_ref": draft.goal_ref,
        "tokens_used": draft.tokens_used,
        "budget": draft.budget,
        "snippets": [{k: getattr(s, k) for k in _SNIPPET_KEYS} for s in draft.snippets],
        "replay_key": draft.replay_key,
        "render_sha256": draft.render_sha256,
        "inputs_sha256": draft.inputs_sha256,
        "model_citations": list(draft.model_citations),
    }
    if draft.user:
        body["user"] = draft.user
    return body


def feedback_payload(draft: FeedbackDraft) -> JSON:
    """The JSON payload of a feedback record. Tool-result summaries are stored texts named
    by sha256 (the caller stores them), so the chain holds no text a purge could not reach."""
    return {
        "cited": list(draft.cited),
        "dropped": list(draft.dropped),
        "stale": list(draft.stale),
        "tool_results": [
            {"name": t.name, "ok": t.ok, "summary_sha256": text_sha256(t.summary)}
            for t in draft.tool_results
        ],
        "outcome": draft.outcome,
    }


def text_sha256(text: str) -> str:
    """The name a text is stored under: the sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decode_row(row: Sequence[Any]) -> Record:
    """A stored row ``(seq, kind, turn_id, time, payload, prev_hash, record_hash)`` as a record.

    Raises ``LedgerCorruptError`` naming the seq when the row does not decode.
    """
    seq, kind, turn_id, time, payload, prev_hash, rec_hash = row
    chain = _Chain(int(seq), str(prev_hash), str(rec_hash))
    try:
        value = json.loads(bytes(payload))
        check_time(time)
        parsed = RecordKind(kind)
        if parsed is RecordKind.TURN:
            return _turn(_str(turn_id), time, value, chain)
        if parsed is RecordKind.FEEDBACK:
            return _feedback(_str(turn_id), time, value, chain)
        if turn_id is not None:
            _str(turn_id)
        return JournalEntry(
            parsed, turn_id, time, value,
            seq=chain.seq, prev_hash=chain.prev_hash, record_hash=chain.record_hash,
        )  # fmt: skip
    except (ValueError, TypeError, KeyError) as exc:
        raise LedgerCorruptError(
            f"ledger record seq {seq} ({kind!r}) does not decode: {exc!r}; run verify"
        ) from exc


class _Chain(NamedTuple):
    seq: int
    prev_hash: str
    record_hash: str


def _turn(turn_id: str, time: str, p: dict[str, Any], chain: _Chain) -> TurnRecord:
    for key in ("goal_ref", "render_sha256", "inputs_sha256"):
        check_sha256(key, p[key])
    return TurnRecord(
        turn_id,
        time,
        p["goal_ref"],
        _int(p["tokens_used"]),
        _int(p["budget"]),
        tuple(SnippetRef(**{k: s[k] for k in _SNIPPET_KEYS}) for s in _list(p["snippets"])),
        _str(p["replay_key"]),
        p["render_sha256"],
        p["inputs_sha256"],
        tuple(_int(c) for c in _list(p["model_citations"])),
        _str(p.get("user", "")),
        seq=chain.seq,
        prev_hash=chain.prev_hash,
        record_hash=chain.record_hash,
    )


def _feedback(turn_id: str, time: str, p: dict[str, Any], chain: _Chain) -> FeedbackRecord:
    outcome = p["outcome"]
    return FeedbackRecord(
        turn_id,
        time,
        tuple(_int(c) for c in _list(p["cited"])),
        tuple(_str(d) for d in _list(p["dropped"])),
        tuple(_int(c) for c in _list(p["stale"])),
        tuple(_tool_result(t) for t in _list(p["tool_results"])),
        None if outcome is None else _str(outcome),
        seq=chain.seq,
        prev_hash=chain.prev_hash,
        record_hash=chain.record_hash,
    )


def _tool_result(t: dict[str, Any]) -> ToolResult:
    """A stored tool result: its summary inline (older records) or named by sha256, to be
    filled in from the stored texts by the reader (``Ledger``)."""
    if "summary_sha256" in t:
        return ToolResult(t["name"], t["ok"], "", t["summary_sha256"])
    return ToolResult(t["name"], t["ok"], t["summary"])


def _int(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an int, found {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a str, found {value!r}")
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, found {value!r}")
    return value


def check_json(value: object, where: str = "payload") -> None:
    """Raise ``ValueError`` unless ``value`` survives a JSON round trip unchanged in meaning.

    ``json.dumps`` would silently turn ``{1: …}`` into ``{"1": …}``; a journal payload must
    read back as what was appended, so such keys are refused here.
    """
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where} holds {value!r}, which JSON cannot carry")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_json(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-str key {key!r}")
            check_json(item, f"{where}[{key!r}]")
        return
    raise ValueError(f"{where} holds a {type(value).__name__}, which is not JSON")
