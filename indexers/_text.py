"""Bytes to lines, the one way every indexer sees a file.

Line numbers must agree with editors, git and tracebacks, so a line ends at ``\\n`` only
(``str.splitlines`` would also split at form feeds, ``\\x1c`` and ``\\u2028``, shifting every
line after them). A trailing ``\\r`` is dropped from each line so CRLF files read like LF
files; the text of a chunk is its lines joined with ``\\n``.
"""

from __future__ import annotations

import codecs
import hashlib
import re

__all__ = ["SourceText", "declared_codec", "decode", "is_bom_text", "sha256_text", "span_text"]

# Byte-order marks, longest first (UTF-32 LE's starts with UTF-16 LE's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# PEP 263's form, which Emacs's ``-*- coding: x -*-`` and Vim's ``fileencoding=x`` match too.
_CODING = re.compile(rb"^[ \t\f]*(?:#|//|/\*|--|;|%).*?coding[:=][ \t]*([-\w.]+)")


def decode(data: bytes) -> str:
    """Decode a file's bytes, never raising: UTF-8 (a BOM dropped); UTF-16 or UTF-32 when a
    BOM says so; else, when the bytes are not UTF-8, the codec a coding declaration in the
    first two lines names (PEP 263's ``# -*- coding: latin-1 -*-``, also read by Emacs and
    Vim in other languages); what still does not decode becomes U+FFFD.

    >>> decode("café".encode("utf-16"))
    'café'
    >>> decode(b"# -*- coding: latin-1 -*-\\nname = 'caf\\xe9'\\n").splitlines()[1]
    "name = 'café'"
    """
    return _decode(data)[0]


def _decode(data: bytes) -> tuple[str, bool]:
    """``decode``'s text, and whether ``data`` is that text's UTF-8 (a UTF-8 BOM aside)."""
    body = data
    for bom, codec in _BOMS:
        if data.startswith(bom):
            if codec != "utf-8":
                return data[len(bom) :].decode(codec, errors="replace"), False
            body = data[len(bom) :]
            break
    try:
        return body.decode("utf-8"), True
    except UnicodeDecodeError:
        pass
    return body.decode(declared_codec(body) or "utf-8", errors="replace"), False


def declared_codec(data: bytes) -> str | None:
    """The text codec a coding declaration in ``data``'s first two lines names, when Python
    knows it (``latin-1``, ``cp1252``, ``euc-jp`` …); None without one."""
    for line in data.split(b"\n", 2)[:2]:
        found = _CODING.search(line)
        if found is None:
            continue
        try:
            info = codecs.lookup(found.group(1).decode("ascii"))
        except LookupError:
            return None
        # rot13 and the like are str-to-str transforms, not ways to read bytes
        return info.name if getattr(info, "_is_text_encoding", True) else None
    return None


def is_bom_text(data: bytes) -> bool:
    """Whether ``data`` opens with a UTF-16 or UTF-32 byte-order mark (their text holds NUL
    bytes, which would otherwise say binary)."""
    return any(data.startswith(bom) for bom, codec in _BOMS if codec != "utf-8")


def sha256_text(text: str) -> str:
    """The hex sha256 of ``text`` encoded as UTF-8: the content address used everywhere."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SourceText:
    """A decoded file as 1-based lines (tree-sitter rows count ``\\n`` the same way).

    ``lines[i]`` is line ``i + 1`` without its line ending;
    ``data`` is the file's bytes when they are UTF-8; otherwise (UTF-16, a declared legacy
    codec, bytes that are not text) the text's UTF-8, so that tree-sitter's byte offsets and
    the names it reads agree with the text.
    """

    __slots__ = ("data", "lines", "text")

    def __init__(self, data: bytes) -> None:
        self.text, utf8 = _decode(data)
        self.lines = [ln[:-1] if ln.endswith("\r") else ln for ln in self.text.split("\n")]
        if len(self.lines) > 1 and self.lines[-1] == "":
            # A final newline ends the last line; it does not start another one.
            self.lines.pop()
        self.data = data if utf8 else self.text.encode("utf-8")

    @property
    def line_count(self) -> int:
        """Number of lines (0 for an empty file)."""
        return 0 if self.lines == [""] else len(self.lines)

    def span_text(self, start_line: int, end_line: int) -> str:
        """The exact text of lines ``start_line..end_line`` (1-based, inclusive)."""
        return "\n".join(self.lines[start_line - 1 : end_line])

    def is_blank(self, line: int) -> bool:
        """Whether 1-based ``line`` holds only white space."""
        return not self.lines[line - 1].strip()


def span_text(data: bytes, start_line: int, end_line: int) -> str | None:
    """The exact text a chunk of lines ``start_line..end_line`` of ``data`` would have, or
    None when the file no longer has those lines (for checking a citation's sha256)."""
    src = SourceText(data)
    if end_line > src.line_count:
        return None
    return src.span_text(start_line, end_line)
