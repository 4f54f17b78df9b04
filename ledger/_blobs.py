"""Content-addressed texts: the exact UTF-8 bytes, stored once under their sha256, zlib-packed.

Snippet texts and rendered prompts live here, so a replay needs only the ledger. Every read
re-hashes the bytes, so a damaged or edited blob is reported, never returned.
"""

from __future__ import annotations

import hashlib
import sqlite3
import zlib

from ledger._errors import BlobNotFoundError, LedgerCorruptError

__all__ = ["blob_problem", "load_text", "store_text"]

# Level 6 (zlib's default) makes the ledger ~5% smaller than level 1 for ~0.2 ms more a turn
# (eval.bench_ledger); a blob is written once, and repeated texts are never recompressed.
_ZLIB_LEVEL = 6


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
