"""A View: a base segment, an overlay segment, and the base paths the overlay hides.

The overlay holds the files that differ from the base (committed on the branch, staged,
unstaged, untracked); every base path the overlay holds or tombstones is hidden, so base
text is never returned for a file the branch changed or deleted. The View answers the same
questions a single segment answers, and answers them as a single segment built from the
View's files would:

- BM25: the base's hits are rescored with the View's statistics (the base's, minus the
  hidden documents, plus the overlay's), the overlay's documents are scored in memory with
  the same statistics, and the base is read deeper until no unread base document could
  still enter the top k (see ``rescale_bound``).
- dense: cosine does not depend on the corpus, so the base's top k outside the hidden
  paths and the overlay's top k are merged.
- symbols, paths, chunks: merged, hidden base entries dropped, same order as one segment.

Ties are broken by ids everywhere, never by which segment a result came from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from indexers import Chunk
from overlays._bm25 import bm25, rescale_bound
from overlays._memory import Memory, OverlayMemory
from overlays._part import Found, Part

__all__ = ["Found", "Part", "View"]

TABLES = ("sections", "pages")
_EPSILON = 1e-6  # relative slack on the bound: f32 scores from tantivy, f64 here


class View:
    """Base plus overlay with hidden base paths; with no overlay, the base itself."""

    def __init__(
        self,
        base: Part,
        overlay: Part | None = None,
        *,
        overlay_paths: Collection[str] = (),
        tombstones: Collection[str] = (),
        ident: str = "",
        memory: OverlayMemory | None = None,
    ) -> None:
        self.base = base
        self.overlay = overlay
        self.overlay_paths = frozenset(overlay_paths)
        self.tombstones = frozenset(tombstones)
        self.hidden = self.overlay_paths | self.tombstones
        self.ident = ident
        # Shared with the Views before and after this one (``Layers`` passes it), so each
        # View's in-memory side is advanced by what changed, not rebuilt.
        self._shared = memory if memory is not None else OverlayMemory()
        self._docs: dict[str, Memory] = {}
        self._counts: dict[str, dict[str, int]] = {}  # table -> term -> documents holding it
        self._files: dict[str, Any] | None = None

    @property
    def layered(self) -> bool:
        """Whether anything is laid over the base (else every answer is the base's own)."""
        return self.overlay is not None and bool(self.hidden)

    # -- BM25 -----------------------------------------------------------------------

    def search_sections(
        self, query: str, k: int, *, paths: Collection[str] | None = None
    ) -> list[Found]:
        """The ``k`` best sections for ``query`` (in ``paths`` if given), best first."""
        return self._lexical("sections", query, k, paths)

    def search_pages(self, query: str, k: int) -> list[Found]:
        """The ``k`` best pages (whole files) for ``query``, best first."""
        return self._lexical("pages", query, k, None)

    def term_counts(self, table: str, terms: Sequence[str]) -> dict[str, int]:
        """How many of ``table``'s documents in this View hold each term (in any field);
        remembered for the View's life (its documents never change)."""
        known = self._counts.setdefault(table, {})
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing:
            stats = self.base.lexical_stats(table, missing)
            if self.layered:
                stats = self._memory(table).stats(stats, missing)
            for t in missing:
                known[t] = max((f.df.get(t, 0) for f in stats.fields.values()), default=0)
        return {t: known[t] for t in terms}

    def _lexical(
        self, table: str, query: str, k: int, paths: Collection[str] | None
    ) -> list[Found]:
        if not self.layered:
            return self.base.lexical_search(table, query, k, paths)
        assert self.overlay is not None
        terms = self.base.query_terms(query)
        if not terms or (paths is not None and not paths):
            return []
        weights = self.base.lexical_weights(table)
        memory = self._memory(table)
        own = self.base.lexical_stats(table, terms)
        view = memory.stats(own, terms)
        wanted = None if paths is None else set(paths)
        scored = {
            i: Found(i, p, score) for i, p, score in memory.top(terms, view, weights, k, wanted)
        }
        base_paths = None if wanted is None else sorted(wanted - self.hidden)
        if base_paths is None or base_paths:
            bound = rescale_bound(own, view, terms, weights)
            depth = k + 16
            while True:
                hits = self.base.lexical_search(table, query, depth, base_paths)
                visible = [h for h in hits if h.path not in self.hidden]
                docs = self.base.doc_terms(table, visible)
                for h in visible:
                    if h.id not in scored and h.id in docs:
                        score = bm25(docs[h.id], terms, view, weights)
                        if score > 0:
                            scored[h.id] = Found(h.id, h.path, score)
                if len(hits) < depth:
                    break  # every matching base document was read
                ranked = sorted(s.score for s in scored.values())[::-1]
                unseen = hits[-1].score * bound * (1 + _EPSILON)
                if len(ranked) >= k and ranked[k - 1] > unseen:
                    break
                depth *= 4
        return sorted(scored.values(), key=lambda f: (-f.score, f.id))[:k]

    def _memory(self, table: str) -> Memory:
        memory = self._docs.get(table)
        if memory is None:
            assert self.overlay is not None
            memory = self._docs[table] = self._shared.memory(
                table, self.base, self.overlay, self.overlay_paths, self.hidden
            )
        return memory

    # -- dense ----------------------------------------------------------------------

    def has_dense(self, model_id: str) -> bool:
        """Whether the View can answer dense queries for ``model_id``."""
        return self.base.has_dense(model_id) and (
            self.overlay is None or not self.overlay_paths or self.overlay.has_dense(model_id)
        )

    def search_dense(self, vector: np.ndarray, model_id: str, k: int) -> list[tuple[Chunk, float]]:
        """The ``k`` sections nearest ``vector`` (cosine), best first, ties by id."""
        hits = self.search_dense_ids(vector, model_id, k)
        chunks = self.chunks([cid for cid, _ in hits])
        return [(chunks[cid], s) for cid, s in hits if cid in chunks]

    def search_dense_ids(
        self, vector: np.ndarray, model_id: str, k: int
    ) -> list[tuple[str, float]]:
        """``search_dense`` as (chunk id, cosine) pairs, reading no chunk."""
        if not self.layered:
            return self.base.dense_ids(vector, model_id, k)
        assert self.overlay is not None
        hits = self.base.dense_ids(vector, model_id, k, self.hidden)
        hits += self.overlay.dense_ids(vector, model_id, k)
        return sorted(hits, key=lambda h: (-h[1], h[0]))[:k]

    # -- metadata -------------------------------------------------------------------

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id; a hidden base chunk is absent unless the overlay holds it too."""
        if not self.layered:
            return self.base.chunks(ids)
        assert self.overlay is not None
        found = {i: c for i, c in self.base.chunks(ids).items() if c.path not in self.hidden}
        found.update(self.overlay.chunks([i for i in ids if i not in found]))
        return found

    def chunks_of(self, path: str) -> list[Chunk]:
        """A file's chunks in line order, from whichever layer holds the file."""
        if path in self.overlay_paths and self.overlay is not None:
            return self.overlay.chunks_of(path)
        if path in self.tombstones:
            return []
        return self.base.chunks_of(path)

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching lines ``first_line..last_line``, in line order, from
        whichever layer holds the file."""
        if path in self.overlay_paths and self.overlay is not None:
            return self.overlay.chunks_near(path, first_line, last_line)
        if path in self.tombstones:
            return []
        return self.base.chunks_near(path, first_line, last_line)

    def defining(self, names: Sequence[str], limit: int = 50) -> dict[str, list[str]]:
        """Chunk ids defining each name (id order, at most ``limit`` per name)."""
        if not self.layered:
            return {n: [i for i, _ in v] for n, v in self.base.definitions(names, limit).items()}
        assert self.overlay is not None
        out: dict[str, list[str]] = {}
        depth = limit
        while True:
            got = self.base.definitions(names, depth)
            short = False
            for name in dict.fromkeys(names):
                pairs = got.get(name, [])
                short |= len(pairs) == depth and sum(p not in self.hidden for _, p in pairs) < limit
                out[name] = [i for i, p in pairs if p not in self.hidden]
            if not short:
                break
            depth *= 4
        for name, pairs in self.overlay.definitions(names, limit).items():
            out[name] = sorted(set(out.get(name, [])) | {i for i, _ in pairs})
        return {n: ids[:limit] for n, ids in out.items() if ids}

    def paths_like(self, suffix: str, limit: int = 20) -> list[str]:
        """Paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        if not self.layered:
            return self.base.paths_like(suffix, limit)
        assert self.overlay is not None
        base = [p for p in self.base.paths_like(suffix, limit + len(self.hidden))
                if p not in self.hidden]  # fmt: skip
        merged = set(base) | set(self.overlay.paths_like(suffix, limit))
        return sorted(merged, key=lambda p: (len(p), p))[:limit]

    def files(self) -> dict[str, Any]:
        """Every file's record by path (the overlay's where it holds the file)."""
        if not self.layered:
            return dict(self.base.files())
        if self._files is None:  # a View is fixed: its files do not change under it
            assert self.overlay is not None
            out = dict(self.base.files())
            for path in self.hidden:
                out.pop(path, None)
            out.update(self.overlay.files())
            self._files = out
        return dict(self._files)
