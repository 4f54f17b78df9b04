"""The ledger's SQLite file: schema, opening it, and SQLite's errors in the ledger's terms.

One table holds every record of the chain in ``seq`` order; a one-row ``head`` table holds
the record count and the last hash, updated in the same transaction as each append, so a
deleted last record is detectable. ``application_id`` marks the file as a cortex ledger and
``user_version`` is its schema version, so a foreign or newer file is refused before any
table is read.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeAlias

from ledger._codec import GENESIS_HASH
from ledger._errors import (
    LedgerCorruptError,
    LedgerError,
    LedgerNotFoundError,
    LedgerSchemaError,
    LedgerWriteError,
)

__all__ = [
    "APPLICATION_ID",
    "FOLD_WAIT_S",
    "PURGED_TABLE",
    "SCHEMA_VERSION",
    "FileId",
    "OpenLock",
    "connect",
    "file_id",
    "fold_wal",
    "has_table",
    "translate_errors",
]

FileId: TypeAlias = tuple[int, int]
"""(device, inode): which file a path named when it was opened."""

APPLICATION_ID = 0x43585447  # "CXTG": written in the file header, marks a cortex ledger
SCHEMA_VERSION = 1
_JOURNAL_LIMIT = 4 << 20  # truncate the WAL back to this after checkpoints (not left at peak)
_LOCK_POLL_S = 0.005  # between tries of the open lock: it is held for milliseconds, or a rotation

# Texts removed by a purge: the blob's name stays, its bytes are replaced by a marked text
# whose sha256 the purge record (in the chain) names. Created on first purge in ledgers
# made before purges existed, so their schema number is unchanged.
PURGED_TABLE = """CREATE TABLE IF NOT EXISTS purged (
    sha256 TEXT PRIMARY KEY,  -- the name of the text that was removed
    seq INTEGER NOT NULL,  -- the purge record that removed it
    replacement_sha256 TEXT NOT NULL,
    data BLOB NOT NULL  -- zlib of the replacement (the text with the purged parts marked)
    )"""

# Types are pinned with CHECKs: SQLite would otherwise let an edit store 5 where "5" was and
# still hash the same, and verification reads these columns' bytes as the hashed text.
_SCHEMA = (
    """CREATE TABLE records (
    seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (typeof(kind) = 'text'),
    turn_id TEXT CHECK (turn_id IS NULL OR typeof(turn_id) = 'text'),
    time TEXT NOT NULL CHECK (typeof(time) = 'text'),
    payload BLOB NOT NULL CHECK (typeof(payload) = 'blob'),
    prev_hash TEXT NOT NULL CHECK (typeof(prev_hash) = 'text'),
    record_hash TEXT NOT NULL CHECK (typeof(record_hash) = 'text'),
    replay_key TEXT  -- a copy of the turn payload's key, for lookup (reads cross-check it)
    )""",
    "CREATE INDEX records_turn ON records (turn_id, seq)",
    "CREATE INDEX records_kind ON records (kind, seq)",
    "CREATE UNIQUE INDEX records_turn_once ON records (turn_id) WHERE kind = 'turn'",
    "CREATE INDEX records_replay ON records (replay_key, seq) WHERE replay_key IS NOT NULL",
    """CREATE TABLE head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    count INTEGER NOT NULL,
    last_hash TEXT NOT NULL
    )""",
    """CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,  -- bytes of UTF-8 before compression
    data BLOB NOT NULL  -- zlib
    )""",
    PURGED_TABLE,
)

_REFUSE_FOREIGN = "it is not a cortex ledger; point cortex at another path"
# A ledger's file SQLite finds malformed: a damaged disk or a partial copy, not tampering
# that the chain can name. Its records cannot be trusted or read past the damage.
_DAMAGED = (
    "the ledger file is damaged (a failing disk, a partial copy or an edit of the file "
    "itself); restore {path} from a backup, and keep the damaged copy as evidence "
    "(`cortex ledger rotate --broken` moves it aside and starts a new ledger)"
)
_START_NEW = (
    "To start a new ledger, move {path} aside (keep it if you need its history: "
    "`cortex ledger rotate --broken` does); a new ledger is created there on next use"
)


def connect(
    path: Path, *, create: bool, read_only: bool, busy_timeout: float, max_pages: int | None
) -> tuple[sqlite3.Connection, FileId | None]:
    """Open (and on first use create) the ledger file, checking it is a ledger of our schema;
    return the connection and the file it opened (``file_id``), taken under the open lock,
    so a rotation cannot slip between the two.

    Raises ``LedgerNotFoundError``, ``LedgerCorruptError`` (not a ledger),
    ``LedgerSchemaError`` (another version) or ``LedgerWriteError`` (cannot create it).
    """
    writable = create and not read_only
    if writable and not path.parent.is_dir():
        try:  # a folder made here is its owner's alone
            path.parent.mkdir(parents=True, exist_ok=True)
            path.parent.chmod(0o700)
        except OSError as exc:
            raise LedgerWriteError(f"cannot create the ledger {path}: {exc}") from exc
    lock = OpenLock(path, create=writable)
    try:
        lock.take(exclusive=False, wait=busy_timeout)
        conn = _connect(path, lock, create=create, read_only=read_only,
                        busy_timeout=busy_timeout, max_pages=max_pages)  # fmt: skip
        return conn, file_id(path)
    finally:
        lock.release()


def file_id(path: Path) -> FileId | None:
    """(device, inode) of the file ``path`` names now; None when it names none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class OpenLock:
    """An ``flock`` on a file beside the ledger: by default ``<ledger>.init``, shared while a
    process opens the ledger, exclusive while one creates it or a rotation swaps its files,
    so that no process opens a half-moved set (a ledger without its write-ahead log, a new
    ledger beside the old log) or creates a ledger of its own where a rotation is about to
    put one. Another ``suffix`` serialises another step across processes (``doing`` and
    ``holder`` name it in the error a wait past its time gets).

    In a folder no one may write (an auditor's read-only copy) the file may be absent and
    cannot be made: no lock is taken there, and none is needed, as nothing can move."""

    def __init__(self, path: Path, *, create: bool, suffix: str = ".init",
                 doing: str = "open the ledger",
                 holder: str = "creating or rotating the ledger") -> None:  # fmt: skip
        self.path = Path(f"{path}{suffix}")
        self._ledger = path
        self._doing, self._holder = doing, holder
        self._fd: int | None = None
        for flags in ([os.O_RDWR | os.O_CREAT] if create else []) + [os.O_RDONLY]:
            try:
                self._fd = os.open(self.path, flags, 0o600)
                break
            except OSError:
                continue

    def take(self, *, exclusive: bool, wait: float) -> None:
        """Take (or convert to) the shared or exclusive lock, waiting up to ``wait`` s."""
        if self._fd is None:
            return
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self._fd, mode)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LedgerWriteError(
                        f"cannot {self._doing} {self._ledger}: another process held "
                        f"{self.path.name} for more than {wait:g} s ({self._holder})"
                    ) from None
                time.sleep(_LOCK_POLL_S)

    def release(self) -> None:
        """Release the lock and its file (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _connect(
    path: Path,
    lock: OpenLock,
    *,
    create: bool,
    read_only: bool,
    busy_timeout: float,
    max_pages: int | None,
) -> sqlite3.Connection:
    """``connect``'s work, under the shared open lock."""
    if not path.exists():
        if read_only or not create:
            raise LedgerNotFoundError(f"no ledger at {path}")
        try:
            # The file is its owner's alone, whatever the umask (it holds the prompts a model
            # saw): SQLite makes its -wal and -shm files with the mode of the database file.
            with suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError as exc:
            raise LedgerWriteError(f"cannot create the ledger {path}: {exc}") from exc
    # A read-only copy (an auditor's, a CI artefact) in a folder no one may write: SQLite
    # cannot make the WAL's shared-memory file there, so it reads the file as immutable;
    # when a write-ahead log holds commits the file lacks, it reads a private copy of both
    # with the log folded in (the copy goes once opened: the open file stays readable).
    immutable = read_only and not os.access(path.parent, os.W_OK)
    source = path
    if immutable and _wal_frames(path):
        with translate_errors(path, "open"):
            source = _folded_copy(path)
    with translate_errors(path, "open"):
        conn = sqlite3.connect(
            _uri(source, read_only=read_only, immutable=immutable),
            uri=True,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
    try:
        with translate_errors(path, "open", busy_timeout):
            if not read_only and _header(conn) == (0, 0):
                # Possibly a brand-new file that another process is creating too: create it
                # under the exclusive lock, on a fresh connection that sees the winner's header.
                conn.close()
                lock.take(exclusive=True, wait=busy_timeout)
                conn = sqlite3.connect(
                    _uri(path, read_only=False),
                    uri=True,
                    timeout=busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                _init_with_retry(conn, path, read_only=False, busy_timeout=busy_timeout)
            else:
                _init_with_retry(conn, path, read_only=read_only, busy_timeout=busy_timeout)
            # WAL + NORMAL: a commit survives a process crash (kill -9); only a power cut can
            # lose the newest commits, and then whole ones, so the chain stays valid.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA journal_size_limit={_JOURNAL_LIMIT}")
            if max_pages is not None:
                conn.execute(f"PRAGMA max_page_count={int(max_pages)}")
    except BaseException:
        conn.close()
        raise
    finally:
        if source != path:  # the copy is open (and read): its folder can go
            shutil.rmtree(source.parent, ignore_errors=True)
    return conn


def _init_with_retry(
    conn: sqlite3.Connection, path: Path, *, read_only: bool, busy_timeout: float
) -> None:
    """``_check_or_init``, retried while another process creates the same new file.

    Two processes opening a brand-new ledger race to switch it to WAL and create the
    schema; SQLite reports the loser's lock upgrade as "database is locked" at once
    (without waiting: waiting could deadlock), so the loser waits briefly and reads the
    schema the winner wrote.
    """
    deadline = time.monotonic() + busy_timeout
    delay = 0.01
    while True:
        try:
            _check_or_init(conn, path, read_only=read_only)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _uri(path: Path, *, read_only: bool, immutable: bool = False) -> str:
    """The SQLite URI for ``path`` (a URI, so ``mode=ro`` can be asked for)."""
    return (f"{path.absolute().as_uri()}?mode={'ro' if read_only else 'rwc'}"
            + ("&immutable=1" if immutable else ""))  # fmt: skip


def _folded_copy(path: Path) -> Path:
    """A copy of ``path`` and its write-ahead log in a private temporary folder, the log
    checkpointed into it, to be read as immutable; the folder is removed after opening."""
    folder = Path(tempfile.mkdtemp(prefix="cortex-ledger-"))
    copy = folder / path.name
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        conn = sqlite3.connect(copy, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise sqlite3.OperationalError(
            f"it has a write-ahead log and its folder is read-only, and a copy to read could "
            f"not be made in {folder.parent} ({exc}): copy the ledger and its -wal file to a "
            "writable folder, or checkpoint the source first"
        ) from exc
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return copy


def _wal_frames(path: Path) -> bool:
    """Whether ``path``'s write-ahead log holds anything."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def _check_or_init(conn: sqlite3.Connection, path: Path, *, read_only: bool) -> None:
    app_id, version = _header(conn)
    if app_id == 0 and version == 0 and _has_tables(conn) and not read_only:
        # Tables but no header yet: another process may be creating this ledger right now.
        # Its transaction sets both; once we can take the write lock, the header is final.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        app_id, version = _header(conn)
    if app_id == 0 and version == 0:
        if _has_tables(conn):
            raise LedgerCorruptError(f"{path} is an SQLite database but {_REFUSE_FOREIGN}")
        if read_only:
            raise LedgerCorruptError(f"{path} is an empty file, not a ledger yet")
        # journal_mode is persistent in the file and cannot change inside a transaction.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have created it between our read and our lock.
            app_id, version = _header(conn)
            if app_id == 0 and version == 0 and not _has_tables(conn):
                # Not executescript: it would COMMIT first and leave the lock.
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("INSERT INTO head (id, count, last_hash) VALUES (1, 0, ?)",
                             (GENESIS_HASH,))  # fmt: skip
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        app_id, version = _header(conn)
    if app_id != APPLICATION_ID:
        raise LedgerCorruptError(
            f"{path} has SQLite application_id {app_id:#x}, not {APPLICATION_ID:#x}: "
            + _REFUSE_FOREIGN
        )
    if version != SCHEMA_VERSION:
        raise LedgerSchemaError(
            f"{path} is a ledger of schema {version}; this cortex reads schema "
            f"{SCHEMA_VERSION}. " + _START_NEW.format(path=path)
        )


def _header(conn: sqlite3.Connection) -> tuple[int, int]:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return int(app_id), int(version)


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has table ``name`` (``purged`` exists only after a first purge)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None


@contextmanager
def translate_errors(path: Path, action: str, busy_timeout: float | None = None) -> Iterator[None]:
    """Turn SQLite's errors inside the block into the ledger's, naming the file and cause."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, path, action, busy_timeout) from exc


def _translate(
    exc: sqlite3.Error, path: Path, action: str, busy_timeout: float | None
) -> LedgerError:
    code = getattr(exc, "sqlite_errorcode", -1) & 0xFF
    text = str(exc)
    where = f"cannot {action} the ledger {path}"
    if code == sqlite3.SQLITE_FULL or "is full" in text:
        return LedgerWriteError(f"{where}: the disk is full, or the ledger hit its size limit")
    if code == sqlite3.SQLITE_READONLY or "readonly" in text:
        return LedgerWriteError(
            f"{where}: it is read-only (opened read-only, or its file or file system does not "
            "allow writing)"
        )
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in text:
        waited = "" if busy_timeout is None else f" for more than {busy_timeout:g} s"
        return LedgerWriteError(f"{where}: another process held it locked{waited}")
    if code in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
        return LedgerWriteError(f"{where}: {text}")
    if code == sqlite3.SQLITE_CORRUPT or "malformed" in text:
        return LedgerCorruptError(f"{where}: SQLite says {text!r}: {_DAMAGED.format(path=path)}")
    if code == sqlite3.SQLITE_NOTADB or "not a database" in text:
        return LedgerCorruptError(
            f"{where}: SQLite says {text!r}, so {_REFUSE_FOREIGN} (if it was one, its first "
            f"page is damaged: {_DAMAGED.format(path=path)})"
        )
    if "decode" in text:  # TEXT bytes that are not UTF-8: only an edit of the file does that
        return LedgerCorruptError(f"{where}: a stored text is not UTF-8 ({text}); run verify")
    return LedgerError(f"{where}: {type(exc).__name__}: {text}")


# Folding the write-ahead log into the file after a VACUUM that dropped text (a purge, a
# forget): another process inside a read keeps the old pages in use, and SQLite then says
# the checkpoint is busy rather than failing, so callers must look at the answer.
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
