"""Tantivy's BM25 for Qdrant's candidates: what makes the Qdrant backend score as the
embedded one does, not only rank alike.

Qdrant scores a field with the document's exact length; tantivy (the embedded backend)
rounds a length past 40 tokens down through its one-byte fieldnorm code
(``overlays.stored_length``), and averages raw lengths without the Qdrant backend's
empty-field marker. So Qdrant's BM25 only proposes candidates, and the candidates that can
reach the top k are scored again here with ``overlays.bm25``, the function the embedded
View rescores base hits with, under the scope's exact statistics:

- documents and tokens per field (``Totals``): each file's are kept in its page point and
  summed per layer in the layer's record when it is mirrored; a scope's are its base
  layer's, minus the files it hides, plus the overlay's files;
- document frequencies: counted in Qdrant within the scope, per field;
- a candidate's length and term frequencies (``doc_terms``): read from its analysed fields.

A tantivy score is at most ``MAX_ROUNDING`` times Qdrant's for the same document (see
``MAX_ROUNDING``), which bounds what an unread or unrescored candidate could still score.
Terms stay in the encoded alphabet of the text indexes (``encode_terms``, one-to-one).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from overlays import DocTerms, FieldStats, TableStats, stored_length

__all__ = ["EMPTY_FIELD", "MAX_ROUNDING", "Totals", "doc_terms", "field_length"]

EMPTY_FIELD = "qz"  # what a field without terms holds: never an encoded term (q is doubled)


def _max_rounding() -> float:
    """The largest ``length / stored_length(length)``: a length just below the next code,
    stored as the code below it (about 1.12, approached as lengths double)."""
    worst, code = 1.0, 40
    while code < 1 << 24:
        low, high = code, 2 * code + 2  # the next code is above ``low``, at most ``high``
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if stored_length(mid) == code else (low, mid)
        worst = max(worst, (high - 1) / code)
        code = high
    return worst


# How much higher tantivy may score a document than Qdrant: per term, the ratio of the two
# length parts is at most (exact length / stored length) * (tantivy's average / Qdrant's
# average), and tantivy's average is never the larger (the marker only adds tokens).
MAX_ROUNDING = _max_rounding()


def field_length(terms: str) -> int:
    """Tokens in an analysed field (space-separated terms), counted as the embedded
    segment's writer counts them for its statistics."""
    return terms.count(" ") + 1 if terms else 0


@dataclass(frozen=True, slots=True)
class Totals:
    """Documents and tokens per field, per table, of a set of files (a file, a layer, a
    scope): ``{"sections": {"docs": n, "body": tokens, ...}, "pages": {...}}``, the shape
    of the embedded segment's recorded statistics."""

    tables: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def of_file(cls, page: Mapping[str, str], sections: Iterable[Mapping[str, str]]) -> Totals:
        """A file's totals from its page's and sections' analysed fields."""
        counts: dict[str, dict[str, int]] = {"pages": {"docs": 1}, "sections": {"docs": 0}}
        for name, terms in page.items():
            counts["pages"][name] = field_length(terms)
        mine = counts["sections"]
        for fields in sections:
            mine["docs"] += 1
            for name, terms in fields.items():
                mine[name] = mine.get(name, 0) + field_length(terms)
        return cls(counts)

    @classmethod
    def parse(cls, raw: str) -> Totals:
        """Totals from ``to_json``'s string."""
        loaded = json.loads(raw)
        return cls({t: {k: int(v) for k, v in c.items()} for t, c in loaded.items()})

    def to_json(self) -> str:
        """One JSON string (a payload string is written at once, a mapping key by key)."""
        return json.dumps(self.tables, separators=(",", ":"), sort_keys=True)

    def plus(self, other: Totals, sign: int = 1) -> Totals:
        """These totals with ``other``'s added (``sign`` 1) or taken away (-1)."""
        scaled = Totals({t: {k: sign * n for k, n in c.items()} for t, c in other.tables.items()})
        return Totals.sum((self, scaled))

    @classmethod
    def sum(cls, parts: Iterable[Totals]) -> Totals:
        """The totals of several sets of files."""
        out: dict[str, dict[str, int]] = {}
        for part in parts:
            for table, counts in part.tables.items():
                mine = out.setdefault(table, {})
                for key, n in counts.items():
                    mine[key] = mine.get(key, 0) + n
        return cls(out)

    def stats(self, table: str, df: Mapping[str, Mapping[str, int]]) -> TableStats:
        """``table``'s BM25 statistics, with ``df`` (field -> term -> documents)."""
        counts = self.tables.get(table, {})
        fields = {name: FieldStats(n, dict(df.get(name, {})))
                  for name, n in counts.items() if name != "docs"}  # fmt: skip
        return TableStats(counts.get("docs", 0), fields)


def doc_terms(
    ident: str,
    path: str,
    payload: Mapping[str, object],
    names: Sequence[str],
    wanted: Collection[str],
) -> DocTerms:
    """A candidate as BM25 sees it for the (encoded) terms ``wanted``, from its point's
    analysed fields (``f_<name>``): per field its length and each wanted term's frequency
    (the others are dropped: only these are scored, and the result is kept)."""
    fields: dict[str, tuple[int, Counter[str]]] = {}
    for name in names:
        raw = payload.get(f"f_{name}", "")
        terms = raw if isinstance(raw, str) and raw != EMPTY_FIELD else ""
        counts = Counter(terms.split())
        mine = Counter({t: counts[t] for t in wanted if t in counts})
        fields[name] = (field_length(terms), mine)
    return DocTerms(ident, path, fields)
