"""Line windows: the fallback that never cuts a line and never drops one.

Used for files with no grammar, files that fail to parse, and any single piece that is still
too large after structural splitting.
"""

from __future__ import annotations

from collections.abc import Sequence

from indexers._text import SourceText
from indexers._tokens import TokenCounter

__all__ = ["line_windows", "pack_ranges"]


def pack_ranges(
    ranges: Sequence[tuple[int, int]], costs: Sequence[int], max_tokens: int
) -> list[tuple[int, int]]:
    """Greedily merge consecutive ``ranges`` while the summed ``costs`` stay <= ``max_tokens``.

    A range that alone exceeds the budget stays on its own (the caller splits it further or
    accepts it). Returns merged (start, end) pairs in order.
    """
    out: list[tuple[int, int]] = []
    cur_start = cur_end = -1
    cur_cost = 0
    for (start, end), cost in zip(ranges, costs, strict=True):
        if cur_start >= 0 and cur_cost + cost <= max_tokens:
            cur_end, cur_cost = end, cur_cost + cost
            continue
        if cur_start >= 0:
            out.append((cur_start, cur_end))
        cur_start, cur_end, cur_cost = start, end, cost
    if cur_start >= 0:
        out.append((cur_start, cur_end))
    return out


def line_windows(
    src: SourceText,
    start_line: int,
    end_line: int,
    max_tokens: int,
    overlap_lines: int,
    counter: TokenCounter,
) -> list[tuple[int, int]]:
    """Cover lines ``start_line..end_line`` with windows of at most ``max_tokens`` tokens.

    Consecutive windows share up to ``overlap_lines`` lines so a statement that straddles a
    boundary is whole in one of them. A single line longer than the budget is a window of its
    own (lines are never cut). Leading and trailing blank lines of each window are trimmed;
    an all-blank range yields nothing.
    """
    while start_line <= end_line and src.is_blank(start_line):
        start_line += 1
    while end_line >= start_line and src.is_blank(end_line):
        end_line -= 1
    if start_line > end_line:
        return []
    numbers = range(start_line, end_line + 1)
    # +1: the newline that joins a line to the next one costs about a token.
    costs = [c + 1 for c in counter.count_many([src.lines[n - 1] for n in numbers])]
    if sum(costs) <= max_tokens:
        return [(start_line, end_line)]
    windows: list[tuple[int, int]] = []
    i = 0
    n = len(costs)
    while i < n:
        j, total = i, 0
        while j < n and (j == i or total + costs[j] <= max_tokens):
            total += costs[j]
            j += 1
        lo, hi = numbers[i], numbers[j - 1]
        while lo < hi and src.is_blank(hi):
            hi -= 1
        windows.append((lo, hi))
        if j >= n:
            break
        # Step back by the overlap, but always move forward by at least one line.
        i = max(j - overlap_lines, i + 1)
        while i < n and src.is_blank(numbers[i]):
            i += 1
    return windows
