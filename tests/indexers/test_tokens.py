"""Token counters: the remembering wrapper counts exactly what it wraps, within its size."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from indexers import MemoCounter, TiktokenCounter, WordCounter


class _Counting(WordCounter):
    """A WordCounter that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return super().count(text)


@settings(deadline=None)  # the first example loads the encoding
@given(st.lists(st.text(max_size=40), max_size=30))
def test_memo_counts_what_the_inner_counter_counts(texts: list[str]) -> None:
    """Every count, remembered or not, is the inner counter's (with a tiny memory too)."""
    inner = TiktokenCounter()
    memo = MemoCounter(inner, size=4)
    for text in texts + texts[::-1]:
        assert memo.count(text) == inner.count(text)
    assert memo.count_many(texts) == inner.count_many(texts)
    assert memo.name == inner.name


def test_memo_counts_a_text_again_only_after_it_was_dropped() -> None:
    """A remembered text is not counted again; the oldest is dropped past ``size``."""
    inner = _Counting()
    memo = MemoCounter(inner, size=2)
    for text in ("a b", "c d", "a b", "a b"):
        memo.count(text)
    assert inner.calls == 2
    memo.count("e f")  # drops "c d", the least recently used
    memo.count("a b")
    memo.count("c d")
    assert inner.calls == 4
