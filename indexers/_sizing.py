"""Sizing: sections found by the chunker become drafts that fit the token budget.

A section that fits is kept whole; a larger one is cut only where no unit that fits (a
statement, a member) would be split, and the pieces are packed up to the budget. Leading
and trailing blank lines are trimmed; a section of blank lines alone is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from indexers._chunk import ChunkKind, DocType
from indexers._draft import Draft
from indexers._text import SourceText
from indexers._tokens import TokenCounter
from indexers._windows import pack_ranges

if TYPE_CHECKING:
    import tree_sitter

__all__ = ["Candidate", "Sizer", "lines_of"]


def lines_of(node: tree_sitter.Node) -> tuple[int, int]:
    """1-based inclusive lines of a node; a node ending at column 0 ends on the line before."""
    start_row, _ = node.start_point
    end_row, end_col = node.end_point
    end = end_row + 1 if end_col > 0 or end_row == start_row else end_row
    return start_row + 1, end


@dataclass(slots=True)
class Candidate:
    """A section before sizing: its lines, names, and the nodes it may be split between."""

    start: int
    end: int
    kind: ChunkKind
    symbol: str
    context: str
    depth: int
    defines: tuple[tuple[str, int], ...]  # each name it defines, with the line declaring it
    units: list[tree_sitter.Node] = field(default_factory=list)
    signature: str = ""  # first line of a definition, shown as context on later parts
    test: bool = False  # a test beside the code (``Syntax.test_attribute``): doc type test


class Sizer:
    """Sizes one file's candidates against ``max_tokens``."""

    def __init__(self, src: SourceText, max_tokens: int, counter: TokenCounter) -> None:
        self.src = src
        self.max_tokens = max_tokens
        self.counter = counter

    def drafts(self, candidates: list[Candidate], doc_type: DocType | None) -> list[Draft]:
        """Size candidates: keep those that fit, split the rest at child boundaries."""
        candidates = [c for c in candidates if self._trim(c)]
        texts = [self.src.span_text(c.start, c.end) for c in candidates]
        counts = self.counter.count_many(texts)
        out: list[Draft] = []
        for cand, tokens in zip(candidates, counts, strict=True):
            cand_type = doc_type
            if cand_type is None and cand.test:
                cand_type = DocType.TEST
            elif cand_type is None and cand.kind in (ChunkKind.CLASS, ChunkKind.TYPE):
                cand_type = DocType.DEFINITION
            if tokens <= self.max_tokens:
                out.append(self._draft(cand, cand.start, cand.end, 1, 1, cand_type, tokens))
                continue
            pieces = self._split(cand)
            for i, (a, b) in enumerate(pieces, start=1):
                out.append(self._draft(cand, a, b, i, len(pieces), cand_type, None))
        out.sort(key=lambda d: (d.start_line, d.end_line))
        return out

    def _trim(self, cand: Candidate) -> bool:
        src = self.src
        while cand.start < cand.end and src.is_blank(cand.start):
            cand.start += 1
        while cand.end > cand.start and src.is_blank(cand.end):
            cand.end -= 1
        return not src.is_blank(cand.start)

    def _draft(
        self,
        cand: Candidate,
        start: int,
        end: int,
        part: int,
        parts: int,
        doc_type: DocType | None,
        tokens: int | None,
    ) -> Draft:
        context = cand.context
        if part > 1 and cand.signature:
            context = f"{context}\n{cand.signature}" if context else cand.signature
        # Every part carries the names of the whole section. Giving each part only the
        # names declared in it (a run of 250 #defines in 7 parts would name each of its
        # #defines once) was measured and not kept: the parts of one split statement
        # (zod's `export const $ZodType = core.$constructor(...)`, a class's attribute
        # run) lost the name the request asks for, and the gold file fell behind (Python
        # dev Acc@1 -4 on sphinx and astropy, developer questions' primary@4k -2 on zod).
        defines = tuple(name for name, _ in cand.defines)
        return Draft(
            start,
            end,
            cand.kind,
            symbol=cand.symbol,
            context=context,
            defines=defines,
            depth=cand.depth,
            part=part,
            parts=parts,
            doc_type=doc_type,
            tokens=tokens,
        )

    def _split(self, cand: Candidate) -> list[tuple[int, int]]:
        """Cut ``cand`` only where no unit that fits the budget spans the cut."""
        a, b = cand.start, cand.end
        costs = [c + 1 for c in self.counter.count_many(self.src.lines[a - 1 : b])]
        prefix = [0]
        for cost in costs:
            prefix.append(prefix[-1] + cost)
        bridged = [0] * (b - a + 2)  # difference array: >0 where a cut would split a unit

        # Units that fit bridge their lines; larger ones are read through to their children.
        # A stack, not recursion: a parser lost in macros can nest expressions thousands
        # deep (fmt's format-inl.h became one 946-line comma expression).
        stack: list[tree_sitter.Node] = list(reversed(cand.units))
        while stack:
            node = stack.pop()
            s, e = lines_of(node)
            s, e = max(s, a), min(e, b)
            if e < s:
                continue
            cost = prefix[e - a + 1] - prefix[s - a]
            if cost <= self.max_tokens:
                if e > s:
                    bridged[s + 1 - a] += 1
                    bridged[e + 1 - a] -= 1
                continue
            stack.extend(reversed(node.children))
        starts = []
        running = 0
        for line in range(a, b + 1):
            running += bridged[line - a]
            if line == a or running == 0:
                starts.append(line)
        segments = [(s, e - 1) for s, e in zip(starts, [*starts[1:], b + 1], strict=True)]
        seg_costs = [prefix[e - a + 1] - prefix[s - a] for s, e in segments]
        pieces = []
        for s, e in pack_ranges(segments, seg_costs, self.max_tokens):
            while s < e and self.src.is_blank(s):
                s += 1
            while e > s and self.src.is_blank(e):
                e -= 1
            if not self.src.is_blank(s):
                pieces.append((s, e))
        return pieces
