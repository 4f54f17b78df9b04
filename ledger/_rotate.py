"""Rotating the ledger: the file moved aside, closed, and a new chain that names it.

``rotate_file`` (``Ledger.rotate``) moves the ledger file, its write-ahead log and
shared-memory files, and the files folded from it that the caller names (the engine's
salience tables), aside to ``<stem>.<rotated|broken>-<UTC time><suffix>`` beside it, folds
the log into the moved file, makes it read-only (0400), and puts a new ledger in its place
whose first record (kind ``continues``) names the moved file: its name, the last record of
its chain that verifies (seq, hash), its size and sha256, whether it verified (and why
not) and why it was rotated.

Two locks make the move safe while other processes use the ledger:

- SQLite's write lock on the old file, held from reading its head to moving its files, so
  no append lands after the head the new chain names; a process that appends later finds,
  once it holds that lock, that the path names another file, and opens it
  (``ledger._handle``);
- the exclusive open lock (``<ledger>.init``, ``ledger._sqlite.OpenLock``) from the move
  until the new ledger is in place, so no process opens a half-moved set of files or
  creates a ledger of its own at the path meanwhile.

A process running a cortex from before this check does not look: stop such servers before
rotating, or their appends land in the file moved aside.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from ledger._chain import link
from ledger._codec import GENESIS_HASH, canonical_json, decode_row, now_utc
from ledger._errors import (
    LedgerCorruptError,
    LedgerNotFoundError,
    LedgerRotateError,
    LedgerSchemaError,
    LedgerWriteError,
)
from ledger._records import (
    JournalEntry,
    PreviousLedger,
    RecordKind,
    RotateReason,
    VerifyReport,
    check_time,
)
from ledger._sqlite import OpenLock, connect, fold_wal, translate_errors
from ledger._verify import as_str, chain_head, check_chain, verify_chain

__all__ = ["ROTATE_FOLD_WAIT_S", "Rotation", "aside_path", "previous_problem", "rotate_file"]

# How long the moved file's write-ahead log waits to be folded in for a reader of it (a
# process that has not looked yet) to finish; past it the log is kept beside it, moved too.
ROTATE_FOLD_WAIT_S = 5.0
_SIDECARS = ("-wal", "-shm")  # SQLite's files beside a WAL database, moved with it
_CHUNK = 1 << 20  # bytes read at a time to hash the moved file
_READ_ONLY = 0o400
_OWNER_ONLY = 0o600


@dataclass(frozen=True, slots=True)
class Rotation:
    """What ``Ledger.rotate`` did: the files it moved aside, as (from, to) (a log folded
    into its file on the way is not listed), the ledger the new chain continues as its
    first record names it, and that record."""

    moved: tuple[tuple[Path, Path], ...]
    previous: PreviousLedger
    first: JournalEntry


def aside_path(path: Path, reason: RotateReason, time: str) -> Path:
    """Where ``rotate`` moves the ledger at ``path`` at ``time`` (ISO 8601 UTC):
    ``ledger.sqlite`` becomes ``ledger.rotated-20260131T101502Z.sqlite`` (or ``broken-``)."""
    stamp = time[:19].replace("-", "").replace(":", "") + "Z"
    label = "rotated" if reason is RotateReason.ROTATE else "broken"
    return path.with_name(f"{path.stem}.{label}-{stamp}{path.suffix}")


def rotate_file(
    path: Path,
    *,
    broken: bool,
    also: tuple[Path, ...],
    anchor: tuple[int, str] | None,
    busy_timeout: float,
    time: str | None,
) -> Rotation:
    """``Ledger.rotate``: check, lock, move aside, fold, hash, start the new chain."""
    reason = RotateReason.BROKEN if broken else RotateReason.ROTATE
    stamp = time or now_utc()
    check_time(stamp)
    aside = aside_path(path, reason, stamp)
    plan = _plan(path, aside, also)
    if not path.exists():
        raise LedgerNotFoundError(f"no ledger at {path}: nothing to rotate")
    _refuse_taken(plan)
    conn, unreadable = _open(path, busy_timeout)
    lock = OpenLock(path, create=True)
    try:
        ends = _ends(conn)
        report = _walk(conn, path, anchor, unreadable)  # the long part, while others append
        _refuse(path, reason, report)
        if conn is not None:
            with suppress(sqlite3.Error):  # a small log to move, most likely none
                fold_wal(conn, 0)
        lock.take(exclusive=True, wait=busy_timeout)
        held = conn is not None and _begin(conn, path, busy_timeout, required=report.ok)
        if held and _ends(conn) != ends:  # appended to while it was walked: again, held
            report = _walk(conn, path, anchor, unreadable, held=True)
            _refuse(path, reason, report)
        seq, last = _last_sound(conn, report)
        _refuse_taken(plan)
        moved = _move(plan)
        try:
            if conn is not None:  # SQLite sees its file moved: it leaves the moved log be
                conn.close()
                conn = None
            _fold(aside, busy_timeout)
            kept = tuple((a, b) for a, b in moved if _lexists(b))
            for _, to in kept:
                to.chmod(_READ_ONLY)
            size, digest = file_digest(aside)
            previous = PreviousLedger(aside.name, seq, last, size, digest, report.ok, reason,
                                      "" if report.ok else report.reason)  # fmt: skip
            first = _start(path, previous, stamp, busy_timeout)
        except BaseException:
            _undo(moved)
            raise
        return Rotation(kept, previous, first)
    finally:
        if conn is not None:
            conn.close()
        lock.release()


def previous_problem(path: Path, previous: PreviousLedger) -> str | None:
    """What is wrong with the file a chain continues (beside ``path``) against what its
    ``continues`` record names: gone, another size or sha256, no record ``seq`` with that
    hash; None when it matches."""
    old = path.with_name(previous.file)
    if not old.is_file():
        return f"the ledger this chain continues, {old}, is not there"
    size, digest = file_digest(old)
    if (size, digest) != (previous.size, previous.sha256):
        return (f"{old} is not the file moved aside: {size:,} bytes with sha256 {digest}, where "
                f"the continues record names {previous.size:,} bytes with sha256 "
                f"{previous.sha256}")  # fmt: skip
    if previous.seq == 0:
        return None
    # Immutable: reading the evidence writes nothing beside it (unless a log was kept there).
    folded = not Path(f"{old}-wal").exists()
    uri = f"{old.absolute().as_uri()}?mode=ro" + ("&immutable=1" if folded else "")
    try:
        db = sqlite3.connect(uri, uri=True)
        try:
            row = db.execute("SELECT CAST(record_hash AS BLOB) FROM records WHERE seq = ?",
                             (previous.seq,)).fetchone()  # fmt: skip
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"{old} cannot be read to find record seq {previous.seq}: {exc}"
    if row is None or as_str(row[0]) != previous.hash:
        return f"{old} holds no record seq {previous.seq} with hash {previous.hash}"
    return None


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, sha256) of the file."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _plan(path: Path, aside: Path, also: tuple[Path, ...]) -> list[tuple[Path, Path]]:
    """Every (from, to) name a rotation may move: each file's log and shared memory first
    (a file left without its log is an older state; a log left without its file would be
    read into whatever file takes the name next), then the file."""
    pairs = [(path, aside)]
    for extra in also:
        if extra.parent.absolute() != path.parent.absolute():
            raise ValueError(f"{extra} is not beside the ledger {path}: it cannot move with it")
        tail = extra.name.removeprefix(path.stem) if extra.name.startswith(f"{path.stem}.") \
            else f".{extra.name}"  # fmt: skip
        pairs.append((extra, aside.with_name(aside.stem + tail)))
    return [(Path(f"{a}{s}"), Path(f"{b}{s}")) for a, b in pairs for s in (*_SIDECARS, "")]


def _refuse_taken(plan: list[tuple[Path, Path]]) -> None:
    taken = [str(b) for _, b in plan if _lexists(b)]
    if taken:
        raise LedgerRotateError(
            f"{', '.join(taken)} already exist(s): a rotation never overwrites a file; nothing "
            "was moved (try again in a second, or move that file away)"
        )


def _open(path: Path, busy_timeout: float) -> tuple[sqlite3.Connection | None, str]:
    """The old ledger's connection, or None and why when SQLite cannot read it as a ledger
    of this schema (damaged, another schema, not a ledger): then it can only go as broken."""
    try:
        conn, _ = connect(path, create=False, read_only=False, busy_timeout=busy_timeout,
                          max_pages=None)  # fmt: skip
    except (LedgerCorruptError, LedgerSchemaError) as exc:
        return None, str(exc)
    return conn, ""


def _ends(conn: sqlite3.Connection | None) -> object:
    """The head row and the last record: what an append changes."""
    if conn is None:
        return None
    try:
        return (conn.execute("SELECT count, last_hash FROM head WHERE id = 1").fetchall(),
                conn.execute("SELECT seq, record_hash FROM records ORDER BY seq DESC LIMIT 1"
                             ).fetchall())  # fmt: skip
    except sqlite3.Error:
        return None


def _walk(
    conn: sqlite3.Connection | None,
    path: Path,
    anchor: tuple[int, str] | None,
    unreadable: str,
    *,
    held: bool = False,
) -> VerifyReport:
    """The chain's check as ``cortex ledger verify`` makes it (stored texts too)."""
    if conn is None:
        return VerifyReport(False, 0, None, None, unreadable)
    try:
        with translate_errors(path, "verify"):
            if held:
                return check_chain(conn, blobs=True, anchor=anchor)
            return verify_chain(conn, blobs=True, anchor=anchor)
    except LedgerCorruptError as exc:
        return VerifyReport(False, 0, None, None, str(exc))


