"""Attest: what an outcome teaches. The rules, the EMA step over rerank features, and the
token bucket that limits how often one (actor, intent) may attest.

- success: each cited item (a snippet's file, folder and symbol; a memory note) +1
  citation and +1 access;
- failure with reason ``factual_error`` or ``wrong_assumption``: -1 citation (floor 0);
- any other failure: no count changes; every cited item's last-used time is still touched.

The learned weights move by EMA toward the difference between the cited and the uncited
candidates of a successful turn that the ranking put the wrong way round (each uncited
candidate ranked above a cited one), feature by feature, clamped to the configured bound.
A turn the ranking already got right teaches nothing: moving toward every
cited-minus-uncited difference would only push up the features that ranked the cited ones
first, tilting the weights chosen for every other request (on the dev set that cost top-1
files without gaining top-5 ones). A failure moves no weight, whatever its reason: it says
the cited items misled (their counts drop), not what should have been cited instead, so
it gives no direction. Pushing away from the cited ones' features (the earlier rule) set
each faulted failure against everything ranked below the evidence, a far larger step than
a success's few misranked rivals give.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from engine.core import (
    FAULT_REASONS,
    MAX_ATTEST_CITATIONS,
    ConfigError,
    LearnSettings,
    Outcome,
    RateLimitedError,
    check_text,
    salience_keys,
    uri_path,
)
from engine.memory._feedback import CitedRef

__all__ = [
    "LEARN_POOL",
    "FeatureRow",
    "RecentFeatures",
    "TokenBucket",
    "check_attest",
    "cited_keys",
    "ema_step",
    "failure_reason",
    "item_changes",
    "split_rows",
]

LEARN_POOL = 40  # best candidates of a turn kept for learning: the packed ones and rivals
RATE_PER_S = 1.0  # attests per second one (actor, intent) may sustain
BURST = 5  # ... and how many may come at once
_RECENT = 256  # turns whose candidate features this process keeps for feedback


@dataclass(frozen=True, slots=True)
class FeatureRow:
    """One candidate of a turn: where it is, its symbol, its rerank feature values."""

    path: str
    start_line: int
    end_line: int
    symbol: str
    features: tuple[tuple[str, float], ...]
    rank: int = 0  # its place in the turn's ranking (0: the best)


def check_attest(
    outcome: str, reason: str | None, intent: str, citations: int
) -> tuple[Outcome, str | None]:
    """The outcome and its reason as journaled (see ``failure_reason``), or a
    ``ConfigError`` naming what is wrong with the attest: a reason says why a step failed,
    so a success takes none."""
    try:
        checked = Outcome(outcome)
    except ValueError:
        raise ConfigError(f"unknown outcome {outcome!r}; use success or failure") from None
    if reason is not None:
        reason = failure_reason(check_text("reason", reason))
    if reason is not None and checked is Outcome.SUCCESS:
        raise ConfigError(f"success takes no reason (got {reason!r}): a reason says why a "
                          "step failed")  # fmt: skip
    if not intent.strip():
        raise ConfigError("an attest needs the turn's intent (its goal or query), got none")
    if citations < 1:
        raise ConfigError("an outcome needs at least one citation (what did the step use?)")
    if citations > MAX_ATTEST_CITATIONS:
        raise ConfigError(f"{citations} citations: at most {MAX_ATTEST_CITATIONS} per feedback")
    return checked, reason


def failure_reason(reason: str) -> str | None:
    """A failure's reason as journaled: a ``FailureReason`` in its own words however it was
    written ("Wrong_Assumption", " factual-error ": a slip of case took no citation back),
    other text stripped, blank text as none."""
    text = reason.strip()
    known = re.sub(r"[\s_-]+", "_", text.lower())
    return known if known in FAULT_REASONS else (text or None)


def _overlaps(row: FeatureRow, ref: CitedRef) -> int:
    if row.path != uri_path(ref.source_uri):
        return 0
    return max(0, min(row.end_line, ref.end_line) - max(row.start_line, ref.start_line) + 1)


def split_rows(rows: Sequence[FeatureRow], cited: Sequence[CitedRef]
               ) -> tuple[list[FeatureRow], list[FeatureRow]]:  # fmt: skip
    """(cited, uncited): the turn's candidates that overlap a cited snippet, and the rest."""
    hit = [r for r in rows if any(_overlaps(r, c) for c in cited)]
    return hit, [r for r in rows if r not in hit]


