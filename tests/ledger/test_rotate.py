"""Rotating the ledger: the file moved aside whole, a new chain that names it, and every
process that had the old file open appending to the new one."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import (
    GENESIS_HASH,
    Ledger,
    LedgerCorruptError,
    LedgerNotFoundError,
    LedgerRotateError,
    RecordKind,
    RotateReason,
    TurnRecord,
)
from ledger._codec import canonical_json, record_hash
from tests.ledger import add_turn, build, raw

REPO = Path(__file__).resolve().parents[2]
TIME = "2026-01-31T10:15:02.000000Z"
ASIDE = "ledger.rotated-20260131T101502Z.sqlite"
BROKEN = "ledger.broken-20260131T101502Z.sqlite"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in the folder by name, with its bytes, each database's write-ahead log
    folded in first (what a refusal must leave; SQLite's own -wal/-shm come and go)."""
    for db in (folder / "ledger.sqlite", folder / "ledger.salience.sqlite"):
        with raw(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}  # fmt: skip


def _salience(path: Path) -> Path:
    """A salience-tables file beside the ledger, as the engine folds one."""
    tables = path.with_suffix(".salience.sqlite")
    with sqlite3.connect(tables) as db:
        db.execute("CREATE TABLE meta (seq INTEGER)")
        db.execute("INSERT INTO meta VALUES (5)")
    return tables


@pytest.fixture
def five(tmp_path: Path) -> tuple[Path, list[TurnRecord]]:
    """A closed ledger of five turns at ledger.sqlite, with salience tables beside it."""
    path = tmp_path / "ledger.sqlite"
    turns = build(path, 5)
    _salience(path)
    return path, turns


