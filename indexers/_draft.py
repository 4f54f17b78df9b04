"""What a chunker decides (a ``Draft``: span, kind, symbol) and how it becomes a ``Chunk``.

Chunkers only choose line ranges and names; text, hashes, ids, token counts and the
referenced identifiers are derived here, once, the same way for every language.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass

from indexers._chunk import Chunk, ChunkKind, DocType, Span, chunk_id
from indexers._text import SourceText, sha256_text
from indexers._tokens import TokenCounter

__all__ = ["Draft", "finish", "identifiers"]


@dataclass(frozen=True, slots=True)
class Draft:
    """A chunk before its text is cut out: a span and what the chunker knows about it."""

    start_line: int
    end_line: int
    kind: ChunkKind
    symbol: str = ""
    context: str = ""
    defines: tuple[str, ...] = ()
    depth: int = 0
    part: int = 1
    parts: int = 1
    doc_type: DocType | None = None  # None: the file's doc type
    tokens: int | None = None  # already counted by the chunker (None: count in ``finish``)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MIN_IDENT = 2  # one-letter names (i, x, T) match everything and mean nothing
_MAX_REFERENCES = 256  # a huge generated table must not make every query "overlap"
# Keywords of the languages we parse; the union is harmless across languages.
_STOP = (
    frozenset(keyword.kwlist)
    | frozenset(keyword.softkwlist)
    | frozenset(
        (
            "self",
            "cls",
            "this",
            "super",
            "new",
            "delete",
            "typeof",
            "instanceof",
            "var",
            "let",
            "const",
            "function",
            "return",
            "void",
            "null",
            "undefined",
            "true",
            "false",
            "nil",
            "func",
            "package",
            "import",
            "export",
            "default",
            "extends",
            "implements",
            "interface",
            "struct",
            "enum",
            "union",
            "impl",
            "trait",
            "pub",
            "mut",
            "ref",
            "fn",
            "mod",
            "use",
            "crate",
            "where",
            "match",
            "loop",
            "move",
            "dyn",
            "unsafe",
            "static",
            "extern",
            "inline",
            "volatile",
            "register",
            "sizeof",
            "typedef",
            "template",
            "typename",
            "namespace",
            "using",
            "public",
            "private",
            "protected",
            "final",
            "abstract",
            "synchronized",
            "throws",
            "throw",
            "try",
            "catch",
            "finally",
            "switch",
            "case",
            "break",
            "continue",
            "goto",
            "do",
            "while",
            "for",
            "if",
            "else",
            "elif",
            "int",
            "char",
            "long",
            "short",
            "float",
            "double",
            "unsigned",
            "signed",
            "bool",
            "boolean",
            "byte",
            "string",
            "str",
            "usize",
            "isize",
            "u8",
            "u16",
            "u32",
            "u64",
            "i8",
            "i16",
            "i32",
            "i64",
            "f32",
            "f64",
            "auto",
            "constexpr",
            "override",
            "virtual",
            "friend",
            "operator",
            "explicit",
            "chan",
            "go",
            "defer",
            "select",
            "range",
            "map",
            "type",
            "async",
            "await",
            "yield",
            "from",
            "as",
            "in",
            "is",
            "not",
            "and",
            "or",
            "del",
            "pass",
            "lambda",
            "global",
            "nonlocal",
            "with",
            "assert",
            "raise",
            "except",
            "def",
            "class",
            "None",
            "True",
            "False",
        )
    )
)


def identifiers(text: str) -> list[str]:
    """Distinct identifiers in ``text`` in first-seen order, keywords and 1-letter names out."""
    seen: dict[str, None] = {}
    for name in _IDENT.findall(text):
        if len(name) >= _MIN_IDENT and name not in _STOP:
            seen.setdefault(name, None)
    return list(seen)


def finish(
    drafts: Sequence[Draft],
    src: SourceText,
    *,
    path: str,
    page: str,
    language: str,
    doc_type: DocType,
    license: str,
    counter: TokenCounter,
    code: bool,
) -> list[Chunk]:
    """Turn drafts into chunks: cut the text, hash it, count its tokens, find references.

    ``code`` selects how references are read: every identifier for code, only code-looking
    names (``snake_case``, ``camelCase``, dotted, or in backticks) for prose.
    """
    texts = [src.span_text(d.start_line, d.end_line) for d in drafts]
    todo = [i for i, d in enumerate(drafts) if d.tokens is None]
    counts = [d.tokens or 0 for d in drafts]
    for i, n in zip(todo, counter.count_many([texts[i] for i in todo]), strict=True):
        counts[i] = n
    chunks: list[Chunk] = []
    for draft, text, tokens in zip(drafts, texts, counts, strict=True):
        span = Span(draft.start_line, draft.end_line)
        sha = sha256_text(text)
        names = identifiers(text) if code else _prose_identifiers(text)
        defined = set(draft.defines)
        refs = tuple(sorted([n for n in names if n not in defined][:_MAX_REFERENCES]))
        chunks.append(
            Chunk(
                id=chunk_id(path, span, sha),
                page_id=page,
                path=path,
                span=span,
                text=text,
                sha256=sha,
                language=language,
                kind=draft.kind,
                doc_type=draft.doc_type or doc_type,
                symbol=draft.symbol,
                context=draft.context,
                defines=draft.defines,
                references=refs,
                tokens=tokens,
                license=license,
                depth=draft.depth,
                part=draft.part,
                parts=draft.parts,
            )
        )
    return chunks


_BACKTICKED = re.compile(r"`+([^`\n]+)`+")
_CODE_LOOKING = re.compile(r"\b(?:[A-Za-z_]\w*_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*)\b")


def _prose_identifiers(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for inner in _BACKTICKED.findall(text):
        for name in identifiers(inner):
            seen.setdefault(name, None)
    for name in _CODE_LOOKING.findall(text):
        seen.setdefault(name, None)
    return list(seen)
