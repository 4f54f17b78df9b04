"""Document sections: Markdown and reStructuredText headings, plain-text paragraphs, sizes."""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from indexers._chunk import ChunkKind
from indexers._docs import FRONT_MATTER, PREAMBLE, markdown_drafts, rst_drafts, text_drafts
from indexers._draft import Draft
from indexers._text import SourceText
from indexers._tokens import TiktokenCounter, TokenCounter, WordCounter

Chunker = Callable[..., list[Draft]]
WORDS = WordCounter()
BIG = 10**6  # a budget no test document reaches: sections stay whole


def _run(
    chunker: Chunker,
    text: str | bytes,
    max_tokens: int = BIG,
    overlap_lines: int = 0,
    counter: TokenCounter = WORDS,
) -> list[Draft]:
    data = text.encode() if isinstance(text, str) else text
    src = SourceText(data)
    return chunker(src, max_tokens=max_tokens, overlap_lines=overlap_lines, counter=counter)


def _sections(chunker: Chunker, text: str | bytes, **kw: int) -> list[tuple[int, int, str]]:
    return [(d.start_line, d.end_line, d.symbol) for d in _run(chunker, text, **kw)]


def _check_invariants(src: SourceText, drafts: list[Draft], counter: TokenCounter = WORDS) -> None:
    """Within bounds, trimmed, in order, every non-blank line covered, token counts exact."""
    n = src.line_count
    covered = [0] * (n + 2)
    prev_start, prev_end = 0, 0
    for d in drafts:
        assert 1 <= d.start_line <= d.end_line <= n
        assert not src.is_blank(d.start_line) and not src.is_blank(d.end_line)
        assert d.start_line > prev_start and d.end_line >= prev_end
        assert 1 <= d.part <= d.parts
        if d.tokens is not None:
            assert d.tokens == counter.count(src.span_text(d.start_line, d.end_line))
        prev_start, prev_end = d.start_line, d.end_line
        covered[d.start_line] += 1
        covered[d.end_line + 1] -= 1
    depth = 0
    for line in range(1, n + 1):
        depth += covered[line]
        assert depth > 0 or src.is_blank(line), f"line {line} dropped"


# --- Markdown ----------------------------------------------------------------------------------


def test_atx_sections_carry_heading_path() -> None:
    """Each ATX heading starts a section up to the next heading; the symbol is its path."""
    text = "# Install\nintro\n\n## From source\nmake\n\n## From pip\npip\n# Usage\nrun\n"
    drafts = _run(markdown_drafts, text)
    assert [(d.start_line, d.end_line, d.symbol, d.depth) for d in drafts] == [
        (1, 2, "Install", 0),
        (4, 5, "Install > From source", 1),
        (7, 8, "Install > From pip", 1),
        (9, 10, "Usage", 0),
    ]
    assert {d.kind for d in drafts} == {ChunkKind.SECTION}


def test_atx_level_skipping_keeps_open_headings() -> None:
    """Skipped levels work: the path holds exactly the headings still open."""
    text = "# A\n### C\n## B\n#### D\n# E\n"
    assert [d.symbol for d in _run(markdown_drafts, text)] == [
        "A",
        "A > C",
        "A > B",
        "A > B > D",
        "E",
    ]
    assert [d.depth for d in _run(markdown_drafts, text)] == [0, 2, 1, 3, 0]


def test_atx_syntax_details() -> None:
    """Closing hashes and indent up to 3 count; '#word' and a 4-space indent are no headings."""
    text = "   ## Title ##\n#hashtag\n    # code\n# foo#\n#\n"
    assert _sections(markdown_drafts, text) == [(1, 3, "Title"), (4, 4, "foo#"), (5, 5, "")]


def test_setext_headings() -> None:
    """'===' under a paragraph line is level 1, '---' is level 2."""
    text = "Title\n=====\ntext\n\nSub\n---\nmore\n"
    drafts = _run(markdown_drafts, text)
    assert [(d.start_line, d.end_line, d.symbol, d.depth) for d in drafts] == [
        (1, 3, "Title", 0),
        (5, 7, "Title > Sub", 1),
    ]


