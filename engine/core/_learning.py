"""What learning from outcomes hands to ranking: the outcome words, and ``Learned``, the
plain data (salience per item, learned offsets per rerank feature) a rerank adds as two
named features, ``salience`` and ``learned``.

Memory computes it from the journal; retrieval reads it; neither imports the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "DEFAULT_LEARN_BOUND",
    "DEFAULT_LEARN_RATE",
    "FAULT_REASONS",
    "MAX_ATTEST_CITATIONS",
    "FailureReason",
    "LearnSettings",
    "Learned",
    "Outcome",
    "PastOutcome",
    "salience_keys",
]

MAX_ATTEST_CITATIONS = 256  # more is not a model citing evidence but a caller dumping ids
DEFAULT_LEARN_RATE = 0.1  # EMA step: about the last ten outcomes dominate
DEFAULT_LEARN_BOUND = 1.5  # |offset| per feature: below the source prior's 4.0: tilts, not rules


class Outcome(StrEnum):
    """How the step that used a context ended."""

    SUCCESS = "success"
    FAILURE = "failure"


class FailureReason(StrEnum):
    """The failure reasons learning knows: the cited evidence itself was wrong. Only these
    take a citation back; any other reason (a flaky test, a timeout) is free text, journaled
    and shown by the bundle, that says nothing about the evidence."""

    FACTUAL_ERROR = "factual_error"
    WRONG_ASSUMPTION = "wrong_assumption"


FAULT_REASONS = frozenset(r.value for r in FailureReason)


@dataclass(frozen=True, slots=True)
class LearnSettings:
    """How fast per-workspace weights move and how far they may go."""

    rate: float = DEFAULT_LEARN_RATE
    bound: float = DEFAULT_LEARN_BOUND
    # An outcome's signal (cited mean minus uncited mean of a feature, in [-1, 1]) scaled so
    # a consistent habit reaches the bound's order in a few dozen outcomes.
    gain: float = 2.0


@dataclass(frozen=True, slots=True)
class Learned:
    """Salience per item key (``file:``, ``dir:``, ``symbol:``, ``memory:``; in [0, 1])
    and learned offsets per rerank feature; ``digest`` names the state (part of a replay
    key), "" when nothing was learned."""

    weights: tuple[tuple[str, float], ...] = ()
    salience: Mapping[str, float] = field(default_factory=dict)
    digest: str = ""

    @classmethod
    def of(cls, weights: Mapping[str, float], salience: Mapping[str, float]) -> Learned:
        """A state with its digest (sorted, canonical JSON: equal states, equal digests)."""
        w = tuple(sorted((k, v) for k, v in weights.items() if v))
        s = {k: v for k, v in sorted(salience.items()) if v}
        if not w and not s:
            return cls()
        body = json.dumps([w, s], sort_keys=True, separators=(",", ":"))
        return cls(w, s, hashlib.sha256(body.encode("utf-8")).hexdigest()[:16])

    def __bool__(self) -> bool:
        return bool(self.digest)


def salience_keys(path: str, symbol: str = "") -> tuple[str, str, str]:
    """The (file, symbol, dir) item keys of a section of ``path`` (symbol "" when none)."""
    parent = path.rsplit("/", 1)[0] if "/" in path else "."
    return f"file:{path}", f"symbol:{path}#{symbol}" if symbol else "", f"dir:{parent}"


@dataclass(frozen=True, slots=True)
class PastOutcome:
    """An earlier intent in this workspace that ended with an outcome: what it asked,
    what it cited, how it ended, and how similar it is to the request (``score``)."""

    turn_id: str
    time: str
    intent: str
    outcome: str
    reason: str | None
    cited: tuple[str, ...]  # the cited sources' uris, in citation order
    score: float
