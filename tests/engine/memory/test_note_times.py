"""Notes saved at a time the caller gives (an imported history): kept, checked, and read
by timeline and dedupe (real SQLite stores)."""

from __future__ import annotations

import math

import pytest

from engine.core import ConfigError, SaveAction
from engine.memory import DEDUPE_WINDOW_S, Memory

DAY = 86_400.0
T0 = 1_683_554_160.0  # 8 May 2023, 13:56 UTC


def test_a_note_keeps_the_time_it_was_given(mem: Memory) -> None:
    """A note saved with ``created`` is made, updated and last read then; timeline sorts by it."""
    now = mem.save("saved today", "note").id
    old = mem.save("imported from last year", "note", created=T0)
    note = mem.get(old.id)
    assert (note.created, note.updated) == (T0, T0)
    assert [h.id for h in mem.timeline(now)] == [old.id, now]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, True, "2023-05-08", 4e12])
def test_a_bad_creation_time_is_refused(mem: Memory, bad: object) -> None:
    """Not a number, not finite, negative or in the future: a clear error, nothing saved."""
    with pytest.raises(ConfigError, match="created"):
        mem.save("a note", "note", created=bad)  # type: ignore[arg-type]
    assert mem.stats().notes == 0


def test_dedupe_counts_the_window_from_the_notes_own_time(mem: Memory) -> None:
    """The same content a day apart is one note; past the window apart, two."""
    first = mem.save("the same words", "note", created=T0)
    assert mem.save("the same words", "note", created=T0 + DAY).id == first.id
    later = mem.save("the same words", "note", created=T0 + DEDUPE_WINDOW_S + DAY)
    assert later.action is SaveAction.CREATED and later.id != first.id
