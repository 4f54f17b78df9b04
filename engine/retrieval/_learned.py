"""What a workspace learned, added to a rerank as two named features.

``salience``: how often outcomes in this workspace cited the section's file or symbol (or,
at half weight, its folder). ``learned``: the per-workspace offsets (``Learned.weights``)
times the section's own rerank features: a repository's habits tilt the ranking. Both
are ordinary contributions, so ``--explain`` shows them beside the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.core import Contribution, Learned, salience_keys
from engine.retrieval._rerank import Scored

__all__ = ["LEARNED_FEATURES", "SALIENCE_WEIGHT", "candidate_salience", "with_learned"]

# Salience in [0, 1) at a quarter of the file feature's weight: a habit tilts close calls
# and never outranks a file the request matches better. At the file feature's full weight a
# file cited on seven earlier tasks (sphinx's autodoc/__init__.py) took first place from
# the right file, and learning cost top-1 files (dev set's second halves, eval.learning:
# Acc@1 53.4 at 1.0, 58.6 at 0.25, 60.3 without learning; Acc@5 81.0 at both).
SALIENCE_WEIGHT = 0.25
_DIR_SHARE = 0.5  # a folder's habit counts half: its files share a role, not the evidence
LEARNED_FEATURES = ("salience", "learned")  # names of the added features (never learned from)


def candidate_salience(learned: Learned, path: str, symbol: str) -> float:
    """A section's salience: its file's or symbol's, or half its folder's."""
    file_key, symbol_key, dir_key = salience_keys(path, symbol)
    s = learned.salience
    return max(s.get(file_key, 0.0), s.get(symbol_key, 0.0) if symbol_key else 0.0,
               _DIR_SHARE * s.get(dir_key, 0.0))  # fmt: skip


def with_learned(scored: Sequence[Scored], learned: Learned | None) -> list[Scored]:
    """``scored`` with the ``salience`` and ``learned`` contributions added (where not 0),
    best first again, ties by chunk id; unchanged when nothing was learned."""
    if not learned:
        return list(scored)
    offsets = dict(learned.weights)
    out = []
    for s in scored:
        values = {c.feature: c.value for c in s.contributions}
        lv = sum(w * values.get(name, 0.0) for name, w in offsets.items())
        sv = candidate_salience(learned, s.chunk.path, s.chunk.symbol)
        extra = []
        if sv:
            extra.append(Contribution("salience", sv, SALIENCE_WEIGHT, SALIENCE_WEIGHT * sv))
        if lv:
            extra.append(Contribution("learned", lv, 1.0, lv))
        if extra:
            s = replace(s, score=s.score + sum(c.points for c in extra),
                        contributions=(*s.contributions, *extra))  # fmt: skip
        out.append(s)
    return sorted(out, key=lambda s: (-s.score, s.chunk.id))
