"""Memory recall: score fusion, episode diversity, and both on a real SQLite store."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest import MonkeyPatch

from engine.memory import Memory, _memory
from engine.memory._memory import DENSE_SHARE
from engine.memory._recall import IMPORTANCE_WEIGHT, diversify, fuse


def test_fusion_keeps_a_weak_match_weak() -> None:
    """A note at a tenth of the best BM25 gets about a tenth of the best fused score."""
    fused = dict(fuse([(1, 10.0), (2, 1.0)], [], 0.15, {1: 0.0, 2: 0.0}))
    assert fused[2] == pytest.approx(fused[1] / 10)


def test_fusion_weighs_cosine_by_its_share_and_drops_what_is_not_kept() -> None:
    """The cosine adds its share (a negative one nothing); ids without a weight are left out."""
    fused = dict(fuse([(1, 4.0)], [(1, 0.5), (2, 0.5), (3, -0.2), (9, 1.0)], 0.25,
                      {1: 0.0, 2: 0.0, 3: 0.0}))  # fmt: skip
    assert fused[1] == pytest.approx(0.75 + 0.25 * 0.5)
    assert fused[2] == pytest.approx(0.25 * 0.5)
    assert fused[3] == 0.0
    assert 9 not in fused


def test_importance_scales_but_orders_ties_by_id() -> None:
    """Importance multiplies by at most 1 + IMPORTANCE_WEIGHT; equal scores sort by id."""
    fused = fuse([(5, 2.0), (3, 2.0), (4, 1.0)], [], 0.0, {5: 0.0, 3: 0.0, 4: 1.0})
    assert [n for n, _ in fused] == [3, 5, 4]
    assert fused[2][1] == pytest.approx(0.5 * (1 + IMPORTANCE_WEIGHT))


def test_diversify_moves_a_neighbour_below_another_episode() -> None:
    """The note beside the first one drops below a slightly weaker note elsewhere."""
    scored = [(1, 1.0), (2, 0.95), (7, 0.9), (8, 0.5)]
    out = diversify(scored, {1: {2}, 2: {1}}, 0.8)
    assert [n for n, _ in out] == [1, 7, 2, 8]
    assert dict(out) == dict(scored)  # scores as they came


def test_diversify_goes_breadth_first_in_the_head_only() -> None:
    """In the first places a second note of a shown episode drops below a weaker note of
    another episode; past them the milder penalty lets it back above a third episode's."""
    scored = [(1, 1.0), (2, 0.95), (4, 0.9), (3, 0.7), (5, 0.6)]
    episodes = {1: 0, 2: 0, 4: 0, 3: 1, 5: 2}
    assert [n for n, _ in diversify(scored, {}, 1.0, episodes, 0.8)] == [1, 2, 4, 3, 5]
    out = diversify(scored, {}, 1.0, episodes, 0.8, head=2, head_episode_penalty=0.5)
    assert [n for n, _ in out] == [1, 3, 2, 4, 5]
    everywhere = diversify(scored, {}, 1.0, episodes, 0.5)
    assert [n for n, _ in everywhere] == [1, 3, 5, 2, 4]
    assert dict(out) == dict(scored)  # scores as they came


@given(st.lists(st.tuples(st.integers(1, 50), st.floats(0, 1)), unique_by=lambda p: p[0]))
def test_diversify_without_neighbours_keeps_the_order(pairs: list[tuple[int, float]]) -> None:
    """With no edges the order is the fused order, ties by id."""
    scored = sorted(pairs, key=lambda p: (-p[1], p[0]))
    assert diversify(scored, {}, 0.8) == scored


def test_search_shows_distinct_episodes_first(mem: Memory, monkeypatch: MonkeyPatch) -> None:
    """Two exchanges match: with the episode penalty the second place goes to the other
    exchange; without it, to the first exchange's next note."""
    ids = [mem.save(text, "note").id for text in (
        "kiln firing pottery", "kiln firing pottery went well", "lunch plans", "weather talk",
        "a new bike", "a long book", "tea or coffee",
        "notes from the class on pottery glazes and a kiln firing")]  # fmt: skip
    mem.relate(ids[1], ids[0], "follows")
    monkeypatch.setattr(_memory, "NEIGHBOUR_PENALTY", 1.0)
    assert [h.id for h in mem.search("kiln firing pottery", 2)] == [ids[0], ids[1]]
    monkeypatch.setattr(_memory, "NEIGHBOUR_PENALTY", 0.5)
    assert [h.id for h in mem.search("kiln firing pottery", 2)] == [ids[0], ids[7]]


def test_the_answer_after_a_question_is_recalled(mem: Memory) -> None:
    """A note that follows a strong hit (its answer) is recalled though it shares no word."""
    q = mem.save("which database do we run in staging", "note")
    a = mem.save("postgres sixteen, upgraded last spring", "note")
    mem.relate(a.id, q.id, "follows")
    for i in range(5):
        mem.save(f"unrelated note number {i} about lunch", "note")
    assert a.id in [h.id for h in mem.search("database staging", 3)]


def test_the_reply_two_notes_on_is_recalled(mem: Memory) -> None:
    """Scores pass two steps along follows: question, a question back, then the reply."""
    q = mem.save("which database do we run in staging", "note")
    back = mem.save("do you mean the primary", "note")
    reply = mem.save("postgres sixteen, upgraded last spring", "note")
    mem.relate(back.id, q.id, "follows")
    mem.relate(reply.id, back.id, "follows")
    for i in range(5):
        mem.save(f"unrelated note number {i} about lunch", "note")
    assert reply.id in [h.id for h in mem.search("database staging", 3)]


def test_a_typed_search_spreads_only_to_its_types(mem: Memory) -> None:
    """A note of another type is never passed a score into a search for one type."""
    q = mem.save("which database do we run in staging", "decision")
    a = mem.save("postgres sixteen, upgraded last spring", "note")
    mem.relate(a.id, q.id, "follows")
    assert [h.id for h in mem.search("database staging", 5, types=["decision"])] == [q.id]


def test_a_query_sharing_no_word_stays_weak_and_zero_scores_are_not_listed(
    mem: Memory,
) -> None:
    """With no note sharing a word, the nearest note scores at most the cosine's share
    (times importance), not a full score; notes neither retriever scored are left out."""
    mem.save("Parser rejects empty headers", "bugfix", what="parse_strict raises on empty input")
    mem.save("Kiln fires on Tuesdays", "note", what="the pottery kiln schedule")
    mem.save("Retries live in the transport", "decision", what="not the client")
    strong = mem.search("parser empty headers")
    assert strong[0].title.startswith("Parser") and strong[0].score > 1.0
    for query in ("zebra quantum", "parser empty headers", "kiln"):
        assert all(h.score > 0 for h in mem.search(query))
    weak = mem.search("zebra quantum")
    assert all(h.score <= DENSE_SHARE * 1.5 for h in weak), weak
