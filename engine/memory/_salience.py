"""Salience and learned weights: a fold over the journal's attest/weights pairs.

The journal is the truth: an attest record (``salience`` kind: the items an outcome
touched, with their citation and access changes) and the weights record after it
(``weights`` kind: before, after, rate, skipped). ``SalienceState.apply`` folds one pair;
folding every pair from an empty state rebuilds the same tables bit for bit (the weights
record carries its ``after`` values verbatim, and counts are integers).

``SalienceTables`` keeps the fold on disk (``<state>/salience.sqlite``) with the journal
seq it covers, so a read folds only the records after it, in memory: reads never write.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import Learned, MemoryStateError
from ledger import JSON, JournalEntry, RecordKind

__all__ = ["SALIENCE_HALF", "SalienceState", "SalienceTables", "item_salience", "salience_path"]

# Citations at which an item's salience reaches one half: s = c / (c + SALIENCE_HALF).
# Two successes already mark a file as this workspace's habit; ten are near certainty.
SALIENCE_HALF = 2.0
_SCHEMA = 1


def salience_path(ledger: Path) -> Path:
    """The salience tables folded from the ledger at ``ledger``, beside it (one per ledger:
    a rotation moves them aside with it, under the same name)."""
    return ledger.with_suffix(".salience.sqlite")


def item_salience(citations: int) -> float:
    """An item's salience in [0, 1) from its net citations."""
    return citations / (citations + SALIENCE_HALF) if citations > 0 else 0.0


@dataclass(slots=True)
class Item:
    """One item's counts: net citations (floor 0), accesses, last-used time."""

    citations: int = 0
    accesses: int = 0
    last_used: str = ""


@dataclass(slots=True)
class SalienceState:
    """Items by key and learned offsets by feature, as of journal record ``seq``."""

    items: dict[str, Item] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    seq: int = 0

    def apply(self, record: JournalEntry) -> None:
        """Fold one attest (salience) or weights record; others are ignored."""
        payload = record.payload
        if not isinstance(payload, dict):
            return
        if record.kind is RecordKind.SALIENCE:
            changes = payload.get("items", [])
            assert isinstance(changes, list)
            for change in changes:
                assert isinstance(change, list) and len(change) == 3
                key, d_cit, d_acc = change
                assert isinstance(key, str) and isinstance(d_cit, int) and isinstance(d_acc, int)
                item = self.items.setdefault(key, Item())
                item.citations = max(0, item.citations + d_cit)
                item.accesses += d_acc
                item.last_used = record.time
        elif record.kind is RecordKind.WEIGHTS:
            after = payload.get("after", {})
            assert isinstance(after, dict)
            self.weights = {
                str(k): float(v) for k, v in after.items() if isinstance(v, (int, float))
            }
        self.seq = max(self.seq, record.seq)

    def learned(self) -> Learned:
        """What ranking reads: salience per key and the learned offsets."""
        sal = {k: item_salience(i.citations) for k, i in self.items.items() if i.citations}
        return Learned.of(self.weights, sal)

    def dump(self) -> str:
        """The whole state as canonical JSON (for bit-for-bit comparisons)."""
        body: JSON = {
            "items": {
                k: [i.citations, i.accesses, i.last_used] for k, i in sorted(self.items.items())
            },
            "weights": dict(sorted(self.weights.items())),
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    def copy(self) -> SalienceState:
        """An independent copy."""
        items = {k: Item(i.citations, i.accesses, i.last_used) for k, i in self.items.items()}
        return SalienceState(items, dict(self.weights), self.seq)


class SalienceTables:
    """The fold on disk: ``items``, ``weights`` and the journal seq they cover.

    Only ``catch_up`` writes (feedback calls it after journaling a pair); ``state``
    reads the tables and folds the records after them in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self, *, write: bool) -> sqlite3.Connection | None:
        if not write and not self.path.exists():
            return None
        try:
            if write:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(
                    "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1),"
                    " schema INTEGER NOT NULL, seq INTEGER NOT NULL);"
                    "CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY,"
                    " citations INTEGER NOT NULL, accesses INTEGER NOT NULL,"
                    " last_used TEXT NOT NULL);"
                    "CREATE TABLE IF NOT EXISTS weights (feature TEXT PRIMARY KEY,"
                    " value REAL NOT NULL);"
                )
                return conn
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10.0)
        except sqlite3.Error as exc:
            raise MemoryStateError(f"salience tables {self.path}: {exc}") from exc

    def load(self) -> SalienceState:
        """The state the tables hold (empty when there are none)."""
        conn = self._connect(write=False)
        if conn is None:
            return SalienceState()
        try:
            meta = conn.execute("SELECT schema, seq FROM meta WHERE id = 1").fetchone()
            if meta is None:
                return SalienceState()
            if int(meta[0]) != _SCHEMA:
                raise MemoryStateError(
                    f"salience tables {self.path} have schema {meta[0]}; "
                    "delete the file (it is rebuilt from the ledger)"
                )
            rows = conn.execute("SELECT key, citations, accesses, last_used FROM items")
            items = {str(k): Item(int(c), int(a), str(t)) for k, c, a, t in rows}
            found = conn.execute("SELECT feature, value FROM weights")
            weights = {str(f): float(v) for f, v in found}
            return SalienceState(items, weights, int(meta[1]))
        except sqlite3.Error as exc:
            raise MemoryStateError(f"salience tables {self.path}: {exc}") from exc
        finally:
            conn.close()

    def state(
        self, tail: Iterable[JournalEntry], base: SalienceState | None = None
    ) -> SalienceState:
        """``base`` (else the tables) with the journal records after it folded in memory."""
        state = (base or self.load()).copy()
        for record in tail:
            if record.seq > state.seq:
                state.apply(record)
        return state

    def catch_up(self, records: Iterable[JournalEntry]) -> int:
        """Fold the journal records after the tables' seq into them (``SalienceState.apply``)
        and write the items they touched, the weights and the seq in one transaction;
        return the seq now covered."""
        state = self.load()
        touched: set[str] = set()
        for record in records:
            if record.seq > state.seq:
                before = {k: (i.citations, i.accesses, i.last_used) for k, i in state.items.items()}
                state.apply(record)
                touched |= {k for k, i in state.items.items()
                            if before.get(k) != (i.citations, i.accesses, i.last_used)}  # fmt: skip
        conn = self._connect(write=True)
        assert conn is not None
        try:
            conn.execute("BEGIN IMMEDIATE")
            rows = [(k, state.items[k].citations, state.items[k].accesses,
                     state.items[k].last_used) for k in sorted(touched)]  # fmt: skip
            conn.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", rows)
            conn.execute("DELETE FROM weights")
            conn.executemany("INSERT INTO weights VALUES (?, ?)", sorted(state.weights.items()))
            conn.execute("INSERT OR REPLACE INTO meta VALUES (1, ?, ?)", (_SCHEMA, state.seq))
            conn.execute("COMMIT")
            return state.seq
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise MemoryStateError(f"salience tables {self.path}: {exc}") from exc
        finally:
            conn.close()

    def dump(self) -> str:
        """The tables as canonical JSON (what a purity test compares)."""
        return self.load().dump()


def weights_payload(before: Mapping[str, float], after: Mapping[str, float], rate: float,
                    skipped: bool) -> JSON:  # fmt: skip
    """The weights record's payload."""
    for v in after.values():
        if not math.isfinite(v):
            raise ValueError(f"learned weight is not finite: {v}")
    return {"before": dict(sorted(before.items())), "after": dict(sorted(after.items())),
            "rate": rate, "skipped": skipped}  # fmt: skip
