"""MetaStore: chunk records round-trip exactly; schema mismatches are refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine import IndexSchemaError
from engine.segment import FileRecord, MetaStore
from indexers import WordCounter, chunk_file


def _record(path: str, n: int) -> FileRecord:
    return FileRecord(path, "0" * 64, 10, 0, "p" * 32, "python", "implementation", "MIT", 3, n, 5)


def test_chunks_round_trip_exactly(tmp_path: Path) -> None:
    """Every field of a chunk comes back equal, even text with NUL, colons and unicode."""
    data = "class K:\n    def m(self):\n        return '\\x00:é:中'\n".encode()
    data = data.replace(b"\\x00", b"\x00")
    chunks = chunk_file("k.py", data, counter=WordCounter()).chunks
    store = MetaStore(tmp_path / "meta.sqlite")
    with store.transaction():
        store.put_file(_record("k.py", len(chunks)), chunks)
    got = store.chunks([c.id for c in chunks])
    assert [got[c.id] for c in chunks] == list(chunks)
    assert "\x00" in got[chunks[-1].id].text
    assert store.chunks_of("k.py") == sorted(chunks, key=lambda c: c.span)


def test_remove_paths_forgets_chunks(tmp_path: Path) -> None:
    """Removing a path removes its file record and chunks."""
    chunks = chunk_file("a.py", b"def f():\n    pass\n", counter=WordCounter()).chunks
    store = MetaStore(tmp_path / "meta.sqlite")
    with store.transaction():
        store.put_file(_record("a.py", 1), chunks)
    with store.transaction():
        store.remove_paths(["a.py"])
    assert store.chunks([c.id for c in chunks]) == {} and store.files() == {}


def test_failed_transaction_rolls_back(tmp_path: Path) -> None:
    """An exception inside a transaction leaves nothing written."""
    chunks = chunk_file("a.py", b"def f():\n    pass\n", counter=WordCounter()).chunks
    store = MetaStore(tmp_path / "meta.sqlite")
    with pytest.raises(RuntimeError), store.transaction():
        store.put_file(_record("a.py", 1), chunks)
        raise RuntimeError("boom")
    assert store.files() == {}


def test_other_schema_is_refused(tmp_path: Path) -> None:
    """A store written by another schema version names the rebuild command."""
    path = tmp_path / "meta.sqlite"
    MetaStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE info SET value = '999' WHERE key = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(IndexSchemaError, match="--rebuild"):
        MetaStore(path)


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    """A file that is not SQLite gives IndexSchemaError, not a crash."""
    path = tmp_path / "meta.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(IndexSchemaError):
        MetaStore(path)


def test_a_failed_write_says_what_failed_and_keeps_what_was_there(tmp_path: Path) -> None:
    """A disk or I/O error inside the update's transaction (SQLite may have rolled it back
    itself) is an IndexStateError saying so, not "cannot rollback"; the data before stays."""
    from engine.core import IndexStateError

    meta = MetaStore(tmp_path / "meta.sqlite")
    meta.set_info("kept", "yes")
    with pytest.raises(IndexStateError, match=r"disk I/O error.*still answers"), meta.transaction():
        meta.set_info("kept", "no")
        raise sqlite3.OperationalError("disk I/O error")
    assert meta.get_info("kept") == "yes"


def test_an_unwritable_state_folder_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state folder the lock cannot be written in is an IndexStateError naming it and
    CORTEX_STATE_DIR (it was a PermissionError traceback)."""
    import os

    from engine.core import IndexStateError
    from engine.index import WriterLock

    def refused(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refused)
    with pytest.raises(IndexStateError, match=r"cannot write the state folder.*CORTEX_STATE_DIR"):
        WriterLock(tmp_path / "state" / "lock").acquire()
