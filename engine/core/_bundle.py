"""The cold-start bundle's records: what an agent is handed before its first step."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "DEFAULT_BUNDLE_BUDGET",
    "MAX_BUNDLE_BUDGET",
    "MAX_OVERFLOW",
    "PINNED_FLOOR",
    "Bundle",
    "BundleItem",
    "Tier",
]

DEFAULT_BUNDLE_BUDGET = 3000  # tokens: the rules, a few outcomes and the code to start from
MAX_BUNDLE_BUDGET = 4000  # a cold start, not a context: past this, build_context is the tool
MAX_OVERFLOW = 64  # left-out items named by uri: enough to page through, never a dump
# Pinned items (rules, constraints, goals, identity) rank at least this salient, above
# every outcome and code item, so they are the last to go under budget pressure.
PINNED_FLOOR = 0.7


class Tier(StrEnum):
    """Where a bundle item comes from; on a duplicate, the earlier tier here wins."""

    PINNED = "pinned"
    OUTCOMES = "outcomes"
    FRAME = "frame"


@dataclass(frozen=True, slots=True)
class BundleItem:
    """One item of a bundle: its tier, where it resolves, a title, its text, how salient
    it is (the global trim keeps the most salient) and its token cost as rendered."""

    tier: Tier
    uri: str
    title: str
    text: str
    salience: float
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Bundle:
    """The cold-start bundle: items that fit ``budget`` (``render`` is the exact text),
    the uris of those left out (at most ``MAX_OVERFLOW``), and how long it took."""

    goal: str
    budget: int
    items: tuple[BundleItem, ...]
    overflow: tuple[str, ...]
    tokens_used: int
    text: str
    latency_ms: float

    def render(self) -> str:
        """The bundle as a prompt shows it (the same bytes for the same state)."""
        return self.text
