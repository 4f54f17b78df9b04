"""The lines of a session's steps that a request can point at, and the steps it finds.

A tool output's lines, and an agent turn's code besides its command (``drafts_of``), are
what the history lane recalls for a request (``step_lines``: each line with its words
and the definitions it sits in); ``search_items`` finds the steps themselves, by BM25 over
their text plus the names their code defines.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core import Step, StepRole, inert
from engine.memory._history import VERBATIM_CHARS, Memo
from engine.memory._observe import MAX_LINE_CHARS, drafts_of, names_in
from engine.memory._terminal import terminal_text

__all__ = ["SEARCH_DEFINITION_WEIGHT", "StepLines", "search_items", "step_lines", "words"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_MIN_LINE = 25  # shorter lines carry too little to be worth recalling into a stub
# Code as tools print it: a line number ("12:", "  12<tab>") before the code, and the
# definitions that open a block (the block is every deeper-indented line after).
_NUMBERED = re.compile(r"^\s*\d+(?::|\t)")
_DEFINES = re.compile(r"\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
# A step whose code defines a name the query uses is what a search for it wants: each such
# name adds this many times its idf (over the definitions) to the step's BM25 score.
SEARCH_DEFINITION_WEIGHT = 2.0


def words(text: str) -> list[str]:
    """The words of ``text`` a request and a line are matched by (lower case, 3+ chars)."""
    return [w.lower() for w in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class StepLines:
    """An item's recallable lines, their words, and the definitions each sits in."""

    text: tuple[str, ...]
    words: tuple[frozenset[str], ...]
    within: dict[str, tuple[int, ...]]  # a def/class name (lower case) -> its lines
    defines: frozenset[str]  # every def/class name it opens (lower case)
    where: dict[str, tuple[int, ...]]  # a word -> the lines it is in, in order
    inert: tuple[str, ...]  # each line with a start that reads as the prompt's frame escaped


def step_lines(item: Step, memo: Memo | None) -> StepLines:
    """The recallable lines of a tool output, or of an agent turn's code besides its
    command (memoised when given a memo): each with its words and, for code (a file shown
    whole or in part, numbered or not), the definitions it is inside. ``defines`` is every
    name the whole item's code defines (an agent turn's command included)."""
    found = memo.lines.get(item) if memo is not None else None
    if found is not None:
        assert isinstance(found, StepLines)
        return found
    text: list[str] = []
    within: dict[str, list[int]] = {}
    scope: list[tuple[int, str]] = []  # open definitions: (indent, name)
    defines: set[str] = set()
    drafted = item.role is StepRole.ASSISTANT
    shown = memo.text(item) if memo is not None else terminal_text(item.text)
    if len(item.text) <= VERBATIM_CHARS:
        for raw in (drafts_of(shown) if drafted else shown).splitlines():
            line = raw.rstrip()
            body = _NUMBERED.sub("", line, count=1)
            if not body.strip():
                continue
            indent = len(body) - len(body.lstrip())
            while scope and scope[-1][0] >= indent:
                scope.pop()
            opened = _DEFINES.match(body)
            if opened:
                scope.append((indent, opened.group(1).lower()))
                defines.add(scope[-1][1])
            if len(line.strip()) >= _MIN_LINE and len(line) <= MAX_LINE_CHARS:
                for _, name in scope:
                    within.setdefault(name, []).append(len(text))
                text.append(line)
    if drafted:  # a definition its command writes is still one it defines
        defines.update(name.lower() for name in names_in(shown)[3])
    line_words = tuple(frozenset(words(ln)) for ln in text)
    where: dict[str, list[int]] = {}
    for n, found_words in enumerate(line_words):
        for word in found_words:
            where.setdefault(word, []).append(n)
    found = StepLines(tuple(text), line_words, {k: tuple(v) for k, v in within.items()},
                      frozenset(defines), {k: tuple(v) for k, v in where.items()},
                      tuple(inert(ln) for ln in text))  # fmt: skip
    if memo is not None:
        memo.lines[item] = found
    return found


def search_items(items: Sequence[Step], query: str, k: int = 3,
                 role: StepRole | None = None, memo: Memo | None = None) -> list[Step]:  # fmt: skip
    """The ``k`` items (of ``role``, when given) whose text best matches ``query`` by BM25,
    plus ``SEARCH_DEFINITION_WEIGHT`` times the idf of each name the query uses that the
    item's code defines (ties: newest first): how a stubbed step is found again by what a
    later step says. ``memo`` caches each item's definitions."""
    if role is not None:
        items = [i for i in items if i.role is role]
    asked = set(words(query))
    if not asked or not items:
        return []
    docs = [Counter(words(memo.text(i) if memo else terminal_text(i.text))) for i in items]
    lengths = [sum(d.values()) for d in docs]
    avg = sum(lengths) / len(docs) or 1.0
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    defined = [asked & step_lines(i, memo).defines for i in items]
    named = Counter(w for d in defined for w in d)
    k1, b = 1.2, 0.75
    scores = []
    for idx, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        s = 0.0
        for w in asked:
            tf = doc.get(w, 0)
            if tf:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        for w in defined[idx]:
            s += SEARCH_DEFINITION_WEIGHT * math.log(1 + (n - named[w] + 0.5) / (named[w] + 0.5))
        if s > 0:
            scores.append((-s, -items[idx].step, idx))
    scores.sort()
    return [items[idx] for _, _, idx in scores[:k]]
