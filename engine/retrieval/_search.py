"""``search``: ranked sections for a query by BM25, dense cosine, or both fused by RRF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from engine.core import ConfigError, SearchHit, SearchMode
from indexers import Chunk
from overlays import View

__all__ = ["FUSION_DEPTH", "RRF_K", "fuse", "search"]

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.); damps the head of each list
FUSION_DEPTH = 5  # hybrid search reads this many times k from each retriever

_Hit = tuple[Chunk, float]  # a section one retriever found, with that retriever's score


def search(
    view: View,
    query: str,
    mode: SearchMode,
    k: int,
    query_vector: np.ndarray | None,
    dense_model: str | None,
) -> list[SearchHit]:
    """The ``k`` best sections of ``view``; the dense side needs ``query_vector`` (the
    query embedded by ``dense_model``), and is skipped without one in hybrid mode."""
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    depth = k if mode is not SearchMode.HYBRID else max(k * FUSION_DEPTH, 50)
    bm25: list[_Hit] = []
    dense: list[_Hit] = []
    if mode is not SearchMode.DENSE:
        found = view.search_sections(query, depth)
        chunks = view.chunks([f.id for f in found])
        bm25 = [(chunks[f.id], f.score) for f in found if f.id in chunks]
    if mode is not SearchMode.BM25 and query_vector is not None and dense_model is not None:
        dense = view.search_dense(query_vector, dense_model, depth)
    return fuse(bm25, dense, k)


def _order(hits: Sequence[_Hit]) -> list[_Hit]:
    return sorted(hits, key=lambda h: (-h[1], h[0].id))


def fuse(bm25: Sequence[_Hit], dense: Sequence[_Hit], k: int) -> list[SearchHit]:
    """Reciprocal-rank fusion; a single list passes through with its own scores."""
    if not dense or not bm25:
        is_bm25 = bool(bm25)
        return [
            SearchHit(
                chunk,
                score,
                bm25_rank=i if is_bm25 else None,
                bm25_score=score if is_bm25 else None,
                dense_rank=None if is_bm25 else i,
                dense_score=None if is_bm25 else score,
            )
            for i, (chunk, score) in enumerate(_order(bm25 or dense)[:k], start=1)
        ]
    fused: dict[str, SearchHit] = {}
    for rank, (chunk, score) in enumerate(_order(bm25), start=1):
        fused[chunk.id] = SearchHit(chunk, 1.0 / (RRF_K + rank), bm25_rank=rank, bm25_score=score)
    for rank, (chunk, score) in enumerate(_order(dense), start=1):
        prior = fused.get(chunk.id) or SearchHit(chunk, 0.0)
        fused[chunk.id] = replace(
            prior, score=prior.score + 1.0 / (RRF_K + rank), dense_rank=rank, dense_score=score
        )
    return sorted(fused.values(), key=lambda h: (-h.score, h.chunk.id))[:k]
