"""Edits made to the SQLite file behind the ledger's back are caught and named by verify."""

from __future__ import annotations

import hashlib
import json
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import (
    GENESIS_HASH,
    FeedbackDraft,
    Ledger,
    LedgerCorruptError,
    RecordKind,
    TurnRecord,
    VerifyReport,
)
from tests.ledger import add_turn, build, raw


def _verify(path: Path, *, blobs: bool = False) -> VerifyReport:
    with Ledger.open(path, create=False) as ledger:
        return ledger.verify(blobs=blobs)


@pytest.fixture
def ten(tmp_path: Path) -> tuple[Path, list[TurnRecord]]:
    """A closed ledger of ten turns, t01 … t10, and the records as appended."""
    path = tmp_path / "ledger.db"
    turns = build(path, 10)
    assert _verify(path, blobs=True).ok
    return path, turns


def test_untouched_ledger_verifies(ten: tuple[Path, list[TurnRecord]]) -> None:
    """A ledger nobody edited verifies, every record checked."""
    report = _verify(ten[0], blobs=True)
    assert report.ok and report.checked == 10 and report.first_bad_seq is None


def test_edited_payload_byte_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """Editing one byte of record 5's payload makes verify name seq 5 and turn t05."""
    path, _ = ten
    with raw(path) as conn:
        payload = conn.execute("SELECT payload FROM records WHERE seq = 5").fetchone()[0]
        edited = payload.replace(b'"tokens_used":103', b'"tokens_used":104')
        assert edited != payload
        conn.execute("UPDATE records SET payload = ? WHERE seq = 5", (edited,))
    report = _verify(path)
    assert not report.ok
    assert (report.first_bad_seq, report.first_bad_turn, report.checked) == (5, "t05", 4)
    assert "edited" in report.reason


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("time", "2001-01-01T00:00:00.000000Z"),
        ("turn_id", "t99"),
        ("kind", "salience"),
        ("record_hash", "f" * 64),
        ("prev_hash", "0" * 64),
    ],
)
def test_edited_column_is_named(
    ten: tuple[Path, list[TurnRecord]], column: str, value: str
) -> None:
    """Editing any hashed column of record 5 makes verify name seq 5."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute(f"UPDATE records SET {column} = ? WHERE seq = 5", (value,))
    report = _verify(path)
    assert not report.ok and report.first_bad_seq == 5


def test_edited_replay_key_column_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """The unhashed lookup copy of the replay key must agree with the hashed payload."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("UPDATE records SET replay_key = 'rk-t01' WHERE seq = 5")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq) == (False, 5) and "replay_key" in report.reason
    with Ledger.open(path) as ledger, pytest.raises(LedgerCorruptError, match="seq 5"):
        ledger.turn_by_replay_key("rk-t01")


def test_invalid_utf8_edit_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """A text column edited into bytes that are not UTF-8 is a finding, not a crash."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("UPDATE records SET time = CAST(x'ff00' AS TEXT) WHERE seq = 5")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq) == (False, 5)


def test_deleted_record_is_named_as_gap(ten: tuple[Path, list[TurnRecord]]) -> None:
    """Deleting record 5 makes verify name the missing seq 5 and the jump to seq 6."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 5")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 5, None)
    assert "seq 5 is missing" in report.reason and "seq 6" in report.reason


def test_deleted_last_record_is_detected(ten: tuple[Path, list[TurnRecord]]) -> None:
    """Deleting the last record breaks the head; verify names seq 10 and appends are refused."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 10")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq) == (False, 10) and "deleted" in report.reason
    with Ledger.open(path) as ledger, pytest.raises(LedgerCorruptError, match="head"):
        ledger.append(RecordKind.WEIGHTS, None, {})


def test_deleted_head_is_detected(ten: tuple[Path, list[TurnRecord]]) -> None:
    """Deleting the head row itself is detected."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("DELETE FROM head")
    report = _verify(path)
    assert not report.ok and "head" in report.reason


