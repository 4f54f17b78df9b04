"""Workspace → pages and chunks: walk, pick a chunker per language, finish the chunks."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from indexers._chunk import Chunk, DocType, Page, page_id
from indexers._code import code_drafts, is_header_file, window_drafts
from indexers._docs import markdown_drafts, rst_drafts, text_drafts
from indexers._doctype import doc_type_for
from indexers._draft import Draft, finish
from indexers._languages import Family, Language, language_for_file
from indexers._license import NOASSERTION, LicenseResolver
from indexers._secrets import Redaction, redact
from indexers._text import SourceText, decode, sha256_text
from indexers._tokens import TiktokenCounter, TokenCounter
from indexers._walk import Skipped, SourceFile, WalkOptions, walk

__all__ = ["CHUNKER_VERSION", "ChunkOptions", "ChunkedFile", "Chunker", "chunk_file", "scan"]

# Bumped whenever the chunks made from the same bytes change (spans, kinds, doc types), or
# which files get chunks at all: an index built by another version re-chunks every file on
# its next update (a base segment is never patched, so this is what retires an old one).
# 4: PHP, Ruby, C#, Kotlin, Swift sections; JS/TS `#private` names; licences from manifests
# 5: source in languages without a grammar (Lua, Scala, Cython, jq, ...) is code, not data
# 6: Rust tests beside the code (`#[test]`, `#[cfg(test)] mod tests`, `tests.rs`) are tests
# 7: generated headers ("auto-generated ... do not edit") and documentation tools' API pages
#    are skipped as generated
# 8: JS/TS `export const X = ...` / `export let ...` define their names (they defined none)
# 9: Markdown: a GitHub table before a "---" is no setext heading; an empty list item ends
#    at the blank line after it (as CommonMark's one-blank-line rule says)
# 10: Markdown heading titles read through images, links and HTML tags (`# <img alt="chi"
#    src=... />` is "chi", not forty tokens of URL in every section's title)
# 11: redaction finds a token passed to a call (``Github("ghp_...")``), SSH2 and PuTTY private
#    keys and a URL's short password: an index made before may hold them in clear
# 12: a C++ `.h` is C++; no line lost to a parse error or held by two sections; more names
#    (C declarators, operators, macros before a name); Cargo workspace licences
# 13: in docs, shell scripts, env files and Dockerfiles an unquoted `PASSWORD=value` is
#    redacted (an index made before may hold one in clear); a line left half-typed no
#    longer folds the definitions after it into one unnamed section
# 14: an Authorization header's credentials (``Basic <base64>``, ``Token <hex>``) are
#    redacted, and a symlink into .git or cortex's state is skipped: an index made before
#    may hold a git config's CI token
# 15: UTF-16/32 files (with a BOM) are read as text, and a file that is not UTF-8 through its
#    PEP 263 / Emacs / Vim coding declaration (a Latin-1 `def café()` was named `caf`);
#    tree-sitter reads the text's UTF-8, so names and spans agree with the text
CHUNKER_VERSION = 15
DEFAULT_MAX_SECTION_TOKENS = 512  # one function or heading section; larger ones are split
DEFAULT_WINDOW_OVERLAP_LINES = 3  # enough to keep a statement whole across a window edge
_LICENSE_HEAD_BYTES = 4096  # SPDX tags live in the first comment block
_FALLBACK_DETAIL = 200  # characters of the fault kept in ``ChunkedFile.fallback``
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChunkOptions:
    """How files are cut into chunks."""

    max_section_tokens: int = DEFAULT_MAX_SECTION_TOKENS
    window_overlap_lines: int = DEFAULT_WINDOW_OVERLAP_LINES

    def __post_init__(self) -> None:
        if self.max_section_tokens < 16:
            raise ValueError(f"max_section_tokens must be >= 16, got {self.max_section_tokens}")
        if self.window_overlap_lines < 0:
            raise ValueError("window_overlap_lines must be >= 0")


@dataclass(frozen=True, slots=True)
class ChunkedFile:
    """One indexed file: its page, its chunks in line order, its decoded text (secrets
    redacted, as in the chunks), the secrets taken out, and, when its chunker failed on it
    and it was cut into line windows instead, why (``fallback``; empty otherwise)."""

    page: Page
    chunks: tuple[Chunk, ...]
    text: str
    redactions: tuple[Redaction, ...] = ()
    fallback: str = ""


_Chunker = Callable[..., list[Draft]]
_DOC_CHUNKERS: dict[str, _Chunker] = {"markdown": markdown_drafts, "rst": rst_drafts}


def _drafts(
    src: SourceText,
    path: str,
    language: Language,
    doc_type: DocType | None,
    options: ChunkOptions,
    counter: TokenCounter,
) -> list[Draft]:
    max_tokens = options.max_section_tokens
    overlap = options.window_overlap_lines
    if language.family is Family.CODE:
        if doc_type is None and is_header_file(path, language):
            doc_type = DocType.DEFINITION
        return code_drafts(
            src,
            language,
            max_tokens=max_tokens,
            overlap_lines=overlap,
            counter=counter,
            doc_type=doc_type,
        )
    chunker = _DOC_CHUNKERS.get(language.name) if language.family is Family.DOC else None
    if chunker is None:
        chunker = text_drafts if language.family is Family.TEXT else window_drafts
    return chunker(src, max_tokens=max_tokens, overlap_lines=overlap, counter=counter)


def chunk_file(
    path: str,
    data: bytes,
    *,
    options: ChunkOptions | None = None,
    counter: TokenCounter | None = None,
    license: str = NOASSERTION,
    size: int | None = None,
) -> ChunkedFile:
    """Chunk one file's bytes; ``path`` is its workspace-relative, '/'-separated path.

    >>> cf = chunk_file("a.py", b"def f():\\n    return 1\\n")
    >>> [(c.symbol, str(c.span)) for c in cf.chunks]
    [('f', '1-2')]
    """
    options = options or ChunkOptions()
    counter = counter or TiktokenCounter()
    src = SourceText(data)
    # Credentials never reach a chunk, an index, an embedding or a prompt: they are
    # replaced where they stand (lines and spans do not move).
    clean = redact(src.text, path)
    if clean.redactions:
        src = SourceText(clean.text.encode("utf-8"))
    language = language_for_file(path, src.data)  # a `.h` holding C++ is C++
    doc_type = doc_type_for(path, language)
    page = Page(
        id=page_id(path, sha256_text(src.text)),
        path=path,
        sha256=sha256_text(src.text),
        language=language.name,
        doc_type=doc_type or DocType.IMPLEMENTATION,
        license=license,
        size_bytes=len(data) if size is None else size,
        line_count=src.line_count,
    )
    fallback = ""
    try:
        drafts = _drafts(src, path, language, doc_type, options, counter)
    except Exception as exc:  # one file's parser fault must not stop the run
        # Definitions nested past Python's stack, or a grammar that trips on one file: the
        # file is still indexed, every line in a window, and the run says which and why.
        fallback = f"{type(exc).__name__}: {exc}"[:_FALLBACK_DETAIL]
        _log.warning("%s: cut into line windows, its chunker failed: %s", path, fallback)
        drafts = window_drafts(
            src,
            max_tokens=options.max_section_tokens,
            overlap_lines=options.window_overlap_lines,
            counter=counter,
        )
    chunks = finish(
        drafts,
        src,
        path=path,
        page=page.id,
        language=language.name,
        doc_type=doc_type or DocType.IMPLEMENTATION,
        license=license,
        counter=counter,
        code=language.family is not Family.DOC and language.family is not Family.TEXT,
    )
    return ChunkedFile(page, tuple(chunks), src.text, clean.redactions, fallback)


class Chunker:
    """Chunks the files of one workspace, with licence lookups cached per folder.

    ``scan`` is walk + ``Chunker.chunk``; an incremental indexer walks, compares, and calls
    ``chunk`` only for the files that changed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        options: ChunkOptions | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.options = options or ChunkOptions()
        self.counter = counter or TiktokenCounter()
        self._licenses = LicenseResolver(Path(root))

    def chunk(self, item: SourceFile) -> ChunkedFile:
        """Chunk one walked file."""
        return chunk_file(
            item.path,
            item.data,
            options=self.options,
            counter=self.counter,
            license=self.license_of(item),
            size=item.size,
        )

    def license_of(self, item: SourceFile) -> str:
        """The licence ``chunk`` gives the file: its header's tag, else its folder's."""
        head = decode(item.data[:_LICENSE_HEAD_BYTES])
        return self._licenses.for_file(item.path, head)


def scan(
    root: str | os.PathLike[str],
    *,
    walk_options: WalkOptions | None = None,
    options: ChunkOptions | None = None,
    counter: TokenCounter | None = None,
) -> Iterator[ChunkedFile | Skipped]:
    """Walk ``root`` and chunk every file that is not skipped, in path order.

    Skipped files come through as ``Skipped`` records so callers can count and show them.
    """
    chunker = Chunker(root, options=options, counter=counter)
    for item in walk(root, walk_options or WalkOptions()):
        yield item if isinstance(item, Skipped) else chunker.chunk(item)
