"""The citation-validity harness: which packed snippets cover the gold code."""

from __future__ import annotations

from engine import Snippet, Span
from eval.citations import _covers_gold
from eval.swebench_data import Instance


def _snippet(uri: str, symbol: str) -> Snippet:
    return Snippet(1, "c1", uri, symbol, uri, Span(1, 3), "0" * 64, "MIT", 10, 1.0, "bm25", "x")


def test_a_hash_in_a_path_is_part_of_the_path() -> None:
    """A snippet's ``path#Lx-Ly`` is cut at its last "#": gold named with one is covered."""
    inst = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",),
                    ("mid#dle/use#it.py:use",), None)  # fmt: skip
    assert _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "use"), inst)
    assert not _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "other"), inst)
    files_only = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",), (), None)
    assert _covers_gold(_snippet("mid#dle/use#it.py#L5-L9", ""), files_only)
