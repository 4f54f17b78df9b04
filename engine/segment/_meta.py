"""A segment's metadata in SQLite: which files it holds, their chunks, and chunk text.

It is the segment's source of truth. The lexical and dense indexes are derived from it, and
a search hit that this store does not know is dropped, so an interrupted write never
surfaces half-indexed content. A chunk's text, context and references are stored together
as one zlib blob in its row: one read per hit, no join, ~3x smaller than plain text.
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core import IndexSchemaError, IndexStateError
from engine.segment._dense import int_id
from indexers import Chunk, ChunkKind, DocType, Skipped, Span
from ledger import fold_wal

__all__ = ["SCHEMA_VERSION", "FileRecord", "MetaStore"]

SCHEMA_VERSION = 3
_JOURNAL_LIMIT = 8 << 20  # truncate the WAL back to this after checkpoints (not left at peak)
_ZLIB_LEVEL = 1  # fastest level: most of the gain (short texts), decompression ~10 µs a hit

_IN_BATCH = 500  # SQLite's default limit on host parameters is 999 (older builds)
_SEP = " "  # identifiers never contain spaces, so a space-joined list round-trips

_SCHEMA = """
CREATE TABLE IF NOT EXISTS info (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, content_sha256 TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, page_id TEXT NOT NULL, language TEXT NOT NULL,
    doc_type TEXT NOT NULL, license TEXT NOT NULL, line_count INTEGER NOT NULL,
    chunks INTEGER NOT NULL, tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS skipped (path TEXT PRIMARY KEY, reason TEXT NOT NULL, detail TEXT);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, int_id INTEGER NOT NULL, page_id TEXT NOT NULL, path TEXT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, kind TEXT NOT NULL,
    symbol TEXT NOT NULL, defines TEXT NOT NULL, body BLOB NOT NULL,
    tokens INTEGER NOT NULL, sha256 TEXT NOT NULL, language TEXT NOT NULL,
    doc_type TEXT NOT NULL, license TEXT NOT NULL, depth INTEGER NOT NULL,
    part INTEGER NOT NULL, parts INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path);
