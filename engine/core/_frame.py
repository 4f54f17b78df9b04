"""What keeps text cortex did not write from forging the prompt's frame.

The frame is cortex's own: lane headers (``## Evidence``), each item's ``[n]`` line, its
``Source:`` and ``Hash:`` lines, code fences, and the history lane's step headers
(``[#N tool …]``, ``~#N``) and part headers (``Digest of #…``). A file name (git allows newlines and
backticks in one), a saved note, a session step or a turn's text can hold look-alikes of
every one of them. A name is shown on one line with its breaking characters escaped
(``shown_name``); a text outside a fence has each line that would read as a frame line
escaped with a backslash (``inert``); a fence is longer than any backtick run inside it
(``fence_for``).
"""

from __future__ import annotations

import re

__all__ = ["fence_for", "inert", "shown_name"]

# Characters that end or break a line for a reader (and a tokenizer), and the other
# control characters: shown escaped, as Python writes them (``\n``, ``\x1b``, ``\u2028``).
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A line that would read as part of the frame: a Markdown heading, an item's ``[n]``, a
# ``Source:`` or ``Hash:`` line, a code fence (up to three spaces of indent, as CommonMark
# reads them), and the history lane's own lines: a step's ``[#N …]`` header, a recalled
# group's ``~#N``, and the headers of its parts.
_FRAME_LINE = re.compile(
    r"^( {0,3})(#{1,6}(?:\s|$)|\[\d+\]|\[#\d|~#\d|Source:|Hash:|```|~~~"
    r"|Recent steps, verbatim|Digest of #|Goals and lessons of #|Recalled for this request"
    r"|Steps #\d)",
    re.MULTILINE,
)


def shown_name(name: str) -> str:
    """``name`` (a path, a title) on one line: control and line-separator characters
    escaped, so it cannot start a line of its own."""
    if not _BREAKS.search(name):
        return name
    return _BREAKS.sub(lambda m: repr(m.group())[1:-1], name)


def inert(text: str) -> str:
    """``text`` with a backslash before each line start that would read as a frame line
    (``\\## Evidence``, ``\\[1] name``, ``\\Source: …``, ``\\```); every other byte
    as it was."""
    return _FRAME_LINE.sub(r"\1\\\2", text)


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of three or more backticks in ``text``."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    return "`" * max(3, longest + 1)
