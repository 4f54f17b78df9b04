"""A parse tree recovered from a syntax error: where a half-typed line made the grammar fold
what follows into one ``ERROR``, the tree of the file with the line at fault blanked."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

__all__ = ["recovered"]

# Recovering a tree from a syntax error: lines tried a round, rounds, and the largest file
# tried (each try is one more parse).
_TRIES = 6
_MIN_COST = 3  # lines under errors (or made-up tokens) before a blanking is tried
_ROUNDS = 3
_MAX_BYTES = 256 * 1024


def recovered(parser: tree_sitter.Parser, data: bytes) -> tree_sitter.Tree:
    """The file's tree; where a syntax error made the grammar fold what follows into one
    ``ERROR`` (a half-typed call swallowing every function after it, as an agent's edit
    leaves a file), the tree of the file with the line at fault blanked instead. An error
    the grammar got round in a line or two keeps its tree.

    Each round blanks, one at a time, the lines where the first error nodes start, keeps
    the blanking that leaves the fewest lines under errors, and stops when none halves
    them (a file whose errors are spread over it, not one line's, costs one round).
    A line is blanked with spaces to its end, so every byte and line keeps its place: the
    sections are cut from the file as it is, the line at fault among them."""
    tree = parser.parse(data)
    if not tree.root_node.has_error or len(data) > _MAX_BYTES:
        return tree
    best = (_error_cost(tree.root_node), tree, data)
    if best[0] < _MIN_COST:  # a local error the grammar got round: keep its tree
        return tree
    starts = [0, *(i + 1 for i, b in enumerate(data) if b == 10)]
    for _ in range(_ROUNDS):
        tried = []
        for row in _error_rows(best[1].root_node):
            end = starts[row + 1] - 1 if row + 1 < len(starts) else len(data)
            blanked = best[2][: starts[row]] + b" " * (end - starts[row]) + best[2][end:]
            again = parser.parse(blanked)
            tried.append((_error_cost(again.root_node), again, blanked))
        if not tried:
            break
        found = min(tried, key=lambda t: t[0])
        if found[0] * 2 > best[0]:  # not the line at fault: errors spread over the file
            break
        best = found
        if found[0] == 0:
            break
    return best[1]


def _error_cost(root: tree_sitter.Node) -> int:
    """How much of a tree a syntax error spoils: the lines under ``ERROR`` nodes, and one
    for each token the grammar had to make up (``MISSING``)."""
    lines: set[int] = set()
    missing = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error:
            lines.update(range(node.start_point[0], node.end_point[0] + 1))
        elif node.has_error:
            missing += node.is_missing
            stack.extend(node.children)
    return len(lines) + missing


def _error_rows(root: tree_sitter.Node) -> list[int]:
    """The rows (from 0) where the first error nodes and their parts start: the line at
    fault (a call left open) is usually one of them, before the part the error spoils."""
    rows: list[int] = []
    stack = [root]
    while stack and len(rows) < _TRIES:
        node = stack.pop()
        if node.is_error or node.is_missing:
            starts = (node, *node.children)
            rows += [r for r in dict.fromkeys(n.start_point[0] for n in starts) if r not in rows]
        if node.has_error:
            stack.extend(reversed(node.children))
    return rows[:_TRIES]
