"""Files ranked from their sections: what ``rank_files`` and the file-level evals read."""

from __future__ import annotations

from collections.abc import Sequence

from engine.retrieval._fusion import Candidate, file_scores
from engine.retrieval._rerank import Scored

__all__ = ["rank_files"]


def rank_files(cands: Sequence[Candidate] | Sequence[Scored]) -> list[str]:
    """Files by the sum of their three best section scores."""
    if cands and isinstance(cands[0], Scored):
        per: dict[str, list[float]] = {}
        for s in cands:
            assert isinstance(s, Scored)
            per.setdefault(s.chunk.path, []).append(s.score)
        totals = {p: sum(sorted(v, reverse=True)[:3]) for p, v in per.items()}
    else:
        totals = file_scores([c for c in cands if isinstance(c, Candidate)])
    return sorted(totals, key=lambda p: (-totals[p], p))