def test_swapped_records_are_named_at_the_first(ten: tuple[Path, list[TurnRecord]]) -> None:
    """Swapping the seqs of records 5 and 6 is detected at seq 5 (now holding t06)."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("UPDATE records SET seq = -1 WHERE seq = 5")
        conn.execute("UPDATE records SET seq = 5 WHERE seq = 6")
        conn.execute("UPDATE records SET seq = 6 WHERE seq = -1")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 5, "t06")
    assert "prev_hash" in report.reason


def _forge(seq: int, prev_hash: str) -> tuple[object, ...]:
    """A record whose own hash is right for its fields (computed as the spec says)."""
    time, payload = "2030-01-01T00:00:00.000000Z", {"bm25": 9.0}
    whole = {"kind": "weights", "seq": seq, "turn_id": "t05", "time": time,
             "payload": payload, "prev_hash": prev_hash}  # fmt: skip
    dump = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False}
    digest = hashlib.sha256(json.dumps(whole, **dump).encode()).hexdigest()  # type: ignore[arg-type]
    return (seq, "weights", "t05", time, json.dumps(payload, **dump).encode(), prev_hash, digest)  # type: ignore[arg-type]


def test_inserted_record_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """A forged record slid in at seq 6 (later ones renumbered, head bumped) is named at 6."""
    path, _ = ten
    with raw(path) as conn:
        for seq in range(10, 5, -1):
            conn.execute("UPDATE records SET seq = ? WHERE seq = ?", (seq + 1, seq))
        conn.execute(
            "INSERT INTO records (seq, kind, turn_id, time, payload, prev_hash, record_hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            _forge(6, "ab" * 32),
        )
        conn.execute("UPDATE head SET count = 11")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 6, "t05")
    assert "prev_hash" in report.reason


def test_inserted_record_with_right_prev_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """A forged record that links to seq 5 breaks the link of the record after it."""
    path, turns = ten
    with raw(path) as conn:
        for seq in range(10, 5, -1):
            conn.execute("UPDATE records SET seq = ? WHERE seq = ?", (seq + 1, seq))
        conn.execute(
            "INSERT INTO records (seq, kind, turn_id, time, payload, prev_hash, record_hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            _forge(6, turns[4].record_hash),
        )
        conn.execute("UPDATE head SET count = 11")
    report = _verify(path)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 7, "t06")


def test_record_appended_behind_the_head_is_named(ten: tuple[Path, list[TurnRecord]]) -> None:
    """A well-formed record added at the end without moving the head is detected."""
    path, turns = ten
    with raw(path) as conn:
        conn.execute(
            "INSERT INTO records (seq, kind, turn_id, time, payload, prev_hash, record_hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            _forge(11, turns[-1].record_hash),
        )
    report = _verify(path)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 11, "t05")
    assert "past the head" in report.reason


@pytest.mark.parametrize("how", ["replace", "flip", "delete"])
def test_edited_blob_is_caught(ten: tuple[Path, list[TurnRecord]], how: str) -> None:
    """A prompt blob replaced, damaged or deleted is named by verify(blobs=True) and get_text."""
    path, turns = ten
    target = turns[4].render_sha256
    with raw(path) as conn:
        if how == "replace":
            conn.execute(
                "UPDATE blobs SET data = ? WHERE sha256 = ?", (zlib.compress(b"evil"), target)
            )
        elif how == "flip":
            data = bytearray(
                conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (target,)).fetchone()[0]
            )
            data[len(data) // 2] ^= 0x01
            conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (bytes(data), target))
        else:
            conn.execute("DELETE FROM blobs WHERE sha256 = ?", (target,))
    assert _verify(path).ok  # the chain itself is untouched
    report = _verify(path, blobs=True)
    assert (report.ok, report.first_bad_seq, report.first_bad_turn) == (False, 5, "t05")
    assert target in report.reason
    with (
        Ledger.open(path) as ledger,
        pytest.raises(LookupError if how == "delete" else LedgerCorruptError, match=target),
    ):
        ledger.get_text(target)


def test_edited_snippet_blob_is_named_at_first_use(tmp_path: Path) -> None:
    """A snippet text shared by several turns is reported at the first turn that cites it."""
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        add_turn(ledger, "t1", texts=["only here"])
        add_turn(ledger, "t2", texts=["shared"])
        add_turn(ledger, "t3", texts=["shared", "more"])
        shared = ledger.put_text("shared")
    with raw(path) as conn:
        conn.execute(
            "UPDATE blobs SET data = ? WHERE sha256 = ?", (zlib.compress(b"SHARED"), shared)
        )
    report = _verify(path, blobs=True)
    assert (report.first_bad_seq, report.first_bad_turn) == (2, "t2")


_payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
_ops = st.lists(
    st.one_of(
        st.just(("turn", None)),
        st.just(("feedback", None)),
        st.tuples(st.sampled_from(["weights", "checkpoint", "salience"]), _payloads),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops, data=st.data())
def test_any_flipped_payload_byte_is_named(
    ops: list[tuple[str, object]], data: st.DataObject
) -> None:
    """Random appends verify; flipping any one byte of any stored payload fails at that seq."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.db"
        turn_ids: list[str] = []
        with Ledger.open(path) as ledger:
            for i, (kind, payload) in enumerate(ops):
                if kind == "turn" or (kind == "feedback" and not turn_ids):
                    turn_ids.append(add_turn(ledger, f"t{i}").turn_id)
                elif kind == "feedback":
                    ledger.append_feedback(FeedbackDraft(turn_id=turn_ids[-1], cited=(1,)))
                else:
                    tid = data.draw(st.sampled_from([None, *turn_ids]))
                    ledger.append(RecordKind(kind), tid, payload)  # type: ignore[arg-type]
            assert ledger.verify(blobs=True).ok and len(ledger) == len(ops)
        seq = data.draw(st.integers(1, len(ops)), label="seq")
        with raw(path) as conn:
            payload = bytearray(
                conn.execute("SELECT payload FROM records WHERE seq = ?", (seq,)).fetchone()[0]
            )
            at = data.draw(st.integers(0, len(payload) - 1), label="byte")
            payload[at] ^= data.draw(st.integers(1, 255), label="mask")
            conn.execute("UPDATE records SET payload = ? WHERE seq = ?", (bytes(payload), seq))
        report = _verify(path)
        assert (report.ok, report.first_bad_seq, report.checked) == (False, seq, seq - 1)


