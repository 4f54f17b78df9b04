"""Records and texts round-trip through a real SQLite ledger, in one order, with one chain."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import (
    GENESIS_HASH,
    JSON,
    BlobNotFoundError,
    FeedbackDraft,
    FeedbackRecord,
    JournalEntry,
    Ledger,
    Record,
    RecordKind,
    SnippetRef,
    ToolResult,
    TurnDraft,
    TurnRecord,
)
from ledger._codec import canonical_json, canonical_record
from tests.ledger import add_turn, build, raw, sha


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """A fresh ledger in a temporary folder."""
    return Ledger.open(tmp_path / "state" / "ledger.db")


def test_turn_round_trip(ledger: Ledger) -> None:
    """A turn reads back equal by id, by replay key, and from the record stream."""
    turn = add_turn(ledger, "t1", texts=["a = 1", "b = 2"], time="2025-01-02T03:04:05.000006Z")
    assert turn.seq == 1 and turn.prev_hash == GENESIS_HASH and turn.kind is RecordKind.TURN
    assert turn.time == "2025-01-02T03:04:05.000006Z"
    assert [s.local_id for s in turn.snippets] == [1, 2]
    assert ledger.turn("t1") == turn
    assert ledger.turn_by_replay_key("rk-t1") == turn
    assert list(ledger.records()) == [turn]
    assert ledger.turn("nope") is None and ledger.turn_by_replay_key("nope") is None


def test_turn_survives_reopen(tmp_path: Path) -> None:
    """What was appended is read back the same after close and reopen."""
    turns = build(tmp_path / "l.db", 3)
    with Ledger.open(tmp_path / "l.db", create=False) as ledger:
        assert list(ledger.records()) == turns and len(ledger) == 3


def test_time_is_filled_in_utc(ledger: Ledger) -> None:
    """A draft without a time gets the current UTC time, ISO 8601 with a Z."""
    turn = add_turn(ledger, "t1")
    assert turn.time.endswith("Z") and turn.time[:4].isdigit() and "T" in turn.time


def test_feedback_round_trip(ledger: Ledger) -> None:
    """Feedback reads back equal, in order, and only for its own turn."""
    add_turn(ledger, "t1")
    add_turn(ledger, "t2")
    first = ledger.append_feedback(
        FeedbackDraft(
            turn_id="t1",
            cited=(1, 3),
            dropped=("[7]", "[x", "[\uff11]"),  # out of set, malformed, full-width
            stale=(2,),
            tool_results=(
                ToolResult("pytest", False, "1 failed: test_x"),
                ToolResult("ls", True, ""),
            ),
            outcome="tests fail",
        )
    )
    second = ledger.append_feedback(FeedbackDraft(turn_id="t1", outcome=None))
    ledger.append_feedback(FeedbackDraft(turn_id="t2", cited=(2,)))
    assert isinstance(first, FeedbackRecord) and first.kind is RecordKind.FEEDBACK
    assert first.prev_hash == ledger.turn("t2").record_hash  # type: ignore[union-attr]
    assert ledger.feedback_for("t1") == [first, second]
    assert ledger.feedback_for("nope") == []


@pytest.mark.parametrize("kind", [RecordKind.WEIGHTS, RecordKind.CHECKPOINT, RecordKind.SALIENCE])
def test_journal_round_trip(ledger: Ledger, kind: RecordKind) -> None:
    """A journal entry of each later kind reads back equal to what append returned."""
    add_turn(ledger, "t1")
    payload: JSON = {
        "w": [0.25, -1e-9, 3],
        "note": "naïve ☃ 𝄞 \x00",
        "nested": {"ok": True, "n": None},
    }
    entry = ledger.append(kind, "t1", payload)
    loose = ledger.append(kind, None, ["a", 1])
    assert entry.payload == payload and entry.kind is kind and entry.turn_id == "t1"
    assert list(ledger.records(kind)) == [entry, loose]
    assert isinstance(loose, JournalEntry) and loose.turn_id is None


def test_records_share_one_order(ledger: Ledger) -> None:
    """All kinds interleave in one seq order, each linked to the previous record's hash."""
    made: list[Record] = [add_turn(ledger, "t1")]
    made.append(ledger.append(RecordKind.WEIGHTS, "t1", {"bm25": 0.5}))
    made.append(ledger.append_feedback(FeedbackDraft(turn_id="t1", cited=(1,))))
    made.append(add_turn(ledger, "t2"))
    made.append(ledger.append(RecordKind.CHECKPOINT, None, {"digest": "…"}))
    made.append(ledger.append(RecordKind.SALIENCE, "t2", {"up": [1]}))
    stored = list(ledger.records())
    assert stored == made and [r.seq for r in stored] == list(range(1, 7))
    assert [r.prev_hash for r in stored] == [GENESIS_HASH] + [r.record_hash for r in stored[:-1]]
    assert [r.seq for r in ledger.records(turn_id="t1")] == [1, 2, 3]
    assert [r.seq for r in ledger.records(RecordKind.TURN)] == [1, 4]
    assert [r.seq for r in ledger.records(RecordKind.SALIENCE, "t2")] == [6]
    assert ledger.last(2) == made[-2:] and ledger.last(0) == []
    assert ledger.last(5, RecordKind.TURN) == [made[0], made[3]]
    assert len(ledger) == 6 and ledger.verify().ok


