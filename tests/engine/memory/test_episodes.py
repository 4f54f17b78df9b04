"""Episodes: notes grouped by the time they were made, and recall reading them (real SQLite
stores)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest import MonkeyPatch

from engine.memory import Memory, _memory
from engine.memory._episodes import (
    EPISODE_B,
    EPISODE_GAP_S,
    EPISODE_K1,
    Episodes,
    episode_of,
    episode_scores,
)
from engine.memory._recall import diversify

DAY = 86_400.0
T0 = 1_683_554_160.0  # 8 May 2023, 13:56 UTC


def _reference(created: dict[int, float]) -> dict[int, int]:
    """Episodes by the definition: sort by (time, id), cut where the gap passes the limit."""
    out, label, last = {}, -1, None
    for note, at in sorted(created.items(), key=lambda p: (p[1], p[0])):
        if last is None or at - last > EPISODE_GAP_S:
            label += 1
        out[note], last = label, at
    return out


@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 20), st.booleans()), max_size=60))
def test_episodes_advanced_in_any_order_match_the_definition(
    steps: list[tuple[int, int, bool]],
) -> None:
    """Notes arriving in any order, some leaving, group as sorting them afresh would."""
    eps, live = Episodes(), dict[int, float]()
    for seq, (note, hours, keep) in enumerate(steps, 1):
        at = live.get(note, hours * 1_200.0)  # a note's time never changes
        eps.advance([(note, at, keep)], seq)
        if keep:
            live[note] = at
        else:
            live.pop(note, None)
    of, sizes = eps.groups()
    assert {n: episode_of(of, n) for n in live} == _reference(live)
    assert sum(sizes) == len(live) == int((of >= 0).sum())


def test_deleting_the_note_that_bridged_a_gap_splits_its_episode(mem: Memory) -> None:
    """Soft or hard, a removed note leaves the episodes its neighbours make without it."""
    a = mem.save("first", "note", created=T0).id
    b = mem.save("second", "note", created=T0 + 0.8 * EPISODE_GAP_S).id
    c = mem.save("third", "note", created=T0 + 1.6 * EPISODE_GAP_S).id
    of, _ = mem.store.episodes()
    assert episode_of(of, a) == episode_of(of, b) == episode_of(of, c) == 0
    mem.forget(b)
    of, sizes = mem.store.episodes()
    assert (episode_of(of, a), episode_of(of, b), episode_of(of, c)) == (0, None, 1)
    assert sizes == [1, 1]
    d = mem.save("fourth", "note", created=T0 + 0.8 * EPISODE_GAP_S).id
    of, _ = mem.store.episodes()
    assert episode_of(of, d) == episode_of(of, a) == episode_of(of, c)
    mem.forget(d, hard=True)
    of, _ = mem.store.episodes()
    assert (episode_of(of, a), episode_of(of, d), episode_of(of, c)) == (0, None, 1)


def test_episode_scores_reward_an_episode_that_holds_more_of_the_words() -> None:
    """BM25 over episodes: holding two query terms beats holding one; one episode: nothing."""
    of = np.array([-1, 0, 0, 1, 1, 2])
    fit = episode_scores({"kiln": np.array([1, 3, 99]), "glaze": np.array([2])}, of, [2, 2, 1])
    assert fit[0] > fit[1] > 0 and 2 not in fit
    assert episode_scores({"kiln": np.array([1, 3])}, np.array([-1, 0, -1, 0]), [2]) == {}


@given(st.lists(st.lists(st.integers(0, 12), max_size=12), min_size=1, max_size=4))
def test_episode_scores_match_a_plain_bm25(terms: list[list[int]]) -> None:
    """The array count equals BM25 written out per episode (tf: notes holding the term)."""
    of = np.array([-1, 0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, -1])
    sizes = [3, 2, 1, 4, 1]
    matches = {
        str(t): np.array(sorted(set(notes)), dtype=np.int64) for t, notes in enumerate(terms)
    }
    want: dict[int, float] = {}
    avg = sum(sizes) / len(sizes)
    for notes in matches.values():
        tf: dict[int, int] = {}
        for n in notes:
            if of[n] >= 0:
                tf[int(of[n])] = tf.get(int(of[n]), 0) + 1
        idf = math.log(1 + (len(sizes) - len(tf) + 0.5) / (len(tf) + 0.5))
        for e, f in tf.items():
            norm = EPISODE_K1 * (1 - EPISODE_B + EPISODE_B * sizes[e] / avg)
            want[e] = want.get(e, 0.0) + idf * f * (EPISODE_K1 + 1) / (f + norm)
    got = episode_scores(matches, of, sizes)
    assert got.keys() == want.keys()
    assert all(got[e] == pytest.approx(want[e]) for e in want)


def test_diversify_spreads_over_episodes() -> None:
    """A note of an episode already shown drops below a slightly weaker one of another."""
    out = diversify([(1, 1.0), (2, 0.95), (3, 0.9)], {}, 0.9, {1: 0, 2: 0, 3: 1}, 0.8)
    assert [n for n, _ in out] == [1, 3, 2]


def test_a_question_spread_over_one_episode_finds_that_episode(
    mem: Memory, monkeypatch: MonkeyPatch
) -> None:
    """Two notes match a question's first words, the shorter one better; the other comes
    first once its episode's other note holding the question's last word lifts it."""
    other = mem.save("kiln firing today", "note", created=T0).id
    mem.save("lunch order for the team", "note", created=T0 + 60)
    mine = mem.save("kiln firing on tuesday", "note", created=T0 + 3 * DAY).id
    mem.save("glaze colours for the cups", "note", created=T0 + 3 * DAY + 60)
    for i in range(6):
        mem.save(f"unrelated note {i} about the weather", "note", created=T0 + (10 + i) * DAY)
    monkeypatch.setattr(_memory, "EPISODE_LIFT", 0.0)
    assert [h.id for h in mem.search("kiln firing glaze", 2)] == [other, mine]
    monkeypatch.undo()
    assert [h.id for h in mem.search("kiln firing glaze", 2)] == [mine, other]


def test_undated_notes_are_one_episode_and_rank_as_before(mem: Memory) -> None:
    """Notes saved in one sitting are one episode: recall reads no episode into them."""
    for text in ("kiln firing", "glaze colours", "lunch order"):
        mem.save(text, "note")
    of, sizes = mem.store.episodes()
    assert sizes == [3] and set(of[of >= 0].tolist()) == {0}
