"""A step's text as a terminal would have shown it, for observing and showing steps.

Tool output is stored as the tool wrote it (``resolve`` gives it back so); what the lane
reads and shows is this view of it: ANSI escape sequences removed (pytest's colours put
``ESC[31m`` before ``FAILED``, which hid the failing test), a line a carriage return wrote
over shown in its last state (a progress bar is one line, not a hundred), a backspace's
overstrike resolved, runs of binary lines folded to one line that counts them, and every
other control character but newline and tab dropped. A pure function of the text.
"""

from __future__ import annotations

import re

__all__ = ["terminal_text"]

# Anything the view changes: C0 controls but tab and newline, DEL, C1 controls, and the
# replacement character invalid UTF-8 was decoded to. Text without any is its own view.
_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")
_ASCII_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
# ECMA-48 escape sequences: CSI (colours, cursor moves), OSC (window titles, hyperlinks;
# ended by BEL or ST), the other string commands (DCS, SOS, PM, APC), and the two- and
# three-byte escapes (charset selection, keypad modes). The leading ESC lets the regex
# engine skip ahead to each one. (The 8-bit forms are C1 controls, dropped as such.)
_ANSI = re.compile("\x1b(?:\\[[0-?]*[ -/]*[@-~]|[]PX^_][^\x07\x1b]*(?:\x07|\x1b\\\\)?|[ -/]*[0-~])")
_OVERWRITTEN = re.compile("[^\n]*\r[^\n]*")  # a line a carriage return writes over
_OVERSTRIKE = re.compile("[^\n\x08]\x08")  # "a\bb" prints b over a (man pages' bold)
_BADS = "\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd"  # what a binary line is mostly made of
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BAD = re.compile(f"[{_BADS}]")
_LINE = re.compile(f"^[^\n{_BADS}]*[{_BADS}][^\n]*", re.MULTILINE)  # a line with any
# A line at least this share of which is controls or replacement characters is binary
# (random bytes decode to about half); a word with one mis-decoded accent is not.
_BINARY_SHARE = 4  # one character in four
_BINARY_MIN = 2  # and at least two of them
_BINARY_MARK = "\x00"  # a binary line, until its run is folded (stored text has no NUL)
# A run of binary lines, with the short lines between them (random bytes hold a newline
# every 256 bytes or so, and some of the pieces between decode to a few clean letters).
_BINARY_GAP = 16
_BINARY_RUN = re.compile(f"\x00(?:(?:\n[^\n\x00]{{0,{_BINARY_GAP}}})*?\n\x00)*")


def _overwrite(found: re.Match[str]) -> str:
    """A line as a terminal leaves it: each carriage return goes back to its start and
    what follows writes over what was there (a shorter write keeps the rest)."""
    shown = ""
    for part in found.group().split("\r"):
        shown = part + shown[len(part) :]
    return shown


def _binary(found: re.Match[str]) -> str:
    line = found.group()
    bad = len(_BAD.findall(line))
    return _BINARY_MARK if bad >= _BINARY_MIN and bad * _BINARY_SHARE >= len(line) else line


def _fold(found: re.Match[str]) -> str:
    n = found.group().count("\n") + 1
    return f"[binary output: {n} line{'s' if n > 1 else ''} not shown]"


def _special(text: str) -> bool:
    """Whether ``text`` holds anything the view changes. An ASCII text (most logs) is
    checked at memory speed by bytes.translate; a regex over a 45 MB log takes ~0.5 s."""
    if text.isascii():
        data = text.encode("ascii")
        return len(data.translate(None, _ASCII_CONTROLS)) != len(data)
    return _SPECIAL.search(text) is not None


def terminal_text(text: str) -> str:
    """``text`` as a terminal shows it (see the module's docstring); ``text`` itself when
    it holds nothing a terminal would not print as is.

    >>> terminal_text("\\x1b[31mFAILED\\x1b[0m a.py::t\\r\\n10%\\r100%\\n")
    'FAILED a.py::t\\n100%\\n'
    """
    if not _special(text):
        return text
    text = _ANSI.sub("", text.replace("\x00", ""))
    if "\r" in text:
        text = _OVERWRITTEN.sub(_overwrite, text.replace("\r\n", "\n"))
    if "\x08" in text:
        text = _OVERSTRIKE.sub("", text)
    if not _special(text):  # colours and progress lines were all it held
        return text
    if _BAD.search(text):
        text = _BINARY_RUN.sub(_fold, _LINE.sub(_binary, text))
    return _CONTROL.sub("", text)