def test_a_healthy_ledger_is_moved_aside_and_a_new_chain_names_its_head(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """rotate moves the file and its salience tables aside (0400), and the new ledger's
    first record names the old head, size and sha256; both files verify."""
    path, turns = five
    with Ledger.open(path) as ledger:
        head = ledger.head()
    rotation = Ledger.rotate(path, also=[path.with_suffix(".salience.sqlite")], time=TIME)
    aside = path.with_name(ASIDE)
    previous = rotation.previous
    assert (previous.file, previous.seq, previous.hash) == (ASIDE, *head)
    assert head == (5, turns[-1].record_hash)
    assert previous.verified and previous.reason is RotateReason.ROTATE and not previous.problem
    assert (previous.size, previous.sha256) == (
        aside.stat().st_size, hashlib.sha256(aside.read_bytes()).hexdigest())  # fmt: skip
    moved = {src.name: dst.name for src, dst in rotation.moved}
    assert moved["ledger.sqlite"] == ASIDE
    assert moved["ledger.salience.sqlite"] == "ledger.rotated-20260131T101502Z.salience.sqlite"
    for _, dst in rotation.moved:
        assert dst.stat().st_mode & 0o777 == 0o400
    assert not path.with_suffix(".salience.sqlite").exists()
    first = rotation.first
    assert (first.kind, first.seq, first.prev_hash, first.time) == (
        RecordKind.CONTINUES, 1, GENESIS_HASH, TIME)  # fmt: skip
    with Ledger.open(path) as ledger:
        report = ledger.verify(blobs=True, previous=True)
        assert report.ok and report.previous == previous, report
        assert f"continues {ASIDE} at seq 5 hash {head[1]}" in report.reason
        assert [r.seq for r in ledger.records()] == [1]
        assert add_turn(ledger, "t06").seq == 2
        assert ledger.verify(blobs=True).ok
    with Ledger.open(aside, read_only=True) as old:
        assert old.verify(blobs=True).ok and old.head() == head


def test_a_ledger_open_before_the_rotation_appends_to_the_new_file(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """A Ledger opened before the rotate (a server's) stores its texts and appends its
    turn in the new file; the file moved aside is left exactly as it was moved."""
    path, _ = five
    with Ledger.open(path) as stale:
        add_turn(stale, "t06")
        rotation = Ledger.rotate(path, time=TIME)
        before = stale.file_id()
        turn = add_turn(stale, "t07")
        assert turn.seq == 2 and stale.file_id() == before  # reopened on the read above
        assert [r.seq for r in stale.records()] == [1, 2]
    assert rotation.previous.seq == 6
    with Ledger.open(path) as ledger:
        assert ledger.turn("t07") is not None and ledger.verify(blobs=True, previous=True).ok
    with Ledger.open(path.with_name(ASIDE), read_only=True) as old:
        assert old.turn("t07") is None and old.head()[0] == 6


def test_a_ledger_open_before_the_rotation_appends_once_it_holds_the_lock(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """An append that was waiting for the write lock when the rotation moved the file
    finds, once it holds the lock, another file at the path: it appends there."""
    path, _ = five
    with Ledger.open(path) as stale:
        stale.head()  # open, and read once, before the move
        Ledger.rotate(path, time=TIME)
        entry = stale.append(RecordKind.WEIGHTS, None, {"after": {}})
        assert entry.seq == 2
    with Ledger.open(path.with_name(ASIDE), read_only=True) as old:
        assert old.head()[0] == 5


_OPEN_THEN_APPEND = """
import sys, time
from pathlib import Path
from tests.ledger import add_turn
from ledger import Ledger
path, ready, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with Ledger.open(path) as ledger:
    print(add_turn(ledger, "before").seq, flush=True)
    ready.touch()
    while not go.exists():
        time.sleep(0.005)
    print(add_turn(ledger, "after").seq, flush=True)
"""


def test_another_process_open_before_the_rotation_appends_to_the_new_file(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """A process that opened the ledger (and appended) before the rotation, as a server
    does, appends its next turn to the new ledger, not to the file moved aside."""
    path, _ = five
    ready, go = path.with_name("ready"), path.with_name("go")
    child = subprocess.Popen(
        [sys.executable, "-c", _OPEN_THEN_APPEND, str(path), str(ready), str(go)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(2000):
            if ready.exists() or child.poll() is not None:
                break
            subprocess.run(["sleep", "0.01"], check=True)
        rotation = Ledger.rotate(path, time=TIME)
        go.touch()
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out.split() == ["6", "2"]
    assert rotation.previous.seq == 6
    with Ledger.open(path) as ledger:
        assert ledger.turn("after") is not None
        assert ledger.verify(blobs=True, previous=True).ok
    with Ledger.open(path.with_name(ASIDE), read_only=True) as old:
        assert old.turn("after") is None and old.verify(blobs=True).ok


def test_a_cut_tail_is_moved_aside_as_broken_naming_its_last_sound_record(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """A ledger whose last record was deleted is refused a plain rotate (nothing moves);
    --broken moves it aside and names seq 4, its last record that verifies, and why."""
    path, turns = five
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 5")
    before = _files(path.parent)
    with pytest.raises(LedgerRotateError, match="does not verify"):
        Ledger.rotate(path, time=TIME)
    assert _files(path.parent) == before
    rotation = Ledger.rotate(path, broken=True, time=TIME)
    previous = rotation.previous
    assert (previous.file, previous.seq, previous.hash) == (BROKEN, 4, turns[3].record_hash)
    assert not previous.verified and previous.reason is RotateReason.BROKEN
    assert "deleted" in previous.problem
    with Ledger.open(path) as ledger:
        report = ledger.verify(blobs=True, previous=True)
        assert report.ok and "moved aside broken" in report.reason, report
        assert add_turn(ledger, "t06").seq == 2
    with Ledger.open(path.with_name(BROKEN), read_only=True) as old:
        assert not old.verify().ok  # kept as it was: the evidence


def test_an_edited_record_is_moved_aside_as_broken(five: tuple[Path, list[TurnRecord]]) -> None:
    """A record edited in place: --broken names the record before it as the last sound one."""
    path, turns = five
    with raw(path) as conn:
        conn.execute("UPDATE records SET time = '2001-01-01T00:00:00.000000Z' WHERE seq = 3")
    rotation = Ledger.rotate(path, broken=True, time=TIME)
    assert (rotation.previous.seq, rotation.previous.hash) == (2, turns[1].record_hash)
    assert "edited" in rotation.previous.problem
    with Ledger.open(path) as ledger:
        assert ledger.verify(blobs=True).ok


def test_a_file_sqlite_finds_damaged_is_moved_aside_as_broken(tmp_path: Path) -> None:
    """A ledger file with a page zeroed goes aside as broken, byte for byte as it was."""
    path = tmp_path / "ledger.sqlite"
    build(path, 60)
    with raw(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek(page * 3)
        f.write(b"\0" * page)
    damaged = path.read_bytes()
    with pytest.raises(LedgerRotateError):
        Ledger.rotate(path, time=TIME)
    rotation = Ledger.rotate(path, broken=True, time=TIME)
    assert not rotation.previous.verified and path.with_name(BROKEN).read_bytes() == damaged
    with Ledger.open(path) as ledger:
        assert ledger.verify(blobs=True, previous=True).ok


def test_a_healthy_ledger_is_not_moved_aside_as_broken(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """--broken on a ledger that verifies is refused and every file stays as it was."""
    path, _ = five
    before = _files(path.parent)
    with pytest.raises(LedgerRotateError, match="verifies"):
        Ledger.rotate(path, broken=True, also=[path.with_suffix(".salience.sqlite")], time=TIME)
    assert _files(path.parent) == before


def test_a_cut_and_reheaded_tail_goes_as_broken_with_its_anchor(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """A tail cut with its head rewritten verifies on its own; the anchor kept elsewhere
    makes rotate take it as broken, naming the last record before the anchor."""
    path, turns = five
    anchor = (5, turns[4].record_hash)
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 5")
        conn.execute("UPDATE head SET count = 4, last_hash = ?", (turns[3].record_hash,))
    with pytest.raises(LedgerRotateError):
        Ledger.rotate(path, broken=True, time=TIME)
    rotation = Ledger.rotate(path, broken=True, anchor=anchor, time=TIME)
    assert (rotation.previous.seq, rotation.previous.verified) == (4, False)
    assert "cut" in rotation.previous.problem


@pytest.mark.parametrize("taken", [ASIDE, f"{ASIDE}-wal",
                                   "ledger.rotated-20260131T101502Z.salience.sqlite"])  # fmt: skip
def test_a_name_aside_already_taken_moves_nothing(
    five: tuple[Path, list[TurnRecord]], taken: str
) -> None:
    """When a name the rotation would move a file to exists, it refuses and every file,
    that one too, stays as it was."""
    path, _ = five
    path.with_name(taken).write_bytes(b"someone else's")
    before = _files(path.parent)
    with pytest.raises(LedgerRotateError, match="already exist"):
        Ledger.rotate(path, also=[path.with_suffix(".salience.sqlite")], time=TIME)
    assert _files(path.parent) == before


def test_no_ledger_nothing_to_rotate(tmp_path: Path) -> None:
    """Rotating a path with no ledger raises LedgerNotFoundError and creates nothing."""
    with pytest.raises(LedgerNotFoundError, match="nothing to rotate"):
        Ledger.rotate(tmp_path / "ledger.sqlite", time=TIME)
    assert list(tmp_path.iterdir()) == []


def test_a_continues_record_only_opens_a_chain(five: tuple[Path, list[TurnRecord]]) -> None:
    """Only rotate writes a continues record; one slipped in past seq 1 is named by verify."""
    path, turns = five
    with Ledger.open(path) as ledger, pytest.raises(ValueError, match="opens a chain"):
        ledger.append(RecordKind.CONTINUES, None, {})
    payload = canonical_json({"file": ASIDE, "seq": 0, "hash": GENESIS_HASH, "size": 0,
                              "sha256": GENESIS_HASH, "verified": True, "reason": "rotate",
                              "problem": ""})  # fmt: skip
    prev = turns[-1].record_hash
    forged = record_hash("continues", 6, None, TIME, payload, prev)
    with raw(path) as conn:
        conn.execute(
            "INSERT INTO records (seq, kind, turn_id, time, payload, prev_hash, record_hash) "
            "VALUES (6, 'continues', NULL, ?, ?, ?, ?)", (TIME, payload, prev, forged))  # fmt: skip
        conn.execute("UPDATE head SET count = 6, last_hash = ?", (forged,))
    with Ledger.open(path) as ledger:
        report = ledger.verify()
    assert (report.ok, report.first_bad_seq) == (False, 6) and "opens a chain" in report.reason


def test_verify_previous_finds_the_old_file_changed(five: tuple[Path, list[TurnRecord]]) -> None:
    """verify(previous=True) fails once the file moved aside is no longer the one the
    continues record hashed."""
    path, _ = five
    Ledger.rotate(path, time=TIME)
    aside = path.with_name(ASIDE)
    aside.chmod(0o600)
    with aside.open("ab") as f:
        f.write(b"\0")
    with Ledger.open(path) as ledger:
        assert ledger.verify().ok
        report = ledger.verify(previous=True)
    assert not report.ok and "sha256" in report.reason
    os.remove(aside)
    with Ledger.open(path) as ledger:
        assert "is not there" in ledger.verify(previous=True).reason


def test_appending_to_a_broken_chain_names_the_rotate_command(
    five: tuple[Path, list[TurnRecord]],
) -> None:
    """The refusal to append to a broken chain says how to record again."""
    path, _ = five
    with raw(path) as conn:
        conn.execute("DELETE FROM records WHERE seq = 5")
    with Ledger.open(path) as ledger, pytest.raises(LedgerCorruptError) as caught:
        add_turn(ledger, "t06")
    assert "cortex ledger rotate --broken" in str(caught.value)
