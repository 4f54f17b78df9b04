"""The memory store: notes an agent saves and finds again, in ``<state>/memory.sqlite``.

One SQLite file (WAL) holds every project's notes that share a state folder, each row
stamped with its project and, for a personal note, its owner; every read filters on both,
so one project's notes never appear in another's and one user's personal notes never
reach another user. Writes run in ``BEGIN IMMEDIATE`` transactions: two processes saving
the same topic key get one row, each revision counted.

The store is handed everything it needs of the index as plain callables (``CodeAccess``):
memory imports only ``engine.core``, the workspace composes it::

    store = NoteStore(path, project="…", user="ann", terms=code_terms, embedder=emb)
    saved = store.save("Retries live in the HTTP client", "decision", what="…")
    store.search("where are retries configured")   # titles, previews, scores
    store.get(saved.id)                            # the full note, links re-checked
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.core import (
    MAX_BODY_CHARS,
    MAX_TITLE_CHARS,
    MAX_TOPIC_KEY_CHARS,
    ConfigError,
    Edge,
    EdgeKind,
    MemoryStateError,
    Note,
    NoteType,
    NotFoundError,
    SaveAction,
    SaveResult,
    Scope,
    body_text,
    clean_field,
    normalised,
    parse_enum,
    whole_number,
)
from engine.memory._episodes import Episodes
from engine.memory._links import CodeAccess, checked_links, link_entities
from engine.memory._near import NEAR_WEIGHT, index_near
from engine.memory._recall import NoteEmbedder, Vectors, importance
from indexers import redact, sha256_text
from ledger import fold_wal

__all__ = ["CLOCK_SKEW_S", "DEDUPE_WINDOW_S", "SCHEMA", "NoteStore"]

SCHEMA = 2  # 2: the lexical index holds each note's neighbours' words (``near``)
DEDUPE_WINDOW_S = 30 * 86_400.0  # the same content saved again within 30 days is one note
CLOCK_SKEW_S = 300.0  # a given creation time may run this far ahead of our clock
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another process's transaction
_FILE_MODE = 0o600
_REEMBED_BATCH = 256  # notes embedded again per write when the dense model changed
TITLE_WEIGHT = 2.0  # a title is the note's own summary: its words count twice in BM25

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL, scope TEXT NOT NULL, owner TEXT NOT NULL,
    type TEXT NOT NULL, title TEXT NOT NULL, what TEXT NOT NULL, why TEXT NOT NULL,
    place TEXT NOT NULL, learned TEXT NOT NULL, topic_key TEXT,
    revision INTEGER NOT NULL, content TEXT NOT NULL, entities TEXT NOT NULL,
    links TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL,
    accessed REAL NOT NULL, access_count INTEGER NOT NULL DEFAULT 0,
    deleted REAL, archived INTEGER NOT NULL DEFAULT 0, model TEXT, vector BLOB,
    seq INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS notes_topic ON notes (project, scope, owner, topic_key)
    WHERE topic_key IS NOT NULL AND deleted IS NULL;
CREATE INDEX IF NOT EXISTS notes_content ON notes (project, scope, owner, content);
CREATE INDEX IF NOT EXISTS notes_seq ON notes (seq);
CREATE INDEX IF NOT EXISTS notes_time ON notes (project, created, id);
CREATE TABLE IF NOT EXISTS edges (
    src INTEGER NOT NULL, dst INTEGER NOT NULL, kind TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (src, dst, kind));
CREATE INDEX IF NOT EXISTS edges_dst ON edges (dst, kind);
"""
_FTS_TABLE = """CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(
    title, body, near, tokenize = "porter unicode61 remove_diacritics 0 tokenchars '_'")"""
_RANK = f"bm25({TITLE_WEIGHT}, 1.0, {NEAR_WEIGHT})"
_FTS_RANK = "INSERT INTO notes_fts (notes_fts, rank) VALUES ('rank', ?)"
_FTS_RANK_NOW = "SELECT v FROM notes_fts_config WHERE k = 'rank'"
_COLUMNS = (
    "id, type, scope, title, what, why, place, learned, topic_key, revision, "
    "entities, links, created, updated, accessed, access_count, deleted, archived"
)


