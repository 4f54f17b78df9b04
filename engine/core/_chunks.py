"""Rules about chunks that every stage shares: which are too small to stand alone, what text
a section is embedded as, what a file's content hash is, what its text is as chunks hold it,
and what chunks depend on besides the bytes."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from engine.core._config import Config
from indexers import CHUNKER_VERSION, Chunk, ChunkKind, TokenCounter

__all__ = [
    "SOURCE_URI",
    "TRIVIAL_TOKENS",
    "chunker_fingerprint",
    "content_sha",
    "embedding_text",
    "is_trivial",
    "page_text",
    "uri_path",
]

TRIVIAL_TOKENS = 8  # a lone `class X:` header or `import os` says nothing on its own


def is_trivial(chunk: Chunk) -> bool:
    """A tiny section that is not a function: a class header line, an import, a heading
    with one word under it. It stays searchable but gets no vector and is not packed (a
    method's context already shows its class header). Small functions are never trivial."""
    return chunk.tokens < TRIVIAL_TOKENS and chunk.kind not in (
        ChunkKind.FUNCTION,
        ChunkKind.METHOD,
    )


def embedding_text(chunk: Chunk) -> str:
    """The text a section is embedded as: its title, its context, then its text."""
    head = f"{chunk.title}\n{chunk.context}\n" if chunk.context else f"{chunk.title}\n"
    return head + chunk.text


def content_sha(data: bytes) -> str:
    """The sha256 of a file's raw bytes: what decides whether it is re-chunked."""
    return hashlib.sha256(data).hexdigest()


def chunker_fingerprint(config: Config, counter: TokenCounter) -> str:
    """What an index's sections depend on besides the bytes: the chunker, its settings, the
    encoding, and the rules choosing which files are indexed (a base indexed under other
    rules may hold files now excluded: it is rebuilt, never patched)."""
    files = config.walk_options().fingerprint()
    chunker = f"chunker {CHUNKER_VERSION}; {config.chunk_options()}"
    return f"{chunker}; encoding {counter.name}; files {files}"


def page_text(chunks: Iterable[Chunk]) -> str:
    """A file's text as its chunks hold it: every covered line once, in order, and the lines
    no chunk holds (blank ones: the chunkers never drop a line with a word) as empty lines.

    Its BM25 terms are those of the whole file, as the lexical index saw it."""
    lines: dict[int, str] = {}
    for chunk in chunks:
        for offset, line in enumerate(chunk.text.split("\n")):
            lines.setdefault(chunk.span.start_line + offset, line)
    return "\n".join(lines.get(n, "") for n in range(1, max(lines, default=0) + 1))


# A source uri: ``path#La-Lb``, ``path#La`` or a bare ``path``. A path may hold a ``#`` of
# its own (not first: "#L3" names no path), so only a trailing line fragment is one; lines
# are ASCII digits ("٣" is no 3).
SOURCE_URI = re.compile(
    r"^(?P<path>[^#].*?)(?:#L(?P<start>[0-9]{1,9})(?:-L?(?P<end>[0-9]{1,9}))?)?$"
)


def uri_path(uri: str) -> str:
    """The path of a source uri (``SOURCE_URI``): cut at its line fragment only."""
    match = SOURCE_URI.match(uri)
    return match["path"] if match else uri
