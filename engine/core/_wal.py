"""Folding a SQLite write-ahead log into its file, waiting out readers for a while.

After a ``VACUUM`` that dropped text (a purge, a forget), the old pages that still hold it
stay in the main file until the WAL is checkpointed over them; another process inside a
read transaction keeps them in use, and SQLite then reports the checkpoint busy rather
than failing. Callers must look at that answer, never assume the bytes are gone.
"""

from __future__ import annotations

import sqlite3
import time

__all__ = ["FOLD_WAIT_S", "fold_wal"]

# A read (a replay, a search, a verify of a large file) lasts seconds; one still open after
# 30 s is held open on purpose, and waiting longer would not help.
FOLD_WAIT_S = 30.0
_RETRY_S = 0.2  # between checkpoints that found a reader still in the old pages


def fold_wal(db: sqlite3.Connection, wait: float | None = None) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)``, retried for ``wait`` seconds while another
    connection's read keeps it from finishing (default ``FOLD_WAIT_S``); True once every
    page is in the main file and the WAL is empty, False if a reader still holds old pages
    at the end."""
    deadline = time.monotonic() + (FOLD_WAIT_S if wait is None else wait)
    timeout = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
    try:
        while True:  # the checkpoint itself waits for readers up to busy_timeout
            left = max(0.0, deadline - time.monotonic())
            db.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")
            if not int(db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_RETRY_S)
    finally:
        db.execute(f"PRAGMA busy_timeout = {timeout}")
