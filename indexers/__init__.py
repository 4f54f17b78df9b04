"""Bytes to chunks: which files of a workspace to read, and how to cut them.

``walk`` picks the files (git-tracked plus untracked-not-ignored, minus binaries, vendored
and generated trees, secrets and huge files, each skip with a reason); ``chunk_file`` and
``scan`` turn them into ``Page`` and ``Chunk`` records: tree-sitter sections for code,
heading sections for documents, paragraphs for text, line windows for the rest.

Credentials in file content are redacted before chunking (``redact``, detect-secrets).

This package imports nothing else from cortex; tree-sitter, tiktoken, git and
detect-secrets are loaded on first use, not on import.
"""

from indexers._chunk import Chunk, ChunkKind, DocType, Page, Span, chunk_id, page_id
from indexers._doctype import doc_type_for
from indexers._draft import identifiers
from indexers._gitenv import git_overrides
from indexers._languages import (
    Family,
    Language,
    language_for_file,
    language_for_path,
    languages,
)
from indexers._license import NOASSERTION, is_license_source, license_from_text
from indexers._scan import (
    CHUNKER_VERSION,
    DEFAULT_MAX_SECTION_TOKENS,
    DEFAULT_WINDOW_OVERLAP_LINES,
    ChunkedFile,
    Chunker,
    ChunkOptions,
    chunk_file,
    scan,
)
from indexers._secrets import (
    Redacted,
    Redaction,
    redact,
    redacted_path,
    secret_kinds,
    secret_paths,
)
from indexers._text import decode, sha256_text, span_text
from indexers._tokens import (
    DEFAULT_ENCODING,
    MemoCounter,
    TiktokenCounter,
    TokenCounter,
    WordCounter,
)
from indexers._walk import Skipped, SkipReason, SourceFile, WalkOptions, walk

__all__ = [
    "CHUNKER_VERSION",
    "DEFAULT_ENCODING",
    "DEFAULT_MAX_SECTION_TOKENS",
    "DEFAULT_WINDOW_OVERLAP_LINES",
    "NOASSERTION",
    "Chunk",
    "ChunkKind",
    "ChunkOptions",
    "ChunkedFile",
    "Chunker",
    "DocType",
    "Family",
    "Language",
    "MemoCounter",
    "Page",
    "Redacted",
    "Redaction",
    "SkipReason",
    "Skipped",
    "SourceFile",
    "Span",
    "TiktokenCounter",
    "TokenCounter",
    "WalkOptions",
    "WordCounter",
    "chunk_file",
    "chunk_id",
    "decode",
    "doc_type_for",
    "git_overrides",
    "identifiers",
    "is_license_source",
    "language_for_file",
    "language_for_path",
    "languages",
    "license_from_text",
    "page_id",
    "redact",
    "redacted_path",
    "scan",
    "secret_kinds",
    "secret_paths",
    "sha256_text",
    "span_text",
    "walk",
]
