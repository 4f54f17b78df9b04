"""``Workspace.search``'s result type and its fusion of BM25 and dense rankings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from engine._segment import Hit
from indexers import Chunk

__all__ = ["FUSION_DEPTH", "RRF_K", "SearchHit", "SearchMode", "fuse"]

RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al.); damps the head of each list
FUSION_DEPTH = 5  # hybrid search reads this many times k from each retriever


class SearchMode(StrEnum):
    """Which retriever answers ``search``."""

    BM25 = "bm25"
    DENSE = "dense"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A ranked section with each retriever's rank and score (None where it did not find it)."""

    chunk: Chunk
    score: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None


def fuse(bm25: list[Hit], dense: list[Hit], k: int) -> list[SearchHit]:
    """Reciprocal-rank fusion; a single list passes through with its own scores."""
    if not dense or not bm25:
        only = bm25 or dense
        is_bm25 = bool(bm25)
        ranked = sorted(only, key=lambda h: (-h.score, h.chunk.id))[:k]
        return [
            SearchHit(
                h.chunk,
                h.score,
                bm25_rank=i if is_bm25 else None,
                bm25_score=h.score if is_bm25 else None,
                dense_rank=None if is_bm25 else i,
                dense_score=None if is_bm25 else h.score,
            )
            for i, h in enumerate(ranked, start=1)
        ]
    fused: dict[str, SearchHit] = {}
    for rank, hit in enumerate(sorted(bm25, key=lambda h: (-h.score, h.chunk.id)), start=1):
        fused[hit.chunk.id] = SearchHit(
            hit.chunk, 1.0 / (RRF_K + rank), bm25_rank=rank, bm25_score=hit.score
        )
    for rank, hit in enumerate(sorted(dense, key=lambda h: (-h.score, h.chunk.id)), start=1):
        prior = fused.get(hit.chunk.id) or SearchHit(hit.chunk, 0.0)
        fused[hit.chunk.id] = replace(
            prior,
            score=prior.score + 1.0 / (RRF_K + rank),
            dense_rank=rank,
            dense_score=hit.score,
        )
    return sorted(fused.values(), key=lambda h: (-h.score, h.chunk.id))[:k]