def test_setext_heading_takes_whole_paragraph() -> None:
    """As in CommonMark, a multi-line paragraph above the underline is the heading."""
    text = "# A\n\nline one\nline two\n---\nbody\n"
    assert _sections(markdown_drafts, text) == [(1, 1, "A"), (3, 6, "A > line one line two")]


def test_a_table_before_a_rule_is_no_heading() -> None:
    """A GitHub table (header row, delimiter row) is no paragraph: the '---' after it is a
    rule, so the table never becomes a heading; a plain paragraph with pipes still can."""
    table = "| Handler | description |\n| :------ | ----------: |\n| [A] | does a |\n"
    text = f"# Core\n\n{table}---\n\n## Next\nbody\n"
    assert _sections(markdown_drafts, text) == [(1, 6, "Core"), (8, 9, "Core > Next")]
    one = "| a |\n|---|\n| b |\n-----\nafter\n"
    assert _sections(markdown_drafts, "# T\n" + one) == [(1, 6, "T")]
    assert _sections(markdown_drafts, "# T\na | b\nc | d\n---\nx\n") == [
        (1, 1, "T"), (2, 5, "T > a | b c | d")]  # fmt: skip


def test_heading_titles_read_through_inline_markup() -> None:
    """An image is its alt text, a link its text, an HTML tag goes; code spans stay."""
    text = (
        '# <img alt="chi" src="https://cdn.example/chi.svg" width="220" />\n'
        "## Build [![CI](https://ci.example/badge.svg)](https://ci.example)\n"
        "## The `Vec<T>` type\n"
        "Setext <b>title</b>\n---\n"
    )
    assert [s for _, _, s in _sections(markdown_drafts, text)] == [
        "chi", "chi > Build CI", "chi > The `Vec<T>` type", "chi > Setext title"]  # fmt: skip


def test_thematic_break_is_not_setext() -> None:
    """'---' after a blank line, or after a list item or quote, is a thematic break."""
    text = "# A\ntext\n\n---\nmore\n- item\n---\n> quote\n---\n"
    assert _sections(markdown_drafts, text) == [(1, 9, "A")]


@pytest.mark.parametrize(
    "fence",
    [
        "```\n# not\n```",
        "~~~python\n# not\nnot\n===\n~~~",
        "````\n```\n# not\n```\n# still not\n````",
        "```\n~~~\n# not\n```",
        "  ```\n# not\n   ```",
    ],
)
def test_hash_inside_code_fence_is_not_heading(fence: str) -> None:
    """Fenced lines never start sections: backticks, tildes, longer fences, indented fences."""
    text = f"# A\n{fence}\n# B\n"
    end = 1 + fence.count("\n") + 1
    assert _sections(markdown_drafts, text) == [(1, end, "A"), (end + 1, end + 1, "B")]


def test_unclosed_fence_runs_to_end_of_file() -> None:
    """An unclosed fence hides every later heading."""
    assert _sections(markdown_drafts, "# A\n```\n# B\n\n# C\n\n") == [(1, 5, "A")]


def test_backtick_info_string_with_backtick_is_not_a_fence() -> None:
    """'``` a`b' is inline code, not a fence, so the next heading counts."""
    assert _sections(markdown_drafts, "``` a`b\n# B\n") == [(1, 1, PREAMBLE), (2, 2, "B")]


def test_html_blocks_hide_headings() -> None:
    """Multi-line HTML comments and <pre>/<script> blocks never produce headings."""
    text = "# A\n<!--\n# not\n-->\n<pre>\n# not\n</pre>\n<!-- one line -->\n# B\n"
    assert _sections(markdown_drafts, text) == [(1, 8, "A"), (9, 9, "B")]


def test_html_blocks_ending_at_blank_line() -> None:
    """Block-level tags and lone unknown tags run to a blank line; the latter never interrupt."""
    text = "<div>\n# not\n\n# A\n\n<custom-tag>\n# not\n\npara\n<custom-tag>\n# B\n"
    assert _sections(markdown_drafts, text) == [(1, 2, PREAMBLE), (4, 10, "A"), (11, 11, "B")]


