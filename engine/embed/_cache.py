"""The content-addressed vector cache: (model id, sha256 of the text) → float32 vector.

One SQLite file (WAL, so readers never wait for the writer). A vector is stored as its
little-endian float32 bytes and read back with ``numpy.frombuffer``: exact, and never
pickle. The file is marked with SQLite's ``application_id`` and a schema number, so a
foreign or newer file is refused with a clear message instead of failing deep in a query.

>>> import tempfile, numpy as np
>>> with EmbeddingCache(Path(tempfile.mkdtemp()) / "e.sqlite") as cache:
...     cache.put_many("hash:2", [("ab12", np.array([0.6, 0.8], np.float32))])
...     cache.get_many("hash:2", ["ab12", "missing"])["ab12"].tolist()
[0.6000000238418579, 0.800000011920929]
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt

from engine.core import CacheError
from ledger import fold_wal

__all__ = ["EmbeddingCache"]

# "crtx": SQLite reserves the header's application_id for exactly this, so `file` and
# sqlite3 tooling can tell the format, and we can tell a foreign database from ours.
_APPLICATION_ID = 0x63727478
_SCHEMA = 2  # bump when the table layout changes; older files get a rebuild message
_MAX_PARAMS = 500  # bound on bound parameters per statement (old SQLite builds cap at 999)
_BUSY_TIMEOUT_S = 30.0  # another process may hold the write lock while it indexes
# Stored as float16 with an explicit byte order (the file may move between machines): half
# of float32's bytes, and ~1e-3 relative error, far below what changes a cosine ranking.
# Callers get float32 back; ``round_trip`` gives fresh vectors the same rounding.
_DTYPE = np.dtype("<f2")
_JOURNAL_LIMIT = 8 << 20  # WAL is truncated back to this after checkpoints, not left at peak

_CREATE = """
CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, model_id TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS vectors (
    model INTEGER NOT NULL,
    sha256 BLOB NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, sha256)
) WITHOUT ROWID;
"""


@contextmanager
def _creation_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``<cache>.init`` around checking or creating the schema."""
    fd = os.open(f"{path}.init", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class EmbeddingCache:
    """Vectors by ``(model_id, sha256)`` in one SQLite file; safe to share between threads.

    Opening creates the file (and its parent directory) if missing. Use it as a context
    manager, or call ``close``.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            # Its owner's alone (0700) where it makes the folder: often the state folder.
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise CacheError(f"cannot create the embedding cache's folder {self.path.parent} "
                             f"({exc.strerror or exc}): set CORTEX_EMBEDDING_CACHE to a "
                             "writable path") from exc  # fmt: skip
        try:
            db = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_S,
                isolation_level=None,  # autocommit; put_many opens its own transaction
                check_same_thread=False,  # every use goes through self._lock
            )
        except sqlite3.Error as exc:
            raise CacheError(f"cannot open embedding cache {self.path}: {exc}") from exc
        try:
            # Two processes opening a brand-new cache race to create it; an OS lock on a
            # sidecar file makes one create it while the other waits and then reads it.
            with _creation_lock(self.path):
                self._prepare(db)
        except sqlite3.OperationalError as exc:  # read-only, no space: the file may be fine
            db.close()
            raise CacheError(
                f"cannot write embedding cache {self.path} ({exc}): check that its folder is "
                "writable and its disk has room"
            ) from exc
        except sqlite3.DatabaseError as exc:
            db.close()
            raise CacheError(
                f"{self.path} is not a cortex embedding cache ({exc}); delete it to rebuild"
            ) from exc
        except CacheError:
            db.close()
            raise
        self._db = db

    def _prepare(self, db: sqlite3.Connection) -> None:
        # Reading the header first is what turns a random file into "file is not a database".
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if app_id == 0 and version == 0:
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise CacheError(
                    f"{self.path} is a SQLite database but not a cortex embedding cache; "
                    "point the cache elsewhere or delete the file"
                )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            for statement in _CREATE.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA application_id={_APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={_SCHEMA}")
            db.execute("COMMIT")
        elif app_id != _APPLICATION_ID:
            raise CacheError(
                f"{self.path} belongs to another application (application_id {app_id:#x}); "
                "point the cache elsewhere or delete the file"
            )
        elif version != _SCHEMA:
            raise CacheError(
                f"{self.path} has cache schema {version}, this cortex reads {_SCHEMA}; "
                "delete the file and it is rebuilt on the next index"
            )
        else:
            db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA journal_size_limit={_JOURNAL_LIMIT}")
        # A cache may lose its last transaction on power loss; it must never be corrupt,
        # which WAL with synchronous=NORMAL guarantees, at a fraction of FULL's fsyncs.
        db.execute("PRAGMA synchronous=NORMAL")

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise CacheError(f"embedding cache {self.path} is closed")
        return self._db

    def get_many(self, model_id: str, shas: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The cached vectors of ``shas`` under ``model_id``; missing ones are left out.

        The arrays are read-only views of the stored bytes (float32, shape ``(dim,)``).
        """
        wanted = list(dict.fromkeys(shas))
        found: dict[str, npt.NDArray[np.float32]] = {}
        step = _MAX_PARAMS - 1  # one parameter is the model id
        with self._lock:
            db = self._conn()
            try:
                model = self._model_key(db, model_id, create=False)
                if model is None:
                    return found
                for start in range(0, len(wanted), step):
                    part = wanted[start : start + step]
                    marks = ",".join("?" * len(part))
                    rows = db.execute(
                        "SELECT sha256, dim, vector FROM vectors "
                        f"WHERE model = ? AND sha256 IN ({marks})",
                        (model, *(bytes.fromhex(sha) for sha in part)),
                    ).fetchall()
                    for raw, dim, blob in rows:
                        sha = raw.hex()
                        found[sha] = self._decode(sha, dim, blob)
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"embedding cache {self.path} is unreadable: {exc}") from exc
        return found

    @staticmethod
    def _model_key(db: sqlite3.Connection, model_id: str, *, create: bool) -> int | None:
        """The small integer standing for ``model_id`` in ``vectors`` (not repeated per row)."""
        row = db.execute("SELECT id FROM models WHERE model_id = ?", (model_id,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        cursor = db.execute("INSERT INTO models (model_id) VALUES (?)", (model_id,))
        assert cursor.lastrowid is not None  # an INSERT into a rowid table always sets it
        return cursor.lastrowid

    @staticmethod
    def round_trip(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``vectors`` as a later ``get_many`` would return them (rounded through storage)."""
        return np.asarray(vectors, dtype=_DTYPE).astype(np.float32)

    def _decode(self, sha: str, dim: int, blob: bytes) -> npt.NDArray[np.float32]:
        if len(blob) != dim * _DTYPE.itemsize:
            raise CacheError(
                f"embedding cache {self.path}: vector {sha[:12]} has {len(blob)} bytes, "
                f"expected {dim} float16; delete the file to rebuild"
            )
        return np.frombuffer(blob, dtype=_DTYPE).astype(np.float32, copy=False)

    def put_many(self, model_id: str, items: Iterable[tuple[str, npt.NDArray[np.float32]]]) -> None:
        """Store vectors in one transaction; a key already present keeps its first vector."""
        rows = []
        for sha, vector in items:
            array = np.asarray(vector, dtype=_DTYPE)
            if array.ndim != 1:
                raise ValueError(f"vector for {sha[:12]} must be 1-D, got shape {array.shape}")
            rows.append((bytes.fromhex(sha), int(array.shape[0]), array.tobytes()))
        if not rows:
            return
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    model = self._model_key(db, model_id, create=True)
                    db.executemany(
                        "INSERT OR IGNORE INTO vectors (model, sha256, dim, vector) "
                        "VALUES (?, ?, ?, ?)",
                        [(model, *row) for row in rows],
                    )
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"cannot write embedding cache {self.path}: {exc}") from exc

    def held(self, shas: Iterable[str]) -> int:
        """How many vectors of ``shas`` (under every model) ``delete`` would drop."""
        keys = [bytes.fromhex(sha) for sha in dict.fromkeys(shas)]
        found = 0
        with self._lock:
            db = self._conn()
            for start in range(0, len(keys), _MAX_PARAMS):
                part = keys[start : start + _MAX_PARAMS]
                marks = ",".join("?" * len(part))
                row = db.execute(f"SELECT COUNT(*) FROM vectors WHERE sha256 IN ({marks})",
                                 part).fetchone()  # fmt: skip
                found += int(row[0])
        return found

    def delete(self, shas: Iterable[str]) -> tuple[int, bool]:
        """Drop the vectors of ``shas`` under every model, then rewrite the file so the
        freed pages leave the disk; returns how many vectors went, and whether their bytes
        left the disk (False: another process's read still held old pages after waiting,
        ``ledger.fold_wal``)."""
        keys = [bytes.fromhex(sha) for sha in dict.fromkeys(shas)]
        removed, cleared = 0, True
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for start in range(0, len(keys), _MAX_PARAMS):
                        part = keys[start : start + _MAX_PARAMS]
                        marks = ",".join("?" * len(part))
                        cursor = db.execute(f"DELETE FROM vectors WHERE sha256 IN ({marks})", part)
                        removed += cursor.rowcount
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                if removed:
                    db.execute("VACUUM")
                cleared = fold_wal(db)  # an earlier delete's pages a reader held: out now
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"cannot write embedding cache {self.path}: {exc}") from exc
        return removed, cleared

    def count(self, model_id: str) -> int:
        """How many vectors are stored under ``model_id``."""
        with self._lock:
            db = self._conn()
            try:
                row = db.execute(
                    "SELECT count(*) FROM vectors v JOIN models m ON m.id = v.model "
                    "WHERE m.model_id = ?",
                    (model_id,),
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                raise CacheError(f"embedding cache {self.path} is unreadable: {exc}") from exc
        return int(row[0])

    def close(self) -> None:
        """Close the file; later calls raise ``CacheError``. Closing twice is harmless."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r})"
