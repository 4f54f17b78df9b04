"""``search``: the ranking ``build_context`` uses, as sections or as files.

The reranked candidates of a request (``Scored``, best first) become ``SearchHit`` records
(each with its rank and score in the BM25 and dense lists), or ``FileHit`` records: files
as ``rank_files`` ranks them (``engine.retrieval._files``), each with its best sections.
``dense_hits`` is the dense retriever alone, for diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.core import FileHit, FileRanking, SearchHit
from engine.retrieval._files import file_totals
from engine.retrieval._fusion import FILE_TOP
from engine.retrieval._rerank import Scored
from overlays import View

__all__ = ["dense_hits", "file_hits", "ranked_hits"]


def _hit(s: Scored) -> SearchHit:
    return SearchHit(
        s.chunk,
        s.score,
        bm25_rank=s.ranks.get("bm25"),
        bm25_score=s.scores.get("bm25"),
        dense_rank=s.ranks.get("dense"),
        dense_score=s.scores.get("dense"),
        reason=s.reason,
        contributions=s.contributions,
    )


def ranked_hits(scored: Sequence[Scored], k: int) -> list[SearchHit]:
    """The ``k`` best sections of a reranked list."""
    return [_hit(s) for s in scored[:k]]


def file_hits(
    scored: Sequence[Scored], k: int, ranking: FileRanking = FileRanking.LEARNED
) -> list[FileHit]:
    """The ``k`` best files of a reranked list under ``ranking`` (``rank_files``' order),
    each with its best sections, ties by path."""
    per: dict[str, list[Scored]] = {}
    for s in scored:  # best first, so each file's list is too
        per.setdefault(s.chunk.path, []).append(s)
    totals = file_totals(scored, ranking)
    ranked = sorted(totals, key=lambda p: (-totals[p], p))[:k]
    return [FileHit(p, totals[p], tuple(_hit(s) for s in per[p][:FILE_TOP])) for p in ranked]


def dense_hits(view: View, vector: np.ndarray, model: str, k: int) -> list[SearchHit]:
    """The ``k`` sections nearest ``vector`` by cosine, the dense retriever alone."""
    found = view.search_dense(vector, model, k)
    return [SearchHit(chunk, score, dense_rank=i, dense_score=score, reason="dense")
            for i, (chunk, score) in enumerate(found, start=1)]  # fmt: skip
