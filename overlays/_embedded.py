"""The embedded backend: a base segment and an overlay segment answering within a ``Scope``.

The overlay holds the files that differ from the base (committed on the branch, staged,
unstaged, untracked); every base path the scope hides is dropped, so base text is never
returned for a file the branch changed or deleted. Answers are those a single segment built
from the scope's files would give:

- BM25: the base's hits are rescored with the scope's statistics (the base's, minus the
  hidden documents, plus the overlay's), the overlay's documents are scored in memory with
  the same statistics, and the base is read deeper until no unread base document could
  still enter the top k (see ``rescale_bound``).
- dense: cosine does not depend on the corpus, so the base's top k outside the hidden
  paths and the overlay's top k are merged.
- symbols, paths, chunks: merged, hidden base entries dropped, same order as one segment.

This is where the BM25 internals of ``Part`` (document terms, field statistics) are used;
they do not cross the ``Backend`` seam. Ties are broken by ids everywhere, never by which
segment a result came from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from indexers import Chunk
from overlays._bm25 import bm25, rescale_bound
from overlays._memory import Memory, OverlayMemory
from overlays._part import Found, Part
from overlays._scope import Scope, Table

__all__ = ["Embedded"]

_EPSILON = 1e-6  # relative slack on the bound: f32 scores from tantivy, f64 here


class Embedded:
    """``Backend`` over a base ``Part`` and an optional overlay ``Part``.

    The scope's ``overlay_paths`` and ``tombstones`` say what the overlay replaces and
    deletes; its layer names are not looked at (the parts are the layers)."""

    def __init__(
        self, base: Part, overlay: Part | None = None, *, memory: OverlayMemory | None = None
    ) -> None:
        self.base = base
        self.overlay = overlay
        # Shared with the backends before and after this one (``Layers`` passes it), so each
        # scope's in-memory side is advanced by what changed, not rebuilt.
        self._shared = memory if memory is not None else OverlayMemory()
        self._docs: dict[tuple[Table, Scope], Memory] = {}
        self._counts: dict[tuple[Table, Scope], dict[str, int]] = {}
        self._files: dict[Scope, dict[str, Any]] = {}

    def _layered(self, scope: Scope) -> bool:
        return self.overlay is not None and bool(scope.hidden)

    # -- BM25 -----------------------------------------------------------------------

    def search(
        self, scope: Scope, table: Table, query: str, k: int, paths: Collection[str] | None = None
    ) -> list[Found]:
        """Top ``k`` of ``table`` by BM25 with the scope's statistics, ties by id."""
        if not self._layered(scope):
            return self.base.lexical_search(table, query, k, paths)
        terms = self.base.query_terms(query)
        if not terms or (paths is not None and not paths):
            return []
        hidden = scope.hidden
        weights = self.base.lexical_weights(table)
        memory = self._memory(scope, table)
        own = self.base.lexical_stats(table, terms)
        view = memory.stats(own, terms)
        wanted = None if paths is None else set(paths)
        scored = {
            i: Found(i, p, score) for i, p, score in memory.top(terms, view, weights, k, wanted)
        }
        base_paths = None if wanted is None else sorted(wanted - hidden)
        if base_paths is None or base_paths:
            bound = rescale_bound(own, view, terms, weights)
            depth = k + 16
            while True:
                hits = self.base.lexical_search(table, query, depth, base_paths)
                visible = [h for h in hits if h.path not in hidden]
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

    def term_counts(self, scope: Scope, table: Table, terms: Sequence[str]) -> dict[str, int]:
        """Documents of ``table`` in the scope holding each term (the most over its fields);
        remembered per scope (a scope's documents never change under one backend)."""
        known = self._counts.setdefault((table, scope), {})
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing:
            stats = self.base.lexical_stats(table, missing)
            if self._layered(scope):
                stats = self._memory(scope, table).stats(stats, missing)
            for t in missing:
                known[t] = max((f.df.get(t, 0) for f in stats.fields.values()), default=0)
        return {t: known[t] for t in terms}

    def _memory(self, scope: Scope, table: Table) -> Memory:
        memory = self._docs.get((table, scope))
        if memory is None:
            assert self.overlay is not None
            memory = self._docs[(table, scope)] = self._shared.memory(
                table, self.base, self.overlay, scope.overlay_paths, scope.hidden
            )
        return memory

    # -- dense ----------------------------------------------------------------------

    def has_dense(self, scope: Scope, model_id: str) -> bool:
        """Whether both layers (the overlay where it holds files) have ``model_id``'s vectors."""
        return self.base.has_dense(model_id) and (
            self.overlay is None or not scope.overlay_paths or self.overlay.has_dense(model_id)
        )

    def search_dense(
        self, scope: Scope, vector: np.ndarray, model_id: str, k: int
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, cosine) of the scope, ties by id."""
        if not self._layered(scope):
            return self.base.dense_ids(vector, model_id, k)
        assert self.overlay is not None
        hits = self.base.dense_ids(vector, model_id, k, scope.hidden)
        hits += self.overlay.dense_ids(vector, model_id, k)
        return sorted(hits, key=lambda h: (-h[1], h[0]))[:k]

    # -- metadata -------------------------------------------------------------------

    def chunks(self, scope: Scope, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id; a hidden base chunk is absent unless the overlay holds it too."""
        if not self._layered(scope):
            return self.base.chunks(ids)
        assert self.overlay is not None
        hidden = scope.hidden
        found = {i: c for i, c in self.base.chunks(ids).items() if c.path not in hidden}
        found.update(self.overlay.chunks([i for i in ids if i not in found]))
        return found

    def chunks_of(self, scope: Scope, path: str) -> list[Chunk]:
        """A file's chunks in line order, from whichever layer holds the file."""
        if path in scope.overlay_paths and self.overlay is not None:
            return self.overlay.chunks_of(path)
        if path in scope.tombstones:
            return []
        return self.base.chunks_of(path)

    def chunks_near(self, scope: Scope, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching ``first_line..last_line``, from the layer holding it."""
        if path in scope.overlay_paths and self.overlay is not None:
            return self.overlay.chunks_near(path, first_line, last_line)
        if path in scope.tombstones:
            return []
        return self.base.chunks_near(path, first_line, last_line)

    def definitions(self, scope: Scope, names: Sequence[str], limit: int) -> dict[str, list[str]]:
        """Chunk ids defining each name (id order, at most ``limit`` per name)."""
        if not self._layered(scope):
            return {n: [i for i, _ in v] for n, v in self.base.definitions(names, limit).items()}
        assert self.overlay is not None
        hidden = scope.hidden
        out: dict[str, list[str]] = {}
        depth = limit
        while True:
            got = self.base.definitions(names, depth)
            short = False
            for name in dict.fromkeys(names):
                pairs = got.get(name, [])
                short |= len(pairs) == depth and sum(p not in hidden for _, p in pairs) < limit
                out[name] = [i for i, p in pairs if p not in hidden]
            if not short:
                break
            depth *= 4
        for name, pairs in self.overlay.definitions(names, limit).items():
            out[name] = sorted(set(out.get(name, [])) | {i for i, _ in pairs})
        return {n: ids[:limit] for n, ids in out.items() if ids}

    def paths_like(self, scope: Scope, suffix: str, limit: int) -> list[str]:
        """Paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        if not self._layered(scope):
            return self.base.paths_like(suffix, limit)
        assert self.overlay is not None
        hidden = scope.hidden
        base = [p for p in self.base.paths_like(suffix, limit + len(hidden)) if p not in hidden]
        merged = set(base) | set(self.overlay.paths_like(suffix, limit))
        return sorted(merged, key=lambda p: (len(p), p))[:limit]

    def files(self, scope: Scope) -> dict[str, Any]:
        """Every file's record by path (the overlay's where it holds the file)."""
        if not self._layered(scope):
            return dict(self.base.files())
        files = self._files.get(scope)
        if files is None:  # a scope's files do not change under one backend
            assert self.overlay is not None
            files = dict(self.base.files())
            for path in scope.hidden:
                files.pop(path, None)
            files.update(self.overlay.files())
            self._files[scope] = files
        return dict(files)
