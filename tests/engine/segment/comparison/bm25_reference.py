"""A plain-Python BM25 with tantivy's constants, written to be read and checked, not to be fast.

Scores one field of a small corpus the way tantivy does: k1 = 1.2, b = 0.75,
idf = ln(1 + (N - n + 0.5) / (n + 0.5)), and the average length over the field's token
counts. A document's own length goes through tantivy's lossy one-byte "fieldnorm" code first
(``tantivy/src/fieldnorm/code.rs``): lengths up to 40 are exact, longer ones round down to a
256-entry table.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

K1 = 1.2
B = 0.75


def _fieldnorm_table() -> list[int]:
    """The 256 lengths a fieldnorm id stands for: 0..40 exactly, then 8 steps per doubling."""
    table = list(range(41))
    step = 2
    while len(table) < 256:
        for _ in range(8):
            table.append(table[-1] + step)
        step *= 2
    return table[:256]


FIELDNORMS = _fieldnorm_table()


def stored_length(length: int) -> int:
    """The length tantivy remembers for a field of ``length`` tokens (rounded down)."""
    return FIELDNORMS[bisect.bisect_right(FIELDNORMS, length) - 1]


def bm25_scores(docs: Sequence[Sequence[str]], query: Sequence[str]) -> list[float]:
    """Each document's BM25 score for the distinct terms of ``query``, 0.0 where none occur."""
    n_docs = len(docs)
    average = sum(len(doc) for doc in docs) / n_docs
    terms = list(dict.fromkeys(query))
    doc_freq = {t: sum(1 for doc in docs if t in doc) for t in terms}
    scores = []
    for doc in docs:
        length = stored_length(len(doc))
        score = 0.0
        for term in terms:
            tf = doc.count(term)
            if tf == 0:
                continue
            n = doc_freq[term]
            idf = math.log(1 + (n_docs - n + 0.5) / (n + 0.5))
            score += idf * (K1 + 1) * tf / (tf + K1 * (1 - B + B * length / average))
        scores.append(score)
    return scores
