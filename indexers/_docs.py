"""Document sections: Markdown and reStructuredText by heading, plain text by paragraph.

A section runs from its heading line to the line before the next heading of any level, so
sections never nest or overlap; the hierarchy lives in the symbol (``"Install > From
source"``). A section over the token budget is split at paragraph boundaries, and a single
paragraph still too large falls back to line windows, so nothing is ever dropped.

>>> from indexers._text import SourceText
>>> from indexers._tokens import WordCounter
>>> src = SourceText(b"# Install\\nRun it.\\n## From source\\nmake\\n")
>>> [(d.start_line, d.end_line, d.symbol) for d in markdown_drafts(
...     src, max_tokens=100, overlap_lines=0, counter=WordCounter())]
[(1, 2, 'Install'), (3, 4, 'Install > From source')]
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from indexers._chunk import ChunkKind
from indexers._draft import Draft
from indexers._markdown import markdown_headings
from indexers._text import SourceText
from indexers._tokens import TokenCounter
from indexers._windows import line_windows, pack_ranges

__all__ = ["FRONT_MATTER", "PREAMBLE", "markdown_drafts", "rst_drafts", "text_drafts"]

PREAMBLE = "(preamble)"  # symbol of the text before a document's first heading
FRONT_MATTER = "front matter"  # symbol of a Markdown file's leading YAML/TOML block
_PATH_SEP = " > "
_SECTION = ChunkKind.SECTION


@dataclass(frozen=True, slots=True)
class _Heading:
    """Where a section starts. Level 0 stands outside the hierarchy (preamble, front matter)."""

    line: int
    level: int
    title: str


# --- reStructuredText ------------------------------------------------------------------------

# Any 7-bit punctuation, as docutils accepts (Sphinx's own docs underline with "."), not
# only the recommended ``= - ` : ' " ~ ^ _ * + # < >``.
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*[ \t]*$")
_NOT_TITLE = re.compile(r"(?:\.\.(?:[ \t]|$)|[-*+\u2022][ \t])")  # markup, bullet item


def _width(text: str) -> int:
    """Display columns, as docutils measures a title against its underline."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _rst_headings(lines: Sequence[str]) -> list[_Heading]:
    """Section starts, levels given to adornment styles in the order first seen (docutils).

    Literal blocks (after ``::``) and directive bodies (after ``.. ``) are indented, and a
    title needs an unindented title or overline line that starts its block, so nothing in
    them can be taken for a title.
    """
    n = len(lines)
    heads = [_Heading(1, 0, PREAMBLE)]
    styles: list[tuple[str, bool]] = []
    i = 0
    block_start = True  # line i follows a blank line, a title, or the start of the file
    while i < n:
        line = lines[i]
        if not line.strip():
            block_start, i = True, i + 1
            continue
        found: tuple[int, str, str, bool] | None = None  # (lines used, title, char, overlined)
        over = _ADORNMENT.match(line) if block_start else None
        if over and i + 2 < n and lines[i + 2].rstrip() == line.rstrip():
            title = lines[i + 1].strip()
            if title and _width(title) <= len(line.rstrip()):
                found = (3, title, line[0], True)
        if found is None and block_start and i + 1 < n and not line[0].isspace():
            under = _ADORNMENT.match(lines[i + 1])
            title = line.rstrip()
            if (
                under
                and not over
                and not _NOT_TITLE.match(title)
                and _width(title) <= len(lines[i + 1].rstrip())
            ):
                found = (2, title, lines[i + 1][0], False)
        if found is None:
            block_start, i = False, i + 1
            continue
        used, title, char, overlined = found
        if (char, overlined) not in styles:
            styles.append((char, overlined))
        heads.append(_Heading(i + 1, styles.index((char, overlined)) + 1, title))
        block_start, i = True, i + used
    return heads


# --- Sections to drafts ----------------------------------------------------------------------


def _check(max_tokens: int, overlap_lines: int) -> None:
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if overlap_lines < 0:
        raise ValueError(f"overlap_lines must not be negative, got {overlap_lines}")


def _paragraphs(
    blank: Sequence[bool], start: int, end: int, fenced: Sequence[bool] | None
) -> list[tuple[int, int]]:
    """Runs of non-blank lines in ``start..end``; a blank line inside a fence splits nothing."""
    out: list[tuple[int, int]] = []
    first = last = 0  # the open run, 0 when none is open
    for number in range(start, end + 1):
        if not blank[number]:
            first, last = first or number, number
        elif first and not (fenced is not None and fenced[number]):
            out.append((first, last))
            first = 0
    if first:
        out.append((first, last))  # ``last`` skips the blank tail of an unclosed fence
    return out


