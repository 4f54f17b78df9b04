"""A note search's words and its title lift: pure functions, then on a real SQLite store."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest import MonkeyPatch

from engine.memory import Memory, _query
from engine.memory._query import TITLE_LIFT, lift_titled, query_words, titled
from engine.segment import code_terms


def test_query_words_drop_function_words_unless_nothing_else_is_left() -> None:
    """A question's function words go, once each word; a query of only them keeps them."""
    assert query_words(code_terms, "What did Ann say about the kiln, the kiln?") == [
        "ann", "say", "about", "kiln"]  # fmt: skip
    assert query_words(code_terms, "what is it") == ["what", "is", "it"]


def test_lift_titled_scales_only_the_titled_notes_and_reorders() -> None:
    """A titled note counts 1 + TITLE_LIFT of its score; the others keep theirs."""
    out = lift_titled([(1, 1.0), (2, 0.9), (3, 0.5)], {2})
    assert [i for i, _ in out] == [2, 1, 3]
    assert dict(out) == pytest.approx({1: 1.0, 2: 0.9 * (1 + TITLE_LIFT), 3: 0.5})


@given(st.lists(st.tuples(st.integers(1, 50), st.floats(0, 1)), unique_by=lambda p: p[0]))
def test_lift_titled_with_no_title_keeps_the_order(pairs: list[tuple[int, float]]) -> None:
    """With no titled note the order is the score order, ties by id."""
    scored = sorted(pairs, key=lambda p: (-p[1], p[0]))
    assert lift_titled(pairs, set()) == scored


def test_titled_reads_titles_stemmed_and_only_among_the_ids(mem: Memory) -> None:
    """A title holding a word's stem counts; one holding it only in its body, or not
    among the ids asked about, does not."""
    by_title = mem.save("Retries live in the HTTP client", "decision").id
    by_body = mem.save("HTTP client", "note", what="retry three times").id
    other = mem.save("Retry budget", "note").id
    found = titled(mem.store, ["retry"], [by_title, by_body])
    assert found == {by_title}
    assert titled(mem.store, ["retry"], [by_title, by_body, other]) == {by_title, other}
    assert titled(mem.store, [], [by_title]) == set()


def test_a_note_titled_by_a_common_name_ranks_first(mem: Memory, monkeypatch: MonkeyPatch) -> None:
    """A name that titles most notes weighs nothing in BM25 (its idf floors at zero), so
    of two notes that match "kiln" alike, the one titled by the asked-about name comes
    first only through the title lift."""
    for i in range(6):
        mem.save(f"Ann ({i})", "note", what=f"lunch plans number {i}")
    bob = mem.save("Bob (6)", "note", what="the kiln is hot").id
    ann = mem.save("Ann (7)", "note", what="the kiln is hot today").id
    query = "what did Ann say about the kiln"
    monkeypatch.setattr(_query, "TITLE_LIFT", 0.0)
    assert [h.id for h in mem.search(query, 2)] == [bob, ann]
    monkeypatch.undo()
    assert [h.id for h in mem.search(query, 2)] == [ann, bob]
