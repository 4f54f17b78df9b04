"""BM25 with tantivy's constants, so that scores from different segments can be compared.

A segment scores a document with its own statistics (document count, average field length,
document frequency of each term). A View over a base and an overlay has other statistics:
the base's, minus what the tombstones hide, plus what the overlay holds. This module
rescores a document with any statistics, exactly the way tantivy would have scored it in a
single index holding the View's documents: k1 = 1.2, b = 0.75,
idf = ln(1 + (N - n + 0.5) / (n + 0.5)), the average over raw token counts, and the
document's own length rounded through tantivy's one-byte "fieldnorm" code
(``tantivy/src/fieldnorm/code.rs``: exact up to 40, then 8 steps per doubling).

A query's score is the boost-weighted sum over fields of the per-field BM25 sums.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "K1",
    "B",
    "DocTerms",
    "FieldStats",
    "TableStats",
    "TermTable",
    "bm25",
    "idf",
    "packed",
    "rescale_bound",
    "stored_length",
]

K1 = 1.2
B = 0.75


def _fieldnorm_table() -> list[int]:
    table = list(range(41))
    step = 2
    while len(table) < 256:
        for _ in range(8):
            table.append(table[-1] + step)
        step *= 2
    return table[:256]


_FIELDNORMS = _fieldnorm_table()


def stored_length(length: int) -> int:
    """The length tantivy remembers for a field of ``length`` tokens (rounded down)."""
    if length <= 40:
        return length
    return _FIELDNORMS[bisect.bisect_right(_FIELDNORMS, length) - 1]


def idf(docs: int, df: int) -> float:
    """Tantivy's (Lucene's) BM25 idf."""
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


class TermTable:
    """Numbers for the terms of one set of in-memory postings, so postings are arrays.

    Owned by what holds the postings (an overlay's memory, see ``overlays._memory``) and
    dropped with it: nothing process-wide grows with every term a long-running server has
    ever seen. Safe to share between threads."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()  # two threads must never give two terms one number

    def __len__(self) -> int:
        return len(self._ids)

    @classmethod
    def of(cls, terms: Sequence[str]) -> TermTable:
        """A table numbering ``terms`` 0, 1, 2, ... in that order (``terms()`` read back)."""
        table = cls()
        table._ids = {t: i for i, t in enumerate(terms)}
        if len(table._ids) != len(terms):
            raise ValueError("a term table's terms must be distinct")
        return table

    def terms(self) -> list[str]:
        """Every term, by number."""
        with self._lock:
            return list(self._ids)  # numbered in insertion order: 0, 1, 2, ...

    def id(self, term: str, *, create: bool = True) -> int | None:
        """The number of ``term`` (None if unseen and not ``create``)."""
        found = self._ids.get(term)
        if found is None and create:
            with self._lock:
                found = self._ids.setdefault(term, len(self._ids))
        return found

    def ids(self, terms: Collection[str]) -> np.ndarray:
        """The numbers of ``terms`` (numbering the new ones), as an int64 array."""
        with self._lock:
            known = self._ids
            return np.fromiter(
                (known.setdefault(t, len(known)) for t in terms), dtype=np.int64, count=len(terms)
            )


@dataclass(frozen=True, slots=True)
class DocTerms:
    """One document as BM25 sees it: per field, its raw token count and term frequencies."""

    id: str
    path: str
    fields: Mapping[str, tuple[int, Counter[str]]]
    # Per field, (table, term ids, tfs): computed on first use by ``packed`` for a table.
    arrays: dict[str, tuple[TermTable, np.ndarray, np.ndarray]] = field(
        default_factory=dict, compare=False
    )


def packed(doc: DocTerms, name: str, table: TermTable) -> tuple[np.ndarray, np.ndarray]:
    """``doc``'s field ``name`` as (term ids in ``table``, tfs) arrays, computed once per
    document and table."""
    got = doc.arrays.get(name)
    if got is None or got[0] is not table:
        counts = doc.fields[name][1]
        tfs = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        got = doc.arrays[name] = (table, table.ids(counts.keys()), tfs)
    return got[1], got[2]


@dataclass(slots=True)
class FieldStats:
    """A field's statistics over a set of documents: token total and document frequencies."""

    tokens: int = 0
    df: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class TableStats:
    """Statistics of one table (sections or pages) for the terms of one query."""

    docs: int
    fields: dict[str, FieldStats]

    def average(self, name: str) -> float:
        """The average raw length of field ``name`` (0.0 on an empty table)."""
        return self.fields[name].tokens / self.docs if self.docs else 0.0

    def add(self, docs: Iterable[DocTerms], terms: Sequence[str], sign: int) -> None:
        """Count ``docs`` in (``sign`` 1) or out (``sign`` -1) of these statistics."""
        for doc in docs:
            self.docs += sign
            for name, (length, counts) in doc.fields.items():
                stats = self.fields.setdefault(name, FieldStats())
                stats.tokens += sign * length
                for term in terms:
                    if term in counts:
                        stats.df[term] = stats.df.get(term, 0) + sign


def bm25(
    doc: DocTerms, terms: Sequence[str], stats: TableStats, weights: Mapping[str, float]
) -> float:
    """``doc``'s score for the distinct ``terms`` under ``stats``; 0.0 when none occurs.

    The operations run in the same order as the View's vectorised scoring of overlay
    documents, so two documents with the same terms and lengths get bit-identical scores
    wherever they live (ties then fall to ids, as in one index)."""
    total = 0.0
    if not stats.docs:
        return total
    for name, weight in weights.items():
        if weight == 0.0 or name not in doc.fields:
            continue
        length, counts = doc.fields[name]
        fstats = stats.fields.get(name)
        df = fstats.df if fstats is not None else {}
        average = stats.average(name)
        for term in terms:
            tf = float(counts.get(term, 0))
            if tf:
                norm = K1 * (1.0 - B + B * stored_length(length) / average)
                weight_idf = weight * idf(stats.docs, df.get(term, 0)) * (K1 + 1.0)
                total += weight_idf * tf / (tf + norm)
    return total


def rescale_bound(
    own: TableStats, view: TableStats, terms: Sequence[str], weights: Mapping[str, float]
) -> float:
    """A factor R with ``view score <= R * own score`` for every document of a segment.

    Per term, the idf changes by the ratio of the two idfs; per field, the length part
    ``tf (k1+1) / (tf + k1 (1 - b + b dl/avg))`` changes by at most the ratio of the two
    averages (or not at all when the view's average is smaller). The product of the largest
    of each bounds every document, so a segment's unseen documents, all scored at most its
    last fetched score, cannot beat ``R`` times that score in the view.
    """
    bound = 0.0
    for name, weight in weights.items():
        if weight == 0.0 or name not in own.fields or own.fields[name].tokens == 0:
            continue
        mine, theirs = own.fields[name], view.fields.get(name, FieldStats())
        ratio = 0.0
        for term in terms:
            df, seen = mine.df.get(term, 0), theirs.df.get(term, 0)
            if df > 0 and seen > 0:  # seen == 0: every holder of the term is hidden
                ratio = max(ratio, idf(view.docs, seen) / idf(own.docs, df))
        if ratio == 0.0:
            continue
        average_ratio = view.average(name) / own.average(name) if view.docs else 1.0
        bound = max(bound, ratio * max(1.0, average_ratio))
    return bound
