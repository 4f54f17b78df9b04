"""``Ledger``: append-only, hash-chained records and content-addressed texts in one SQLite file.

Each append is one ``BEGIN IMMEDIATE`` transaction (read the head, hash, insert, move the
head, commit), so a crash at any point leaves either the whole record or none of it, and two
processes appending at once are serialised by SQLite's lock (``busy_timeout``), never
interleaved inside a record. Once that lock is held, the append checks that the path still
names the file it has open (``ledger._handle``), so an append after a rotation lands in the
new ledger, never in the file moved aside.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from os import PathLike
from pathlib import Path
from types import TracebackType

from ledger._blobs import load_text, purged_names, store_text, text_page
from ledger._chain import COLUMNS, link
from ledger._codec import (
    canonical_json,
    check_json,
    decode_row,
    feedback_payload,
    now_utc,
    text_sha256,
    turn_payload,
)
from ledger._errors import LedgerCorruptError
from ledger._handle import Handle, snapshot
from ledger._purge import purge_texts
from ledger._records import (
    JSON,
    FeedbackDraft,
    FeedbackRecord,
    JournalEntry,
    Record,
    RecordKind,
    TurnDraft,
    TurnRecord,
    VerifyReport,
    check_time,
)
from ledger._rotate import Rotation, previous_problem, rotate_file
from ledger._sqlite import FOLD_WAIT_S, FileId, connect, fold_wal
from ledger._verify import chain_head, load_stored, record_problem, verify_chain

__all__ = ["BUSY_TIMEOUT_S", "COMPACT_WAIT_S", "Ledger"]

BUSY_TIMEOUT_S = 10.0  # an append holds the lock ~1 ms; 10 s of waiting means a stuck writer
# A reader's transaction (a replay, a verify of a large ledger) lasts a few seconds at most;
# one still open after 30 s is held open on purpose, and waiting longer would not help.
COMPACT_WAIT_S = FOLD_WAIT_S
_PAGE = 256  # records per read while iterating: bounded memory, few round trips
_COLUMNS = COLUMNS


class Ledger:
    """The evidence ledger: every turn and what followed it, in one hash chain.

    >>> with Ledger.open(tmp / "ledger.db") as ledger:  # doctest: +SKIP
    ...     sha = ledger.put_text(prompt)
    ...     record = ledger.append_turn(TurnDraft(turn_id="t1", render_sha256=sha, ...))
    ...     assert ledger.verify().ok

    Safe to share between threads of one process; any number of processes may append to
    the same file. Open it with ``Ledger.open``. After a rotation (``Ledger.rotate``, here
    or in another process) the next read or append goes to the new ledger.
    """

    def __init__(self, handle: Handle) -> None:
        """Wrap an open handle; use ``Ledger.open`` instead."""
        self._path = handle.path
        self._handle = handle

    @classmethod
    def open(
        cls,
        path: Path | str | PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        busy_timeout: float = BUSY_TIMEOUT_S,
        max_pages: int | None = None,
    ) -> Ledger:
        """Open the ledger at ``path``, creating it (and its folder) if absent and ``create``.

        ``read_only`` opens it with SQLite's ``mode=ro``: reads and ``verify`` work, every
        write raises ``LedgerWriteError``. ``busy_timeout`` is how many seconds a write waits
        for another process's lock. ``max_pages`` caps the file at that many pages
        (``PRAGMA max_page_count``), for tests of a full disk.

        Raises ``LedgerNotFoundError``, ``LedgerCorruptError`` (not a ledger),
        ``LedgerSchemaError`` (another schema version) or ``LedgerWriteError``.
        """
        where = Path(path)

        def opener() -> tuple[sqlite3.Connection, FileId | None]:
            return connect(where, create=create, read_only=read_only,
                           busy_timeout=busy_timeout, max_pages=max_pages)  # fmt: skip

        return cls(Handle(where, opener, busy_timeout))

    @classmethod
    def rotate(
        cls,
        path: Path | str | PathLike[str],
        *,
        broken: bool = False,
        also: Sequence[Path] = (),
        anchor: tuple[int, str] | None = None,
        busy_timeout: float = BUSY_TIMEOUT_S,
        time: str | None = None,
    ) -> Rotation:
        """Close the ledger at ``path`` and start a new chain that names it.

        Moves the file, its ``-wal`` and ``-shm`` files and the files in ``also`` (files
        folded from the ledger, beside it, each with its own ``-wal``/``-shm``) aside to
        ``<stem>.<rotated|broken>-<UTC time>...`` in the same folder, read-only (0400), and
        puts a new ledger at ``path`` whose first record (kind ``continues``) names the file
        moved aside: its last record that verifies (seq, hash), its size and sha256,
        whether its chain verified (with ``anchor``, as ``verify(anchor=...)`` checks it)
        and why not, and the reason. A ledger open in any process follows to the new file
        on its next read or append; none appends to the file moved aside.

        ``broken`` is for a ledger that fails its check (or that SQLite cannot read): it is
        moved aside as evidence. Without it the ledger must verify. ``time`` (ISO 8601 UTC)
        stamps the names and the record instead of now.

        Raises ``LedgerNotFoundError`` (no ledger at ``path``), ``LedgerRotateError``
        (refused: a healthy ledger called broken, a broken one not, a name aside taken;
        nothing moved) or ``LedgerWriteError``.

        >>> Ledger.rotate(state / "ledger.sqlite").previous.seq  # doctest: +SKIP
        4121
        """
        return rotate_file(Path(path), broken=broken, also=tuple(Path(p) for p in also),
                           anchor=anchor, busy_timeout=busy_timeout, time=time)  # fmt: skip

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self._path

    def file_id(self) -> FileId | None:
        """(device, inode) of the ledger file at the path, the one reads and appends go to:
        another after a rotation (a cache of what was read from the ledger keys on it)."""
        return self._handle.file_id()

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._handle.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self._path)!r})"

    # -- texts --------------------------------------------------------------------------

    def put_text(self, text: str) -> str:
        """Store ``text``'s exact UTF-8 bytes once under their sha256; return the sha256."""
        with self._reading("store a text in") as conn:
            return store_text(conn, text)

    def get_text(self, sha256: str) -> str:
        """The text stored under ``sha256``, re-hashed on read.

        Raises ``BlobNotFoundError`` if absent, ``LedgerCorruptError`` naming the sha if the
        stored bytes do not hash back to it.
        """
        with self._reading("read a text from") as conn:
            return load_text(conn, sha256)

    def get_stored(self, sha256: str) -> tuple[str, bool]:
        """(text, purged): like ``get_text``, but a text a purge removed gives its
        replacement (the removed parts marked ``[PURGED]``) and True instead of an error.

        The replacement is returned only when a sound purge record names it; one slipped
        in by hand raises ``LedgerCorruptError``."""
        with self._reading("read a text from") as conn, snapshot(conn):
            return load_stored(conn, sha256)

    def texts(self, *, purged: bool = False) -> Iterator[tuple[str, str]]:
        """Every stored text as (sha256, text), in sha256 order, each verified on read;
        with ``purged``, then every text a purge removed as (its sha256, what the purge
        left), each checked as ``get_stored`` checks it (a later purge cuts from that)."""
        after = ""
        while True:
            with self._reading("read the texts of") as conn:
                page = text_page(conn, after)
            if not page:
                break
            yield from page
            after = page[-1][0]
        after = ""
        while purged:
            with self._reading("read the texts of") as conn, snapshot(conn):
                page = [(n, load_stored(conn, n)[0]) for n in purged_names(conn, after)]
            if not page:
                return
            yield from page
            after = page[-1][0]

    def purge(
        self, cuts: Mapping[str, Sequence[tuple[int, int]]], note: Mapping[str, JSON]
    ) -> JournalEntry:
        """Cut parts out of stored texts: for each sha256 in ``cuts``, each (start, end)
        range of characters of the text stored under it now (what an earlier purge left,
        if one did) becomes ``[PURGED]``, and the rest stays as it was; nothing else can be
        written. One transaction appends a ``purge`` record naming every (removed sha256,
        replacement sha256) pair and, under ``cuts``, for each text the sha256 of the text
        cut and each cut as (UTF-8 byte offset, byte length, sha256 of the bytes cut), so
        whoever holds a cut string can check it (``ledger.restore``), plus ``note`` (which
        must not hold what was removed). Call ``compact`` after it: until then the removed
        bytes are still in the file's freed pages.

        Raises ``ValueError`` for a sha256 that names no stored text and for a range that
        is empty, out of order, overlapping or outside its text.
        """
        return purge_texts(self._handle, cuts, note)

    def compact(self, *, wait: float | None = None) -> bool:
        """Rewrite the file so no freed page (what a purge removed) is left in it or in its
        write-ahead log; True when done. Another process inside a read (a server answering
        a replay, a ``verify``) keeps the old pages in use: this retries for ``wait``
        seconds (default ``COMPACT_WAIT_S``), then returns False, and the bytes stay on disk
        until it is called again once that reader is done."""
        with self._reading("compact") as conn:
            if int(conn.execute("PRAGMA freelist_count").fetchone()[0]):
                conn.execute("VACUUM")  # every page written again, into the WAL
            # then copied over the file's pages, once no reader needs them
            return fold_wal(conn, COMPACT_WAIT_S if wait is None else wait)

    # -- appends ------------------------------------------------------------------------

    def append_turn(self, turn: TurnDraft) -> TurnRecord:
        """Append a turn; its texts must already be stored (``put_text``).

        Raises ``ValueError`` for a turn id already recorded or a blob not stored, and
        ``LedgerWriteError`` when the write cannot land.
        """
        shas = sorted({turn.render_sha256, turn.inputs_sha256, *(s.sha256 for s in turn.snippets)})

        def check(conn: sqlite3.Connection) -> None:
            if conn.execute(
                "SELECT 1 FROM records WHERE kind = 'turn' AND turn_id = ?", (turn.turn_id,)
            ).fetchone():
                raise ValueError(f"turn {turn.turn_id!r} is already in the ledger")
            marks = ",".join("?" * len(shas))
            found = {
                r[0]
                for r in conn.execute(f"SELECT sha256 FROM blobs WHERE sha256 IN ({marks})", shas)
            }
            if missing := [s for s in shas if s not in found]:
                raise ValueError(
                    f"turn {turn.turn_id!r} names texts not stored in the ledger "
                    f"(put_text them first): {', '.join(missing)}"
                )

        time = turn.time or now_utc()
        payload = canonical_json(turn_payload(turn))
        seq, prev, rec_hash = self._append(
            RecordKind.TURN, turn.turn_id, time, payload, turn.replay_key, check
        )
        return TurnRecord(
            turn.turn_id, time, turn.goal_ref, turn.tokens_used, turn.budget, turn.snippets,
            turn.replay_key, turn.render_sha256, turn.inputs_sha256, turn.model_citations,
            turn.user, seq=seq, prev_hash=prev, record_hash=rec_hash,
        )  # fmt: skip

    def append_feedback(self, draft: FeedbackDraft) -> FeedbackRecord:
        """Append feedback for a stored turn.

        Raises ``ValueError`` when the turn is not in the ledger or ``cited``/``stale`` name
        ids that are not among its snippets.
        """

        def check(conn: sqlite3.Connection) -> None:
            turn = self._select_turn(conn, draft.turn_id)
            if turn is None:
                raise ValueError(f"no turn {draft.turn_id!r} in the ledger to give feedback on")
            for result in draft.tool_results:  # texts, named from the record by sha256
                store_text(conn, result.summary)
            outside = (set(draft.cited) | set(draft.stale)) - {s.local_id for s in turn.snippets}
            if outside:
                raise ValueError(
                    f"feedback for turn {draft.turn_id!r} cites ids {sorted(outside)} that are "
                    "not its snippets (record them in dropped)"
                )

        time = draft.time or now_utc()
        payload = canonical_json(feedback_payload(draft))
        seq, prev, rec_hash = self._append(
            RecordKind.FEEDBACK, draft.turn_id, time, payload, None, check
        )
        results = tuple(replace(t, summary_sha256=text_sha256(t.summary))
                        for t in draft.tool_results)  # fmt: skip
        return FeedbackRecord(
            draft.turn_id, time, draft.cited, draft.dropped, draft.stale, results,
            draft.outcome, seq=seq, prev_hash=prev, record_hash=rec_hash,
        )  # fmt: skip

    def append(
        self, kind: RecordKind, turn_id: str | None, payload: JSON, *, time: str | None = None
    ) -> JournalEntry:
        """Append a journal entry of a later kind (weights, checkpoint, salience).

        Turns and feedback have their own methods, which check their fields; ``append``
        refuses them. ``payload`` must be JSON (str keys, finite floats).
        """
        kind = RecordKind(kind)
        if kind in (RecordKind.TURN, RecordKind.FEEDBACK):
            raise ValueError(f"append {kind.value} records with append_{kind.value}")
        if kind is RecordKind.PURGE:
            raise ValueError("append purge records with purge (it removes the texts with it)")
        if kind is RecordKind.CONTINUES:
            raise ValueError("a continues record opens a chain: Ledger.rotate writes it")
        if turn_id is not None and (not isinstance(turn_id, str) or not turn_id):
            raise ValueError(f"turn_id must be None or a non-empty str, not {turn_id!r}")
        if time is not None:
            check_time(time)
        check_json(payload)
        stamp = time or now_utc()
        data = canonical_json(payload)
        seq, prev, rec_hash = self._append(kind, turn_id, stamp, data, None, None)
        entry = decode_row((seq, kind.value, turn_id, stamp, data, prev, rec_hash))
        assert isinstance(entry, JournalEntry)
        return entry

    def append_entries(
        self,
        entries: Sequence[tuple[RecordKind, str | None, JSON]],
        *,
        time: str | None = None,
        texts: Sequence[str] = (),
    ) -> list[JournalEntry]:
        """Append journal entries (kind, turn_id, payload) as consecutive records in one
        transaction: a crash leaves all of them or none (e.g. a salience change and the
        weight update that goes with it). ``texts`` are stored (as ``put_text`` stores
        them) in the same transaction, for payloads that name them by sha256. The same
        checks as ``append``."""
        if not entries:
            raise ValueError("no entries to append")
        if time is not None:
            check_time(time)
        stamp = time or now_utc()
        rows: list[tuple[RecordKind, str | None, bytes]] = []
        for kind, turn_id, payload in entries:
            kind = RecordKind(kind)
            if kind in (RecordKind.TURN, RecordKind.FEEDBACK, RecordKind.PURGE,
                        RecordKind.CONTINUES):  # fmt: skip
                raise ValueError(f"append_entries takes journal kinds, not {kind.value}")
            if turn_id is not None and (not isinstance(turn_id, str) or not turn_id):
                raise ValueError(f"turn_id must be None or a non-empty str, not {turn_id!r}")
            check_json(payload)
            rows.append((kind, turn_id, canonical_json(payload)))
        if any(not isinstance(t, str) for t in texts):
            raise ValueError("the texts to store with the entries must be str")
        out: list[JournalEntry] = []
        with self._handle.writing("append to") as conn:
            for text in texts:
                store_text(conn, text)
            for kind, turn_id, data in rows:
                seq, prev, rec_hash = link(conn, self._path, kind, turn_id, stamp, data, None)
                entry = decode_row((seq, kind.value, turn_id, stamp, data, prev, rec_hash))
                assert isinstance(entry, JournalEntry)
                out.append(entry)
        return out

    def _append(
        self,
        kind: RecordKind,
        turn_id: str | None,
        time: str,
        payload: bytes,
        replay_key: str | None,
        check: Callable[[sqlite3.Connection], None] | None,
        then: Callable[[sqlite3.Connection, int], None] | None = None,
    ) -> tuple[int, str, str]:
        """Chain one record onto the head in one transaction; return (seq, prev, hash).
        ``then(conn, seq)`` writes what belongs with the record, in the same transaction."""
        with self._handle.writing("append to") as conn:
            if check is not None:
                check(conn)
            seq, prev, rec_hash = link(conn, self._path, kind, turn_id, time, payload, replay_key)
            if then is not None:
                then(conn, seq)
        return seq, prev, rec_hash

    # -- reads --------------------------------------------------------------------------

    def turn(self, turn_id: str) -> TurnRecord | None:
        """The turn with this id, or None."""
        with self._reading("read") as conn:
            return self._select_turn(conn, turn_id)

    def turn_by_replay_key(
        self, key: str, users: Container[str] | None = None
    ) -> TurnRecord | None:
        """The latest turn with this replay key recorded by one of ``users`` (None: by
        anyone), or None.

        Equal inputs give equal keys, so a key can recur; every turn with it rendered the
        same prompt, and the latest is the one feedback most likely refers to. Users who
        share a ledger ask the same question under one key: each finds their own turn.

        The record is checked as ``verify`` checks it (its content against its hash, its
        links to the records beside it), without walking the chain: an edited record
        raises ``LedgerCorruptError`` rather than being replayed.
        """
        with self._reading("read") as conn, snapshot(conn):
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM records WHERE replay_key = ? AND kind = 'turn' "
                "ORDER BY seq DESC",
                (key,),
            )
            row = next((r for r in rows if users is None or _recorded_by(r, users)), None)
            problem = None if row is None else record_problem(conn, int(row[0]))
        if row is None:
            return None
        if problem is not None:
            raise LedgerCorruptError(f"the turn under replay key {key} fails its check: {problem}")
        turn = decode_row(row)
        if not isinstance(turn, TurnRecord) or turn.replay_key != key:
            raise LedgerCorruptError(
                f"ledger record seq {row[0]}: its replay_key column disagrees with the record; "
                "run verify"
            )
        return turn

    def records(
        self, kind: RecordKind | None = None, turn_id: str | None = None, after: int = 0
    ) -> Iterator[Record]:
        """Stored records in ``seq`` order, optionally only one kind and/or one turn's, and
        only those after record ``after``."""
        where, args = "", []
        if kind is not None:
            where += " AND kind = ?"
            args.append(RecordKind(kind).value)
        if turn_id is not None:
            where += " AND turn_id = ?"
            args.append(turn_id)
        while True:
            with self._reading("read") as conn, snapshot(conn):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM records WHERE seq > ?{where} ORDER BY seq LIMIT ?",
                    (after, *args, _PAGE),
                ).fetchall()
                page = [_filled(conn, decode_row(r)) for r in rows]
            if not page:
                return
            yield from page
            after = int(rows[-1][0])

    def feedback_for(self, turn_id: str) -> list[FeedbackRecord]:
        """The feedback records of one turn, oldest first."""
        found = self.records(RecordKind.FEEDBACK, turn_id)
        return [r for r in found if isinstance(r, FeedbackRecord)]

    def last(self, n: int, kind: RecordKind | None = None) -> list[Record]:
        """The ``n`` most recent records (of ``kind``, if given), oldest first."""
        if n <= 0:
            return []
        where, args = ("WHERE kind = ?", (RecordKind(kind).value,)) if kind else ("", ())
        with self._reading("read") as conn, snapshot(conn):
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM records {where} ORDER BY seq DESC LIMIT ?", (*args, n)
            ).fetchall()
            return [_filled(conn, decode_row(r)) for r in reversed(rows)]

    def __len__(self) -> int:
        """How many records the chain holds (its head's count)."""
        with self._reading("read") as conn:
            row = conn.execute("SELECT count FROM head WHERE id = 1").fetchone()
        if row is None:
            raise LedgerCorruptError(f"the ledger {self._path} has lost its head row; run verify")
        return int(row[0])

    def verify(
        self,
        *,
        blobs: bool = False,
        anchor: tuple[int, str] | None = None,
        previous: bool = False,
    ) -> VerifyReport:
        """Walk the whole chain and name the first bad record (see ``VerifyReport``).

        With ``blobs``, also check that every text a turn names is stored and hashes right;
        with ``anchor`` (seq, hash) from an earlier ``head``, that the chain still holds it
        (the only way to detect a tail cut and re-headed); with ``previous``, for a chain
        that continues a rotated ledger, that the file it names beside this one still has
        the size and sha256 recorded and holds the record it names (one read of the file).
        """
        try:
            with self._reading("verify") as conn:
                report = verify_chain(conn, blobs=blobs, anchor=anchor)
        except LedgerCorruptError as exc:  # a damaged file: said as a failed check is
            return VerifyReport(False, 0, None, None, str(exc))
        if not previous or not report.ok or report.previous is None:
            return report
        problem = previous_problem(self._path, report.previous)
        if problem is not None:
            return replace(report, ok=False, first_bad_seq=1, reason=problem)
        return replace(report, reason=f"{report.reason}; {report.previous.file} checked")

    def head(self) -> tuple[int, str]:
        """(records, the last record's hash): print it, keep it elsewhere, pass it back to
        ``verify(anchor=...)`` later."""
        with self._reading("head") as conn:
            return chain_head(conn)

    def latest(self, kind: RecordKind) -> int:
        """The seq of the newest record of ``kind``, 0 when there is none (one indexed
        lookup: what a cache of texts checks for a purge made since it read them)."""
        with self._reading("read") as conn:
            row = conn.execute("SELECT MAX(seq) FROM records WHERE kind = ?",
                               (RecordKind(kind).value,)).fetchone()  # fmt: skip
        return int(row[0] or 0)

    # -- plumbing -----------------------------------------------------------------------

    @staticmethod
    def _select_turn(conn: sqlite3.Connection, turn_id: str) -> TurnRecord | None:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM records WHERE kind = 'turn' AND turn_id = ?", (turn_id,)
        ).fetchone()
        if row is None:
            return None
        turn = decode_row(row)
        assert isinstance(turn, TurnRecord)
        return turn

    def _reading(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        return self._handle.reading(action)


def _recorded_by(row: Sequence[object], users: Container[str]) -> bool:
    """Whether a turn row was recorded by one of ``users``; a row that does not decode is
    taken (the caller's check then says what is wrong with it, rather than skip it)."""
    try:
        turn = decode_row(row)
    except LedgerCorruptError:
        return True
    return isinstance(turn, TurnRecord) and turn.user in users


def _filled(conn: sqlite3.Connection, record: Record) -> Record:
    """A feedback record with its tool-result summaries read from the stored texts (what a
    purge left, where one removed them)."""
    if not isinstance(record, FeedbackRecord) or not any(
        t.summary_sha256 for t in record.tool_results
    ):
        return record
    results = tuple(
        replace(t, summary=load_stored(conn, t.summary_sha256)[0]) if t.summary_sha256 else t
        for t in record.tool_results
    )
    return replace(record, tool_results=results)
