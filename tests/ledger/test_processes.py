"""Real processes against one ledger file: killed mid-append, and appending side by side."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger import Ledger, TurnRecord

REPO = Path(__file__).resolve().parents[2]

# Appends a turn and a journal entry per round, printing each seq once its append returned.
_APPEND_FOREVER = """
import sys
from pathlib import Path
from ledger import Ledger, RecordKind
from tests.ledger import add_turn
path, prefix = Path(sys.argv[1]), sys.argv[2]
with Ledger.open(path) as ledger:
    i = 0
    while True:
        turn = add_turn(ledger, f"{prefix}-{i:06d}")
        print(turn.seq, flush=True)
        print(ledger.append(RecordKind.WEIGHTS, turn.turn_id, {"i": i}).seq, flush=True)
        i += 1
"""

# Opens (maybe creating) the ledger, waits for the go file, then appends N turns.
_APPEND_N = """
import sys, time
from pathlib import Path
from ledger import Ledger
from tests.ledger import add_turn
path, prefix, go, n = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
with Ledger.open(path) as ledger:
    while not go.exists():
        time.sleep(0.001)
    for i in range(n):
        add_turn(ledger, f"{prefix}-{i:04d}")
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_during_append_leaves_a_valid_chain(tmp_path: Path) -> None:
    """SIGKILL at arbitrary points of a tight append loop never leaves a broken chain."""
    path = tmp_path / "ledger.db"
    last_printed = 0
    for round_no, delay in enumerate((0.5, 0.23, 0.71, 0.37)):
        child = _spawn(_APPEND_FOREVER, str(path), f"r{round_no}")
        assert child.stdout is not None
        first = child.stdout.readline()  # appending for real before the clock starts
        assert first.strip(), child.stderr.read() if child.stderr else ""
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        printed = [int(line) for line in [first, *child.stdout.read().split()] if line.strip()]
        last_printed = max(printed)
        with Ledger.open(path) as ledger:
            report = ledger.verify(blobs=True)
            records = list(ledger.records())
            assert report.ok, report
            assert len(ledger) == len(records) == report.checked
            # Every append that returned is there; at most one more committed unreported.
            assert last_printed <= len(ledger) <= last_printed + 1
            assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert last_printed > 20  # the loop really ran between kills


def test_two_writers_both_land(tmp_path: Path) -> None:
    """Two processes appending 200 turns each at once give 400 records in one valid chain."""
    path, go = tmp_path / "ledger.db", tmp_path / "go"
    children = [_spawn(_APPEND_N, str(path), prefix, str(go), "200") for prefix in ("A", "B")]
    time.sleep(0.3)  # both open (and race to create) the file before the go
    go.touch()
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    with Ledger.open(path) as ledger:
        assert ledger.verify(blobs=True).ok
        turns = [r for r in ledger.records() if isinstance(r, TurnRecord)]
    assert len(turns) == 400 and [t.seq for t in turns] == list(range(1, 401))
    for prefix in ("A", "B"):
        mine = [t.turn_id for t in turns if t.turn_id.startswith(prefix)]
        assert mine == [f"{prefix}-{i:04d}" for i in range(200)]
