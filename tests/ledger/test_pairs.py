"""Journal entries appended together: one transaction, so a kill leaves all or none; the
texts they name are stored in it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import PURGED_MARK, JournalEntry, Ledger, RecordKind
from tests.ledger import raw

REPO = Path(__file__).resolve().parents[2]

# Appends attest/weights pairs in a tight loop, printing each pair's seqs once it returned.
_PAIRS_FOREVER = """
import sys
from pathlib import Path
from ledger import Ledger, RecordKind
with Ledger.open(Path(sys.argv[1])) as ledger:
    i = 0
    while True:
        a, w = ledger.append_entries([(RecordKind.SALIENCE, None, {"i": i, "pad": "x" * 3000}),
                                      (RecordKind.WEIGHTS, None, {"i": i})])
        print(a.seq, w.seq, flush=True)
        i += 1
"""


def test_append_entries_chains_consecutive_records(tmp_path: Path) -> None:
    """A pair lands at seq N and N+1 and the chain verifies."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.append(RecordKind.CHECKPOINT, None, {"x": 1})
        a, w = ledger.append_entries(
            [(RecordKind.SALIENCE, "t", {"a": 1}), (RecordKind.WEIGHTS, "t", {"b": 2.5})]
        )
        assert (a.seq, w.seq) == (2, 3) and w.prev_hash == a.record_hash
        assert list(ledger.records())[1:] == [a, w] and ledger.verify().ok


def test_append_entries_refuses_turns_and_bad_payloads(tmp_path: Path) -> None:
    """Turn, feedback and purge kinds and non-JSON payloads are refused, nothing written."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        with pytest.raises(ValueError, match="journal kinds"):
            ledger.append_entries([(RecordKind.TURN, None, {})])
        with pytest.raises(ValueError):
            ledger.append_entries([(RecordKind.WEIGHTS, None, {"x": float("nan")})])
        with pytest.raises(ValueError, match="no entries"):
            ledger.append_entries([])
        assert len(ledger) == 0


def test_kill_between_or_during_a_pair_leaves_both_or_neither(tmp_path: Path) -> None:
    """SIGKILL at arbitrary points of a pair loop: every attest record has its weights
    record right after it, and the chain verifies."""
    path = tmp_path / "ledger.db"
    for delay in (0.31, 0.17, 0.53):
        child = subprocess.Popen(
            [sys.executable, "-c", _PAIRS_FOREVER, str(path)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert child.stdout is not None
        assert child.stdout.readline().strip(), child.stderr.read() if child.stderr else ""
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with Ledger.open(path) as ledger:
            assert ledger.verify().ok
            records = [r for r in ledger.records() if isinstance(r, JournalEntry)]
        kinds = [r.kind for r in records]
        assert len(kinds) % 2 == 0 and len(kinds) > 4
        assert kinds == [RecordKind.SALIENCE, RecordKind.WEIGHTS] * (len(kinds) // 2)
        for a, w in zip(records[::2], records[1::2], strict=True):
            assert a.payload["i"] == w.payload["i"]  # type: ignore[index,call-overload]


def test_texts_stored_with_a_pair_are_checked_and_purged_as_texts(tmp_path: Path) -> None:
    """``append_entries(texts=...)`` stores the texts an attest names (``reason_sha256``)
    in the pair's transaction: verify(blobs=True) checks them and names the attest when one
    is gone, and a purge cuts one with the chain still verifying."""
    path = tmp_path / "l.db"
    reason = "host zebra-77 was wrong"
    sha = hashlib.sha256(reason.encode()).hexdigest()
    with Ledger.open(path) as ledger:
        a, _ = ledger.append_entries(
            [(RecordKind.SALIENCE, "t", {"reason_sha256": sha}), (RecordKind.WEIGHTS, "t", {})],
            texts=[reason],
        )
        assert ledger.get_text(sha) == reason and ledger.verify(blobs=True).ok
        ledger.purge({sha: [(5, 13)]}, {"text": True})
        assert ledger.get_stored(sha) == (f"host {PURGED_MARK} was wrong", True)
        assert ledger.verify(blobs=True).purged == 1
        with pytest.raises(ValueError, match="str"):
            ledger.append_entries([(RecordKind.WEIGHTS, None, {})], texts=[b"x"])  # type: ignore[list-item]
        assert len(ledger) == 3
    assert b"zebra-77" not in b"".join(p.read_bytes() for p in tmp_path.iterdir())
    with raw(path) as conn:
        conn.execute("DELETE FROM purged")
    with Ledger.open(path) as ledger:
        report = ledger.verify(blobs=True)
    assert not report.ok and report.first_bad_seq == a.seq and "is gone" in report.reason