def cited_keys(rows: Sequence[FeatureRow], cited: Sequence[CitedRef]) -> list[str]:
    """The salience items the citations name: a note; a file, its folder and the symbol of
    the candidate that covers the snippet best. Sorted, each once."""
    keys: set[str] = set()
    for ref in cited:
        if ref.source_uri.startswith("memory:"):
            keys.add(ref.source_uri)
            continue
        path = uri_path(ref.source_uri)
        best = max(rows, key=lambda r: (_overlaps(r, ref), r.symbol), default=None)
        symbol = best.symbol if best is not None and _overlaps(best, ref) else ""
        keys.update(k for k in salience_keys(path, symbol) if k)
    return sorted(keys)


def item_changes(outcome: Outcome, reason: str | None, keys: Sequence[str]
                 ) -> list[tuple[str, int, int]]:  # fmt: skip
    """(key, citation change, access change) for each cited item, by the rules above."""
    if outcome is Outcome.SUCCESS:
        return [(k, 1, 1) for k in keys]
    if reason in FAULT_REASONS:
        return [(k, -1, 0) for k in keys]
    return [(k, 0, 0) for k in keys]


def ema_step(before: Mapping[str, float], cited: Sequence[FeatureRow],
             uncited: Sequence[FeatureRow], outcome: Outcome, reason: str | None,
             settings: LearnSettings) -> tuple[dict[str, float], bool]:  # fmt: skip
    """(after, skipped): the learned offsets after one outcome. Skipped (after = before)
    for a failure, or when no (cited, uncited) pair was ranked the wrong way round (see
    the module's docstring)."""
    del reason  # a failure's reason moves counts (``item_changes``), never the weights
    if outcome is not Outcome.SUCCESS:
        return dict(before), True
    cv = [(r.rank, dict(r.features)) for r in cited]
    uv = [(r.rank, dict(r.features)) for r in uncited]
    pairs = [(c, u) for rc, c in cv for ru, u in uv if ru < rc]
    if not pairs:
        return dict(before), True
    names = sorted({n for r in (*cited, *uncited) for n, _ in r.features} | set(before))
    after: dict[str, float] = {}
    for name in names:
        diff = sum(c.get(name, 0.0) - u.get(name, 0.0) for c, u in pairs) / len(pairs)
        target = settings.gain * diff
        value = (1 - settings.rate) * before.get(name, 0.0) + settings.rate * target
        value = max(-settings.bound, min(settings.bound, value))
        if value:
            after[name] = value
    return after, False


class RecentFeatures:
    """The candidate features of this process's last turns, by replay key (what
    feedback learns from without ranking the turn again); safe to share between threads."""

    def __init__(self, keep: int = _RECENT) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._turns: dict[str, tuple[FeatureRow, ...]] = {}

    def remember(self, replay_key: str, rows: Sequence[FeatureRow]) -> None:
        """Keep a turn's rows, forgetting the oldest beyond the limit."""
        with self._lock:
            self._turns.pop(replay_key, None)
            self._turns[replay_key] = tuple(rows)
            while len(self._turns) > self._keep:
                self._turns.pop(next(iter(self._turns)))

    def get(self, replay_key: str) -> tuple[FeatureRow, ...] | None:
        """A remembered turn's rows, or None."""
        with self._lock:
            return self._turns.get(replay_key)


class TokenBucket:
    """A token bucket per key: ``rate`` tokens a second, at most ``burst`` held.
    ``take`` spends one or raises ``RateLimitedError``, spending nothing."""

    def __init__(self, rate: float = RATE_PER_S, burst: int = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._rate, self._burst, self._clock = rate, burst, clock
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: tuple[str, str]) -> None:
        """Spend one token of ``key``, or raise ``RateLimitedError`` spending nothing. One
        step under the lock: of concurrent callers only as many as hold tokens pass."""
        with self._lock:
            tokens = self._tokens(key)
            if tokens >= 1.0:
                self._held[key] = (tokens - 1.0, self._clock())
                return
        wait = (1.0 - tokens) / self._rate
        raise RateLimitedError(f"over {self._rate:g} attests a second (burst {self._burst}) "
                               f"for this intent; retry in {wait:.1f}s", wait)  # fmt: skip

    def _tokens(self, key: tuple[str, str]) -> float:
        tokens, at = self._held.get(key, (float(self._burst), self._clock()))
        return min(float(self._burst), tokens + (self._clock() - at) * self._rate)
