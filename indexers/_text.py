"""Bytes to lines, the one way every indexer sees a file.

Line numbers must agree with editors, git and tracebacks, so a line ends at ``\\n`` only
(``str.splitlines`` would also split at form feeds, ``\\x1c`` and ``\\u2028``, shifting every
line after them). A trailing ``\\r`` is dropped from each line so CRLF files read like LF
files; the text of a chunk is its lines joined with ``\\n``.
"""

from __future__ import annotations

import hashlib

__all__ = ["SourceText", "decode", "sha256_text", "span_text"]


def decode(data: bytes) -> str:
    """Decode bytes as UTF-8 (BOM dropped); invalid sequences become U+FFFD, never an error."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def sha256_text(text: str) -> str:
    """The hex sha256 of ``text`` encoded as UTF-8: the content address used everywhere."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SourceText:
    """A decoded file as 1-based lines (tree-sitter rows count ``\\n`` the same way).

    ``lines[i]`` is line ``i + 1`` without its line ending.
    """

    __slots__ = ("data", "lines", "text")

    def __init__(self, data: bytes) -> None:
        self.text = decode(data)
        self.lines = [ln[:-1] if ln.endswith("\r") else ln for ln in self.text.split("\n")]
        if len(self.lines) > 1 and self.lines[-1] == "":
            # A final newline ends the last line; it does not start another one.
            self.lines.pop()
        self.data = data

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
