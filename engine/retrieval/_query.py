"""What a request asks for: a cleaned query, the identifiers it names, the places it points at.

Issue text is noisy: HTML comments from templates, "installed versions" dumps, pages of log.
Measured on SWE-bench issues, cleaning that away gained ~5 points of file Acc@1, and
boosting sections that define the names an issue mentions gained ~5 more.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache, lru_cache

__all__ = [
    "MAX_INTENT_WORDS",
    "MIN_PHRASE_WORDS",
    "Intent",
    "Location",
    "clean_query",
    "is_question",
    "locations",
    "lone_name",
    "phrase_match",
    "query_identifiers",
    "request_intents",
    "request_phrases",
    "word_forms",
]

LONG_BLOCK_LINES = 24  # a fenced block longer than this is a log: keep its head and tail
KEEP_HEAD_LINES = 8
KEEP_TAIL_LINES = 8
_MIN_IDENT = 3  # `id`, `io` and `os` match too much to be evidence of intent

_LONE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
_VERSIONS_HEADING = re.compile(
    r"^\s*(?:#+\s*|\*\*)?(?:installed versions|versions?|environment|system info(?:rmation)?"
    r"|platform|pip (?:list|freeze)|conda list|output of .*(?:version|show_versions))\b.*$",
    re.I | re.M,
)
_PACKAGE_LINE = re.compile(r"^\s*[-*]?\s*[\w.\-\[\]]+\s*(?:==|:|\s)\s*v?\d+(?:\.\d+)+\S*\s*$")
_BACKTICKED = re.compile(r"`{1,3}([^`\n]{1,120})`{1,3}")
_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b[a-z]+(?:[A-Z][a-z0-9]*)+\b")
_SNAKE = re.compile(r"\b_*[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+_*\b")
_DOTTED = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b")
_CALL = re.compile(r"\b([A-Za-z_]\w{2,})\(")
# A path may be absolute or start at the home folder (a stack trace from the reporter's
# machine: ``/home/u/proj/src/main.rs:12:5``, ``~/env/site-packages/pkg/mod.py:23``); a
# path inside a URL (``https://host/a/b.py``) is not one.
_ROOT = r"(?:~?/)?"
_PATH = re.compile(
    rf"(?<![\w/.-])({_ROOT}(?:[\w.-]+/)*[\w.-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|c|h|cc|cpp|hpp|rst|md|txt|toml|cfg|ini))\b"
)
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([\w<>.]+))?')
# IPython's and Jupyter's frames: ``File ~/lib/python3.10/site-packages/pkg/mod.py:2373, in
# Axes.bar(self, x)``, and before IPython 8 ``~/lib/.../pkg/mod.py in bar(self, x)`` (no line).
_IPY_FRAME = re.compile(r"File (\S+\.py):(\d+)(?:, in ([\w<>.]+))?")
_IPY_OLD_FRAME = re.compile(r"(?<!\S)(\S+\.py) in ([\w<>.]+)\(")
# PHP's ``#0 /app/src/Foo.php(123): Bar->baz()`` and .NET's ``at Foo.Bar() in
# C:\\src\\Foo.cs:line 42``; Node's ESM frames name files as ``file:///app/src/x.mjs:10:5``.
_PAREN_LOC = re.compile(rf"(?<![\w/.-])({_ROOT}(?:[\w.-]+/)*[\w.-]+\.php)\((\d+)\)")
_DOTNET_LOC = re.compile(r"(?<!\S)(\S+\.(?:cs|fs|vb)):line (\d+)")
_FILE_URL = re.compile(r"\bfile://(?=/)")
# JVM frames: ``at com.acme.shop.Cart$Line.total(Cart.java:42)`` (maybe after a class
# loader and a module: ``java.base/``, ``app//``): the class's package is the file's folder
# path (the place is that path exactly), the method its name.
# Ruby's: ``/app/lib/cart.rb:42:in `block in total'``.
_JVM_FRAME = re.compile(
    r"\bat (?:[\w.$@-]*/){0,2}((?:[\w$]+\.)*?)[\w$]+\.([\w$<>]+)"
    r"\(([\w$-]+\.(?:java|kt|scala|groovy)):(\d+)\)"
)
_RUBY_FRAME = re.compile(
    r"(?<!\S)(\S+\.rb):(\d+):in [`'](?:block (?:\(\d+ levels\) )?in )?([\w?!=]+)'"
)
# The lines a long log keeps from its middle (see ``clean_query``): Python's frames. Keeping
# JVM, Ruby, PHP and .NET frames too lowered the gold share of the packed evidence on all 3
# multilingual dev instances it touched (fastlane-21857's 92 Ruby frames, mostly gems, lost
# its gold file at 8k): their long traces run through libraries more than Python's do.
_FRAMES = (_PY_FRAME, _IPY_FRAME, _IPY_OLD_FRAME)
_COLON_LOC = re.compile(
    rf"(?<![\w/.-])({_ROOT}(?:[\w.-]+/)*[\w.-]+\.[A-Za-z]{{1,4}}):(\d+)(?::\d+)?"
)
_PYTEST_ID = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py)::([\w:\[\]-]+)")
_RUST_ARROW = re.compile(r"-->\s*((?:[\w.-]+/)*[\w.-]+\.\w+):(\d+)")
_STOP = frozenset(
    (
        "the", "and", "for", "with", "this", "that", "from", "into", "when", "then", "else",
        "have", "has", "not", "but", "are", "was", "were", "its", "can", "use", "used",
        "using", "should", "would", "could", "will", "also", "http", "https", "www", "com",
        "org", "html", "true", "false", "none", "null", "self", "def", "class", "return",
        "import", "print", "error", "warning",
    )
)  # fmt: skip


# A request longer than this is a report (an issue, a log): its mention of tests or docs is
# context ("the test fails"), not what it asks for. Planner questions are far shorter.
MAX_INTENT_WORDS = 40


def is_question(text: str) -> bool:
    """Whether ``text`` is short enough to be a question (at most ``MAX_INTENT_WORDS``
    words) rather than a report: what its intents, word forms and packing follow."""
    return len(text.split()) <= MAX_INTENT_WORDS


class Intent(StrEnum):
    """What kind of evidence a short question asks for, beyond code."""

    TESTS = "tests"
    DOCS = "docs"
    EXAMPLES = "examples"
    CONFIG = "config"
    USAGE = "usage"  # "how do I ...", "should I ...": what a user of the code is told


_INTENTS = {
    Intent.TESTS: re.compile(r"\b(tests?|tested|testing|test ?cases?|unit ?tests?|specs?)\b", re.I),
    Intent.DOCS: re.compile(
        r"\b(docs?|documentation|documented|document|readme|manual|guide|tutorial"
        r"|changelog|release notes?)\b",
        re.I,
    ),
    Intent.EXAMPLES: re.compile(r"\b(examples?|samples?|demos?)\b", re.I),
    Intent.CONFIG: re.compile(
        r"\b(config|configs|configure[sd]?|configuration|configuring|settings?|options?"
        r"|env(ironment)? ?var(iable)?s?|flags?)\b",
        re.I,
    ),
    Intent.USAGE: re.compile(
        r"(^|[.;:?!]\s)\W*(how (do|can|should|would) (i|we|you)\b|(should|can|could) (i|we)\b"
        r"|is (it|this|the \w+) (safe|possible|recommended|ok)\b"
        r"|what('?s| is) the difference\b|which \w+( \w+){0,2} should (i|we)\b)",
        re.I,
    ),
}


# A quoted run of words in a request: an error message, a log line, a UI string. Quotes
# of any common kind; apostrophes inside words ("don't") do not open one.
_QUOTED = re.compile(r"\"([^\"\n]{8,300})\"|`([^`\n]{8,300})`|(?<!\w)'([^'\n]{8,300})'(?!\w)")
_PHRASE_WORD = re.compile(r"[A-Za-z0-9_]+")
MIN_PHRASE_WORDS = 3  # shorter quotes are names, which the identifier features handle


def request_phrases(text: str, max_words: int | None = None) -> tuple[tuple[str, ...], ...]:
    """The quoted phrases of a request (an error message it cites), each as its lower-case
    words; only those of at least ``MIN_PHRASE_WORDS`` words, in order, without repeats.
    None for a request longer than ``max_words``: a report's quotes are mostly its output
    and code (on the training split they cost 4.5 points of file Acc@1), a short
    question's are what it asks about."""
    if max_words is not None and len(text.split()) > max_words:
        return ()
    found: list[tuple[str, ...]] = []
    for match in _QUOTED.finditer(text):
        quote = next(g for g in match.groups() if g is not None)
        words = tuple(w.lower() for w in _PHRASE_WORD.findall(quote))
        if len(words) >= MIN_PHRASE_WORDS and words not in found:
            found.append(words)
    return tuple(found)


