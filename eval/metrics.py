"""Localisation and budgeted-recall metrics, as plain functions of plain inputs.

Definitions (the report states them too):

* file Acc@k: every gold file is among the first k distinct files of the ranking;
* MRR: 1 / rank of the first gold file in the file ranking (0 when absent);
* function recall@k: the share of gold functions with a matching section among the first
  k sections (a section matches ``path:Qualified.name`` when its path is that path and its
  symbol is that name, any part of a split section counting);
* at a token budget, gold-file hit: every gold file has at least one section in the packed
  context; gold-function coverage: the share of gold functions with a matching section in
  it; tokens used: what the packed context costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "FILE_KS",
    "FUNCTION_KS",
    "Section",
    "file_accuracy",
    "function_recall",
    "gold_file_hit",
    "gold_function_coverage",
    "gold_token_share",
    "mean",
    "reciprocal_rank",
]

FILE_KS = (1, 3, 5, 10)
FUNCTION_KS = (5, 10, 20)


@dataclass(frozen=True, slots=True)
class Section:
    """A retrieved or packed section, reduced to what the metrics need."""

    path: str
    symbol: str
    start_line: int
    end_line: int
    tokens: int


def _split_gold(gold: str) -> tuple[str, str]:
    path, _, name = gold.partition(":")
    return path, name


def _matches(section: Section, gold: str) -> bool:
    path, name = _split_gold(gold)
    return section.path == path and section.symbol == name


def _some(gold_files: Iterable[str]) -> list[str]:
    """The gold files, refusing none: "every gold file is there" holds for no gold at all,
    a success an instance without gold never earned."""
    gold = list(gold_files)
    if not gold:
        raise ValueError("no gold files: the instance cannot be scored")
    return gold


def file_accuracy(ranked_files: Sequence[str], gold_files: Iterable[str], k: int) -> bool:
    """Whether every gold file is among the first ``k`` files."""
    top = set(ranked_files[:k])
    return all(g in top for g in _some(gold_files))


def reciprocal_rank(ranked_files: Sequence[str], gold_files: Iterable[str]) -> float:
    """1 / rank of the first gold file, 0 when none is ranked."""
    gold = set(gold_files)
    for rank, path in enumerate(ranked_files, start=1):
        if path in gold:
            return 1.0 / rank
    return 0.0


def function_recall(
    sections: Sequence[Section], gold_functions: Sequence[str], k: int
) -> float | None:
    """Share of gold functions found among the first ``k`` sections (None: no gold)."""
    if not gold_functions:
        return None
    top = sections[:k]
    found = sum(1 for g in gold_functions if any(_matches(s, g) for s in top))
    return found / len(gold_functions)


def gold_file_hit(packed: Sequence[Section], gold_files: Iterable[str]) -> bool:
    """Whether every gold file has a section in the packed context."""
    present = {s.path for s in packed}
    return all(g in present for g in _some(gold_files))


def gold_function_coverage(
    packed: Sequence[Section], gold_functions: Sequence[str]
) -> float | None:
    """Share of gold functions with a section in the packed context (None: no gold)."""
    return function_recall(packed, gold_functions, len(packed))


def gold_token_share(packed: Sequence[Section], gold_files: Sequence[str]) -> float | None:
    """Share of the packed evidence tokens that come from gold files (None: nothing packed
    with a size): how much of the context is the code the fix touches."""
    total = sum(s.tokens for s in packed)
    if total <= 0:
        return None
    gold = set(gold_files)
    return sum(s.tokens for s in packed if s.path in gold) / total


def mean(values: Iterable[float | bool | None]) -> float | None:
    """Mean of the values that are not None (None when there are none)."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