def test_headings_inside_list_items_and_quotes_are_not_sections() -> None:
    """A heading nested in a list item or a block quote starts no section."""
    text = "# A\n- item\n  # nested\n-   x\n\n    # nested too\n> # quoted\n"
    assert _sections(markdown_drafts, text) == [(1, 7, "A")]


def test_nested_block_ends_lazy_continuation() -> None:
    """After a block nested in a list item, an unindented line starts a top-level paragraph."""
    lazy = "- item\nword\n===\n"  # 'word' and '===' continue the item's paragraph
    assert _sections(markdown_drafts, lazy) == [(1, 3, PREAMBLE)]
    nested = "- item\n    # nested\nword\n===\n"
    assert _sections(markdown_drafts, nested) == [(1, 2, PREAMBLE), (3, 4, "word")]


@pytest.mark.parametrize("closer", ["---", "..."])
def test_yaml_front_matter_is_its_own_section(closer: str) -> None:
    """A leading '---' block closed by '---' or '...' is the 'front matter' section."""
    text = f"---\ntitle: x\n\ntags: [a]\n{closer}\n\nintro\n# A\n"
    assert _sections(markdown_drafts, text) == [
        (1, 5, FRONT_MATTER),
        (7, 7, PREAMBLE),
        (8, 8, "A"),
    ]


def test_unclosed_front_matter_is_ordinary_text() -> None:
    """Without a closing line, a leading '---' is just a thematic break."""
    assert _sections(markdown_drafts, "---\ntitle: x\n# A\n") == [(1, 2, PREAMBLE), (3, 3, "A")]


def test_preamble_before_first_heading() -> None:
    """Non-blank text before the first heading is '(preamble)'; a blank one is dropped."""
    assert _sections(markdown_drafts, "\nintro\n\n# A\n") == [(2, 2, PREAMBLE), (4, 4, "A")]
    assert _sections(markdown_drafts, "\n\n# A\n") == [(3, 3, "A")]
    assert _sections(markdown_drafts, "no headings\nat all\n") == [(1, 2, PREAMBLE)]


@pytest.mark.parametrize("chunker", [markdown_drafts, rst_drafts, text_drafts])
def test_empty_and_blank_files_give_nothing(chunker: Chunker) -> None:
    """An empty or all-blank file has no drafts."""
    assert _run(chunker, b"") == []
    assert _run(chunker, b"\n  \n\t\n") == []


@pytest.mark.parametrize("chunker", [markdown_drafts, rst_drafts, text_drafts])
def test_bad_budgets_raise(chunker: Chunker) -> None:
    """A budget below 1 or a negative overlap is a caller error, not a silent drop."""
    with pytest.raises(ValueError, match="max_tokens"):
        _run(chunker, "x\n", max_tokens=0)
    with pytest.raises(ValueError, match="overlap_lines"):
        _run(chunker, "x\n", overlap_lines=-1)


def test_oversized_section_splits_into_numbered_parts() -> None:
    """A section over budget splits at blank lines; parts share symbol and depth."""
    para = "one two three four five"  # 5 words, cost 6
    text = "# Top\n## Big\n\n" + "\n\n".join([para] * 6) + "\n# Next\nend\n"
    drafts = _run(markdown_drafts, text, max_tokens=12)
    big = [d for d in drafts if d.symbol == "Top > Big"]
    assert [(d.start_line, d.end_line) for d in big] == [(2, 4), (6, 8), (10, 12), (14, 14)]
    assert [(d.part, d.parts, d.depth) for d in big] == [(i, 4, 1) for i in range(1, 5)]
    src = SourceText(text.encode())
    assert all(WORDS.count(src.span_text(d.start_line, d.end_line)) <= 12 for d in big)
    assert [(d.symbol, d.parts) for d in drafts if d.symbol != "Top > Big"] == [
        ("Top", 1),
        ("Next", 1),
    ]


def test_code_fence_is_one_paragraph_when_splitting() -> None:
    """Blank lines inside a fence are no split points: a fitting fence stays whole."""
    fence = "```\nx = 1\n\ny = 2\n\nz = 3\n```"
    text = "# S\n\n" + "w " * 8 + "\n\n" + fence + "\n\n" + "w " * 8 + "\n"
    drafts = _run(markdown_drafts, text, max_tokens=16)
    assert [(d.start_line, d.end_line) for d in drafts] == [(1, 3), (5, 11), (13, 13)]