CREATE TABLE IF NOT EXISTS defs (name TEXT NOT NULL, chunk_id TEXT NOT NULL, path TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS defs_name ON defs (name);
CREATE INDEX IF NOT EXISTS defs_path ON defs (path);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_int_id ON chunks (int_id);
"""
_CHUNK_COLUMNS = (
    "id, int_id, page_id, path, start_line, end_line, kind, symbol, defines, body, "
    "tokens, sha256, language, doc_type, license, depth, part, parts"
)


@dataclass(frozen=True, slots=True)
class FileRecord:
    """What the segment knows about one indexed file."""

    path: str
    content_sha256: str  # of the raw bytes: what decides whether to re-chunk
    size: int
    mtime_ns: int
    page_id: str
    language: str
    doc_type: str
    license: str
    line_count: int
    chunks: int
    tokens: int


class MetaStore:
    """SQLite (WAL) store of files, chunks and chunk text for one segment.

    Reads may come from any thread; writes happen inside ``transaction()`` (one writer, which
    the workspace's writer lock guarantees across processes).
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoint
            self._db.execute(f"PRAGMA journal_size_limit={_JOURNAL_LIMIT}")
            self._db.executescript(_SCHEMA)
        except sqlite3.OperationalError as exc:  # read-only, no space, no such folder
            raise IndexStateError(
                f"{path} cannot be opened for writing ({exc}): check that the state folder "
                "is writable and its disk has room"
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise IndexSchemaError(
                f"{path} is not a cortex index ({exc}); rebuild it with `cortex index --rebuild`"
            ) from exc
        version = self.get_info("schema")
        if version is None:
            self.set_info("schema", str(SCHEMA_VERSION))
        elif version != str(SCHEMA_VERSION):
            raise IndexSchemaError(
                f"{path} has index schema {version}, this cortex reads {SCHEMA_VERSION}; "
                "rebuild it with `cortex index --rebuild`"
            )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def checkpoint(self) -> None:
        """Fold the WAL into the database file and truncate it (after a large write)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- info -----------------------------------------------------------------------

    def get_info(self, key: str) -> str | None:
        """A value from the key/value info table."""
        with self._lock:
            row = self._db.execute("SELECT value FROM info WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_info(self, key: str, value: str) -> None:
        """Set one info value (its own transaction unless inside ``transaction()``)."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO info (key, value) VALUES (?, ?)", (key, value))

    def delete_info(self, key: str) -> None:
        """Remove one info value (its own transaction unless inside ``transaction()``)."""
        with self._lock:
            self._db.execute("DELETE FROM info WHERE key = ?", (key,))

    def vacuum(self) -> bool:
        """Rewrite the file without free pages and empty the WAL: deleted text leaves the
        disk (SQLite otherwise keeps it in freed pages until they are reused). False when
        another process's read still held old pages after waiting (``ledger.fold_wal``):
        the WAL may still hold the deleted text."""
        with self._lock:
            self._db.execute("VACUUM")
            return fold_wal(self._db)

    def fold(self) -> bool:
        """Move what the WAL holds into the file and empty it (what an earlier ``vacuum``
        could not, while a reader held old pages); False if a reader still holds them."""
        with self._lock:
            return fold_wal(self._db)

    @property
    def generation(self) -> int:
        """Bumped by every committed update; derived indexes record the one they match."""
        return int(self.get_info("generation") or 0)

    # -- writes ---------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together, or not at all."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    if self._db.in_transaction:  # SQLite may have rolled back already
                        self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:  # disk full, I/O error, read-only
                raise IndexStateError(
                    f"writing {self.path} failed ({exc}); nothing of this run was kept, and "
                    "the index as it was before still answers: free disk space or make the "
                    "state folder writable, then index again"
                ) from exc

    def bump_generation(self) -> int:
        """Increment the generation (call inside the update's transaction)."""
        gen = self.generation + 1
        self.set_info("generation", str(gen))
        return gen

    def remove_paths(self, paths: Iterable[str]) -> None:
        """Forget files and their chunks."""
        with self._lock:
            for batch in _batches(list(paths)):
                marks = ",".join("?" * len(batch))
                for table in ("chunks", "files", "defs"):
                    self._db.execute(f"DELETE FROM {table} WHERE path IN ({marks})", batch)

    def remove_chunks(self, ids: Sequence[str]) -> None:
        """Drop single chunks (their files stay, with their chunk counts lowered)."""
        with self._lock:
            for batch in _batches(list(ids)):
                marks = ",".join("?" * len(batch))
                rows = self._db.execute(
                    f"SELECT path, count(*), sum(tokens) FROM chunks WHERE id IN ({marks}) "
                    "GROUP BY path",
                    batch,
                ).fetchall()
                self._db.executemany(
                    "UPDATE files SET chunks = chunks - ?, tokens = tokens - ? WHERE path = ?",
                    [(n, tokens, path) for path, n, tokens in rows],
                )
                self._db.execute(f"DELETE FROM chunks WHERE id IN ({marks})", batch)
                self._db.execute(f"DELETE FROM defs WHERE chunk_id IN ({marks})", batch)

    def put_file(self, record: FileRecord, chunks: Sequence[Chunk]) -> None:
        """Store a file's record and chunks, replacing what was there."""
        with self._lock:
            self._db.execute("DELETE FROM chunks WHERE path = ?", (record.path,))
            self._db.execute("DELETE FROM defs WHERE path = ?", (record.path,))
            self._db.execute(
                "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    record.path,
                    record.content_sha256,
                    record.size,
                    record.mtime_ns,
                    record.page_id,
                    record.language,
                    record.doc_type,
                    record.license,
                    record.line_count,
                    record.chunks,
                    record.tokens,
                ),
            )
            self._db.executemany(
                f"INSERT OR REPLACE INTO chunks ({_CHUNK_COLUMNS}) VALUES ({','.join('?' * 18)})",
                [_chunk_row(c) for c in chunks],
            )
            self._db.executemany(
                "INSERT INTO defs (name, chunk_id, path) VALUES (?, ?, ?)",
                [(name, c.id, c.path) for c in chunks for name in dict.fromkeys(c.defines)],
            )

    def set_mtimes(self, mtime_ns: int) -> None:
        """Record one modification time for every file (a base at a commit: its commit time,
        so the same commit gives the same records wherever and whenever it is built)."""
        with self._lock:
            self._db.execute("UPDATE files SET mtime_ns = ?", (mtime_ns,))

    def replace_skipped(self, skipped: Iterable[Skipped]) -> None:
        """Record this walk's skipped files (for status and `cortex chunks`)."""
        with self._lock:
            self._db.execute("DELETE FROM skipped")
            self._db.executemany(
                "INSERT OR REPLACE INTO skipped VALUES (?, ?, ?)",
                [(s.path, s.reason.value, s.detail) for s in skipped],
            )

    # -- reads ----------------------------------------------------------------------

    def files(self) -> dict[str, FileRecord]:
        """Every indexed file by path."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM files").fetchall()
        return {r[0]: FileRecord(*r) for r in rows}

    def file(self, path: str) -> FileRecord | None:
        """One file's record, or None."""
        with self._lock:
            row = self._db.execute("SELECT * FROM files WHERE path = ?", (path,)).fetchone()
        return FileRecord(*row) if row else None

    def skipped_reasons(self) -> list[tuple[str, str]]:
        """(path, reason) of every file the last index run skipped."""
        with self._lock:
            rows = self._db.execute("SELECT path, reason FROM skipped").fetchall()
        return [(str(p), str(r)) for p, r in rows]

    def skipped_counts(self) -> dict[str, int]:
        """Skipped files by reason, from the last index run."""
        with self._lock:
            rows = self._db.execute(
                "SELECT reason, COUNT(*) FROM skipped GROUP BY reason ORDER BY reason"
            ).fetchall()
        return {str(r): int(n) for r, n in rows}

    def counts(self) -> tuple[int, int, int]:
        """(files, chunks, tokens) held."""
        with self._lock:
            files = self._db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            chunks, tokens = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM chunks"
            ).fetchone()
        return int(files), int(chunks), int(tokens)

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id (unknown ids are absent from the result)."""
        return self._select_chunks("c.id", list(ids))

    def ids_by_int_id(self, ints: Sequence[int]) -> dict[int, str]:
        """Chunk ids by their faiss int64 id, without reading the chunks."""
        out: dict[int, str] = {}
        with self._lock:
            for batch in _batches(list(ints)):
                marks = ",".join("?" * len(batch))
                out.update((int(r[0]), str(r[1])) for r in self._db.execute(
                    f"SELECT int_id, id FROM chunks WHERE int_id IN ({marks})", batch))  # fmt: skip
        return out

    def definitions(
        self, names: Sequence[str], limit: int = 50
    ) -> dict[str, list[tuple[str, str]]]:
        """(chunk id, path) of the sections defining each name, id order, ``limit`` per name."""
        out: dict[str, list[tuple[str, str]]] = {}
        with self._lock:
            for name in dict.fromkeys(names):
                rows = self._db.execute(
                    "SELECT chunk_id, path FROM defs WHERE name = ? ORDER BY chunk_id LIMIT ?",
                    (name, limit),
                ).fetchall()
                if rows:
                    out[name] = [(str(r[0]), str(r[1])) for r in rows]
        return out

    def paths_like(self, suffix: str, limit: int = 20) -> list[str]:
        """Indexed paths equal to ``suffix`` or ending with ``/suffix`` (for tool signals)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path FROM files WHERE path = ? OR path LIKE ? ESCAPE '\\' "
                "ORDER BY length(path), path LIMIT ?",
                (suffix, "%/" + _like_escape(suffix), limit),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def page_ids(self, paths: Sequence[str]) -> dict[str, str]:
        """The page id (path and content hash) of each indexed path among ``paths``."""
        out: dict[str, str] = {}
        with self._lock:
            for batch in _batches(list(paths)):
                marks = ",".join("?" * len(batch))
                out.update(self._db.execute(
                    f"SELECT path, page_id FROM files WHERE path IN ({marks})", batch))  # fmt: skip
        return out

    def ids_of(self, paths: Sequence[str]) -> list[tuple[str, str]]:
        """(path, chunk id) of every chunk under ``paths``, by path then line."""
        out: list[tuple[str, str, int, int]] = []
        with self._lock:
            for batch in _batches(list(paths)):
                marks = ",".join("?" * len(batch))
                out.extend(self._db.execute(
                    f"SELECT path, id, start_line, end_line FROM chunks WHERE path IN ({marks})",
                    batch))  # fmt: skip
        out.sort(key=lambda r: (r[0], r[2], r[3], r[1]))
        return [(str(p), str(i)) for p, i, _, _ in out]

    def int_ids_of(self, paths: Sequence[str]) -> list[int]:
        """The faiss int64 ids of every chunk under ``paths``."""
        out: list[int] = []
        with self._lock:
            for batch in _batches(list(paths)):
                marks = ",".join("?" * len(batch))
                out.extend(int(r[0]) for r in self._db.execute(
                    f"SELECT int_id FROM chunks WHERE path IN ({marks})", batch))  # fmt: skip
        return out

    def chunks_of(self, path: str) -> list[Chunk]:
        """A file's chunks in line order."""
        got = self._select_chunks("c.path", [path])
        return sorted(got.values(), key=lambda c: (c.span.start_line, c.span.end_line, c.id))

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks that touch lines ``first_line..last_line``, in line order (a
        fragment's neighbourhood, without reading a large file's every chunk)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE c.path = ? AND c.end_line >= ? "
                "AND c.start_line <= ?", (path, first_line, last_line)).fetchall()  # fmt: skip
        got = [_row_chunk(r) for r in rows]
        return sorted(got, key=lambda c: (c.span.start_line, c.span.end_line, c.id))

    def all_chunk_ids(self) -> list[tuple[str, str]]:
        """(chunk id, text sha256) of every chunk, in id order."""
        with self._lock:
            rows = self._db.execute("SELECT id, sha256 FROM chunks ORDER BY id").fetchall()
        return [(str(a), str(b)) for a, b in rows]

    def iter_chunks(self, batch: int = 2000) -> Iterator[Chunk]:
        """Every chunk, in id order, fetched in batches."""
        ids = [cid for cid, _ in self.all_chunk_ids()]
        for start in range(0, len(ids), batch):
            got = self.chunks(ids[start : start + batch])
            yield from (got[i] for i in ids[start : start + batch] if i in got)

    def _select_chunks(self, column: str, keys: list[object]) -> dict[str, Chunk]:
        out: dict[str, Chunk] = {}
        with self._lock:
            for batch in _batches(keys):
                marks = ",".join("?" * len(batch))
                for row in self._db.execute(
                    f"SELECT {_CHUNK_COLUMNS} FROM chunks c WHERE {column} IN ({marks})", batch
                ):
                    out[str(row[0])] = _row_chunk(row)
        return out