def phrase_match(phrases: Sequence[tuple[str, ...]], text: str) -> float:
    """How much of the best-matching phrase ``text`` holds verbatim: the share of the
    phrase's word triples found in order in the text (a message with a placeholder in the
    middle still matches most of its triples)."""
    if not phrases:
        return 0.0
    words = [w.lower() for w in _PHRASE_WORD.findall(text)]
    triples = set(zip(words, words[1:], words[2:], strict=False))
    best = 0.0
    for phrase in phrases:
        wanted = list(zip(phrase, phrase[1:], phrase[2:], strict=False))
        best = max(best, sum(1 for t in wanted if t in triples) / len(wanted))
    return best


def request_intents(text: str) -> frozenset[Intent]:
    """The kinds of evidence a short question asks for (tests, docs, examples,
    configuration); none for a long report, which still wants the implementation."""
    if not is_question(text):
        return frozenset()
    return frozenset(intent for intent, pattern in _INTENTS.items() if pattern.search(text))


@dataclass(frozen=True, slots=True, order=True)
class Location:
    """A place a signal points at: a path (as written), maybe a line, maybe a name.
    ``exact``: the path is relative to a source root already (a JVM frame's package path),
    so it matches by that whole tail or not at all."""

    path: str
    line: int | None = None
    name: str | None = None
    exact: bool = False