def test_records_stream_past_one_page(ledger: Ledger) -> None:
    """Iterating more records than one read page yields every one, in order."""
    for i in range(600):
        ledger.append(RecordKind.SALIENCE, None, {"i": i})
    assert [r.payload for r in ledger.records() if isinstance(r, JournalEntry)] == [
        {"i": i} for i in range(600)
    ]


def test_replay_key_lookup_finds_latest(ledger: Ledger) -> None:
    """Equal inputs give equal replay keys; the lookup returns the latest such turn."""
    add_turn(ledger, "t1", replay_key="same")
    add_turn(ledger, "t2", replay_key="other")
    latest = add_turn(ledger, "t3", replay_key="same")
    assert ledger.turn_by_replay_key("same") == latest


def test_record_hash_matches_spec_encoding(ledger: Ledger) -> None:
    """record_hash is sha256 of the canonical JSON of {kind, seq, turn_id, time, payload, prev}."""
    entry = ledger.append(RecordKind.WEIGHTS, None, {"b": 1, "a": "é"})
    canonical = json.dumps(
        {
            "kind": "weights",
            "seq": 1,
            "turn_id": None,
            "time": entry.time,
            "payload": {"a": "é", "b": 1},
            "prev_hash": GENESIS_HASH,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert entry.record_hash == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=200)
@given(
    kind=st.sampled_from(list(RecordKind)),
    seq=st.integers(1, 2**53),
    turn_id=st.none() | st.text(),
    time=st.text(),
    payload=_json,
    prev=st.text(),
)
def test_canonical_record_equals_reference(
    kind: RecordKind, seq: int, turn_id: str | None, time: str, payload: object, prev: str
) -> None:
    """Splicing the stored payload bytes gives exactly json.dumps of the whole record."""
    whole = {"kind": kind.value, "seq": seq, "turn_id": turn_id, "time": time,
             "payload": payload, "prev_hash": prev}  # fmt: skip
    reference = canonical_json(whole)  # type: ignore[arg-type]
    spliced = canonical_record(kind.value, seq, turn_id, time, canonical_json(payload), prev)  # type: ignore[arg-type]
    assert spliced == reference


@pytest.mark.parametrize("text", ["", "naïve ☃ 𝄞", "a\x00b\x00", "line\r\nline\n", "x" * 100_000])
def test_text_round_trip(ledger: Ledger, text: str) -> None:
    """A text reads back byte-identical under the sha256 of its UTF-8 bytes."""
    digest = ledger.put_text(text)
    assert digest == sha(text)
    assert ledger.get_text(digest) == text


def test_text_is_stored_once(tmp_path: Path) -> None:
    """Storing the same text again adds no row; different texts add one each."""
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        first = ledger.put_text("same text")
        assert ledger.put_text("same text") == first
        ledger.put_text("other text")
    with raw(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 2


def test_missing_text_is_a_lookup_error(ledger: Ledger) -> None:
    """Asking for a sha that was never stored raises BlobNotFoundError (a LookupError)."""
    with pytest.raises(BlobNotFoundError, match="0" * 64):
        ledger.get_text("0" * 64)
    with pytest.raises(LookupError):
        ledger.get_text(sha("never stored"))


def _draft(**changes: object) -> TurnDraft:
    fields: dict[str, object] = {
        "turn_id": "t",
        "goal_ref": sha("g"),
        "tokens_used": 1,
        "budget": 2,
        "snippets": (SnippetRef(1, "file://a", 1, 1, sha("a"), "MIT", "bm25"),),
        "replay_key": "rk",
        "render_sha256": sha("r"),
        "inputs_sha256": sha("i"),
    }
    fields.update(changes)
    return TurnDraft(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"turn_id": ""},
        {"goal_ref": "ABC"},
        {"render_sha256": sha("r").upper()},
        {"tokens_used": -1},
        {"budget": True},
        {"snippets": [SnippetRef(1, "file://a", 1, 1, sha("a"), "MIT", "bm25")]},
        {"model_citations": (2,)},
        {"time": "2025-01-01T00:00:00+02:00"},
        {"time": "yesterday"},
        {"replay_key": ""},
    ],
)
def test_malformed_turn_is_refused(changes: dict[str, object]) -> None:
    """A draft with a malformed field raises ValueError before anything is hashed."""
    with pytest.raises(ValueError):
        _draft(**changes)


