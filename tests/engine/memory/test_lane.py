"""The history lane: within its room, deterministic, every compacted step reachable, and a
refusal (never a cut) when not even one line fits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import BudgetUnreachableError, Step, StepRole
from engine.memory import Memo, build_lane, search_items
from indexers import TiktokenCounter
from tests.engine.memory.test_observe import PYTEST

COUNTER = TiktokenCounter()


def _session(n: int) -> list[Step]:
    items = [Step(1, StepRole.USER, "Fix: the parser rejects empty headers")]
    for i in range(n):
        step = len(items) + 1
        turn = f"THOUGHT: try {i}\n```bash\npytest tests/test_a.py\n```"
        items.append(Step(step, StepRole.ASSISTANT, turn))
        lines = (f"line {i}.{j} of output text here" for j in range(60))
        body = PYTEST if i % 3 == 0 else "\n".join(lines)
        items.append(Step(step + 1, StepRole.TOOL, body, tool="bash"))
    decision = Step(len(items) + 1, StepRole.DECISION, "keep parse_strict",
                    rationale="callers", evidence=("3",))  # fmt: skip
    items.append(decision)
    return items


def test_lane_fits_and_lists_what_it_compacted() -> None:
    """A 60-step session in 1,500 tokens: within room, the newest step verbatim, every
    other step a pointer that names it, the decision still shown."""
    items = _session(30)
    lane = build_lane(items, 1500, Memo(COUNTER), session="s1", query="empty headers")
    assert lane.tokens == COUNTER.count(lane.text) <= 1500
    assert "keep parse_strict" in lane.text
    compacted = {p.source_uri for p in lane.compacted}
    assert "session:s1#2" in compacted
    assert all(f"#{i.step}" in lane.text or f"session:s1#{i.step}" in compacted for i in items)


def test_lane_is_deterministic() -> None:
    """Two builds (fresh memos) give the same bytes."""
    items = _session(20)
    a = build_lane(items, 2000, Memo(COUNTER), session="s", query="q parse")
    b = build_lane(items, 2000, Memo(COUNTER), session="s", query="q parse")
    assert a == b


def test_lane_refuses_rather_than_truncates() -> None:
    """A room below the one-line form raises BudgetUnreachableError."""
    with pytest.raises(BudgetUnreachableError):
        build_lane(_session(5), 8, Memo(COUNTER), session="s")


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 25), room=st.integers(60, 3000))
def test_lane_never_exceeds_its_room(n: int, room: int) -> None:
    """Any session, any room the one-line form fits: the lane's exact count is within it."""
    lane = build_lane(_session(n), room, Memo(COUNTER), session="s", query="header")
    assert COUNTER.count(lane.text) <= room


def test_search_finds_a_stubbed_step() -> None:
    """BM25 over the steps finds the traceback's step for words from it."""
    found = search_items(_session(6), "empty header ValueError parse", 3)
    assert found and found[0].role is StepRole.TOOL and "ValueError" in found[0].text