def clean_query(text: str) -> str:
    """The text without template comments, version dumps, and the middle of long logs."""
    text = _HTML_COMMENT.sub(" ", text.replace("\r\n", "\n"))
    text = _FENCE.sub(_shorten_block, text)
    kept: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if _VERSIONS_HEADING.match(line):
            skipping = True
            continue
        if skipping:
            if not line.strip() or _PACKAGE_LINE.match(line) or (":" in line and len(line) < 80):
                continue
            skipping = False
        kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def _shorten_block(match: re.Match[str]) -> str:
    fence, body = match.group(1), match.group(2)
    lines = body.split("\n")
    if len(lines) <= LONG_BLOCK_LINES:
        return match.group(0)
    frames = [ln for ln in lines if any(p.search(ln) for p in _FRAMES)]
    head, tail = lines[:KEEP_HEAD_LINES], lines[-KEEP_TAIL_LINES:]
    middle = [ln for ln in frames if ln not in head and ln not in tail]
    return f"{fence}\n" + "\n".join([*head, *middle, *tail]) + f"\n{fence}"


def query_identifiers(text: str) -> list[str]:
    """Names the text mentions as code, strongest evidence first, each once.

    Backticked names, names called like ``f(``, traceback functions, CamelCase, snake_case
    and dotted names (each dotted part too). Ordinary words are left to BM25.
    """
    found: dict[str, None] = {}

    def add(name: str) -> None:
        name = name.strip("_.()[]:,'\" ")
        if len(name) >= _MIN_IDENT and name.lower() not in _STOP and not name.isdigit():
            found.setdefault(name, None)

    for inner in _BACKTICKED.findall(text):
        for part in re.findall(r"[A-Za-z_][\w.]*", inner):
            add(part)
            for piece in part.split("."):
                add(piece)
    funcs = [f for _, _, f in (*_PY_FRAME.findall(text), *_IPY_FRAME.findall(text))]
    funcs += [f for _, f in _IPY_OLD_FRAME.findall(text)]
    for func in funcs:
        if name := _frame_name(func):
            add(name)
    for name in _CALL.findall(text):
        add(name)
    for pattern in (_CAMEL, _SNAKE):
        for name in pattern.findall(text):
            add(name)
    for dotted in _DOTTED.findall(text):
        if _PATH.fullmatch(dotted):
            continue
        for piece in dotted.split("."):
            if _CAMEL.fullmatch(piece) or _SNAKE.fullmatch(piece):
                add(piece)
    return list(found)


def lone_name(text: str) -> str | None:
    """The request's one word, when that is all it is and could name code (``configure``):
    searched as a name too, so its definition comes before the sections that use the word.
    ``query_identifiers`` leaves such a plain word to BM25 inside a longer request."""
    word = text.strip().strip("`")
    if (len(word) >= _MIN_IDENT and _LONE.fullmatch(word) and word.lower() not in _STOP
            and not word.isdigit()):  # fmt: skip
        return word
    return None


def _frame_name(func: str) -> str | None:
    """A frame's function as sections name it (``Axes.bar`` -> ``bar``; ``<module>`` none)."""
    return func.rsplit(".", 1)[-1] if func and not func.startswith("<") else None