def test_a_cut_and_reheaded_tail_is_caught_only_with_an_anchor(
    ten: tuple[Path, list[TurnRecord]],
) -> None:
    """Deleting the last records and rewriting the head to match leaves a consistent chain:
    verify alone cannot tell (it was never longer, as far as it knows); the head printed
    before, passed back as an anchor, names the cut."""
    path, _ = ten
    with Ledger.open(path, create=False) as ledger:
        anchor = ledger.head()
    assert anchor[0] == 10 and len(anchor[1]) == 64
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq > 7")
        last = conn.execute("SELECT record_hash FROM records WHERE seq = 7").fetchone()[0]
        conn.execute("UPDATE head SET count = 7, last_hash = ?", (last,))
    assert _verify(path).ok  # what is and is not detected without an anchor
    with Ledger.open(path, create=False) as ledger:
        report = ledger.verify(anchor=anchor)
        assert not report.ok and report.first_bad_seq == 10 and "cut" in report.reason
        assert ledger.verify(anchor=(7, "0" * 64)).ok is False  # a rewritten record
        assert ledger.verify(anchor=ledger.head()).ok


def test_the_empty_ledgers_head_is_a_sound_anchor(tmp_path: Path) -> None:
    """The head of an empty ledger (0:000…0), kept as an anchor, verifies then and after
    appends (every chain starts there); seq 0 with another hash does not."""
    path = tmp_path / "ledger.sqlite"
    with Ledger.open(path) as ledger:
        genesis = ledger.head()
        assert genesis == (0, GENESIS_HASH) and ledger.verify(anchor=genesis).ok
        add_turn(ledger, "t1")
        assert ledger.verify(anchor=genesis).ok
        assert not ledger.verify(anchor=(0, "1" * 64)).ok


