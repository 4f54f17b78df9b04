"""A scope's BM25 statistics in a Qdrant collection, as one index of the branch has them.

What ``overlays.bm25`` needs besides a document, for the Qdrant backend's rescoring
(``engine.backend._rescore``) and its ``term_counts``:

- documents and tokens per field (``Totals``): the base layer's (its record, written when a
  mirror finishes, else summed over its pages), minus the files the scope hides, plus the
  overlay's files, from their page points;
- document frequencies per (field, encoded term): counted by Qdrant with the scope's filter.

Both are remembered per scope until the backend writes: a base layer never changes under
its name, and an overlay has one writer (its workspace).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from engine.backend._rescore import Totals
from engine.backend._store import Cond, Store, Where
from engine.core import IndexStateError
from overlays import Scope, Table

__all__ = ["ScopeStatistics"]

_SCOPES = 64  # scopes whose counts and totals are remembered


class ScopeStatistics:
    """Document counts and token totals of scopes in one collection (``store``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._counts: dict[tuple[Scope, Table], dict[tuple[str, str], int]] = {}
        self._totals: dict[Scope, Totals] = {}
        self._layers: dict[str, Totals] = {}

    def forget(self) -> None:
        """Drop everything remembered (the collection is being written)."""
        self._counts.clear()
        self._totals.clear()
        self._layers.clear()

    # -- document frequencies -------------------------------------------------------

    def doc_counts(
        self, scope: Scope, table: Table, corpus: Where, pairs: Collection[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        """Documents of ``table`` in the scope (``corpus``, its filter) holding each
        (field, encoded term), counted exactly."""
        known = self._known(scope, table)
        for name, token in [p for p in pairs if p not in known]:
            holds = Cond(f"f_{name}", (token,), "text")
            known[(name, token)] = self.store.count(corpus.and_(holds))
        return {p: known[p] for p in pairs}

    def most(
        self, scope: Scope, table: Table, corpus: Where, fields: Sequence[str], token: str
    ) -> int:
        """Documents of ``table`` in the scope holding ``token``: the most over ``fields``."""
        pairs = [(name, token) for name in fields]
        known = self._known(scope, table)
        # Most word forms asked about occur nowhere. A count of one text condition alone
        # reads the term's postings (0.3 ms on the standard library's 75k points), where any
        # other condition beside it costs a check per point (1.5-5 ms): a form no point of
        # the collection holds in any field is settled that way.
        if not all(p in known for p in pairs) and not any(
            self.store.count(Where(must=(Cond(f"f_{name}", (token,), "text"),))) for name in fields
        ):
            known.update((p, 0) for p in pairs)
        return max(self.doc_counts(scope, table, corpus, pairs).values())

    def _known(self, scope: Scope, table: Table) -> dict[tuple[str, str], int]:
        if (scope, table) not in self._counts and len(self._counts) >= _SCOPES:
            self._counts.clear()
        return self._counts.setdefault((scope, table), {})

    # -- token totals ---------------------------------------------------------------

    def totals(self, scope: Scope) -> Totals:
        """The scope's documents and tokens per field: its base layer's, minus the files
        it hides, plus the overlay's files (the files ``scope_filter`` lets through)."""
        got = self._totals.get(scope)
        if got is None:
            got = self.layer_totals(scope.base)
            if scope.hidden:
                got = got.plus(self.files_totals(scope.base, scope.hidden), -1)
            if scope.layered and scope.overlay_paths:
                got = got.plus(self.files_totals(scope.overlay, scope.overlay_paths))
            if len(self._totals) >= _SCOPES:
                self._totals.clear()
            self._totals[scope] = got
        return got

    def layer_totals(self, layer: str) -> Totals:
        """A layer's totals: from its record when its last mirror finished, else summed
        over its pages (a layer written by ``QdrantBackend.write`` alone, or being written)."""
        got = self._layers.get(layer)
        if got is None:
            where = Where(must=(Cond("t", ("layers",)), Cond("layer", (layer,))))
            record = next(iter(self.store.scroll(where, ("digest", "lengths"))), None)
            if record is not None and record.get("digest") and record.get("lengths"):
                got = Totals.parse(record["lengths"])
            else:
                got = self.files_totals(layer, None)
            self._layers[layer] = got
        return got

    def files_totals(self, layer: str, paths: Collection[str] | None) -> Totals:
        """The totals of ``layer``'s files among ``paths`` (all when None), from their
        page points."""
        where = Where(must=(Cond("t", ("pages",)), Cond("layer", (layer,))))
        if paths is not None:
            where = where.and_(Cond("path", tuple(sorted(paths))))
        pages = self.store.scroll(where, ("path", "lengths"))
        return Totals.sum(_page_totals(p) for p in pages)


def _page_totals(page: Mapping[str, Any]) -> Totals:
    raw = page.get("lengths")
    if not raw:
        raise IndexStateError(
            f"the Qdrant points of {page.get('path')!r} were written without their token "
            "counts (before exact BM25); run `cortex index` to write them again"
        )
    return Totals.parse(raw)