def test_giant_paragraph_falls_back_to_line_windows() -> None:
    """A single paragraph over budget is cut into whole-line windows that overlap."""
    lines = [f"word{i} a b" for i in range(40)]  # 3 tokens + 1 per line
    text = "# G\n" + "\n".join(lines) + "\n"
    drafts = _run(markdown_drafts, text, max_tokens=25, overlap_lines=1)
    assert len(drafts) > 1 and {d.symbol for d in drafts} == {"G"}
    assert [d.part for d in drafts] == list(range(1, len(drafts) + 1))
    for before, after in pairwise(drafts):
        assert after.start_line == before.end_line  # one shared line
    _check_invariants(SourceText(text.encode()), drafts)


@pytest.mark.parametrize("chunker", [markdown_drafts, rst_drafts, text_drafts])
def test_crlf_gives_same_drafts_as_lf(chunker: Chunker) -> None:
    """CRLF line endings change nothing."""
    text = "# A\nTitle\n=====\n\n```\n# x\n```\n\npara one\n\nSub\n---\ntext\n"
    lf = _run(chunker, text, max_tokens=6)
    assert _run(chunker, text.replace("\n", "\r\n").encode(), max_tokens=6) == lf


def test_invalid_utf8_keeps_line_numbers() -> None:
    """Undecodable bytes become U+FFFD without shifting any line."""
    data = b"# A\n\xff\xfe bad \xc3\n# B\nok\n"
    assert _sections(markdown_drafts, data) == [(1, 2, "A"), (3, 4, "B")]
    assert _sections(text_drafts, b"a \xff\n\n\xc3 b\n", max_tokens=3) == [(1, 1, ""), (3, 3, "")]


def test_tiktoken_split_pieces_fit_budget() -> None:
    """With the real tokenizer, packed parts of an oversized section stay within budget."""
    counter = TiktokenCounter()
    paras = [f"Paragraph {i} explains how the retrieval engine packs context." for i in range(30)]
    text = "# Guide\n\n" + "\n\n".join(paras) + "\n"
    drafts = _run(markdown_drafts, text, max_tokens=64, counter=counter)
    src = SourceText(text.encode())
    assert len(drafts) > 1 and drafts[-1].parts == len(drafts)
    assert all(counter.count(src.span_text(d.start_line, d.end_line)) <= 64 for d in drafts)
    _check_invariants(src, drafts, counter)


def test_one_megabyte_markdown_is_fast_with_tiktoken() -> None:
    """A 1 MB document chunks in linear time (a loose guard against quadratic counting)."""
    block = (
        "## Section {i}\n\nSome prose about `feature_{i}` and its options.\n\n"
        "```python\n# comment {i}\ndef f_{i}():\n    return {i}\n```\n\n"
        + "Long line of text that repeats. " * 20
        + "\n\n"
    )
    parts, size, i = ["# Manual\n"], 0, 0
    while size < 1_000_000:
        parts.append(block.format(i=i))
        size, i = size + len(parts[-1]), i + 1
    src = SourceText("".join(parts).encode())
    counter = TiktokenCounter()
    counter.count("warm up")  # loading the encoding is not chunking
    started = time.perf_counter()
    drafts = markdown_drafts(src, max_tokens=256, overlap_lines=2, counter=counter)
    assert time.perf_counter() - started < 5.0
    assert len(drafts) == i + 1
    _check_invariants(src, drafts, counter)


# --- reStructuredText ----------------------------------------------------------------------------


def test_rst_levels_follow_first_appearance() -> None:
    """Adornment styles get levels in the order first seen, overlines distinct from underlines."""
    text = (
        "=====\nTitle\n=====\n\nintro\n\n"  # overlined '=': level 1
        "Part\n----\n\ntext\n\n"  # '-': level 2
        "Deep\n====\n\n"  # underlined '=': a new style, level 3
        "Other\n-----\n"  # '-' again: level 2
    )
    drafts = _run(rst_drafts, text)
    assert [(d.start_line, d.end_line, d.symbol, d.depth) for d in drafts] == [
        (1, 5, "Title", 0),
        (7, 10, "Title > Part", 1),
        (12, 13, "Title > Part > Deep", 2),
        (15, 16, "Title > Other", 1),
    ]