def _pieces(
    src: SourceText,
    paragraphs: Sequence[tuple[int, int]],
    max_tokens: int,
    overlap_lines: int,
    counter: TokenCounter,
) -> list[tuple[int, int, int | None]]:
    """Pack paragraphs under the budget; line windows for one that alone is too large.

    Each piece is ``(start, end, tokens)``; tokens is known only for a lone paragraph (a
    merged piece's count is not the sum: the joining blank lines tokenize with their
    neighbours).
    """
    counts = counter.count_many([src.span_text(a, b) for a, b in paragraphs])
    # +1 per paragraph: the blank line that joins it to the next costs about a token.
    packed = pack_ranges(paragraphs, [c + 1 for c in counts], max_tokens)
    lone = {(a, b): c for (a, b), c in zip(paragraphs, counts, strict=True)}
    out: list[tuple[int, int, int | None]] = []
    for a, b in packed:
        tokens = lone.get((a, b))
        if tokens is not None and tokens > max_tokens:
            windows = line_windows(src, a, b, max_tokens, overlap_lines, counter)
            out.extend((lo, hi, None) for lo, hi in windows)
        else:
            out.append((a, b, tokens))
    return out


def _section_drafts(
    src: SourceText,
    heads: Sequence[_Heading],
    fenced: Sequence[bool] | None,
    max_tokens: int,
    overlap_lines: int,
    counter: TokenCounter,
) -> list[Draft]:
    n = src.line_count
    blank = [True] + [not line.strip() for line in src.lines[:n]]
    sections: list[tuple[int, int, str, int]] = []  # (start, end, symbol, depth)
    path: list[tuple[int, str]] = []  # the open headings: (level, title)
    for index, head in enumerate(heads):
        end = heads[index + 1].line - 1 if index + 1 < len(heads) else n
        start = head.line
        while start <= end and blank[start]:
            start += 1
        while end >= start and blank[end]:
            end -= 1
        if head.level == 0:
            symbol, depth = head.title, 0
        else:
            while path and path[-1][0] >= head.level:
                path.pop()
            path.append((head.level, head.title))
            symbol, depth = _PATH_SEP.join(title for _, title in path), head.level - 1
        if start <= end:
            sections.append((start, end, symbol, depth))
    counts = counter.count_many([src.span_text(a, b) for a, b, _, _ in sections])
    drafts: list[Draft] = []
    for (start, end, symbol, depth), count in zip(sections, counts, strict=True):
        if count <= max_tokens:
            drafts.append(Draft(start, end, _SECTION, symbol=symbol, depth=depth, tokens=count))
            continue
        pieces = _pieces(
            src, _paragraphs(blank, start, end, fenced), max_tokens, overlap_lines, counter
        )
        drafts.extend(
            Draft(a, b, _SECTION, symbol=symbol, depth=depth, part=i, parts=len(pieces), tokens=t)
            for i, (a, b, t) in enumerate(pieces, start=1)
        )
    return drafts


def markdown_drafts(
    src: SourceText, *, max_tokens: int, overlap_lines: int, counter: TokenCounter
) -> list[Draft]:
    """Markdown sections by ATX and setext headings, code fences and raw HTML respected.

    A leading ``---`` … ``---``/``...`` block (or ``+++`` … ``+++``) is its own section,
    ``"front matter"``; non-blank text before the first heading is ``"(preamble)"``.
    Sections over ``max_tokens`` are split into parts at blank lines outside fences.
    """
    _check(max_tokens, overlap_lines)
    if not src.line_count:
        return []
    first, found, fenced = markdown_headings(src.lines)
    heads = [_Heading(1, 0, FRONT_MATTER)] if first else []
    heads += [_Heading(first + 1, 0, PREAMBLE), *(_Heading(*h) for h in found)]
    return _section_drafts(src, heads, fenced, max_tokens, overlap_lines, counter)


def rst_drafts(
    src: SourceText, *, max_tokens: int, overlap_lines: int, counter: TokenCounter
) -> list[Draft]:
    """reStructuredText sections by underlined (optionally overlined) titles.

    Levels follow the order adornment styles first appear, as in docutils; transitions,
    literal blocks and directive bodies are never titles. Oversized sections split as for
    Markdown, at blank lines.
    """
    _check(max_tokens, overlap_lines)
    if not src.line_count:
        return []
    heads = _rst_headings(src.lines)
    return _section_drafts(src, heads, None, max_tokens, overlap_lines, counter)


def text_drafts(
    src: SourceText, *, max_tokens: int, overlap_lines: int, counter: TokenCounter
) -> list[Draft]:
    """Plain text as paragraphs packed greedily up to ``max_tokens``, with no symbol."""
    _check(max_tokens, overlap_lines)
    n = src.line_count
    if not n:
        return []
    blank = [True] + [not line.strip() for line in src.lines]
    paragraphs = _paragraphs(blank, 1, n, None)
    pieces = _pieces(src, paragraphs, max_tokens, overlap_lines, counter)
    return [Draft(a, b, ChunkKind.PARAGRAPH, tokens=t) for a, b, t in pieces]
