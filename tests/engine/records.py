"""Records for the pure-function tests: chunks, candidates and a View reduced to a dict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from indexers import Chunk, ChunkKind, DocType, Span, chunk_id, page_id, sha256_text


def chunk(
    path: str,
    text: str,
    *,
    start: int = 1,
    symbol: str = "",
    kind: ChunkKind = ChunkKind.FUNCTION,
    doc_type: DocType = DocType.IMPLEMENTATION,
    defines: tuple[str, ...] = (),
    references: tuple[str, ...] = (),
    tokens: int | None = None,
    depth: int = 0,
) -> Chunk:
    """A section record as the indexers would make it."""
    span = Span(start, start + text.count("\n"))
    sha = sha256_text(text)
    return Chunk(
        id=chunk_id(path, span, sha),
        page_id=page_id(path, "0" * 64),
        path=path,
        span=span,
        text=text,
        sha256=sha,
        language="python",
        kind=kind,
        doc_type=doc_type,
        symbol=symbol,
        context="",
        defines=defines,
        references=references,
        tokens=len(text.split()) if tokens is None else tokens,
        license="MIT",
        depth=depth,
    )


@dataclass(frozen=True, slots=True)
class FileRow:
    """The fields of a file record that resolve reads."""

    line_count: int
    license: str
    content_sha256: str


class DictView:
    """A View over a fixed set of chunks: what fusion, recall's readers and resolve call."""

    def __init__(self, chunks: Sequence[Chunk], files: dict[str, bytes] | None = None) -> None:
        self.by_id = {c.id: c for c in chunks}
        self.reads: list[str] = []
        self._files = files or {}

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        self.reads.extend(ids)
        return {i: self.by_id[i] for i in ids if i in self.by_id}

    def chunks_of(self, path: str) -> list[Chunk]:
        return sorted((c for c in self.by_id.values() if c.path == path), key=lambda c: c.span)

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        return [c for c in self.chunks_of(path)
                if c.span.end_line >= first_line and c.span.start_line <= last_line]  # fmt: skip

    def files(self) -> dict[str, FileRow]:
        import hashlib

        return {
            path: FileRow(data.decode().count("\n") + 1, "MIT", hashlib.sha256(data).hexdigest())
            for path, data in self._files.items()
        }
