"""Evidence selection: token-cost-aware MMR under a hard budget, every omission a pointer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import PackSettings
from engine.packing import select_evidence
from engine.retrieval import Scored
from indexers import Chunk, ChunkKind, WordCounter
from tests.engine.records import chunk

COUNTER = WordCounter()
HEADER = 10  # tokens a snippet's header costs in these tests


def _cost(c: Chunk, tokens: int) -> int:
    return tokens + HEADER


def _scored(c: Chunk, score: float) -> Scored:
    return Scored(c, score, "bm25", (), None)


def _body(words: int, seed: str) -> str:
    return "\n".join(f"    value_{seed}_{i} = compute_{seed}({i})" for i in range(words))


def test_overlaps_near_copies_and_trivial_sections_are_pointers() -> None:
    """A section overlapping a chosen one, a near-copy of one, and a trivial one are left
    out with their reasons; nothing is dropped silently."""
    best = chunk("a.py", "def run():\n" + _body(8, "run"), symbol="run")
    inner = chunk("a.py", _body(3, "run"), start=3)
    copy = chunk("b.py", "def run():\n" + _body(8, "run"), symbol="run")
    tiny = chunk("c.py", "import os", kind=ChunkKind.MODULE, tokens=2)
    other = chunk("d.py", "def other():\n" + _body(4, "other"), symbol="other")
    scored = [_scored(best, 5.0), _scored(inner, 0.5), _scored(copy, 3.0),
              _scored(tiny, 2.0), _scored(other, 1.0)]  # fmt: skip
    picked, pointers = select_evidence(scored, 1000, _cost, COUNTER, ["run"], PackSettings())
    assert [p.scored.chunk.path for p in picked] == ["a.py", "d.py"]
    reasons = {p.source_uri.split("#")[0]: p.reason for p in pointers}
    assert reasons == {"a.py": "overlap", "b.py": "redundant", "c.py": "trivial"}


def test_a_strong_section_that_does_not_fit_is_narrowed() -> None:
    """With room for a few lines only, the best section is cut to its most relevant
    contiguous lines (whole lines, with their own hash)."""
    lines = [f"    step_{i} = work({i})" for i in range(60)]
    lines[30] = "    target = parse_header(data)"
    big = chunk("big.py", "def handle(data):\n" + "\n".join(lines), symbol="handle")
    picked, _ = select_evidence([_scored(big, 5.0)], 120, _cost, COUNTER, ["parse_header"],
                                PackSettings())  # fmt: skip
    assert len(picked) == 1 and picked[0].narrowed
    assert "parse_header" in picked[0].text and picked[0].tokens + HEADER <= 120
    assert big.text.split("\n")[picked[0].span.start_line - 1 :][0] == picked[0].text.split("\n")[0]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(1, 40), st.floats(0.0, 10.0)), min_size=1, max_size=25),
    st.integers(0, 600),
)
def test_chosen_evidence_never_exceeds_the_budget(sections: list[tuple[int, float]],
                                                   budget: int) -> None:  # fmt: skip
    """Whatever the sizes, scores and budget, the chosen evidence's cost fits the budget,
    and every candidate is either chosen or a pointer."""
    scored = [_scored(chunk(f"f{i}.py", "def f():\n" + _body(n, str(i))), s)
              for i, (n, s) in enumerate(sections)]  # fmt: skip
    picked, pointers = select_evidence(scored, budget, _cost, COUNTER, [], PackSettings())
    assert sum(_cost(p.scored.chunk, p.tokens) for p in picked) <= budget
    assert len(picked) + len(pointers) == len(scored)
