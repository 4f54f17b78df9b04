"""How much of a file is literal data: the test behind the walk's ``DATA`` skip.

A line is *data* when it holds a literal (a number, a string, ``true``/``null``/``None`` …)
and no identifier used as code; a line with such an identifier is *code*; blank, punctuation
and comment-only lines count for neither. Keys of object literals (``name:``) are data, so a
table of ``{id: 1, name: "x"}`` rows reads as one. Prose (Markdown, docstrings) is words, so
it reads as code and is never taken for a table.

The test is lexical and language-blind on purpose: it must judge JSON, Python dicts, C byte
arrays and CSV alike, before any language is chosen, in a few milliseconds.
"""

from __future__ import annotations

import re

__all__ = ["literal_share"]

_SAMPLE_LINES = 1024  # evenly spaced lines: the share within a point or two, a few ms a file
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`(?:[^`\\\n]|\\.)*`')
_COMMENT = re.compile(rb"(?:#|//|--|;).*|/\*.*?\*/")
_NUMBER = re.compile(
    rb"(?<![A-Za-z0-9_$])(?:0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?)[A-Za-z]*"
)
_WORD = re.compile(rb"([A-Za-z_$][A-Za-z0-9_$]*)(\s*:(?!:))?")  # group 2: a key's colon
_LITERAL_WORDS = frozenset(
    (b"true", b"false", b"null", b"none", b"nil", b"undefined", b"nan", b"infinity")
)


def literal_share(data: bytes) -> float:
    """The share of data lines among the data and code lines of a sample of ``data``.

    >>> literal_share(b'TABLE = {\\n  0x41: "A",\\n  0x42: "B",\\n}\\n')
    0.6666666666666666
    """
    lines = data.split(b"\n")
    sample = lines[:: max(1, len(lines) // _SAMPLE_LINES)]
    literal = code = 0
    for line in sample:
        rest, strings = _STRING.subn(b" ", line)
        rest = _COMMENT.sub(b"", rest)
        rest, numbers = _NUMBER.subn(b" ", rest)
        has_literal, has_code = bool(strings or numbers), False
        for match in _WORD.finditer(rest):
            if match.group(1).lower() in _LITERAL_WORDS:
                has_literal = True
            elif match.group(2) is None:
                has_code = True
                break
        if has_code:
            code += 1
        elif has_literal:
            literal += 1
    return literal / (literal + code) if literal + code else 0.0