def test_bad_snippet_is_refused() -> None:
    """A snippet with repeated ids, a bad span or a bad sha raises ValueError."""
    with pytest.raises(ValueError):
        SnippetRef(1, "file://a", 5, 4, sha("a"), "MIT", "bm25")
    with pytest.raises(ValueError):
        SnippetRef(0, "file://a", 1, 1, sha("a"), "MIT", "bm25")
    with pytest.raises(ValueError):
        SnippetRef(1, "file://a", 1, 1, "nope", "MIT", "bm25")
    s = SnippetRef(1, "file://a", 1, 1, sha("a"), "MIT", "bm25")
    with pytest.raises(ValueError, match="repeat"):
        _draft(snippets=(s, s))


def test_append_refuses_what_it_cannot_chain(ledger: Ledger) -> None:
    """Duplicate turn ids, unstored texts, unknown turns and non-JSON payloads raise ValueError."""
    add_turn(ledger, "t1")
    with pytest.raises(ValueError, match="already"):
        add_turn(ledger, "t1")
    with pytest.raises(ValueError, match="put_text"):
        ledger.append_turn(_draft(turn_id="t2"))
    with pytest.raises(ValueError, match="no turn"):
        ledger.append_feedback(FeedbackDraft(turn_id="t9"))
    with pytest.raises(ValueError, match=r"\[4\]"):
        ledger.append_feedback(FeedbackDraft(turn_id="t1", cited=(1, 4)))
    with pytest.raises(ValueError, match="append_turn"):
        ledger.append(RecordKind.TURN, "t1", {})
    for bad in ({1: "int key"}, {"x": float("nan")}, {"x": {1, 2}}):
        with pytest.raises(ValueError):
            ledger.append(RecordKind.WEIGHTS, None, bad)  # type: ignore[arg-type]
    assert len(ledger) == 1 and ledger.verify().ok


def test_closed_ledger_refuses_use(tmp_path: Path) -> None:
    """Using a closed ledger raises ValueError, like a closed file; close is idempotent."""
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.close()
    ledger.close()
    with pytest.raises(ValueError, match="closed"):
        len(ledger)


def test_import_loads_nothing_internal() -> None:
    """Importing ledger loads no other cortex package and opens no SQLite database."""
    code = (
        "import sys, sqlite3\n"
        "opened = []\n"
        "real = sqlite3.connect\n"
        "sqlite3.connect = lambda *a, **k: opened.append(a) or real(*a, **k)\n"
        "import ledger\n"
        "print([m for m in ('engine', 'indexers', 'overlays') if m in sys.modules], opened)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_turn_record_fields_are_as_documented() -> None:
    """TurnRecord carries the documented fields, chain fields last and keyword-only."""
    names = [f for f in TurnRecord.__dataclass_fields__ if not f.startswith("_")]
    assert names == [
        "turn_id", "time", "goal_ref", "tokens_used", "budget", "snippets", "replay_key",
        "render_sha256", "inputs_sha256", "model_citations", "user", "seq", "prev_hash",
        "record_hash",
    ]  # fmt: skip