def test_rst_underline_first_gets_level_one() -> None:
    """Whichever style appears first is the top level, whatever the character."""
    text = "Top\n~~~\n\nA\n=\n\nB\n=\n\nTop2\n~~~~\n"
    assert [d.symbol for d in _run(rst_drafts, text)] == ["Top", "Top > A", "Top > B", "Top2"]


def test_rst_overlined_title_may_be_indented_and_starts_at_overline() -> None:
    """An overlined title may be indented; its section starts at the overline."""
    text = "intro\n\n=========\n  Title\n=========\nbody\n"
    assert _sections(rst_drafts, text) == [(1, 1, PREAMBLE), (3, 6, "Title")]


@pytest.mark.parametrize(
    "text",
    [
        "Long title\n=====\n",  # underline shorter than the title
        "  Indented\n  ========\n",  # indented title and underline
        "para line\nTitle\n=====\n",  # not the first line of its block
        "- item\n------\n",  # a bullet list item
        "=====\nTitle\n-----\n",  # overline and underline differ
    ],
)
def test_rst_non_titles(text: str) -> None:
    """Lines that merely look like titles start no section."""
    assert _sections(rst_drafts, text) == [(1, text.count("\n"), PREAMBLE)]


def test_rst_literal_block_and_directive_body_hold_no_titles() -> None:
    """Underline-looking lines in a '::' literal block or a directive body are code."""
    text = (
        "Doc\n===\n\nExample::\n\n    Foo\n    ===\n\n"
        ".. code-block:: rst\n\n   Bar\n   ---\n\nReal\n----\n"
    )
    assert _sections(rst_drafts, text) == [(1, 12, "Doc"), (14, 15, "Doc > Real")]


def test_rst_transition_is_not_a_title() -> None:
    """A line of punctuation between blank lines is a transition."""
    text = "Doc\n===\n\npara\n\n----------\n\nmore\n"
    assert _sections(rst_drafts, text) == [(1, 8, "Doc")]


def test_rst_wide_characters_measured_in_columns() -> None:
    """East Asian wide characters count two columns against the underline, as in docutils."""
    assert _sections(rst_drafts, "标题\n====\n") == [(1, 2, "标题")]
    assert _sections(rst_drafts, "标题\n===\n") == [(1, 2, PREAMBLE)]


# --- Plain text ----------------------------------------------------------------------------------


def test_text_paragraphs_packed_up_to_budget() -> None:
    """Paragraphs are grouped greedily while their costs fit, with no symbol."""
    text = "a b c\n\nd e f\n\ng h i\nj k\n\nl\n"  # costs 4, 4, 6, 2
    drafts = _run(text_drafts, text, max_tokens=8)
    assert [(d.start_line, d.end_line) for d in drafts] == [(1, 3), (5, 8)]
    assert {(d.kind, d.symbol, d.parts) for d in drafts} == {(ChunkKind.PARAGRAPH, "", 1)}


def test_text_giant_paragraph_uses_line_windows() -> None:
    """One paragraph over budget becomes line windows; nothing is lost."""
    text = "\n".join(f"w{i} x y" for i in range(30)) + "\n\nshort\n"
    drafts = _run(text_drafts, text, max_tokens=10)
    assert len(drafts) > 3 and drafts[-1].start_line == 32
    _check_invariants(SourceText(text.encode()), drafts)


# --- Properties --------------------------------------------------------------------------------

_WORD = st.sampled_from(["alpha", "beta", "gamma", "pip", "make", "x", "#", "==", "--"])
_PHRASE = st.lists(_WORD, min_size=1, max_size=5).map(lambda ws: "word " + " ".join(ws))
_FENCE_BODY = st.lists(st.sampled_from(["# fake", "", "---", "===", "code x", "```", "~~~"]))


