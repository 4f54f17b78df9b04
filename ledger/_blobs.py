"""Content-addressed texts: the exact UTF-8 bytes, stored once under their sha256, zlib-packed.

Snippet texts and rendered prompts live here, so a replay needs only the ledger. Every read
re-hashes the bytes, so a damaged or edited blob is reported, never returned. What a purge
left in a text's place is read through ``ledger._verify.load_stored``, which also checks
that a purge record in the chain names it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib

from ledger._errors import BlobNotFoundError, LedgerCorruptError
from ledger._sqlite import has_table

__all__ = [
    "PURGED_MARK",
    "blob_problem",
    "load_text",
    "purged_names",
    "purged_problem",
    "replace_text",
    "store_text",
    "text_page",
    "unpack_text",
]

# Level 6 (zlib's default) makes the ledger ~5% smaller than level 1 for ~0.2 ms more a turn
# (eval.bench_ledger); a blob is written once, and repeated texts are never recompressed.
_ZLIB_LEVEL = 6
PURGED_MARK = "[PURGED]"  # what a purge leaves where the removed text stood


def store_text(conn: sqlite3.Connection, text: str) -> str:
    """Store ``text`` unless already there; return its sha256 (of the UTF-8 bytes)."""
    data = text.encode("utf-8")
    sha = hashlib.sha256(data).hexdigest()
    # Look first: most snippet texts repeat across turns, and a hit costs no compression and
    # no write (so a read-only ledger still answers for texts it holds).
    if conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (sha,)).fetchone() is None:
        conn.execute(
            "INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
            (sha, len(data), zlib.compress(data, _ZLIB_LEVEL)),
        )
    return sha


def load_text(conn: sqlite3.Connection, sha256: str) -> str:
    """The text stored under ``sha256``, verified.

    Raises ``BlobNotFoundError`` when absent and ``LedgerCorruptError`` (naming the sha) when
    the stored bytes do not decompress or hash back to ``sha256``.
    """
    row = conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
    if row is None:
        raise BlobNotFoundError(f"no text stored under sha256 {sha256}")
    data = _unpack(sha256, row[0])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # hashes right, so stored so on purpose: not by us
        raise LedgerCorruptError(f"blob {sha256} is not UTF-8 text") from exc


def blob_problem(conn: sqlite3.Connection, sha256: str) -> str | None:
    """What is wrong with the blob ``sha256`` (missing, damaged, edited), or None if sound."""
    row = conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
    if row is None:
        return f"blob {sha256} is missing"
    try:
        _unpack(sha256, row[0])
    except LedgerCorruptError as exc:
        return str(exc)
    return None


def _unpack(sha256: str, packed: object) -> bytes:
    if not isinstance(packed, bytes):
        raise LedgerCorruptError(f"blob {sha256} is not stored as bytes: edited")
    try:
        data = zlib.decompress(packed)
    except zlib.error as exc:
        raise LedgerCorruptError(
            f"blob {sha256} does not decompress ({exc}): damaged or edited"
        ) from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise LedgerCorruptError(f"blob {sha256} does not hash to its name: damaged or edited")
    return data


def text_page(conn: sqlite3.Connection, after: str, batch: int = 256) -> list[tuple[str, str]]:
    """Stored (not purged) texts named after ``after``, as (sha256, text) in sha256 order,
    verified; a damaged blob raises."""
    rows = conn.execute(
        "SELECT sha256, data FROM blobs WHERE sha256 > ? ORDER BY sha256 LIMIT ?", (after, batch)
    ).fetchall()
    return [(str(s), _unpack(str(s), packed).decode("utf-8", "replace")) for s, packed in rows]


def purged_names(conn: sqlite3.Connection, after: str, batch: int = 256) -> list[str]:
    """The names of texts a purge removed (and not stored again since), after ``after``,
    in order; none when the ledger never purged."""
    if not has_table(conn, "purged"):
        return []
    rows = conn.execute(
        "SELECT sha256 FROM purged WHERE sha256 > ? AND sha256 NOT IN (SELECT sha256 FROM blobs) "
        "ORDER BY sha256 LIMIT ?",
        (after, batch),
    ).fetchall()
    return [str(r[0]) for r in rows]


def unpack_text(sha256: str, packed: object) -> str:
    """A stored text's packed bytes, checked against ``sha256`` and decoded."""
    return _unpack(sha256, packed).decode("utf-8")


def replace_text(conn: sqlite3.Connection, sha256: str, replacement: str, seq: int) -> str:
    """Remove the text ``sha256`` and keep ``replacement`` in its place (purge record
    ``seq``); returns the replacement's sha256. Call inside the purge's transaction."""
    data = replacement.encode("utf-8")
    new_sha = hashlib.sha256(data).hexdigest()
    conn.execute(
        "INSERT OR REPLACE INTO purged (sha256, seq, replacement_sha256, data) VALUES (?,?,?,?)",
        (sha256, seq, new_sha, zlib.compress(data, _ZLIB_LEVEL)),
    )
    conn.execute("DELETE FROM blobs WHERE sha256 = ?", (sha256,))
    return new_sha


def purged_problem(conn: sqlite3.Connection, sha256: str, expected: str | None) -> str | None:
    """What is wrong with the purged text ``sha256`` whose purge record named the
    replacement ``expected`` (None: no purge record names it), or None if sound."""
    if expected is None:
        return f"blob {sha256} is missing and no purge record removed it"
    row = conn.execute(
        "SELECT replacement_sha256, data FROM purged WHERE sha256 = ?", (sha256,)
    ).fetchone()
    if row is None:
        return f"blob {sha256} was purged and the text left in its place is gone"
    if str(row[0]) != expected:
        return f"blob {sha256} was purged but its replacement is not the one the purge recorded"
    try:
        _unpack(expected, row[1])
    except LedgerCorruptError as exc:
        return f"the replacement of purged blob {sha256}: {exc}"
    return None
