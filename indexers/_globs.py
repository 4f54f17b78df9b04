"""Gitignore-like globs over '/'-separated workspace-relative paths."""

from __future__ import annotations

import re

__all__ = ["glob_to_regex"]

# One glob token: a run of '*', '?', an escaped character, or a non-empty [class].
_GLOB_TOKEN = re.compile(r"\*+|\?|\\.|\[[!^]?(?:\][^\]]*|[^\]]+)\]")


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a gitignore-like glob to a regex over a '/'-separated relative path.

    ``**`` spans any number of folders, ``*`` and ``?`` never match '/', ``[...]`` is a class
    (``[!...]`` negated). A pattern without an inner '/' matches a name at any depth, one with
    a '/' is anchored at the root. Matching a folder matches everything under it; a trailing
    '/' matches only a folder. Negation (a leading '!') is not supported.
    """
    if not pattern.strip("/"):
        raise ValueError(f"empty glob {pattern!r}")
    if pattern.startswith("!"):
        raise ValueError(f"negated glob {pattern!r} is not supported; use exclude instead")
    dir_only = pattern.endswith("/")
    anchored = "/" in pattern.rstrip("/")
    parts = pattern.strip("/").split("/")
    out = [] if anchored else ["(?:.*/)?"]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:.*/)?")
        else:
            out.append(_segment_regex(part) + ("" if last else "/"))
    out.append("/.*" if dir_only else "(?:/.*)?")
    return re.compile("".join(out), re.DOTALL)


def _segment_regex(segment: str) -> str:
    """Translate one path segment of a glob (no '/') to a regex."""
    out, pos = [], 0
    for m in _GLOB_TOKEN.finditer(segment):
        out.append(re.escape(segment[pos : m.start()]))
        token, pos = m.group(), m.end()
        if token[0] == "*":
            out.append("[^/]*")  # '**' inside a segment is an ordinary '*', as in gitignore
        elif token == "?":
            out.append("[^/]")
        elif token[0] == "\\":
            out.append(re.escape(token[1]))
        else:
            negate = token[1] in "!^" and len(token) > 3
            body = re.sub(r"([\\\[\]^])", r"\\\1", token[1 + negate : -1])
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
    return "".join(out) + re.escape(segment[pos:])