@st.composite
def _md_fence(draw: st.DrawFn) -> str:
    char = draw(st.sampled_from("`~"))
    opener = char * draw(st.integers(3, 5))
    closer = draw(st.sampled_from(["", opener, opener + char, char * 3]))
    return "\n".join([opener, *draw(_FENCE_BODY), closer])


_MD_BLOCK = st.one_of(
    st.builds(lambda lvl, t: "#" * lvl + " " + t, st.integers(1, 6), _PHRASE),
    st.builds(lambda t, u: f"{t}\n{u}", _PHRASE, st.sampled_from(["===", "---", "=", "-----"])),
    st.lists(_PHRASE, min_size=1, max_size=4).map("\n".join),
    _md_fence(),
    st.sampled_from(["", "", "---", "***", "- - -", "> quote", "    # indented", "\t# tab"]),
    st.sampled_from(["- item", "1. step", "2) two", "* star", "-", "- # in item", "-     code"]),
    st.sampled_from(["  - nested", "  # two", "   ```", "  ---", "  ===", "  <!--", "  text"]),
    st.lists(_PHRASE, max_size=3).map(lambda ls: "\n".join(["<!--", *ls, "# hidden", "-->"])),
)
_MD_DOC = st.lists(_MD_BLOCK, max_size=25).map(lambda bs: "\n".join(bs) + "\n")


@settings(max_examples=200, deadline=None)
@given(doc=_MD_DOC, max_tokens=st.integers(1, 40), overlap=st.integers(0, 3))
def test_markdown_drafts_cover_every_line(doc: str, max_tokens: int, overlap: int) -> None:
    """Random Markdown: drafts in bounds, ordered, trimmed, covering every non-blank line."""
    src = SourceText(doc.encode())
    drafts = markdown_drafts(src, max_tokens=max_tokens, overlap_lines=overlap, counter=WORDS)
    _check_invariants(src, drafts)


@settings(max_examples=200, deadline=None)
@given(doc=_MD_DOC)
def test_markdown_sections_do_not_overlap(doc: str) -> None:
    """Without oversize sections, Markdown drafts never overlap."""
    src = SourceText(doc.encode())
    drafts = markdown_drafts(src, max_tokens=BIG, overlap_lines=2, counter=WORDS)
    _check_invariants(src, drafts)
    assert all(a.end_line < b.start_line for a, b in pairwise(drafts))


@settings(max_examples=200, deadline=None)
@given(doc=_MD_DOC)
@example(doc="# word alpha\n-\n\n  # two\n")  # an item begins with at most one blank line
def test_markdown_headings_match_commonmark(doc: str) -> None:
    """Differential: section starts and levels equal markdown-it's top-level headings."""
    markdown_it = pytest.importorskip("markdown_it")
    doc = "intro\n\n" + doc  # front matter is our extension, not CommonMark
    src = SourceText(doc.encode())
    ours = {
        (d.start_line, d.depth + 1)
        for d in markdown_drafts(src, max_tokens=BIG, overlap_lines=0, counter=WORDS)
        if d.symbol != PREAMBLE
    }
    tokens = markdown_it.MarkdownIt("commonmark").parse(doc)
    ref = {
        (t.map[0] + 1, int(t.tag[1])) for t in tokens if t.type == "heading_open" and t.level == 0
    }
    assert ours == ref


_ROW = st.lists(st.sampled_from(["a", "b", "x y", ""]), min_size=1, max_size=3).map(
    lambda cs: "| " + " | ".join(cs) + " |"
)
_DELIMITER = st.lists(st.sampled_from(["---", ":--", "--:", ":-:", "-"]), min_size=1, max_size=3)
_TABLE = st.builds(
    lambda head, cells, rows: "\n".join([head, "|" + "|".join(cells) + "|", *rows]),
    _ROW, _DELIMITER, st.lists(_ROW, max_size=3),
)  # fmt: skip
_GFM_DOC = st.lists(
    st.one_of(
        st.builds(lambda lvl, t: "#" * lvl + " " + t, st.integers(1, 6), _PHRASE),
        st.builds(lambda t, u: f"{t}\n{u}", _PHRASE, st.sampled_from(["===", "---", "=", "-----"])),
        st.lists(_PHRASE, min_size=1, max_size=3).map("\n".join),
        st.sampled_from(["", "", "---", "***", "==", "--"]),
        _TABLE,
    ),
    max_size=20,
).map(lambda bs: "\n".join(bs) + "\n")