@pytest.mark.parametrize("how", ["replace", "delete"])
def test_a_session_steps_or_checkpoints_text_edited_is_caught(tmp_path: Path, how: str) -> None:
    """A session step's text and a checkpoint's encoding are stored texts like a prompt:
    one replaced or deleted fails verify(blobs=True) at its record (it said intact)."""
    from ledger import RecordKind

    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        add_turn(ledger, "t1")
        for kind, field, text in ((RecordKind.SESSION, "text_sha256", "use staging only"),
                                  (RecordKind.CHECKPOINT, "checkpoint_sha256", "{}")):  # fmt: skip
            sha = ledger.put_text(text)
            ledger.append(kind, "s1", {"session": "s1", field: sha})
    assert _verify(path, blobs=True).ok
    for seq, target in ((2, hashlib.sha256(b"use staging only").hexdigest()),
                        (3, hashlib.sha256(b"{}").hexdigest())):  # fmt: skip
        with raw(path) as conn:
            saved = conn.execute("SELECT sha256, size, data FROM blobs WHERE sha256 = ?",
                                 (target,)).fetchone()  # fmt: skip
            if how == "replace":
                conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?",
                             (zlib.compress(b"use prod"), target))  # fmt: skip
            else:
                conn.execute("DELETE FROM blobs WHERE sha256 = ?", (target,))
        report = _verify(path, blobs=True)
        assert (report.ok, report.first_bad_seq) == (False, seq) and target in report.reason
        with raw(path) as conn:
            conn.execute("INSERT OR REPLACE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
                         saved)  # fmt: skip


def _turn_by_key(path: Path, key: str) -> TurnRecord | None:
    with Ledger.open(path, create=False) as ledger:
        return ledger.turn_by_replay_key(key)


def test_a_replayed_turn_pointed_at_another_prompt_is_refused(
    ten: tuple[Path, list[TurnRecord]],
) -> None:
    """A turn whose payload is edited to name another turn's prompt (hash left as it was)
    is refused by the replay lookup, as verify names it, not replayed."""
    path, turns = ten
    with raw(path) as conn:
        stored = conn.execute("SELECT payload FROM records WHERE seq = 5").fetchone()[0]
        payload = json.loads(stored)
        payload["render_sha256"] = turns[2].render_sha256
        edited = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        conn.execute("UPDATE records SET payload = ? WHERE seq = 5", (edited,))
    assert _verify(path).first_bad_seq == 5
    with pytest.raises(LedgerCorruptError, match="does not hash to its record_hash"):
        _turn_by_key(path, "rk-t05")
    assert _turn_by_key(path, "rk-t04") == turns[3]  # the others still replay


@pytest.mark.parametrize(
    ("seq", "sql", "reason"),
    [
        (5, "UPDATE records SET record_hash = ? WHERE seq = 5", "does not hash"),
        (5, "UPDATE records SET prev_hash = ? WHERE seq = 5", "prev_hash does not link"),
        (6, "UPDATE records SET prev_hash = ? WHERE seq = 6", "does not link to seq 5"),
        (10, "UPDATE head SET last_hash = ?", "the head does not end at seq 10"),
    ],
)
def test_a_replayed_turn_is_checked_against_its_links(
    ten: tuple[Path, list[TurnRecord]], seq: int, sql: str, reason: str
) -> None:
    """The lookup checks the turn's own hash, its link back, and the link to it from the
    record after it (or the head): each edit verify names there is refused there."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute(sql, ("f" * 64,))
    key = "rk-t05" if seq in (5, 6) else "rk-t10"
    with pytest.raises(LedgerCorruptError, match=reason):
        _turn_by_key(path, key)


def test_appends_after_a_cut_tail_stay_refused_and_say_how_to_recover(
    ten: tuple[Path, list[TurnRecord]],
) -> None:
    """A chain whose last record is gone (head kept) refuses appends before and after a
    verify, and the refusal names the command that finds the damage and the way out."""
    path, _ = ten
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 10")
    with Ledger.open(path, create=False) as ledger:
        for _ in range(2):
            with pytest.raises(LedgerCorruptError) as caught:
                add_turn(ledger, "t11")
            said = str(caught.value)
            assert "cortex ledger verify" in said and "move the file aside" in said, said
            assert not ledger.verify().ok
