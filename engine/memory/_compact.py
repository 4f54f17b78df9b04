"""Compaction with checkpoints: the planner's explicit call.

``compact(items, load_bearing, budget, step)`` keeps the pinned items (the session's goal)
and the load-bearing ones whole, turns every other item into a stub ``{ref, short_form,
salience}`` (a short form of at most ``STUB_TOKENS``), then brings back whole the newest
stubbed items while everything still fits. When the kept items and the stubs alone exceed
the budget it raises ``BudgetUnreachableError``: nothing is ever truncated.

The result is a ``Checkpoint`` in one canonical encoding (sorted-key compact JSON), so the
same inputs give the same bytes and the same sha256 on every machine; reloading one
rebuilds the working set without recomputing the partition. Compaction only reads: nothing
salience-like is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.core import (
    BudgetUnreachableError,
    Checkpoint,
    Compaction,
    ConfigError,
    Step,
    StepRole,
    Stub,
)
from engine.memory._history import VERBATIM_CHARS, Memo, short_form, verbatim_lines

__all__ = ["STUB_TOKENS", "compact"]

STUB_TOKENS = 50  # a stub's short form at most: a line, not a summary
_CHECKPOINT_VERSION = 1


def _salience(item: Step, memo: Memo, last: int) -> float:
    """How much an item matters, from what it is (a pure read: nothing is stored)."""
    obs = memo.observe(item)
    score = 1.0
    score += 2.0 if item.role is StepRole.DECISION else 0.0
    score += 1.0 if obs.failed else 0.0
    score += 0.5 if obs.exceptions or obs.failed_tests else 0.0
    score += 0.5 if obs.writes else 0.0
    score += item.step / max(last, 1)  # newer matters more
    return round(score, 3)


def _fit(text: str, memo: Memo) -> str:
    """``text`` cut to at most ``STUB_TOKENS`` (a stub points at the whole)."""
    if memo.count(text) <= STUB_TOKENS:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if memo.count(text[:mid] + "…") <= STUB_TOKENS:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…"


def _whole(item: Step, memo: Memo) -> int:
    if len(item.text) > VERBATIM_CHARS:
        return memo.item_tokens(item)
    return memo.cost(verbatim_lines(memo.shown(item)))


def compact(
    items: Sequence[Step],
    load_bearing: Sequence[int],
    budget: int,
    step: int,
    memo: Memo,
    *,
    session: str,
) -> Compaction:
    """Compact the items up to ``step`` into ``budget`` tokens (see the module docstring).

    ``load_bearing``: steps that must stay whole. The session's first user item (its
    goal) is pinned and kept whole too. Raises ``BudgetUnreachableError`` when the kept
    items and the other items' stubs exceed ``budget``; ``ConfigError`` for a load-bearing
    step that is not among the items.
    """
    if budget < 1:
        raise ConfigError(f"budget must be >= 1, got {budget}")
    upto = [i for i in items if i.step <= step]
    steps = {i.step for i in upto}
    if missing := sorted(set(load_bearing) - steps):
        raise ConfigError(f"load-bearing steps {missing} are not in session {session} up to "
                          f"step {step}")  # fmt: skip
    goal = next((i.step for i in upto if i.role is StepRole.USER), None)
    keep = set(load_bearing) | ({goal} if goal is not None else set())
    stubs = {i.step: _fit(short_form(i, memo), memo) for i in upto if i.step not in keep}
    whole = {i.step: _whole(i, memo) for i in upto if i.step in keep}
    total = sum(whole.values()) + sum(memo.count(s) + 1 for s in stubs.values())
    if total > budget:
        raise BudgetUnreachableError(
            f"compacting session {session} to step {step} needs {total} tokens for the kept "
            f"items ({len(whole)}) and the stubs of the rest ({len(stubs)}), over the budget "
            f"of {budget}; nothing was truncated: raise the budget or keep fewer items",
            total, budget,
        )  # fmt: skip
    for item in reversed(upto):  # the newest stubbed items come back whole while they fit
        if item.step in stubs:
            gain = _whole(item, memo) - memo.count(stubs[item.step]) - 1
            if total + gain <= budget:
                total += gain
                del stubs[item.step]
                keep.add(item.step)
    last = upto[-1].step if upto else 0
    stub_list = [
        Stub(f"session:{session}#{i.step}", stubs[i.step], _salience(i, memo, last))
        for i in upto
        if i.step in stubs
    ]
    body: dict[str, Any] = {
        "v": _CHECKPOINT_VERSION,
        "session": session,
        "step": step,
        "budget": budget,
        "kept": sorted(keep),
        "stubs": [
            {"ref": s.ref, "short_form": s.short_form, "salience": s.salience} for s in stub_list
        ],
        "tokens": total,
    }
    return Compaction(session, step, budget, tuple(sorted(keep)), tuple(stub_list), total,
                      Checkpoint.of(body))  # fmt: skip