def _unwritable(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite refused for want of write access (a read-only file or folder), not
    because the file is damaged."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "readonly" in text or "read-only" in text or "unable to open" in text
    )


class NoteStore:
    """The notes of one project, as one user sees them; safe to share between threads."""

    def __init__(
        self,
        path: Path,
        *,
        project: str,
        user: str,
        terms: Callable[[str], str],
        embedder: NoteEmbedder | None = None,
        code: CodeAccess | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not project or not user:
            raise ConfigError("a memory store needs a project and a user")
        self.path = path
        self.project = project
        self.user = user
        self.terms = terms
        self.embedder = embedder
        self.code = code
        self.clock = clock
        self._lock = threading.RLock()
        self._db = self._open()
        self._vectors = Vectors(embedder.model_id) if embedder is not None else None
        self._vectors_checked = False
        self._episodes = Episodes()

    # -- the file ------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        new = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            if new:
                self.path.chmod(_FILE_MODE)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # idempotent; executescript commits on its own
            db.executescript(_DDL)
            with _transaction(db, immediate=True):
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
                db.execute("INSERT OR IGNORE INTO meta VALUES ('seq', '0')")
                found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if found is not None and found[0] == "1":
                    self._migrate_1(db)
                    found = (str(SCHEMA),)
                if found is not None and found[0] == str(SCHEMA):
                    db.execute(_FTS_TABLE)
                    _set_rank(db)
        except sqlite3.DatabaseError as exc:
            if _unwritable(exc):  # a read-only copy: nothing is wrong with the file
                raise MemoryStateError(
                    f"cannot write the memory store {self.path} ({exc}): make its folder "
                    "writable, or set CORTEX_STATE_DIR to a writable copy"
                ) from exc
            raise MemoryStateError(
                f"the memory store {self.path} cannot be used ({exc}); move it aside to "
                "start an empty one"
            ) from exc
        except OSError as exc:
            raise MemoryStateError(f"cannot open the memory store {self.path}: {exc}") from exc
        if found is None or found[0] != str(SCHEMA):
            db.close()
            raise MemoryStateError(
                f"the memory store {self.path} has schema {found and found[0]}"
                f", this cortex reads {SCHEMA}; move it aside"
            )
        return db

    def _migrate_1(self, db: sqlite3.Connection) -> None:
        """Schema 1 to 2 (inside a transaction): the lexical index again, with a column for
        each note's neighbours' words."""
        db.execute("DROP TABLE IF EXISTS notes_fts")
        db.execute(_FTS_TABLE)
        rows = db.execute(
            "SELECT id, title, what, why, place, learned, entities FROM notes ORDER BY id"
        ).fetchall()
        for note_id, title, *fields, entities in rows:
            terms = self._note_terms(title, body_text(*fields), json.loads(entities))
            _index_terms(db, note_id, terms)
        index_near(db, [r[0] for r in rows])
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA),))

    def _note_terms(self, title: str, body: str, entities: Sequence[str]) -> tuple[str, str]:
        """A note's lexical terms: its title's, and its body's with its entities' names."""
        names = " ".join(e.split(":", 1)[1] for e in entities)
        return self.terms(title), self.terms(f"{body}\n{names}")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: writers queue, readers keep reading)."""
        with self._lock:
            try:
                with _transaction(self._db, immediate=True):
                    yield self._db
            except sqlite3.DatabaseError as exc:
                raise MemoryStateError(f"the memory store {self.path}: {exc}") from exc

    def read(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (a damaged file is a ``MemoryStateError`` naming it).

        A query that fails with SQLite's generic error is asked once more: the text index
        reloads its state when another connection changed its configuration and fails the
        statement that notices (``SQL logic error``); the same query then answers."""
        with self._lock:
            try:
                try:
                    return self._db.execute(sql, args).fetchall()
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode != sqlite3.SQLITE_ERROR:
                        raise
                    return self._db.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as exc:
                raise MemoryStateError(f"the memory store {self.path}: {exc}") from exc

    def seq(self, db: sqlite3.Connection) -> int:
        """Count one change (inside ``write``): the vector matrix catches up by this."""
        db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'seq'")
        return int(db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0])

    # -- what the caller sees ------------------------------------------------------------

    def visible(self, alias: str = "notes", *, by_id: bool = False) -> tuple[str, tuple[str, str]]:
        """The SQL condition (and its arguments) for the rows this caller may see.
        ``by_id``: for a lookup of listed ids, whose rows are read by id (a project index
        would walk every row of the project instead)."""
        plus = "+" if by_id else ""
        return (
            f"{plus}{alias}.project = ? AND ({alias}.scope = 'project' OR {alias}.owner = ?) "
            f"AND {alias}.deleted IS NULL",
            (self.project, self.user),
        )

    def superseded(self, ids: Sequence[int] | None = None) -> set[int]:
        """Visible notes (among ``ids``, when given) that a live note supersedes."""
        if ids is not None:
            if not ids:
                return set()
            marks = ",".join("?" * len(ids))
            found = self.read(
                "SELECT DISTINCT e.dst FROM edges e JOIN notes s ON s.id = e.src WHERE "
                f"e.dst IN ({marks}) AND e.kind = 'supersedes' AND s.deleted IS NULL",
                tuple(ids),
            )
            return {r[0] for r in found}
        cond, args = self.visible("d")
        rows = self.read(
            "SELECT DISTINCT e.dst FROM edges e JOIN notes s ON s.id = e.src "
            f"JOIN notes d ON d.id = e.dst WHERE e.kind = 'supersedes' AND s.deleted IS NULL "
            f"AND {cond}",
            args,
        )
        return {r[0] for r in rows}

    # -- save ----------------------------------------------------------------------------

    def save(
        self,
        title: str,
        type: NoteType | str = NoteType.NOTE,
        *,
        what: str = "",
        why: str = "",
        where: str = "",
        learned: str = "",
        topic_key: str | None = None,
        scope: Scope | str = Scope.PROJECT,
        created: float | None = None,
    ) -> SaveResult:
        """Save a note; the same topic key in the same scope updates it in place (its
        revision counted), the same normalised content within ``DEDUPE_WINDOW_S`` of it is
        the note already saved. Every text passes secret redaction first.

        ``created``: when the note was made, in seconds since the epoch (default: now; at
        most ``CLOCK_SKEW_S`` ahead of it). A caller importing a history (a conversation's
        turns, another tool's notes) saves each at its own time, so ``timeline``, the
        importance's age and the episodes recall groups notes into read that time."""
        now = self.clock()
        at = now if created is None else _check_time(created, now)
        kind = parse_enum(NoteType, type, "note type")
        where_to = parse_enum(Scope, scope, "scope")
        title = _scrub(clean_field("title", title, MAX_TITLE_CHARS, required=True))
        if "\n" in title:
            raise ConfigError("a title is one line")
        fields = [
            _scrub(clean_field(n, v, MAX_BODY_CHARS))
            for n, v in (("what", what), ("why", why), ("where", where), ("learned", learned))
        ]
        key = _scrub(clean_field("topic_key", topic_key, MAX_TOPIC_KEY_CHARS)) or None
        content = sha256_text(normalised(kind.value, title, *fields))
        body = body_text(*fields)
        linked = link_entities(f"{title}\n{body}", self.code)
        entities, links = linked.entities, linked.links

        def said(note: int, action: SaveAction, revision: int) -> SaveResult:
            return SaveResult(note, action, revision, entities, tuple(lk for lk, _ in links),
                              linked.entities_left_out, linked.links_left_out)  # fmt: skip

        vector = None
        if self.embedder is not None:
            vec = self.embedder.embed([f"{title}\n{body}"])[0]
            vector = np.asarray(vec, dtype=np.float32).tobytes()
        terms = self._note_terms(title, body, entities)
        owner = self.user if where_to is Scope.PERSONAL else ""
        links_json = json.dumps(
            [[lk.entity, lk.path, lk.start_line, lk.end_line, lk.sha256, h] for lk, h in links]
        )
        row = (kind.value, title, *fields, content, json.dumps(list(entities)), links_json)
        model = self.embedder.model_id if self.embedder is not None else None
        with self.write() as db:
            scope_args = (self.project, where_to.value, owner)
            if key is not None:
                found = db.execute(
                    "SELECT id, revision, content FROM notes WHERE project = ? AND scope = ? "
                    "AND owner = ? AND topic_key = ? AND deleted IS NULL",
                    (*scope_args, key),
                ).fetchone()
                if found is not None and found[2] == content:
                    return said(found[0], SaveAction.DUPLICATE, found[1])
                if found is not None:
                    seq = self.seq(db)
                    db.execute(
                        "UPDATE notes SET type = ?, title = ?, what = ?, why = ?, place = ?, "
                        "learned = ?, content = ?, entities = ?, links = ?, revision = "
                        "revision + 1, updated = ?, model = ?, vector = ?, seq = ? "
                        "WHERE id = ?",
                        (*row, at, model, vector, seq, found[0]),
                    )
                    _index_terms(db, found[0], terms)
                    index_near(db, [found[0]])
                    return said(found[0], SaveAction.UPDATED, found[1] + 1)
            else:
                found = db.execute(
                    "SELECT id, revision FROM notes WHERE project = ? AND scope = ? AND "
                    "owner = ? AND content = ? AND deleted IS NULL AND updated BETWEEN ? AND ? "
                    "ORDER BY id LIMIT 1",
                    (*scope_args, content, at - DEDUPE_WINDOW_S, at + DEDUPE_WINDOW_S),
                ).fetchone()
                if found is not None:
                    return said(found[0], SaveAction.DUPLICATE, found[1])
            seq = self.seq(db)
            cur = db.execute(
                "INSERT INTO notes (project, scope, owner, type, title, what, why, place, "
                "learned, content, entities, links, topic_key, revision, created, updated, "
                "accessed, model, vector, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "1, ?, ?, ?, ?, ?, ?)",
                (*scope_args, *row, key, at, at, at, model, vector, seq),
            )
            note_id = int(cur.lastrowid or 0)
            _index_terms(db, note_id, terms)
        return said(note_id, SaveAction.CREATED, 1)

    # -- read ----------------------------------------------------------------------------

    def rows(self, ids: Sequence[int], *, archived: bool = True) -> dict[int, tuple[Any, ...]]:
        """Visible rows by id (``_COLUMNS``); without the archived ones unless ``archived``."""
        if not ids:
            return {}
        cond, args = self.visible(by_id=True)
        cond += "" if archived else " AND notes.archived = 0"
        marks = ",".join("?" * len(ids))
        found = self.read(
            f"SELECT {_COLUMNS} FROM notes WHERE id IN ({marks}) AND {cond}", (*ids, *args)
        )
        return {r[0]: r for r in found}

    def visible_ids(self, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` this caller may see (archived ones included)."""
        if not ids:
            return set()
        cond, args = self.visible(by_id=True)
        marks = ",".join("?" * len(ids))
        found = self.read(f"SELECT id FROM notes WHERE id IN ({marks}) AND {cond}", (*ids, *args))
        return {r[0] for r in found}

    def facts(self, ids: Sequence[int]) -> dict[int, tuple[str, float, float, int]]:
        """(type, created, accessed, access count) of the visible, unarchived notes among
        ``ids``: what ranking needs, without their text."""
        if not ids:
            return {}
        cond, args = self.visible(by_id=True)
        marks = ",".join("?" * len(ids))
        found = self.read(
            f"SELECT id, type, created, accessed, access_count FROM notes WHERE id IN ({marks}) "
            f"AND {cond} AND notes.archived = 0",
            (*ids, *args),
        )
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in found}

    def incoming(self, ids: Sequence[int]) -> dict[int, int]:
        """Live edges pointing at each note."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.read(
            f"SELECT e.dst, count(*) FROM edges e JOIN notes s ON s.id = e.src WHERE e.dst IN "
            f"({marks}) AND s.deleted IS NULL GROUP BY e.dst",
            tuple(ids),
        )
        return {r[0]: r[1] for r in rows}

    def note(
        self,
        row: tuple[Any, ...],
        incoming: int,
        files: dict[str, str | None],
        now: float,
        check: bool = True,
    ) -> Note:
        """A row as a ``Note`` (links checked unless ``check`` is off: then none are
        read or shown; importance computed; edges not read)."""
        (
            note_id,
            kind,
            scope,
            title,
            what,
            why,
            place,
            learned,
            key,
            revision,
            entities,
            links,
            created,
            updated,
            accessed,
            count,
            deleted,
            archived,
        ) = row
        kind = NoteType(kind)
        return Note(
            note_id,
            title,
            kind,
            Scope(scope),
            what,
            why,
            place,
            learned,
            key or "",
            revision,
            tuple(json.loads(entities)),
            checked_links(links, self.code if check else None, files),
            created,
            updated,
            accessed,
            count,
            importance(kind, count, accessed, created, incoming, now),
            deleted is not None,
            bool(archived),
        )

    def touch(self, ids: Sequence[int]) -> None:
        """Count an access of each visible note among ``ids`` (a note a model cited in a
        turn that succeeded)."""
        seen = sorted(self.visible_ids(list(ids)))
        if seen:
            with self.write() as db:
                db.executemany(
                    "UPDATE notes SET accessed = ?, access_count = access_count + 1 WHERE id = ?",
                    [(self.clock(), i) for i in seen],
                )

    def get(self, note_id: int | str, *, touch: bool = True) -> Note:
        """One visible note in full, its links re-checked, its edges and the notes that
        supersede or contradict it; counts as an access (``touch``)."""
        note_id = _check_id(note_id)
        row = self.rows([note_id]).get(note_id)
        if row is None:
            raise NotFoundError(f"no note {note_id} here (for this project and user)")
        now = self.clock()
        if touch:
            with self.write() as db:
                db.execute(
                    "UPDATE notes SET accessed = ?, access_count = access_count + 1 WHERE id = ?",
                    (now, note_id),
                )
            row = (*row[:14], now, row[15] + 1, *row[16:])
        edges = self.edges_of([note_id])
        note = self.note(row, sum(1 for e in edges if e.dst == note_id), {}, now)
        live = self.rows(sorted({e.src for e in edges} | {e.dst for e in edges}))
        above = tuple(
            sorted(
                e.src
                for e in edges
                if e.kind is EdgeKind.SUPERSEDES and e.dst == note_id and e.src in live
            )
        )
        other = sorted(
            {e.dst if e.src == note_id else e.src for e in edges if e.kind is EdgeKind.CONTRADICTS}
            & set(live)
        )
        from dataclasses import replace

        return replace(
            note,
            superseded_by=above,
            contradicts=tuple((i, live[i][3]) for i in other),
            edges=tuple(e for e in edges if e.src in live and e.dst in live),
        )

    def edges_of(self, ids: Sequence[int]) -> list[Edge]:
        """Every edge touching ``ids`` (either end), in (src, dst, kind) order."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.read(
            f"SELECT src, dst, kind, created FROM edges WHERE src IN ({marks}) "
            f"OR dst IN ({marks}) ORDER BY src, dst, kind",
            (*ids, *ids),
        )
        return [Edge(r[0], r[1], EdgeKind(r[2]), r[3]) for r in rows]

    def contradictions(self, ids: Sequence[int]) -> dict[int, tuple[tuple[int, str], ...]]:
        """For each of ``ids``, the visible notes on the other side of a contradiction."""
        edges = [e for e in self.edges_of(ids) if e.kind is EdgeKind.CONTRADICTS]
        if not edges:
            return {}
        live = self.rows(sorted({e.src for e in edges} | {e.dst for e in edges}))
        out: dict[int, set[int]] = {}
        for e in edges:
            if e.src in live and e.dst in live:
                out.setdefault(e.src, set()).add(e.dst)
                out.setdefault(e.dst, set()).add(e.src)
        return {i: tuple((o, live[o][3]) for o in sorted(out[i])) for i in ids if i in out}

    # -- vectors -------------------------------------------------------------------------

    def _last_seq(self) -> int:
        return int(self.read("SELECT value FROM meta WHERE key = 'seq'")[0][0])

    def episodes(self) -> tuple[npt.NDArray[np.int64], list[int]]:
        """Each visible note's episode by note id (-1: none) and each episode's number of
        notes (see ``Episodes``; read-only), advanced to the store's last change."""
        seq = self._last_seq()
        if seq > self._episodes.seq:
            rows = self.read(
                "SELECT id, created, deleted, project, scope, owner FROM notes WHERE seq > ? "
                "ORDER BY seq",
                (self._episodes.seq,),
            )
            self._episodes.advance(
                [(r[0], r[1], r[2] is None and (r[4] == "project" or r[5] == self.user))
                 for r in rows if r[3] == self.project],
                seq,
            )  # fmt: skip
        return self._episodes.groups()

    def dropped(self, note_id: int) -> None:
        """A note was removed from the file (a hard delete, which leaves no changed row
        for the vectors and the episodes to read)."""
        if self._vectors is not None:
            self._vectors.advance([(note_id, None, False)], 0)
        self._episodes.forget(note_id)

    def reembed(self) -> int:
        """Embed again, with this store's model, the project's live notes whose vector
        another model wrote (or that have none); returns how many. Each batch is one write,
        with a new change sequence, so other processes' matrices pick the vectors up."""
        if self.embedder is None:
            return 0
        model = self.embedder.model_id
        rows = self.read(
            "SELECT id, seq, title, what, why, place, learned FROM notes WHERE project = ? "
            "AND deleted IS NULL AND (model IS NOT ? OR vector IS NULL) ORDER BY id",
            (self.project, model),
        )
        for start in range(0, len(rows), _REEMBED_BATCH):
            batch = rows[start : start + _REEMBED_BATCH]
            vecs = self.embedder.embed([f"{r[2]}\n{body_text(*r[3:])}" for r in batch])
            with self.write() as db:
                for row, vec in zip(batch, vecs, strict=True):
                    # Only if the note is as it was read: a save in between (another
                    # process, a topic-key update) wrote its own vector of its new text.
                    db.execute(
                        "UPDATE notes SET model = ?, vector = ?, seq = ? WHERE id = ? AND seq = ?",
                        (model, np.asarray(vec, dtype=np.float32).tobytes(), self.seq(db),
                         row[0], row[1]),
                    )  # fmt: skip
        return len(rows)

    def vectors(self) -> Vectors | None:
        """The vector matrix, advanced to the store's last change. The first call in a
        process first gives this model's vector to the project's notes that another model
        embedded (a changed or upgraded dense model) or none did."""
        if self._vectors is None:
            return None
        if not self._vectors_checked:
            self.reembed()  # an error leaves the check for the next call
            self._vectors_checked = True
        seq = self._last_seq()
        if seq > self._vectors.seq:
            # By the change sequence's index alone: with the project in the condition the
            # planner walks every row of the project instead.
            rows = self.read(
                "SELECT id, vector, model, deleted, project FROM notes WHERE seq > ? ORDER BY seq",
                (self._vectors.seq,),
            )
            model = self._vectors.model_id
            self._vectors.advance(
                [(r[0], r[1] if r[2] == model else None, r[3] is None)
                 for r in rows if r[4] == self.project],
                seq,
            )  # fmt: skip
        return self._vectors

    def purge(self, text: str, *, dry_run: bool = False) -> tuple[int, bool]:
        """Replace ``text`` with ``[PURGED]`` in every note of this file that holds it (any
        project, any user, deleted ones too), in its fields, topic key, entities and code
        links; re-index and re-embed them, then drop the old text from the lexical index's
        segments and zero the freed pages. Returns (how many notes held it, whether the
        old pages left the file: False while another process's read still holds them).
        ``dry_run`` only counts."""
        fields = ("title", "what", "why", "place", "learned", "topic_key", "entities", "links")
        forms = sorted({text, json.dumps(text)[1:-1]}, key=len, reverse=True)  # JSON: escaped
        where = " OR ".join(f"instr({f}, ?) > 0" for f in fields for _ in forms)
        rows = self.read(
            f"SELECT id, type, {', '.join(fields)} FROM notes WHERE {where}",
            tuple(f for _ in fields for f in forms),
        )
        if dry_run or not rows:
            return len(rows), True
        with self._lock:  # freed cells are zeroed from here on, not left in free pages
            self._db.execute("PRAGMA secure_delete = ON")
        with self.write() as db:
            for note_id, kind, *values, key, entities_json, links_json in rows:
                title, what, why, place, learned = (v.replace(text, "[PURGED]") for v in values)
                entities = _purged_json(entities_json, text)
                body = body_text(what, why, place, learned)
                vector = None
                if self.embedder is not None:
                    vec = self.embedder.embed([f"{title}\n{body}"])[0]
                    vector = np.asarray(vec, dtype=np.float32).tobytes()
                content = sha256_text(normalised(kind, title, what, why, place, learned))
                db.execute(
                    "UPDATE notes SET title = ?, what = ?, why = ?, place = ?, learned = ?, "
                    "entities = ?, links = ?, content = ?, vector = ?, seq = ? WHERE id = ?",
                    (title, what, why, place, learned, entities,
                     _purged_json(links_json, text), content, vector, self.seq(db), note_id),
                )  # fmt: skip
                if key is not None and text in key:
                    _purge_key(db, note_id, key.replace(text, "[PURGED]"))
                terms = self._note_terms(title, body, json.loads(entities))
                _index_terms(db, note_id, terms)
            index_near(db, [r[0] for r in rows])
        with self._lock:
            try:  # deleted FTS entries live on in old segments until they are merged
                self._db.execute("INSERT INTO notes_fts (notes_fts) VALUES ('optimize')")
                self._db.execute("VACUUM")
                cleared = fold_wal(self._db)  # old pages leave the file once no read holds them
            except sqlite3.DatabaseError as exc:
                raise MemoryStateError(f"the memory store {self.path}: {exc}") from exc
        return len(rows), cleared

    def bump_seq(self) -> None:
        """Mark a change the vector matrix must see (a delete)."""
        with self.write() as db:
            self.seq(db)


_MAX_ID = 2**63 - 1  # SQLite's largest integer: no row has a larger id


def _purged_json(raw: str, text: str) -> str:
    """A JSON column (entities, links) with ``text`` replaced by [PURGED] in every string
    in it (decoded first: a replace on the encoded form could cut through its syntax)."""

    def purged(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(text, "[PURGED]")
        if isinstance(value, list):
            return [purged(v) for v in value]
        return value

    return json.dumps(purged(json.loads(raw)))


def _purge_key(db: sqlite3.Connection, note_id: int, key: str) -> None:
    """Give a note the purged topic key; if another live note of its project, scope and
    owner has that key already (two keys that differed only in the purged string), the
    note's id is added to keep the keys unique."""
    try:
        db.execute("UPDATE notes SET topic_key = ? WHERE id = ?", (key, note_id))
    except sqlite3.IntegrityError:
        db.execute("UPDATE notes SET topic_key = ? WHERE id = ?", (f"{key}#{note_id}", note_id))


def _check_id(note_id: object) -> int:
    if isinstance(note_id, str):
        with suppress(ConfigError):  # "memory:²" or "abc": no note, as below
            note_id = whole_number("note id", note_id.strip().removeprefix("memory:"))
    if isinstance(note_id, bool) or not isinstance(note_id, int) or not 1 <= note_id <= _MAX_ID:
        raise NotFoundError(f"no note {note_id!r}: note ids are integers from 1 to {_MAX_ID}")
    return note_id


check_id = _check_id


def _check_time(created: object, now: float) -> float:
    """A caller's creation time: seconds since the epoch, not past ``now`` (plus skew)."""
    if (
        isinstance(created, bool)
        or not isinstance(created, int | float)
        or not math.isfinite(created)
        or not 0 <= created <= now + CLOCK_SKEW_S
    ):
        raise ConfigError(
            f"created must be a time in seconds since the epoch, not later than now; got "
            f"{created!r}"
        )
    return float(created)


def _set_rank(db: sqlite3.Connection) -> None:
    """Rank the text index by ``_RANK``, writing its configuration only when it differs:
    every write of it makes each other connection's next ranked query fail once."""
    now = db.execute(_FTS_RANK_NOW).fetchone()
    if now is None or now[0] != _RANK:
        db.execute(_FTS_RANK, (_RANK,))


def _index_terms(db: sqlite3.Connection, note_id: int, terms: tuple[str, str]) -> None:
    db.execute("DELETE FROM notes_fts WHERE rowid = ?", (note_id,))
    db.execute("INSERT INTO notes_fts (rowid, title, body) VALUES (?, ?, ?)", (note_id, *terms))


def _scrub(text: str) -> str:
    return redact(text).text if text else text


@contextmanager
def _transaction(db: sqlite3.Connection, *, immediate: bool = False) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
