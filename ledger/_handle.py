"""The ledger's open connection, following its path when the file there is replaced.

A SQLite connection stays with the file it opened (its inode): once the ledger was rotated
(``Ledger.rotate``, in this process or another, or moved aside by hand), a connection opened
before would go on reading, and appending to, the file moved aside. So each read checks
that the path still names the file opened (one ``stat``: device and inode), and each write
checks again once it holds SQLite's write lock, which a rotation holds while it moves the
files: a write that finds another file there rolls back, closes the old connection (SQLite
sees its file moved and leaves the moved write-ahead log alone) and opens the path again.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ledger._errors import LedgerWriteError
from ledger._sqlite import FileId, translate_errors

__all__ = ["FOLLOW_TRIES", "Handle", "snapshot"]

# Opens of the path before a write gives up: each one found the file replaced again by the
# time it held the lock, which takes rotations back to back, one per try.
FOLLOW_TRIES = 3

Opener = Callable[[], tuple[sqlite3.Connection, FileId | None]]


class Handle:
    """One ledger connection shared by threads (under one lock), reopened when the path
    names another file than the one it opened."""

    def __init__(self, path: Path, opener: Opener, busy_timeout: float) -> None:
        """Open the path with ``opener`` (``ledger._sqlite.connect`` with the ledger's
        options), which returns the connection and the file it opened."""
        self.path = path
        self._where = os.fspath(path)  # stat'ed on every read: no Path conversion each time
        self._opener = opener
        self._busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None
        self._conn, self._file = opener()
        self._closed = False

    def file_id(self) -> FileId | None:
        """(device, inode) of the file the path names, opened: the one a rotation put
        there, once one did (one ``stat``, and an open after a rotation)."""
        with self.reading("open"):
            return self._file

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``ValueError``."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def reading(self, action: str) -> Iterator[sqlite3.Connection]:
        """The connection to the file the path names now, for reads (and ``put_text``)."""
        with self._lock, translate_errors(self.path, action, self._busy_timeout):
            if self._moved():
                self._reopen()
            yield self._live()

    @contextmanager
    def writing(self, action: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the file the path names, checked once
        the write lock is held; committed when the block ends, rolled back if it raises."""
        with self._lock, translate_errors(self.path, action, self._busy_timeout):
            conn = self._begin()
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself after some errors (SQLITE_FULL among them).
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def _begin(self) -> sqlite3.Connection:
        for _ in range(FOLLOW_TRIES):
            conn = self._live()
            conn.execute("BEGIN IMMEDIATE")
            if not self._moved():
                return conn
            conn.execute("ROLLBACK")
            self._reopen()
        raise LedgerWriteError(
            f"cannot write to the ledger {self.path}: it was replaced {FOLLOW_TRIES} times "
            "while this write waited (rotations back to back?); try again"
        )

    def _moved(self) -> bool:
        """Whether the path names another file than the one open (or none)."""
        try:
            # os.stat on a str is ~40% cheaper than Path.stat, and this runs on every read.
            st = os.stat(self._where)  # noqa: PTH116
        except FileNotFoundError:
            return True
        except OSError:  # cannot tell: keep the file open
            return False
        return (st.st_dev, st.st_ino) != self._file

    def _reopen(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._conn, self._file = self._opener()

    def _live(self) -> sqlite3.Connection:
        if self._closed:
            raise ValueError(f"the ledger {self.path} is closed")
        if self._conn is None:  # an earlier reopen failed (the path held no ledger then)
            self._conn, self._file = self._opener()
        return self._conn


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: a record checked against its neighbours and the head sees
    them as of one commit, even while another process appends."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")
