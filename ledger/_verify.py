"""Walking the chain: every record re-hashed from its stored bytes, every link and seq checked.

The walk names the first place the chain breaks and why:

- a record whose content no longer hashes to its ``record_hash``: edited;
- a ``seq`` that skips: a record deleted;
- a ``prev_hash`` that is not the previous record's hash: reordered or inserted (or the
  previous record rewritten with a fresh hash);
- a head (count, last hash) that disagrees with the last record: the last record deleted,
  or records added behind the ledger's back;
- a ``continues`` record (what ``Ledger.rotate`` opens a new chain with, naming the ledger
  moved aside) anywhere but first.

A chain that starts with a ``continues`` record is reported with what it continues
(``VerifyReport.previous``).

What it cannot see is a rewrite of the whole tail with fresh hashes and a fresh head: a hash
chain proves order and integrity relative to a head someone kept elsewhere.

Reads that hand a record out (a replay) check that one record the same way, without the walk
(``record_problem``), and take a purged text's replacement only when a purge record in the
chain names it (``load_stored``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace

from ledger._blobs import blob_problem, load_text, purged_problem, unpack_text
from ledger._codec import GENESIS_HASH, canonical_record
from ledger._cuts import Mark, cuts_problem
from ledger._errors import BlobNotFoundError, LedgerCorruptError
from ledger._records import JSON, PreviousLedger, RecordKind, VerifyReport
from ledger._sqlite import has_table

__all__ = ["as_str", "chain_head", "check_chain", "load_stored", "record_problem", "verify_chain"]

_KINDS = frozenset(k.value for k in RecordKind)
# The records whose payload names stored texts (``blobs``), checked with ``blobs=True``.
_NAMING_TEXTS = frozenset(k.value.encode() for k in (
    RecordKind.TURN, RecordKind.FEEDBACK, RecordKind.SESSION, RecordKind.CHECKPOINT,
    RecordKind.SALIENCE))  # fmt: skip
# The keys of a journal entry's payload that name a stored text: a session step's text, a
# checkpoint's encoding, the free text a record names rather than holds (a decision's
# rationale, a failure's or a reset's reason), so that a purge can cut it.
_TEXT_KEYS = ("text_sha256", "checkpoint_sha256", "rationale_sha256", "reason_sha256")
_FETCH = 512  # rows per fetch: bounded memory on a large ledger, few round trips
_CONTINUES = RecordKind.CONTINUES.value.encode()

# Text columns are read as their raw bytes: a byte edited into invalid UTF-8 is then a
# finding about that record, not an exception that ends the walk.
_ROWS = (
    "SELECT seq, CAST(kind AS BLOB), CAST(turn_id AS BLOB), CAST(time AS BLOB), payload, "
    "CAST(prev_hash AS BLOB), CAST(record_hash AS BLOB), CAST(replay_key AS BLOB) "
    "FROM records"
)
_SELECT = f"{_ROWS} ORDER BY seq"


class _BadRecordError(Exception):
    """The first bad record, raised out of the walk."""

    def __init__(self, seq: int, turn_id: str | None, reason: str) -> None:
        super().__init__(reason)
        self.seq, self.turn_id, self.reason = seq, turn_id, reason


def verify_chain(
    conn: sqlite3.Connection, *, blobs: bool, anchor: tuple[int, str] | None = None
) -> VerifyReport:
    """Walk the whole chain in one read snapshot and report the first bad record, if any.

    Without an anchor a chain cut at its tail and given a new head (or rewritten from some
    record on, hashes recomputed) is internally consistent and cannot be told apart from
    one that was never longer. ``anchor`` = (seq, record hash), as ``head`` printed it and
    kept elsewhere: the record at that seq must still be there with that hash."""
    # One read transaction: the head and the records are seen as of the same commit, even
    # while another process appends.
    conn.execute("BEGIN")
    try:
        return check_chain(conn, blobs=blobs, anchor=anchor)
    finally:
        conn.execute("COMMIT")


def check_chain(
    conn: sqlite3.Connection, *, blobs: bool, anchor: tuple[int, str] | None = None
) -> VerifyReport:
    """``verify_chain`` inside the caller's transaction (a rotation's, under the write lock)."""
    report = _walk(conn, blobs=blobs)
    if anchor is None or not report.ok:
        return report
    seq, expected = anchor
    if seq == 0:  # the head of an empty ledger: every chain starts there
        if expected == GENESIS_HASH:
            return replace(report, reason=f"{report.reason}; the anchor at seq 0 (empty) "
                           "matches")  # fmt: skip
        return replace(report, ok=False, first_bad_seq=0, reason="the anchor at seq 0 "
                       "names a hash other than the empty ledger's (all zeros): it is no "
                       "head of this ledger")  # fmt: skip
    row = conn.execute("SELECT record_hash FROM records WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return replace(report, ok=False, first_bad_seq=seq,
                       reason=f"the anchored record seq {seq} is gone: the chain was cut "
                       f"after seq {report.checked}")  # fmt: skip
    if as_str(row[0]) != expected:
        return replace(report, ok=False, first_bad_seq=seq,
                       reason=f"record seq {seq} no longer has the anchored hash: the "
                       "chain was rewritten at or before it")  # fmt: skip
    return replace(report, reason=f"{report.reason}; the anchor at seq {seq} matches")


def chain_head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(records, hash of the last record): an anchor to keep outside the ledger."""
    row = conn.execute("SELECT count, last_hash FROM head WHERE id = 1").fetchone()
    if row is None:
        return 0, GENESIS_HASH
    return int(row[0]), as_str(row[1])


