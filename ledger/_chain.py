"""Chaining one record onto the head, inside the caller's write transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger._codec import GENESIS_HASH, record_hash
from ledger._errors import LedgerCorruptError
from ledger._records import RecordKind

__all__ = ["COLUMNS", "link"]

COLUMNS = "seq, kind, turn_id, time, payload, prev_hash, record_hash"


def link(
    conn: sqlite3.Connection,
    path: Path,
    kind: RecordKind,
    turn_id: str | None,
    time: str,
    payload: bytes,
    replay_key: str | None,
) -> tuple[int, str, str]:
    """Chain one record onto the head; return (seq, prev_hash, record_hash).

    Refuses (``LedgerCorruptError``) a head that disagrees with the last record, and a
    ``continues`` record anywhere but first: it opens a chain (``Ledger.rotate``)."""
    head = conn.execute("SELECT count, last_hash FROM head WHERE id = 1").fetchone()
    tail = conn.execute("SELECT seq, record_hash FROM records ORDER BY seq DESC LIMIT 1").fetchone()
    # Never chain onto a break: the new record would make a tampered tail look sound.
    ends = (int(tail[0]), str(tail[1])) if tail else (0, GENESIS_HASH)
    if head is None or (int(head[0]), str(head[1])) != ends:
        raise LedgerCorruptError(
            f"the ledger {path} does not end where its head says, so no record is appended to "
            "it, now or after a check (`cortex ledger verify` names the first bad record; to "
            "record again, move the file aside as evidence and start a new chain: `cortex "
            "ledger rotate --broken`, README, 'A broken ledger')"
        )
    seq, prev = int(head[0]) + 1, str(head[1])
    if kind is RecordKind.CONTINUES and seq != 1:
        raise ValueError("a continues record opens a chain: only a new ledger takes one")
    rec_hash = record_hash(kind.value, seq, turn_id, time, payload, prev)
    conn.execute(
        f"INSERT INTO records ({COLUMNS}, replay_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (seq, kind.value, turn_id, time, payload, prev, rec_hash, replay_key),
    )
    conn.execute("UPDATE head SET count = ?, last_hash = ? WHERE id = 1", (seq, rec_hash))
    return seq, prev, rec_hash
