"""The rendered snippet header: named once, placed once, with its hash."""

from __future__ import annotations

from dataclasses import replace

from engine.packing import INSTRUCTION, Lanes, render
from engine.packing._select import Picked, window_pick
from engine.retrieval import Scored
from indexers import Chunk, Span, WordCounter
from tests.engine.records import chunk

COUNTER = WordCounter()


def _picked(c: Chunk, score: float = 1.0) -> Picked:
    """``c`` chosen whole (shown best score first)."""
    return Picked(Scored(c, score, "bm25", (), None), c.span, c.text, c.sha256,
                  COUNTER.count(c.text), False)  # fmt: skip


def _text(*picked: Picked) -> str:
    lanes = Lanes(INSTRUCTION, "## Goal\nfix it", [], [])
    return render(lanes, picked, [], 10_000, COUNTER).text


def test_a_symbol_names_the_snippet_and_the_source_line_places_it() -> None:
    """The label is the symbol (with its part when split); the path and the lines come
    once, as ``path#La-Lb``; the hash follows. No title repeats the path, no Lines line."""
    whole = chunk("pkg/parser.py", "def parse(raw):\n    return raw\n", start=10, symbol="parse")
    split = replace(chunk("pkg/big.py", "    a = 1\n    b = 2\n", start=40, symbol="Big.run"),
                    part=2, parts=3)  # fmt: skip
    text = _text(_picked(whole, 2.0), _picked(split))
    assert f"[1] parse\nSource: pkg/parser.py#L10-L12\nHash: sha256:{whole.sha256[:12]}\n" in text
    assert "[2] Big.run (part 2/3)\nSource: pkg/big.py#L40-L42\n" in text
    assert "Lines:" not in text and "pkg/parser.py:parse" not in text


def test_a_section_without_a_symbol_is_called_by_its_file_name() -> None:
    """A window of a file with no symbols is named by its file; a narrowed one says so,
    and its Source line gives the lines actually shown."""
    window = chunk("deploy/retention.ini", "[retention]\ndays = 90\nmode = nightly\n", start=5)
    narrowed = window_pick(_picked(window).scored, 1, 1, COUNTER)
    assert narrowed.span == Span(6, 6)
    text = _text(narrowed)
    assert "[1] retention.ini (narrowed)\nSource: deploy/retention.ini#L6-L6\n" in text