def record_problem(conn: sqlite3.Connection, seq: int) -> str | None:
    """What the walk would find wrong with record ``seq`` itself, or None if it is sound:
    its content against its record_hash, its prev_hash against the record before it, and
    the record after it (or the head) linking back to it.

    Three indexed reads instead of a walk, for a read that must not hand out an edited
    record. It catches any edit of this record; a rewrite that also re-hashes the records
    after it is left to ``verify_chain`` (and, for a whole new tail, its anchor). Call it
    inside a read transaction, so the neighbours and the head are of one commit."""
    row = conn.execute(f"{_ROWS} WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        return f"record seq {seq} is missing"
    prev = GENESIS_HASH
    if seq > 1:
        before = conn.execute(
            "SELECT CAST(record_hash AS BLOB) FROM records WHERE seq = ?", (seq - 1,)
        ).fetchone()
        if before is None:
            return f"seq {seq - 1} is missing (deleted): the record before seq {seq}"
        prev = as_str(before[0])
    try:
        _, rec_hash = _check_record(row, prev)
    except _BadRecordError as bad:
        return f"record seq {seq}: {bad.reason}"
    after = conn.execute(
        "SELECT CAST(prev_hash AS BLOB) FROM records WHERE seq = ?", (seq + 1,)
    ).fetchone()
    if after is not None:
        if as_str(after[0]) != rec_hash:
            return f"record seq {seq + 1} does not link to seq {seq}: seq {seq} was rewritten"
    elif chain_head(conn) != (seq, rec_hash):
        return f"the head does not end at seq {seq}, the last record"
    return None


def load_stored(conn: sqlite3.Connection, sha256: str) -> tuple[str, bool]:
    """(text, purged): the text stored under ``sha256``, re-hashed on read, or, once a
    purge removed it, the replacement (the removed parts marked ``[PURGED]``) that a sound
    purge record in the chain names for it.

    Raises ``BlobNotFoundError`` when neither is stored, and ``LedgerCorruptError`` for
    bytes that do not hash to their name and for a replacement no purge record vouches for
    (a row slipped into the ``purged`` table by hand)."""
    try:
        return load_text(conn, sha256), False
    except BlobNotFoundError:
        query = "SELECT 1 FROM purged WHERE sha256 = ?"
        if not has_table(conn, "purged") or conn.execute(query, (sha256,)).fetchone() is None:
            raise
    purges = _Purges(conn)
    problem = purged_problem(conn, sha256, purges.replacement.get(sha256))
    if problem is None:
        problem = record_problem(conn, purges.named_by[sha256])
    if problem is not None:
        raise LedgerCorruptError(problem)
    row = conn.execute("SELECT replacement_sha256, data FROM purged WHERE sha256 = ?",
                       (sha256,)).fetchone()  # fmt: skip
    text = unpack_text(str(row[0]), row[1])
    problem = purges.cut_problem(sha256, text)
    if problem is not None:
        raise LedgerCorruptError(problem)
    return text, True


def as_str(value: object) -> str:
    """A column read as bytes (``CAST(... AS BLOB)``) as text, undecodable bytes replaced."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _walk(conn: sqlite3.Connection, *, blobs: bool) -> VerifyReport:
    head = conn.execute("SELECT count, last_hash FROM head WHERE id = 1").fetchone()
    head_count = int(head[0]) if head is not None else -1
    sound_blobs: set[str] = set()
    purges = _Purges(conn) if blobs else None
    prev = GENESIS_HASH
    checked = 0
    past_head_turn: str | None = None
    previous: PreviousLedger | None = None
    try:
        cursor = conn.execute(_SELECT)
        while rows := cursor.fetchmany(_FETCH):
            for row in rows:
                seq = int(row[0])
                expected = checked + 1
                if seq != expected:
                    raise _BadRecordError(
                        expected, None,
                        f"seq {expected} is missing (deleted): the record after seq "
                        f"{expected - 1} is seq {seq}",
                    )  # fmt: skip
                turn_id, rec_hash = _check_record(row, prev)
                if row[1] == _CONTINUES:
                    previous = _continued(seq, turn_id, row[4])
                if blobs and row[1] in _NAMING_TEXTS:
                    assert purges is not None
                    _check_blobs(conn, seq, turn_id, row[4], sound_blobs, purges)
                if seq == head_count + 1:
                    past_head_turn = turn_id
                prev = rec_hash
                checked = seq
    except _BadRecordError as bad:
        return VerifyReport(False, bad.seq - 1, bad.seq, bad.turn_id, bad.reason,
                            previous=previous)  # fmt: skip
    if head is None:
        return VerifyReport(False, checked, checked + 1, None, "the head row is missing",
                            previous=previous)  # fmt: skip
    if head_count > checked:
        return VerifyReport(
            False, checked, checked + 1, None,
            f"the head says {head_count} records but the chain ends at seq {checked}: "
            "the last record(s) were deleted", previous=previous,
        )  # fmt: skip
    if head_count < checked:
        return VerifyReport(
            False, head_count, head_count + 1, past_head_turn,
            f"records past the head: the head says {head_count}, the chain holds {checked}",
            previous=previous,
        )  # fmt: skip
    if head[1] != prev:
        return VerifyReport(
            False, checked - 1, checked or None, None,
            f"the head's last hash does not match the record at seq {checked}",
            previous=previous,
        )  # fmt: skip
    purged = len(purges.seen) if purges is not None else 0
    note = f"; {purged} purged text(s) replaced as their purge records say" if purged else ""
    if previous is not None:
        note += f"; {previous.said()}"
    return VerifyReport(True, checked, None, None, f"chain intact: {checked} records{note}", purged,
                        previous)  # fmt: skip


def _continued(seq: int, turn_id: str | None, payload: object) -> PreviousLedger:
    """The ledger a ``continues`` record names; it must be the chain's first record."""
    if seq != 1:
        raise _BadRecordError(seq, turn_id, f"a continues record opens a chain, but this one "
                              f"is at seq {seq}: records inserted before it")  # fmt: skip
    try:
        body: JSON = json.loads(payload) if isinstance(payload, bytes) else None
        return PreviousLedger.from_payload(body)
    except ValueError as exc:
        said = f"a continues record that does not decode: {exc}"
        raise _BadRecordError(seq, turn_id, said) from None


def _check_record(row: tuple[object, ...], prev: str) -> tuple[str | None, str]:
    """Check one row against its predecessor's hash; return its (turn_id, record_hash)."""
    seq, kind_b, turn_b, time_b, payload, prev_b, hash_b, replay_b = row
    assert isinstance(seq, int)
    try:
        kind, time, prev_hash, rec_hash = (_text(b) for b in (kind_b, time_b, prev_b, hash_b))
        turn_id = None if turn_b is None else _text(turn_b)
    except (UnicodeDecodeError, TypeError) as exc:
        raise _BadRecordError(seq, None, f"a stored field is not text ({exc}): edited") from None
    if prev_hash != prev:
        raise _BadRecordError(
            seq, turn_id,
            f"prev_hash does not link to seq {seq - 1}: records reordered or inserted, "
            f"or seq {seq - 1} rewritten",
        )  # fmt: skip
    if not isinstance(payload, bytes):
        raise _BadRecordError(seq, turn_id, "the payload is not stored as bytes: edited")
    canonical = canonical_record(kind, seq, turn_id, time, payload, prev_hash)
    if hashlib.sha256(canonical).hexdigest() != rec_hash:
        raise _BadRecordError(seq, turn_id, "the record does not hash to its record_hash: edited")
    if kind not in _KINDS:
        raise _BadRecordError(seq, turn_id, f"unknown record kind {kind!r}")
    # The replay_key column is a lookup copy outside the hash; it must agree with the hashed
    # payload, or a lookup could find the wrong turn.
    if kind == RecordKind.TURN and _payload_field(payload, "replay_key") != _maybe_text(replay_b):
        raise _BadRecordError(seq, turn_id, "the replay_key column disagrees with the payload")
    return turn_id, rec_hash


class _Purges:
    """The (removed sha256 -> replacement sha256) pairs the chain's purge records name,
    and the cuts each made (records written before cuts were recorded have none)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.replacement: dict[str, str] = {}
        self.named_by: dict[str, int] = {}  # the purge record (seq) that named each
        # Per removed sha256, in chain order: (the text each purge cut, its replacement,
        # its marks).
        self.cuts: dict[str, list[tuple[str, str, list[Mark]]]] = {}
        self.seen: set[str] = set()
        self.present = has_table(conn, "purged")
        if not self.present:
            return
        query = "SELECT seq, payload FROM records WHERE kind = 'purge' ORDER BY seq"
        for seq, payload in conn.execute(query):
            try:
                body = json.loads(payload)
                pairs = [(str(a), str(b)) for a, b in body["texts"]]
                made = {str(a): (str(b), [(int(x), int(y), str(z)) for x, y, z in m])
                        for a, b, m in body.get("cuts", ())}  # fmt: skip
            except (ValueError, TypeError, KeyError):
                continue  # the walk reports the record itself if it was edited
            self.replacement.update(pairs)
            self.named_by.update((a, int(seq)) for a, _ in pairs)
            for removed, replacement in pairs:
                if removed in made:
                    cut_from, marks = made[removed]
                    self.cuts.setdefault(removed, []).append((cut_from, replacement, marks))

    def cut_problem(self, sha256: str, replacement: str) -> str | None:
        """What is wrong with ``replacement`` as what the purges of ``sha256`` cut it to:
        the first purge must cut the text itself and each later one what the one before
        left, and the last one's ``[PURGED]`` marks must stand where its record says.
        None when sound, or when its purge records predate recorded cuts."""
        made = self.cuts.get(sha256)
        if not made:
            return None
        before = sha256
        for cut_from, replacement_sha, _ in made:
            if cut_from != before:
                return (f"purged blob {sha256}: a purge cut a text the purges before it "
                        "did not leave")  # fmt: skip
            before = replacement_sha
        problem = cuts_problem(replacement, made[-1][2])
        return None if problem is None else f"purged blob {sha256}: {problem}"


def _check_blobs(
    conn: sqlite3.Connection,
    seq: int,
    turn_id: str | None,
    payload: object,
    sound: set[str],
    purges: _Purges,
) -> None:
    """Every text a turn (prompt, inputs, snippet texts), a feedback (tool-result
    summaries), a session step (its text, a decision's rationale), a checkpoint (its
    encoding) or an attest (a failure's reason) names is there and hashes right, or was
    replaced by a recorded purge."""
    assert isinstance(payload, bytes)
    try:
        value = json.loads(payload)
        if not isinstance(value, dict):  # a journal entry's payload may be any JSON
            shas = []
        elif "render_sha256" in value:  # a turn: its prompt, inputs and snippet texts
            shas = [value["render_sha256"], value["inputs_sha256"]]
            shas += [s["sha256"] for s in value["snippets"]]
        elif "tool_results" in value:  # feedback: summaries (inline in older records)
            shas = [t["summary_sha256"] for t in value["tool_results"] if "summary_sha256" in t]
        else:  # a session step's text, a checkpoint's encoding, a reason or a rationale
            shas = [value[k] for k in _TEXT_KEYS if k in value]
    except (ValueError, TypeError, KeyError) as exc:
        raise _BadRecordError(seq, turn_id, f"the payload does not decode: {exc!r}") from None
    for sha in shas:
        if sha in sound:
            continue
        problem = blob_problem(conn, str(sha))
        if problem is not None and problem.endswith("is missing") and purges.present:
            problem = purged_problem(conn, str(sha), purges.replacement.get(str(sha)))
            if problem is None and str(sha) in purges.cuts:
                replacement = purges.replacement[str(sha)]
                row = conn.execute("SELECT data FROM purged WHERE sha256 = ?",
                                   (str(sha),)).fetchone()  # fmt: skip
                text = unpack_text(replacement, row[0])
                problem = purges.cut_problem(str(sha), text)
            if problem is None:
                purges.seen.add(str(sha))
        if problem is not None:
            raise _BadRecordError(seq, turn_id, f"the record references {problem}")
        sound.add(sha)


def _payload_field(payload: bytes, key: str) -> object:
    try:
        value = json.loads(payload)
        return value[key] if isinstance(value, dict) else None
    except ValueError:
        return None


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise TypeError(f"expected text, found {type(value).__name__}")
    return value.decode("utf-8")


def _maybe_text(value: object) -> str | None:
    try:
        return None if value is None else _text(value)
    except (UnicodeDecodeError, TypeError):
        return None
