"""compact: pinned and load-bearing items whole, the rest stubs of at most 50 tokens, one
canonical checkpoint, and BudgetUnreachableError instead of a cut."""

from __future__ import annotations

import pytest

from engine.core import BudgetUnreachableError, Compaction
from engine.memory import STUB_TOKENS, Memo, compact
from indexers import TiktokenCounter
from tests.engine.memory.test_lane import _session

COUNTER = TiktokenCounter()


def test_compact_keeps_goal_and_load_bearing_whole() -> None:
    """The goal and the named step stay whole; stubs are short; the checkpoint decodes."""
    items = _session(20)
    result = compact(items, [5], 2500, items[-1].step, Memo(COUNTER), session="s")
    assert {1, 5} <= set(result.kept)
    assert result.tokens <= 2500
    assert all(COUNTER.count(s.short_form) <= STUB_TOKENS for s in result.stubs)
    assert Compaction.decode(result.checkpoint.encoded) == result


def test_compact_is_deterministic() -> None:
    """The same inputs give the same checkpoint bytes."""
    items = _session(10)
    a = compact(items, [], 800, 15, Memo(COUNTER), session="s")
    b = compact(items, [], 800, 15, Memo(COUNTER), session="s")
    assert a.checkpoint.encoded == b.checkpoint.encoded and a.checkpoint.sha256


def test_compact_refuses_when_stubs_do_not_fit() -> None:
    """Load-bearing text over the budget, or stubs over it, raise; nothing is cut."""
    items = _session(10)
    with pytest.raises(BudgetUnreachableError):
        compact(items, [3], 20, items[-1].step, Memo(COUNTER), session="s")
    with pytest.raises(BudgetUnreachableError):
        compact(items, [], 100, items[-1].step, Memo(COUNTER), session="s")