def locations(text: str) -> list[Location]:
    """Paths (with lines and names where given) that a traceback, a failing test id, a
    compiler error or plain prose points at, in order of appearance, each once. A bare
    ``path:line`` or path that repeats a frame's (or its tail: a Windows frame's
    ``C:\\app\\x.py`` and the ``x.py:12`` inside it) adds nothing."""
    found: dict[Location, None] = {}
    tails: set[str] = set()  # every path found, and each of its tails
    lined: set[tuple[str, int]] = set()  # ... with the line it was found at

    def add(loc: Location) -> None:
        found.setdefault(loc, None)
        parts = loc.path.replace("\\", "/").split("/")
        for i in range(len(parts)):
            tail = "/".join(parts[i:])
            tails.add(tail)
            if loc.line is not None:
                lined.add((tail, loc.line))

    text = _FILE_URL.sub("", text)
    for path, line, func in _PY_FRAME.findall(text):
        add(Location(path, int(line), func or None))
    for path, line, func in _IPY_FRAME.findall(text):
        add(Location(path, int(line), _frame_name(func)))
    for path, func in _IPY_OLD_FRAME.findall(text):
        add(Location(path, None, _frame_name(func)))
    for package, method, file, line in _JVM_FRAME.findall(text):
        folder = package.replace(".", "/")
        name = None if "$" in method else _frame_name(method)  # lambda$sum$0: no section's
        add(Location(folder + file, int(line), name, exact=bool(folder)))
    for path, line, func in _RUBY_FRAME.findall(text):
        add(Location(path, int(line), func))
    for path, test in _PYTEST_ID.findall(text):
        add(Location(path, None, test.split("::")[-1].split("[")[0]))
    for pattern in (_RUST_ARROW, _PAREN_LOC, _DOTNET_LOC, _COLON_LOC):
        for path, line in pattern.findall(text):
            if (path, int(line)) not in lined:
                add(Location(path, int(line)))
    for path in _PATH.findall(text):
        if path not in tails:
            add(Location(path))
    return list(found)


# Endings tried on a word's stem to spell the forms a repository may use instead of the
# request's: a candidate counts only when it stems back to the same stem.
_ENDINGS = (
    "", "e", "s", "es", "ed", "d", "ing", "er", "ers", "or", "ors", "ion", "ions", "ation",
    "ations", "ize", "ized", "izes", "izer", "ization", "ise", "ised", "ment", "ments",
    "al", "ity", "able", "ive", "y", "ies", "ied",
)  # fmt: skip
# Question and function words: their forms are noise in any repository.
_FORM_STOP = _STOP | frozenset((
    "what", "where", "which", "when", "does", "doing", "done", "there", "their", "they",
    "them", "than", "some", "what", "your", "about", "after", "before", "each", "every",
    "make", "makes", "made", "just", "need", "want", "work", "works", "happen", "happens",
))  # fmt: skip
_FORMS_CACHE = 1 << 16  # words whose forms are remembered: a session repeats its vocabulary
_PLAIN_WORD = re.compile(r"(?<![\w.])[A-Za-z]{4,}(?![\w.])")  # prose words, not names


@cache
def _stemmer() -> object:
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _stems(words: Sequence[str]) -> list[str]:
    """The Snowball (English) stem of each word, in one call to tantivy's analyzer."""
    if not words:
        return []
    stems = _stemmer().analyze(" ".join(words))  # type: ignore[attr-defined]
    return [str(s) for s in stems]


def word_forms(text: str) -> dict[str, list[str]]:
    """For each plain lower-case word of ``text`` (4+ letters, not an identifier or a stop
    word), the other spellings that share its stem: ``minifying`` → ``minify``, ``minified``,
    …; ``suggest`` → ``suggestion``, …. Which of them a repository uses is for the caller to
    check; the words come in first-seen order."""
    words = dict.fromkeys(
        w for w in _PLAIN_WORD.findall(text) if w.islower() and w not in _FORM_STOP
    )  # fmt: skip
    out: dict[str, list[str]] = {}
    for word in words:
        same = _forms_of(word)
        if same:
            out[word] = list(same)
    return out


@lru_cache(maxsize=_FORMS_CACHE)
def _forms_of(word: str) -> tuple[str, ...]:
    """``word``'s other spellings with its stem (a pure function of the word: cached)."""
    (stem,) = _stems([word])
    roots = {stem}
    if stem.endswith("i"):  # "minifi" is spelled "minify"
        roots.add(stem[:-1] + "y")
    if len(stem) >= 3 and stem[-1] not in "aeiouwxy" and stem[-2] in "aeiou":
        roots.add(stem + stem[-1])  # "stripp" + "ed"
    cands = sorted({r + e for r in roots for e in _ENDINGS} - {word})
    return tuple(c for c, s in zip(cands, _stems(cands), strict=True) if s == stem)