def _refuse(path: Path, reason: RotateReason, report: VerifyReport) -> None:
    if reason is RotateReason.ROTATE and not report.ok:
        raise LedgerRotateError(
            f"the ledger {path} does not verify ({report.reason}), so it is not rotated as "
            "a closed chain; nothing was moved. To keep it as evidence and start a new "
            "chain: `cortex ledger rotate --broken`"
        )
    if reason is RotateReason.BROKEN and report.ok:
        raise LedgerRotateError(
            f"the ledger {path} verifies ({report.reason}), so it is not moved aside as "
            "broken; nothing was moved. Rotate it without --broken (or with --anchor, the "
            "head it fails to hold)"
        )


def _begin(conn: sqlite3.Connection, path: Path, busy_timeout: float, *, required: bool) -> bool:
    """Take SQLite's write lock on the old file; a damaged file may refuse it (False), and
    then nobody can append to it either."""
    try:
        with translate_errors(path, "lock", busy_timeout):
            conn.execute("BEGIN IMMEDIATE")
    except LedgerCorruptError:
        if required:
            raise
        return False
    return True


def _last_sound(conn: sqlite3.Connection | None, report: VerifyReport) -> tuple[int, str]:
    """(seq, hash) of the chain's head when it verified, else of the last record before
    the first bad one; (0, zeros) when none can be read."""
    if conn is None:
        return 0, GENESIS_HASH
    try:
        if report.ok:
            return chain_head(conn)
        bad = report.first_bad_seq if report.first_bad_seq is not None else report.checked + 1
        seq = max(0, min(report.checked, bad - 1))
        row = conn.execute("SELECT CAST(record_hash AS BLOB) FROM records WHERE seq = ?",
                           (seq,)).fetchone()  # fmt: skip
    except sqlite3.Error:
        return 0, GENESIS_HASH
    return (seq, as_str(row[0])) if row is not None else (0, GENESIS_HASH)


