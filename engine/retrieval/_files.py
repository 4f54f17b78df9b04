"""Files ranked from their sections: what ``rank_files`` and the file-level evals read."""

from __future__ import annotations

from collections.abc import Sequence

from engine.retrieval._fusion import FILE_TOP, Candidate, file_scores
from engine.retrieval._rerank import Scored

__all__ = ["rank_files"]


def rank_files(cands: Sequence[Candidate] | Sequence[Scored]) -> list[str]:
    """Files by the sum of their three best section scores (reranked sections: above the
    weakest one's, as ``search_files`` ranks them)."""
    if cands and isinstance(cands[0], Scored):
        per: dict[str, list[float]] = {}
        floor = min(s.score for s in cands if isinstance(s, Scored))
        for s in cands:
            assert isinstance(s, Scored)
            per.setdefault(s.chunk.path, []).append(s.score - floor)
        totals = {p: sum(sorted(v, reverse=True)[:FILE_TOP]) for p, v in per.items()}
    else:
        totals = file_scores([c for c in cands if isinstance(c, Candidate)])
    return sorted(totals, key=lambda p: (-totals[p], p))
