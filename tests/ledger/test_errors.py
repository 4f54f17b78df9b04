"""Failures come out as the ledger's own errors, with messages that name the file and cause."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

import ledger._sqlite
from ledger import (
    SCHEMA_VERSION,
    FeedbackDraft,
    Ledger,
    LedgerCorruptError,
    LedgerError,
    LedgerNotFoundError,
    LedgerSchemaError,
    LedgerWriteError,
    RecordKind,
)
from tests.ledger import add_turn, build, raw


def _page_count(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def test_full_disk_is_a_write_error_and_the_ledger_still_reads(tmp_path: Path) -> None:
    """Hitting the size limit raises LedgerWriteError('…full…'); what landed reads and verifies."""
    path = tmp_path / "ledger.db"
    build(path, 3)
    landed = 3
    with Ledger.open(path, max_pages=_page_count(path) + 40) as ledger:
        with pytest.raises(LedgerWriteError) as caught:
            for i in range(1000):
                # ~40 KB of incompressible text per turn: the cap is reached within a few.
                add_turn(ledger, f"big{i}", texts=[os.urandom(20_000).hex()])
                landed += 1
        message = str(caught.value)
        assert "full" in message and str(path) in message
        assert isinstance(caught.value, OSError)
        assert len(ledger) == landed and ledger.verify(blobs=True).ok
        assert ledger.turn("t01") is not None
        with pytest.raises(LedgerWriteError, match="full"):
            ledger.append(RecordKind.WEIGHTS, None, {"pad": "x" * 200_000})
    with Ledger.open(path) as ledger:  # room again: appends land and chain on
        add_turn(ledger, "after")
        assert ledger.verify().ok and len(ledger) == landed + 1


def test_read_only_ledger_reads_but_refuses_writes(tmp_path: Path) -> None:
    """Opened read_only, reads and verify work and every write is a LedgerWriteError."""
    path = tmp_path / "ledger.db"
    turns = build(path, 3)
    with Ledger.open(path, read_only=True) as ledger:
        assert ledger.turn("t02") == turns[1] and len(ledger) == 3
        assert ledger.verify(blobs=True).ok
        assert ledger.get_text(turns[0].render_sha256).startswith("# goal t01")
        assert ledger.put_text(ledger.get_text(turns[0].render_sha256)) == turns[0].render_sha256
        for write in (
            lambda: add_turn(ledger, "t9"),
            lambda: ledger.append(RecordKind.SALIENCE, None, {}),
            lambda: ledger.append_feedback(FeedbackDraft(turn_id="t01")),
            lambda: ledger.put_text("new text"),
        ):
            with pytest.raises(LedgerWriteError, match="read-only") as caught:
                write()
            assert str(path) in str(caught.value)
        assert len(ledger) == 3


def test_read_only_file_system_is_reported_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writable open whose file SQLite can only read (mode=ro) gives the same write error."""
    path = tmp_path / "ledger.db"
    build(path, 2)
    # Stand-in for a file system mounted read-only: SQLite gets the file read-only.
    monkeypatch.setattr(ledger._sqlite, "_uri", lambda p, **_: f"{p.as_uri()}?mode=ro")
    with Ledger.open(path) as opened:
        assert opened.verify().ok and opened.turn("t01") is not None
        with pytest.raises(LedgerWriteError, match="read-only"):
            opened.append(RecordKind.WEIGHTS, None, {})
    with pytest.raises(LedgerWriteError):
        Ledger.open(tmp_path / "new.db")  # nothing there to read, nothing can be created