def _move(plan: list[tuple[Path, Path]]) -> list[tuple[Path, Path]]:
    """Move each existing file to its name aside, never over another file: a hard link
    (which fails on a name taken) and an unlink, or a rename where links are not
    supported. On failure, what was moved goes back."""
    done: list[tuple[Path, Path]] = []
    for src, dst in plan:
        if not _lexists(src):
            continue
        try:
            try:
                os.link(src, dst)
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links; we hold the open lock
                if _lexists(dst):
                    raise FileExistsError(dst) from None
                src.rename(dst)
            else:
                src.unlink()
        except OSError as exc:
            _undo(done)
            if isinstance(exc, FileExistsError):
                raise LedgerRotateError(f"{dst} already exists: nothing was moved") from exc
            raise LedgerWriteError(f"cannot move {src} aside to {dst}: {exc}") from exc
        done.append((src, dst))
    return done


def _undo(moved: list[tuple[Path, Path]]) -> None:
    """Put moved files back (a rotation that failed after the move)."""
    for src, dst in reversed(moved):
        with suppress(OSError):
            if _lexists(dst) and not _lexists(src):
                dst.chmod(_OWNER_ONLY)
                dst.rename(src)


def _fold(aside: Path, busy_timeout: float) -> None:
    """Fold the moved file's log into it, so the file alone holds its chain (and its
    sha256 covers it all); a damaged file, or a reader that stays, keeps the log."""
    if not Path(f"{aside}-wal").exists():
        return
    with suppress(sqlite3.Error):
        db = sqlite3.connect(f"{aside.absolute().as_uri()}?mode=rw", uri=True,
                             timeout=busy_timeout, isolation_level=None)  # fmt: skip
        try:
            fold_wal(db, ROTATE_FOLD_WAIT_S)
        finally:
            db.close()  # the last connection to it: SQLite removes the empty log


def _start(path: Path, previous: PreviousLedger, time: str, busy_timeout: float) -> JournalEntry:
    """A new ledger at ``path`` whose one record names ``previous``: made under a hidden
    name beside it, closed (so it is one file), then linked into place."""
    temp = path.with_name(f".{path.name}.new-{os.getpid()}")
    _remove(temp)  # a leftover of a rotation that died here
    data = canonical_json(previous.payload())
    try:
        conn, _ = connect(temp, create=True, read_only=False, busy_timeout=busy_timeout,
                          max_pages=None)  # fmt: skip
        try:
            with translate_errors(temp, "start"):
                conn.execute("BEGIN IMMEDIATE")
                seq, prev, rec_hash = link(conn, temp, RecordKind.CONTINUES, None, time, data,
                                           None)  # fmt: skip
                conn.execute("COMMIT")
        finally:
            conn.close()
        os.link(temp, path)  # never over a ledger something else put there meanwhile
    except OSError as exc:
        raise LedgerWriteError(f"cannot put the new ledger at {path}: {exc}") from exc
    finally:
        _remove(temp)
    entry = decode_row((seq, RecordKind.CONTINUES.value, None, time, data, prev, rec_hash))
    assert isinstance(entry, JournalEntry)
    return entry


def _lexists(path: Path) -> bool:
    """Whether the name is taken (by a file, or a link to nothing)."""
    return path.is_symlink() or path.exists()


def _remove(temp: Path) -> None:
    for name in (temp, *(Path(f"{temp}{s}") for s in (*_SIDECARS, ".init"))):
        with suppress(FileNotFoundError):
            name.unlink()