@settings(max_examples=200, deadline=None)
@given(doc=_GFM_DOC)
@example(doc="| a |\n---\nword --\n===\n")  # the rule is the delimiter, "===" a row
def test_markdown_headings_around_tables_match_markdown_it(doc: str) -> None:
    """Differential, with GitHub tables: a table (which may interrupt a paragraph) is no
    setext heading's text; its rows run on until a rule, a blank line or a heading."""
    markdown_it = pytest.importorskip("markdown_it")
    doc = "intro\n\n" + doc
    src = SourceText(doc.encode())
    ours = {
        (d.start_line, d.depth + 1)
        for d in markdown_drafts(src, max_tokens=BIG, overlap_lines=0, counter=WORDS)
        if d.symbol != PREAMBLE
    }
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(doc)
    ref = {
        (t.map[0] + 1, int(t.tag[1])) for t in tokens if t.type == "heading_open" and t.level == 0
    }
    assert ours == ref


@st.composite
def _rst_doc(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A document of blank-separated blocks, and the (line, level) of each real title."""
    lines: list[str] = []
    titles: list[tuple[int, int]] = []
    styles: list[tuple[str, bool]] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["title", "over", "para", "literal", "directive", "rule"]))
        if kind in ("title", "over"):
            title = draw(_PHRASE).replace("#", "x")
            char = draw(st.sampled_from("=-~^*+#.'"))
            adorn = char * (len(title) + draw(st.integers(0, 3)))
            style = (char, kind == "over")
            if style not in styles:
                styles.append(style)
            titles.append((len(lines) + 1, styles.index(style) + 1))
            lines += [adorn, title, adorn] if kind == "over" else [title, adorn]
        elif kind == "para":
            lines += draw(st.lists(_PHRASE, min_size=1, max_size=3))
        elif kind == "literal":
            lines += ["Example::", "", "    Foo", "    ===", "", "    ----"]
        elif kind == "directive":
            lines += [".. code-block:: rst", "", "   Bar", "   ---"]
        else:
            lines += ["----------"]
        lines.append("")
    return "\n".join(lines) + "\n", titles


@settings(max_examples=200, deadline=None)
@given(case=_rst_doc(), max_tokens=st.integers(1, 40))
def test_rst_finds_exactly_the_real_titles(
    case: tuple[str, list[tuple[int, int]]], max_tokens: int
) -> None:
    """Random rst: titles found with the right levels, code and rules ignored, lines kept."""
    doc, titles = case
    src = SourceText(doc.encode())
    whole = rst_drafts(src, max_tokens=BIG, overlap_lines=0, counter=WORDS)
    assert [(d.start_line, d.depth + 1) for d in whole if d.symbol != PREAMBLE] == titles
    assert all(a.end_line < b.start_line for a, b in pairwise(whole))
    _check_invariants(src, rst_drafts(src, max_tokens=max_tokens, overlap_lines=1, counter=WORDS))


@settings(max_examples=200, deadline=None)
@given(
    paras=st.lists(st.lists(_PHRASE, min_size=1, max_size=4), max_size=15),
    gaps=st.integers(1, 3),
    max_tokens=st.integers(1, 40),
)
def test_text_drafts_pack_whole_paragraphs(
    paras: list[list[str]], gaps: int, max_tokens: int
) -> None:
    """Random text: lines covered; when every paragraph fits, drafts are whole and in budget."""
    doc = ("\n" * (gaps + 1)).join("\n".join(p) for p in paras) + "\n"
    src = SourceText(doc.encode())
    drafts = text_drafts(src, max_tokens=max_tokens, overlap_lines=1, counter=WORDS)
    _check_invariants(src, drafts)
    if all(WORDS.count("\n".join(p)) + 1 <= max_tokens for p in paras):
        assert all(a.end_line < b.start_line for a, b in pairwise(drafts))
        for d in drafts:
            assert WORDS.count(src.span_text(d.start_line, d.end_line)) + 1 <= max_tokens