def test_lock_held_too_long_is_a_write_error(tmp_path: Path) -> None:
    """A write waiting past busy_timeout for another process's lock raises LedgerWriteError."""
    path = tmp_path / "ledger.db"
    build(path, 1)
    holder = raw(path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Ledger.open(path, busy_timeout=0.2) as ledger:
            started = time.perf_counter()
            with pytest.raises(LedgerWriteError, match=r"locked for more than 0\.2 s"):
                ledger.append(RecordKind.WEIGHTS, None, {})
            assert time.perf_counter() - started >= 0.15
            assert len(ledger) == 1  # reads do not wait for the writer
            holder.execute("ROLLBACK")
            ledger.append(RecordKind.WEIGHTS, None, {})
            assert len(ledger) == 2 and ledger.verify().ok
    finally:
        holder.close()


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    """A file that is not SQLite at all is refused as not a ledger, naming the file."""
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(LedgerCorruptError, match="not a cortex ledger") as caught:
        Ledger.open(path)
    assert str(path) in str(caught.value)
    assert path.read_bytes().startswith(b"these are my notes")  # untouched


def test_other_sqlite_database_is_refused(tmp_path: Path) -> None:
    """Another application's SQLite file is refused and left as it was."""
    path = tmp_path / "app.db"
    with raw(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(LedgerCorruptError, match="not a cortex ledger"):
        Ledger.open(path)
    other = tmp_path / "other.db"
    with raw(other) as conn:
        conn.execute("PRAGMA application_id = 1234")
    with pytest.raises(LedgerCorruptError, match="application_id"):
        Ledger.open(other)


def test_other_schema_version_says_how_to_start_anew(tmp_path: Path) -> None:
    """A ledger of another schema version raises LedgerSchemaError saying what to do."""
    path = tmp_path / "ledger.db"
    build(path, 1)
    with raw(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(LedgerSchemaError, match=f"schema {SCHEMA_VERSION + 1}") as caught:
        Ledger.open(path)
    assert "new ledger" in str(caught.value) and "move" in str(caught.value)
    assert isinstance(caught.value, LedgerError)


def test_missing_ledger_without_create(tmp_path: Path) -> None:
    """create=False or read_only on a missing path: LedgerNotFoundError, nothing created."""
    for kwargs in ({"create": False}, {"read_only": True}):
        with pytest.raises(LedgerNotFoundError) as caught:
            Ledger.open(tmp_path / "sub" / "ledger.db", **kwargs)
        assert isinstance(caught.value, FileNotFoundError)
    assert not (tmp_path / "sub").exists()


def test_empty_file_becomes_a_ledger(tmp_path: Path) -> None:
    """A zero-byte file (e.g. made by touch) is initialised as a new ledger."""
    path = tmp_path / "ledger.db"
    path.touch()
    with Ledger.open(path) as ledger:
        add_turn(ledger, "t1")
        assert ledger.verify().ok


def test_unwritable_folder_is_a_write_error(tmp_path: Path) -> None:
    """A ledger path under a regular file cannot be created: LedgerWriteError naming it."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LedgerWriteError, match="cannot create"):
        Ledger.open(blocker / "ledger.db")


def test_undecodable_record_is_corrupt_on_read(tmp_path: Path) -> None:
    """A payload edited into non-JSON raises LedgerCorruptError naming the seq on read."""
    path = tmp_path / "ledger.db"
    build(path, 2)
    with raw(path) as conn:
        conn.execute("UPDATE records SET payload = x'7b7b' WHERE seq = 2")
    with Ledger.open(path) as ledger:
        assert ledger.turn("t01") is not None
        with pytest.raises(LedgerCorruptError, match="seq 2"):
            ledger.turn("t02")


def test_sqlite_errors_never_leak(tmp_path: Path) -> None:
    """Every SQLite error the ledger meets is translated (from exc), none raised raw."""
    path = tmp_path / "ledger.db"
    build(path, 1)
    with raw(path) as conn:
        conn.execute("UPDATE records SET time = CAST(x'ff' AS TEXT) WHERE seq = 1")
    with Ledger.open(path) as ledger, pytest.raises(LedgerError) as caught:
        list(ledger.records())
    assert not isinstance(caught.value, sqlite3.Error)
    assert isinstance(caught.value.__cause__, sqlite3.Error)


@pytest.mark.parametrize("damage", ["zero_page", "truncate"])
def test_a_damaged_ledger_is_called_damaged(tmp_path: Path, damage: str) -> None:
    """A ledger with a page zeroed or cut to half its size is a damaged ledger (restore it
    from a backup), not a foreign file; verify reports it as a failed check."""
    path = tmp_path / "ledger.sqlite"
    build(path, 60)
    with raw(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    size = path.stat().st_size
    with path.open("r+b") as f:
        if damage == "zero_page":
            f.seek(page * 3)
            f.write(b"\0" * page)
        else:
            f.truncate(size // 2)
    try:
        with Ledger.open(path, create=False) as ledger:
            report = ledger.verify(blobs=True)
        said = report.reason
        assert not report.ok
    except LedgerCorruptError as exc:  # damage that SQLite meets while opening
        said = str(exc)
    assert "damaged" in said and "backup" in said and "not a cortex ledger" not in said, said
