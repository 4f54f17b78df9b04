"""Evidence selection: the best evidence first under a hard budget, every omission a
pointer with the reason that is true, fragments with their neighbours, a relevance floor."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import PackSettings
from engine.packing import relevance, select_evidence
from engine.packing._select import LABEL_TOKENS, Picked
from engine.retrieval import Scored
from indexers import Chunk, ChunkKind, WordCounter
from tests.engine.records import chunk

COUNTER = WordCounter()
HEADER = 10  # tokens a snippet's header costs in these tests


def _cost(c: Chunk, tokens: int) -> int:
    return tokens + HEADER


def _scored(c: Chunk, score: float) -> Scored:
    return Scored(c, score, "bm25", (), None)


def _body(lines: int, seed: str) -> str:
    return "\n".join(f"    value_{seed}_{i} = compute_{seed}({i})" for i in range(lines))


def test_overlaps_near_copies_and_trivial_sections_are_pointers() -> None:
    """A section overlapping a chosen one, a near-copy of one, and a trivial one are left
    out with their reasons; nothing is dropped silently."""
    best = chunk("a.py", "def run():\n" + _body(8, "run"), symbol="run")
    inner = chunk("a.py", _body(3, "run"), start=3)
    copy = chunk("b.py", "def run():\n" + _body(8, "run"), symbol="run")
    tiny = chunk("c.py", "import os", kind=ChunkKind.MODULE, tokens=2)
    other = chunk("d.py", "def other():\n" + _body(4, "other"), symbol="other")
    scored = [_scored(best, 5.0), _scored(copy, 3.0), _scored(tiny, 2.0),
              _scored(other, 1.0), _scored(inner, 0.5)]  # fmt: skip
    no_floor = PackSettings(min_relevance=0.0)  # the floor has its own test
    got = select_evidence(scored, 1000, _cost, COUNTER, ["run"], no_floor)
    assert [p.scored.chunk.path for p in got.picked] == ["a.py", "d.py"]
    reasons = {p.source_uri.split("#")[0]: p.reason for p in got.pointers}
    assert reasons == {"a.py": "overlap", "b.py": "redundant", "c.py": "trivial"}


def test_a_strong_section_that_does_not_fit_is_narrowed() -> None:
    """With room for a few lines only, the best section is cut to its most relevant
    contiguous lines (whole lines, with their own hash)."""
    lines = [f"    step_{i} = work({i})" for i in range(60)]
    lines[30] = "    target = parse_header(data)"
    big = chunk("big.py", "def handle(data):\n" + "\n".join(lines), symbol="handle")
    got = select_evidence([_scored(big, 5.0)], 120, _cost, COUNTER, ["parse_header"],
                          PackSettings())  # fmt: skip
    assert len(got.picked) == 1 and got.picked[0].narrowed
    assert "parse_header" in got.picked[0].text and got.picked[0].tokens + HEADER <= 120
    # The lines around a hit come with it as far as the room goes, not the hit alone.
    lines[30], lines[1] = lines[1], lines[30]
    early = chunk("big.py", "def handle(data):\n" + "\n".join(lines), symbol="handle")
    got = select_evidence([_scored(early, 5.0)], 120, _cost, COUNTER, ["parse_header"],
                          PackSettings())  # fmt: skip
    assert "parse_header" in got.picked[0].text and got.picked[0].text.count("\n") >= 12


def test_a_fragment_comes_with_its_neighbours() -> None:
    """A one-line alias is shown inside the lines around it in its file, not alone."""
    head = chunk("m.py", "def load(path):\n" + _body(3, "load"), symbol="load")
    alias = chunk("m.py", "read = load", start=5, kind=ChunkKind.MODULE, tokens=4)
    tail = chunk("m.py", "def save(path):\n" + _body(2, "save"), start=6, symbol="save")
    siblings = [head, alias, tail]
    got = select_evidence([_scored(alias, 5.0), _scored(head, 1.0)], 1000, _cost, COUNTER, [],
                          PackSettings(min_relevance=0.0), lambda c: siblings)  # fmt: skip
    first = got.picked[0]
    assert first.widened and first.scored.chunk.id == alias.id
    assert "read = load" in first.text and first.span.start_line < 5 < first.span.end_line
    assert [p.reason for p in got.pointers] == ["overlap"]  # its neighbour is shown in it
    alone = select_evidence([_scored(alias, 5.0)], 1000, _cost, COUNTER, [], PackSettings())
    assert not alone.picked and [p.reason for p in alone.pointers] == ["trivial"]


def test_parts_of_a_split_function_are_one_piece_of_evidence() -> None:
    """The second part of a function split for size follows its first part even when the
    file has had its turn (one section per file before the others' turn)."""
    first = replace(chunk("a.py", "def run():\n" + _body(6, "run"), symbol="run"), part=1, parts=2)
    second = replace(chunk("a.py", _body(6, "step"), start=8, symbol="run"), part=2, parts=2)
    other = chunk("b.py", "def other():\n" + _body(6, "other"), symbol="other")
    unrelated = chunk("a.py", "def later():\n" + _body(6, "later"), start=30, symbol="later")
    scored = [_scored(first, 5.0), _scored(second, 4.9), _scored(unrelated, 4.8),
              _scored(other, 4.0)]  # fmt: skip
    breadth = PackSettings(min_relevance=0.0, lead_file_tokens=10**6)  # whole sections
    got = select_evidence(scored, 1000, _cost, COUNTER, [], breadth)
    order = [(p.scored.chunk.path, p.scored.chunk.span.start_line) for p in got.picked]
    assert order == [("a.py", 1), ("a.py", 8), ("b.py", 1), ("a.py", 30)]
    # The file of the best candidate may give one section per ``lead_file_tokens`` first.
    deep = replace(breadth, lead_file_tokens=500)  # 2 for a 1000-token room
    got = select_evidence(scored, 1000, _cost, COUNTER, [], deep)
    order = [(p.scored.chunk.path, p.scored.chunk.span.start_line) for p in got.picked]
    assert order == [("a.py", 1), ("a.py", 8), ("a.py", 30), ("b.py", 1)]


def _order_of(got: object) -> list[tuple[str, int]]:
    picked = got.picked  # type: ignore[attr-defined]
    return [(p.scored.chunk.path, p.scored.chunk.span.start_line) for p in picked]


def test_a_small_section_uses_only_its_share_of_the_files_turn() -> None:
    """A short method counts as its share of ``turn_tokens`` in its file's depth penalty:
    the file's main function still comes before a slightly weaker section of another file;
    counted as a whole section, it would not."""
    accessor = chunk("a.py", "def name():\n" + _body(10, "n"), symbol="name")  # 32 tokens
    answer = chunk("a.py", "def run():\n" + _body(40, "r"), start=20, symbol="run")
    other = chunk("b.py", "def other():\n" + _body(10, "o"), symbol="other")
    floor = chunk("c.py", "def unrelated():\n" + _body(10, "u"), symbol="unrelated")
    scored = [_scored(accessor, 5.0), _scored(answer, 4.9), _scored(other, 4.5),
              _scored(floor, 0.0)]  # fmt: skip
    # Relevance 1.0, 0.98, 0.9, 0; the answer loses 0.1 x the accessor's share of a turn.
    base = PackSettings(min_relevance=0.0, lead_file_tokens=10**6, depth_penalty=0.1,
                        mmr_lambda=1.0)  # fmt: skip
    shared = select_evidence(scored, 1000, _cost, COUNTER, [], replace(base, turn_tokens=100))
    assert _order_of(shared) == [("a.py", 1), ("a.py", 20), ("b.py", 1), ("c.py", 1)]
    whole = select_evidence(scored, 1000, _cost, COUNTER, [], replace(base, turn_tokens=None))
    assert _order_of(whole) == [("a.py", 1), ("b.py", 1), ("a.py", 20), ("c.py", 1)]


def test_a_strong_second_section_beats_a_weak_first_one_of_another_file() -> None:
    """Past its cap a file's next section competes at ``depth_penalty`` less relevance:
    a strong one goes before a weak section of an unrelated file; without a penalty it
    waits for every other file's turn."""
    first = chunk("a.py", "def load():\n" + _body(10, "l"), symbol="load")
    second = chunk("a.py", "def save():\n" + _body(10, "s"), start=20, symbol="save")
    weak = chunk("b.py", "def misc():\n" + _body(10, "m"), symbol="misc")
    floor = chunk("c.py", "def unrelated():\n" + _body(10, "u"), symbol="unrelated")
    scored = [_scored(first, 5.0), _scored(second, 4.9), _scored(weak, 2.0),
              _scored(floor, 0.0)]  # fmt: skip
    base = PackSettings(min_relevance=0.0, lead_file_tokens=10**6, mmr_lambda=1.0)
    soft = select_evidence(scored, 1000, _cost, COUNTER, [], replace(base, depth_penalty=0.1))
    assert _order_of(soft) == [("a.py", 1), ("a.py", 20), ("b.py", 1), ("c.py", 1)]
    strict = select_evidence(scored, 1000, _cost, COUNTER, [], replace(base, depth_penalty=None))
    assert _order_of(strict) == [("a.py", 1), ("b.py", 1), ("c.py", 1), ("a.py", 20)]


def test_with_breadth_files_more_files_come_each_as_its_best_lines() -> None:
    """With ``breadth_files``, a file's first section (the lead file's aside) costs at most
    the evidence room over that many files: cut to its lines holding the request's words,
    so more files reach the context; the lead file keeps whole sections."""
    lead = chunk("lead.py", "def run():\n" + _body(30, "lead"), symbol="run")
    others = [chunk(f"m{i}.py", f"def f{i}():\n" + _body(30, f"m{i}") + "\n    parse_header(x)",
                    symbol=f"f{i}") for i in range(6)]  # fmt: skip
    floor = chunk("z.py", "def unrelated():\n" + _body(10, "u"), symbol="unrelated")
    scored = [_scored(lead, 5.0), *(_scored(c, 4.0 - 0.1 * i) for i, c in enumerate(others)),
              _scored(floor, 0.0)]  # fmt: skip
    base = PackSettings(min_relevance=0.5)
    whole = select_evidence(scored, 400, _cost, COUNTER, ["parse_header"], base)
    wide = select_evidence(scored, 400, _cost, COUNTER, ["parse_header"],
                           replace(base, breadth_files=8, narrow_min_tokens=20))  # fmt: skip
    files = [p.scored.chunk.path for p in wide.picked]
    assert len(files) == len(set(files)) == 7 > len(whole.picked)
    for p in wide.picked:
        if p.scored.chunk.path == "lead.py":
            assert not p.narrowed and p.text == lead.text
        else:
            assert p.narrowed and "parse_header" in p.text
            assert _cost(p.scored.chunk, p.tokens + LABEL_TOKENS) <= 400 // 8
    # A look is never under ``narrow_min_tokens`` of text: at 60, fewer files, larger looks.
    floor = select_evidence(scored, 400, _cost, COUNTER, ["parse_header"],
                            replace(base, breadth_files=8, narrow_min_tokens=60))  # fmt: skip
    looks = [p for p in floor.picked if p.scored.chunk.path != "lead.py"]
    assert looks and all(_cost(p.scored.chunk, p.tokens + LABEL_TOKENS) > 400 // 8 for p in looks)
    assert len(floor.picked) < 7
    # Without room to spare the cap changes nothing: one file, whole.
    alone = select_evidence(scored[:1], 400, _cost, COUNTER, [], replace(base, breadth_files=8))
    assert [p.text for p in alone.picked] == [lead.text]


def test_weak_candidates_are_not_filler() -> None:
    """Below the relevance floor nothing is packed: the pointers say "weak" and the
    selection says how much budget it left unused."""
    strong = chunk("a.py", "def a():\n" + _body(3, "a"))
    middling = chunk("b.py", "def b():\n" + _body(3, "b"))
    poor = chunk("c.py", "def c():\n" + _body(3, "c"))
    scored = [_scored(strong, 9.0), _scored(middling, 8.0), _scored(poor, 1.0)]
    got = select_evidence(
        scored, 1000, _cost, COUNTER, [], replace(PackSettings(), min_relevance=0.5)
    )
    assert [p.scored.chunk.path for p in got.picked] == ["a.py", "b.py"]
    assert [(p.source_uri.split("#")[0], p.reason) for p in got.pointers] == [("c.py", "weak")]
    assert got.floor_tokens == 1000 - sum(_cost(p.scored.chunk, p.tokens) for p in got.picked)
    assert relevance(scored)[middling.id] == 7.0 / 8.0


sections = st.lists(st.tuples(st.integers(1, 40), st.floats(0.0, 10.0)), min_size=1, max_size=25)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(sections, st.integers(0, 800), st.floats(0.0, 1.0))
def test_the_best_evidence_goes_first(items: list[tuple[int, float]], budget: int,
                                      lam: float) -> None:  # fmt: skip
    """Whatever the sizes, scores, budget and novelty weight: the evidence fits the budget,
    every candidate is chosen or a pointer, and no packed section scores lower than one
    left out for "budget" unless that one could not fit (even before the weaker ones)."""
    scored = [_scored(chunk(f"f{i}.py", "def f():\n" + _body(n, str(i))), s)
              for i, (n, s) in enumerate(items)]  # fmt: skip
    scored.sort(key=lambda s: (-s.score, s.chunk.id))
    got = select_evidence(
        scored, budget, _cost, COUNTER, [], replace(PackSettings(), mmr_lambda=lam)
    )
    def cost(p: Picked) -> int:  # a cut or widened snippet says so in its title
        return _cost(p.scored.chunk, p.tokens + (LABEL_TOKENS if p.narrowed or p.widened else 0))

    used = sum(cost(p) for p in got.picked)
    assert used <= budget
    assert len(got.picked) + len(got.pointers) == len(scored)
    for left in (p for p in got.pointers if p.reason == "budget"):
        # A pointer's score is rounded to 6 places: a tie can read as a hair stronger.
        better = sum(cost(p) for p in got.picked if p.scored.score >= left.score - 1e-6)
        weaker = [p for p in got.picked if p.scored.score < left.score - 1e-6]
        if weaker:  # it lost to weaker evidence only if it could not fit beside the better
            assert left.tokens + HEADER > budget - better


def test_a_short_question_counts_turns_its_own_way_a_long_report_does_not() -> None:
    """Questions (at most ``MAX_INTENT_WORDS`` words) take ``question_turn_tokens``,
    ``question_depth_penalty`` and ``question_breadth_files``; a long report keeps whole
    sections, strict breadth first, and its other files' first sections cut to their share."""
    from engine.packing import pack_settings_for
    from engine.retrieval import MAX_INTENT_WORDS

    settings = PackSettings(turn_tokens=None, depth_penalty=None, question_turn_tokens=300,
                            question_depth_penalty=0.1, breadth_files=16,
                            question_breadth_files=None)  # fmt: skip
    question = "how does a request reach its handler through the middleware stack"
    asked = pack_settings_for(question, settings)
    assert (asked.turn_tokens, asked.depth_penalty, asked.breadth_files) == (300, 0.1, None)
    report = " ".join(["the handler is never called"] * MAX_INTENT_WORDS)
    assert pack_settings_for(report, settings) == settings


def test_the_file_models_belief_lifts_a_files_turn() -> None:
    """While a file has its turn (under its cap), its sections compete at
    ``file_turn_bonus`` times the file model's probability for the file more relevance: a
    file the model believes in comes before a more relevant section of one it does not,
    and the lead file's second section before other files; past its turn, a file's next
    section gets nothing and waits. No probabilities, or a bonus of 0: as before."""
    lead = chunk("lead.py", "def run():\n" + _body(10, "r"), symbol="run")
    lead2 = chunk("lead.py", "def stop():\n" + _body(10, "s"), start=20, symbol="stop")
    near = chunk("near.py", "def near():\n" + _body(10, "n"), symbol="near")
    gold = chunk("gold.py", "def fix():\n" + _body(10, "g"), symbol="fix")
    gold2 = chunk("gold.py", "def fix2():\n" + _body(10, "h"), start=20, symbol="fix2")
    floor = chunk("z.py", "def unrelated():\n" + _body(10, "u"), symbol="unrelated")
    scored = [_scored(lead, 5.0), _scored(near, 4.0), _scored(gold, 3.8), _scored(gold2, 3.7),
              _scored(lead2, 3.5), _scored(floor, 0.0)]  # fmt: skip
    # Relevance 1.0, 0.8, 0.76, 0.74, 0.7, 0; the lead file has one turn (its cap is 1).
    base = PackSettings(min_relevance=0.0, lead_file_tokens=10**6, mmr_lambda=1.0,
                        file_turn_bonus=1.0)  # fmt: skip
    plain = [("lead.py", 1), ("near.py", 1), ("gold.py", 1), ("z.py", 1), ("gold.py", 20),
             ("lead.py", 20)]  # fmt: skip
    assert _order_of(select_evidence(scored, 1000, _cost, COUNTER, [], base)) == plain
    belief = {"lead.py": 0.4, "near.py": 0.01, "gold.py": 0.3}
    lifted = select_evidence(scored, 1000, _cost, COUNTER, [], base, file_probs=belief)
    assert _order_of(lifted) == [("lead.py", 1), ("gold.py", 1), ("near.py", 1), ("z.py", 1),
                                 ("gold.py", 20), ("lead.py", 20)]  # fmt: skip
    off = select_evidence(scored, 1000, _cost, COUNTER, [], replace(base, file_turn_bonus=0.0),
                          file_probs=belief)  # fmt: skip
    assert _order_of(off) == plain
    # With two turns for the lead file (one per 500 tokens of 1,000), its second section
    # (0.7 + 0.4) comes before the other files; without the belief, after near.py's (0.8).
    deep = replace(base, lead_file_tokens=500)
    first = select_evidence(scored, 1000, _cost, COUNTER, [], deep, file_probs=belief)
    assert _order_of(first)[:3] == [("lead.py", 1), ("lead.py", 20), ("gold.py", 1)]
    assert _order_of(select_evidence(scored, 1000, _cost, COUNTER, [], deep))[:3] == [
        ("lead.py", 1), ("near.py", 1), ("gold.py", 1)]
