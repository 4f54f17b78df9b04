"""The unit everything else indexes, ranks, packs and cites: ``Chunk``, and its ``Page``.

A page is a whole file or document; a chunk is one section of it (a symbol, a heading
section, a group of module-level lines, or a line window). Ids are content addresses, so
they are the same on every machine and every run for the same bytes at the same path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Chunk", "ChunkKind", "DocType", "Page", "Span", "chunk_id", "page_id"]

_ID_HEX = 32  # 128 bits: collision-free for any realistic corpus, short enough to print


class ChunkKind(StrEnum):
    """What a chunk is, structurally."""

    MODULE = "module"  # module-level code between definitions
    FUNCTION = "function"
    CLASS = "class"  # a class/struct/interface/trait/enum header and non-method body
    METHOD = "method"
    TYPE = "type"  # a type alias, typedef or other type-only declaration
    SECTION = "section"  # a document section under a heading
    PARAGRAPH = "paragraph"  # paragraphs of plain text
    WINDOW = "window"  # a line window: no grammar, or the file failed to parse


class DocType(StrEnum):
    """What a chunk is for a reader; the rerank prior keys on it."""

    DEFINITION = "definition"  # declarations: types, interfaces, headers, stubs
    IMPLEMENTATION = "implementation"
    TEST = "test"
    EXAMPLE = "example"
    REFERENCE = "reference"  # documentation that describes
    TUTORIAL = "tutorial"  # documentation that teaches


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """A 1-based, inclusive line range."""

    start_line: int
    end_line: int

    def __post_init__(self) -> None:
        if not 1 <= self.start_line <= self.end_line:
            raise ValueError(f"bad span {self.start_line}-{self.end_line}")

    def __str__(self) -> str:
        return f"{self.start_line}-{self.end_line}"

    @property
    def lines(self) -> int:
        """How many lines the span covers."""
        return self.end_line - self.start_line + 1


def chunk_id(path: str, span: Span, sha256: str) -> str:
    """Stable chunk id from (path, span, sha256 of the exact text)."""
    key = f"chunk\n{path}\n{span.start_line}\n{span.end_line}\n{sha256}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:_ID_HEX]


def page_id(path: str, sha256: str) -> str:
    """Stable page id from (path, sha256 of the whole decoded file)."""
    key = f"page\n{path}\n{sha256}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:_ID_HEX]


@dataclass(frozen=True, slots=True)
class Page:
    """A whole file or document, as indexed."""

    id: str
    path: str  # workspace-relative, '/'-separated
    sha256: str  # of the whole decoded text
    language: str
    doc_type: DocType
    license: str  # SPDX id or NOASSERTION
    size_bytes: int
    line_count: int

    @property
    def source_uri(self) -> str:
        """The page's citation address: its workspace-relative path."""
        return self.path


@dataclass(frozen=True, slots=True)
class Chunk:
    """One section of a page, with everything needed to rank, pack and cite it.

    ``text`` is exactly the page's lines at ``span`` joined with ``\\n``; ``sha256`` is of that
    text. ``context`` frames the text without being part of it (a method's class header),
    so an indexer or a prompt can show it while citations stay exact.
    """

    id: str
    page_id: str
    path: str
    span: Span
    text: str
    sha256: str
    language: str
    kind: ChunkKind
    doc_type: DocType
    symbol: str  # "Request.register_hook", "Install > From source", or "" for windows
    context: str
    defines: tuple[str, ...]
    references: tuple[str, ...]
    tokens: int  # of ``text``, with the configured tiktoken encoding
    license: str
    depth: int = 0  # nesting: 0 at top level, 1 for a method, heading level - 1 for docs
    part: int = 1  # a section split for size is parts 1..parts of one symbol
    parts: int = 1

    @property
    def source_uri(self) -> str:
        """Where the text lives: ``path#Lstart-Lend`` (GitHub's form, readable in prompts)."""
        return f"{self.path}#L{self.span.start_line}-L{self.span.end_line}"

    @property
    def title(self) -> str:
        """A human label: ``path:Symbol`` (with the part when split) or ``path:start-end``."""
        if not self.symbol:
            return f"{self.path}:{self.span}"
        suffix = f" (part {self.part}/{self.parts})" if self.parts > 1 else ""
        return f"{self.path}:{self.symbol}{suffix}"