def _batches(items: Sequence[object]) -> Iterator[list[object]]:
    for start in range(0, len(items), _IN_BATCH):
        yield list(items[start : start + _IN_BATCH])


def _chunk_row(c: Chunk) -> tuple[object, ...]:
    # Length-prefixed, not separated: a text may contain any character, NUL included.
    body = f"{len(c.text)}:{len(c.context)}:{c.text}{c.context}{_SEP.join(c.references)}"
    return (
        c.id, int_id(c.id), c.page_id, c.path, c.span.start_line, c.span.end_line,
        c.kind.value, c.symbol, _SEP.join(c.defines),
        zlib.compress(body.encode("utf-8"), _ZLIB_LEVEL),
        c.tokens, c.sha256, c.language, c.doc_type.value, c.license, c.depth, c.part, c.parts,
    )  # fmt: skip


def _row_chunk(row: Sequence[Any]) -> Chunk:
    (cid, _int, page, path, start, end, kind, symbol, defines, body, tokens, sha,
     language, doc_type, license, depth, part, parts) = row  # fmt: skip
    text, context, refs = _unpack_body(zlib.decompress(body).decode("utf-8"))
    return Chunk(
        id=str(cid),
        page_id=str(page),
        path=str(path),
        span=Span(int(start), int(end)),
        text=text,
        sha256=str(sha),
        language=str(language),
        kind=ChunkKind(kind),
        doc_type=DocType(doc_type),
        symbol=str(symbol),
        context=str(context),
        defines=tuple(str(defines).split()) if defines else (),
        references=tuple(str(refs).split()) if refs else (),
        tokens=int(tokens),
        license=str(license),
        depth=int(depth),
        part=int(part),
        parts=int(parts),
    )


def _unpack_body(body: str) -> tuple[str, str, str]:
    text_len, _, rest = body.partition(":")
    context_len, _, rest = rest.partition(":")
    a, b = int(text_len), int(text_len) + int(context_len)
    return rest[:a], rest[a:b], rest[b:]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
