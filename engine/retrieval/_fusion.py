"""Fusion: ranked lists of chunk ids into one candidate list, and files ranked from sections.

Each recall list keeps its own ranks; reciprocal-rank fusion (RRF, Cormack et al.) sums
``weight / (k + rank)`` over the lists a section is in, or, with ``Fusion.SCORE``, the
max-normalised scores. Ties are broken by chunk id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.core import Fusion, RecallSettings
from indexers import Chunk
from overlays import View

__all__ = ["FILE_TOP", "Candidate", "file_scores", "fuse_lists"]

# A file's strength is its best few sections together: a large file does not win by size,
# and one lucky section does not carry a file.
FILE_TOP = 3


@dataclass(slots=True)
class Candidate:
    """A section some retriever found, with its rank and score in each list."""

    chunk: Chunk
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    fused: float = 0.0

    @property
    def sources(self) -> str:
        """The lists it came from, strongest first (the snippet's reason tag)."""
        return "+".join(sorted(self.ranks, key=lambda s: (self.ranks[s], s)))


def fuse_lists(
    view: View,
    lists: dict[str, list[tuple[str, float]]],
    settings: RecallSettings,
    keep: int | None = None,
    known: dict[str, Chunk] | None = None,
) -> list[Candidate]:
    """Fuse the lists; the best ``keep`` (all when None) as candidates, best first.

    Ranks are fused on ids alone; only the kept ones are read from the metadata (``known``
    chunks are not read again), so a wide recall costs the depth it keeps, not its width.
    An id whose chunk is missing (in an index but not in the metadata: half-written) is
    skipped, and the next one takes its place."""
    weights = dict(settings.weights)
    fused: dict[str, float] = defaultdict(float)
    ranks: dict[str, dict[str, int]] = defaultdict(dict)
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    for name, pairs in lists.items():
        top = max((s for _, s in pairs), default=0.0) or 1.0
        weight = weights.get(name, 1.0)
        for rank, (cid, score) in enumerate(pairs, start=1):
            if name in ranks[cid]:
                continue
            ranks[cid][name] = rank
            scores[cid][name] = score
            if settings.fusion is Fusion.RRF:
                fused[cid] += weight / (settings.rrf_k + rank)
            else:
                fused[cid] += weight * max(score, 0.0) / top
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    want = len(order) if keep is None else keep
    chunks = dict(known or {})
    out: list[Candidate] = []
    start = 0
    while len(out) < want and start < len(order):
        batch = order[start : start + want - len(out)]
        start += len(batch)
        missing = [cid for cid in batch if cid not in chunks]
        if missing:
            chunks.update(view.chunks(missing))
        for cid in batch:
            chunk = chunks.get(cid)
            if chunk is not None:
                out.append(Candidate(chunk, ranks[cid], scores[cid], fused[cid]))
    return out


def file_scores(cands: Sequence[Candidate], top: int = FILE_TOP) -> dict[str, float]:
    """A file's score: the sum of its ``top`` best section scores."""
    per: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        per[c.chunk.path].append(c.fused)
    return {p: sum(sorted(v, reverse=True)[:top]) for p, v in per.items()}
