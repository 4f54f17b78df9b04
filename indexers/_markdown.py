"""Markdown's block structure, as far as headings need it: CommonMark's block rules (code
fences, raw HTML, list items, block quotes, ATX and setext headings) and GitHub's tables.

``markdown_headings`` reads the lines once; ``indexers._docs`` turns what it finds into
sections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["markdown_headings"]

# Every pattern sees a line with tabs expanded and the open list items' indentation removed.
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_THEMATIC = re.compile(r" {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
# A GitHub table: a header row with ``|`` and under it a delimiter row of as many cells
# (``| :--- | ---: |``). It is no paragraph (it may interrupt one), so a "---" after its rows
# is a thematic break, not a setext underline making the whole table one heading (go-chi's
# README: a 30-row table became the title of every section after it). As markdown-it reads
# GitHub tables: its ``table`` rule is the reference in the tests.
_DELIMITER_CELL = re.compile(r"[ \t]*:?-+:?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")
# Inline markup a heading's title is read through (``_plain_title``).
_CODE_SPAN = re.compile(r"(`+[^`]*`+)")
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
_HTML_IMG = re.compile(r"<img\b[^>]*?\balt\s*=\s*(?:\"([^\"]*)\"|'([^']*)')[^>]*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details"
    "|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head"
    "|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p"
    "|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
_ATTR = r"""(?:\s+[a-zA-Z_:][\w:.-]*(?:\s*=\s*(?:[^"'=<>`\x00-\x20]+|'[^']*'|"[^"]*"))?)"""
_TO_BLANK = re.compile(r"^\s*$")
# CommonMark's seven kinds of raw HTML block ("# x" inside one is no heading): how each
# starts, what ends it, and whether it may interrupt a paragraph.
_HTML_BLOCKS: tuple[tuple[re.Pattern[str], re.Pattern[str], bool], ...] = (
    (
        re.compile(r" {0,3}<(?:script|pre|style|textarea)(?=\s|>|$)", re.IGNORECASE),
        re.compile(r"</(?:script|pre|style|textarea)>", re.IGNORECASE),
        True,
    ),
    (re.compile(r" {0,3}<!--"), re.compile(r"-->"), True),
    (re.compile(r" {0,3}<\?"), re.compile(r"\?>"), True),
    (re.compile(r" {0,3}<![A-Za-z]"), re.compile(r">"), True),
    (re.compile(r" {0,3}<!\[CDATA\["), re.compile(r"\]\]>"), True),
    (re.compile(rf" {{0,3}}</?(?:{_BLOCK_TAGS})(?=\s|/?>|$)", re.IGNORECASE), _TO_BLANK, True),
    (
        re.compile(rf" {{0,3}}(?:<[A-Za-z][\w-]*{_ATTR}*\s*/?>|</[A-Za-z][\w-]*\s*>)\s*$"),
        _TO_BLANK,
        False,
    ),
)
_QUOTE = re.compile(r" {0,3}>")
_ITEM = re.compile(r" {0,3}(?:[-+*]|\d{1,9}[.)])(?= |$)")
_INTERRUPTING_ITEM = re.compile(r" {0,3}(?:[-+*]|1[.)]) +\S")  # not empty; ordered from 1
_FRONT_MATTER_CLOSE = {"---": ("---", "..."), "+++": ("+++",)}


def _plain_title(title: str) -> str:
    """A Markdown heading's text as a title: an image is its alt text, a link its text, an
    HTML tag dropped (``# <img alt="chi" src="https://.../chi.svg" width="220" />`` is
    "chi", not forty tokens of URL in every section's title); code spans kept as written."""
    parts = _CODE_SPAN.split(title)
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        text = _MD_IMAGE.sub(r"\1", parts[i])
        text = _MD_LINK.sub(r"\1", text)
        text = _HTML_IMG.sub(lambda m: f" {m[1] or m[2] or ''} ", text)
        parts[i] = _HTML_TAG.sub(" ", text)
    return " ".join("".join(parts).split())


def _table_rows(header: str, delimiter: str) -> bool:
    """Whether ``header`` over ``delimiter`` opens a GitHub table (equal cell counts)."""
    first = delimiter.strip()[:2]
    if "|" not in header or _indent(delimiter) >= 4 or first[:1] not in ("|", "-", ":") or (
        first[:1] == "-" and first[1:].isspace()  # "- x" is a list item
    ):
        return False
    cells = _cells(delimiter)
    return all(_DELIMITER_CELL.match(c) for c in cells) and len(cells) == len(_cells(header))


def _cells(row: str) -> list[str]:
    """A table row's cells (outer pipes dropped)."""
    text = row.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    return re.split(r"(?<!\\)\|", text)


def _indent(text: str) -> int:
    """Leading spaces (tabs are expanded before lines get here)."""
    return len(text) - len(text.lstrip(" "))


def _front_matter_end(lines: Sequence[str]) -> int:
    """The 1-based closing line of a leading front-matter block, or 0 when there is none."""
    closers = _FRONT_MATTER_CLOSE.get(lines[0].rstrip()) if lines else None
    if closers is None:
        return 0
    for number in range(2, len(lines) + 1):
        if lines[number - 1].rstrip() in closers:
            return number
    return 0  # unclosed: line 1 is a thematic break (or text) after all


def _item_width(text: str) -> int:
    """Columns from ``text``'s start to the content of the list item it opens (0: none)."""
    m = _ITEM.match(text)
    if m is None:
        return 0
    rest = text[m.end() :]
    spaces = _indent(rest)
    # 1-4 spaces after the marker set the content column; more start indented code in it.
    return m.end() + (spaces if rest.strip() and spaces <= 4 else 1)


def _starts_block(text: str) -> bool:
    """Whether ``text``, outside the container of the open paragraph, ends that container.

    Any list item does, even one that could not interrupt a paragraph inside it.
    """
    return any(p.match(text) for p in (_ATX, _FENCE, _THEMATIC, _QUOTE, _ITEM)) or any(
        start.match(text) for start, _, interrupts in _HTML_BLOCKS if interrupts
    )


def _html_end(text: str, *, in_paragraph: bool) -> re.Pattern[str] | None:
    """What ends the raw-HTML block that ``text`` opens; None when it opens none."""
    for start, end, interrupts in _HTML_BLOCKS:
        if start.match(text) and (interrupts or not in_paragraph):
            return end
    return None


def _quote_paragraph(text: str, *, continuing: bool) -> bool:
    """Whether a block-quote line leaves a paragraph open for later lines to continue lazily.

    Quotes are not tracked as containers (a fence in one is not followed); this only sees
    whether the line's content is paragraph text or opens some other block.
    """
    rest = text
    while m := _QUOTE.match(rest):
        rest = rest[m.end() + (rest[m.end() : m.end() + 1] == " ") :]
        while width := _item_width(rest):
            rest = rest[width:]
    if not rest.strip():
        return False
    if _indent(rest) >= 4:
        return continuing  # indented code, or the paragraph's continuation
    if continuing and _SETEXT.match(rest):
        return False  # a heading inside the quote closes its paragraph
    blocks = (_ATX, _FENCE, _THEMATIC)
    return not (any(p.match(rest) for p in blocks) or _html_end(rest, in_paragraph=continuing))


def _closes_fence(text: str, char: str, length: int) -> bool:
    """CommonMark: the same character, at least as many, nothing else on the line."""
    body = text.strip(" ")
    return _indent(text) <= 3 and len(body) >= length and body == char * len(body)


class _MarkdownScan:
    """One pass over Markdown lines, keeping the state that decides which lines are headings.

    That is: the open code fence or raw-HTML block, the open list items (a heading inside
    one is no section) and the open paragraph (a setext underline turns it into a heading,
    and whether a line continues it lazily decides whether a list item or quote goes on).
    """

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.fenced = [False] * (len(lines) + 1)  # per 1-based line: inside a code fence
        self.heads: list[tuple[int, int, str]] = []  # (line, level, title)
        self.items: list[int] = []  # content columns of the open list items, innermost last
        self.fence: tuple[str, int] | None = None  # (char, length) of the open fence
        self.raw_end: re.Pattern[str] | None = None  # what ends the open raw-HTML block
        self.inner = 0  # the column the open fence or HTML block sits at
        self.para_start = 0  # first line of the open paragraph, 0 when none is open
        self.para_plain = False  # the open paragraph is no block quote: setext may end it
        # The innermost item opened on the line before with nothing after its marker: a
        # blank line next ends it (an item may begin with at most one blank line).
        self.empty_item = False

    def run(self) -> tuple[int, list[tuple[int, int, str]], list[bool]]:
        """See ``markdown_headings``."""
        first = _front_matter_end(self.lines)
        for number in range(first + 1, len(self.lines) + 1):
            self._line(number)
        return first, self.heads, self.fenced

    def _line(self, number: int) -> None:
        line = self.lines[number - 1].expandtabs(4)
        blank, indent = not line.strip(), _indent(line)
        if (self.fence or self.raw_end) and not blank and indent < self.inner:
            self.fence = self.raw_end = None  # the list item holding the block has ended
        if self.fence is not None:
            self.fenced[number] = True
            if _closes_fence(line[self.inner :], *self.fence):
                self.fence = None
        elif self.raw_end:
            if self.raw_end.search(line):
                self.raw_end = None
        elif blank:
            self.para_start = 0
            if self.empty_item:
                self.items.pop()
                self.empty_item = False
        else:
            self.empty_item = False
            if self.items and indent < self.items[-1]:
                if self.para_start and not _starts_block(line.lstrip(" ")):
                    return  # a lazy continuation line of the item's paragraph
                while self.items and indent < self.items[-1]:
                    self.items.pop()
                self.para_start = 0
            base = self.items[-1] if self.items else 0
            self._block(line[base:], base, number)

    def _table(self, start: int, number: int) -> int:
        """The delimiter row's line of the first GitHub table in the paragraph from line
        ``start`` up to line ``number`` (which may be that row: ``| a |`` over ``---`` is a
        one-column table), or 0 when there is none."""
        lines = self.lines
        return next((k + 1 for k in range(start, number) if _table_rows(lines[k - 1], lines[k])), 0)

    def _block(self, text: str, base: int, number: int) -> None:
        """Read one line's text inside the container at column ``base``."""
        while _indent(text) < 4:  # deeper: paragraph continuation or indented code
            m = _FENCE.match(text)
            if m and not (m[1][0] == "`" and "`" in m[2]):  # "```a`b" is inline code
                self.fence, self.inner = (m[1][0], len(m[1])), base
                self.fenced[number], self.para_start = True, 0
            elif end := _html_end(text, in_paragraph=self.para_start > 0):
                if not end.search(text):
                    self.raw_end, self.inner = end, base
                self.para_start = 0
            elif m := _ATX.match(text):
                if not base:
                    title = _ATX_CLOSE.sub("", m[2] or "").strip()
                    self.heads.append((number, len(m[1]), _plain_title(title)))
                self.para_start = 0
            elif self.para_start and self.para_plain and _SETEXT.match(text):
                table = self._table(self.para_start, number)
                if not table:
                    if not base:
                        start = self.para_start
                        title = " ".join(self.lines[k - 1].strip() for k in range(start, number))
                        level = 1 if "=" in text else 2
                        self.heads.append((start, level, _plain_title(title)))
                    self.para_start = 0
                elif table != number and _THEMATIC.match(text):
                    self.para_start = 0  # a rule ends the table; "==" or "--" is one of its rows
            elif _THEMATIC.match(text):
                self.para_start = 0
            elif (width := _item_width(text)) and (
                # A quote's paragraph continues lazily here, so any item ends the quote.
                not (self.para_start and self.para_plain) or _INTERRUPTING_ITEM.match(text)
            ):
                base += width
                self.items.append(base)
                text, self.para_start = text[width:], 0
                if text.strip():
                    continue  # the item's first line may itself open a block
                self.empty_item = True
            elif _QUOTE.match(text):
                quote_para = _quote_paragraph(text, continuing=self.para_start > 0)
                self.para_start, self.para_plain = number if quote_para else 0, False
            elif not self.para_start:
                self.para_start, self.para_plain = number, True
            return


def markdown_headings(lines: Sequence[str]) -> tuple[int, list[tuple[int, int, str]], list[bool]]:
    """The last line of a leading front-matter block (0 when there is none), every top-level
    heading as (1-based line, level, title), and per 1-based line whether it lies in a code
    fence."""
    return _MarkdownScan(lines).run()
