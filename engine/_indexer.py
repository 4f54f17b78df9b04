"""Bring a Segment up to date with a folder: re-chunk and re-embed only what changed.

The order of writes makes every interruption recoverable:

1. the paths about to change are journaled in the metadata (``pending``);
2. the lexical index drops and re-adds those paths, and commits;
3. the metadata commits files, chunks and text in one transaction and clears the journal;
4. each dense index is brought up to the new metadata generation and saved atomically.

Killed after 1 or 2, the next run sees the journal (and the unchanged metadata) and redoes
those paths; killed in 4, the dense index is behind the metadata generation and is brought
up to date next time. Searches resolve hits through the metadata, so half-written lexical
documents are never returned.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from engine._config import Config
from engine._dense import EXACT_MAX, DenseIndex, int_id, nlist_for
from engine._embed import Embedder, EmbeddingCache, embed_with_cache
from engine._meta import FileRecord
from engine._segment import Segment
from indexers import (
    CHUNKER_VERSION,
    Chunk,
    ChunkedFile,
    Chunker,
    ChunkKind,
    Skipped,
    SourceFile,
    TokenCounter,
    walk,
)

__all__ = [
    "IndexReport",
    "NullProgress",
    "Progress",
    "chunker_fingerprint",
    "content_sha",
    "embedding_text",
    "ensure_dense",
    "is_trivial",
    "update_segment",
]

TRIVIAL_TOKENS = 8  # a lone `class X:` header or `import os` says nothing on its own


class Progress(Protocol):
    """Receives progress from long work; the CLI draws bars, libraries pass ``NullProgress``."""

    def stage(self, name: str, total: int | None, unit: str) -> None:
        """A new stage starts (``total`` None when unknown)."""
        ...

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the current stage are done."""
        ...

    def end(self) -> None:
        """The current stage is finished."""
        ...


class NullProgress:
    """Progress that goes nowhere."""

    def stage(self, name: str, total: int | None, unit: str) -> None:
        """Ignore."""

    def advance(self, n: int = 1) -> None:
        """Ignore."""

    def end(self) -> None:
        """Ignore."""


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What an index run did."""

    files: int
    added: int
    changed: int
    removed: int
    unchanged: int
    chunks: int
    chunks_added: int
    chunks_removed: int
    skipped: dict[str, int]
    embeddings_computed: int
    embeddings_reused: int
    dense_model: str | None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        """Wall time of the whole run."""
        return sum(self.seconds.values())


def embedding_text(chunk: Chunk) -> str:
    """The text a section is embedded as: its title, its context, then its text."""
    head = f"{chunk.title}\n{chunk.context}\n" if chunk.context else f"{chunk.title}\n"
    return head + chunk.text


def content_sha(data: bytes) -> str:
    """The sha256 of a file's raw bytes: what decides whether it is re-chunked."""
    return hashlib.sha256(data).hexdigest()


def chunker_fingerprint(config: Config, counter: TokenCounter) -> str:
    """What chunks depend on besides the bytes: the chunker, its settings, the encoding."""
    return f"chunker {CHUNKER_VERSION}; {config.chunk_options()}; encoding {counter.name}"


def ensure_dense(
    segment: Segment,
    config: Config,
    *,
    embedder: Embedder,
    cache: EmbeddingCache,
    progress: Progress | None = None,
) -> tuple[int, int]:
    """Bring ``embedder``'s dense index of ``segment`` up to its metadata, without reading
    any file (a base at a commit gets vectors of a newly configured model this way).
    Returns (embeddings computed, reused)."""
    return _update_dense(segment, embedder, cache, [], None, config, progress or NullProgress())


def update_segment(
    segment: Segment,
    root: Path,
    config: Config,
    *,
    counter: TokenCounter,
    embedder: Embedder | None,
    cache: EmbeddingCache | None,
    progress: Progress | None = None,
    listing: Iterable[SourceFile | Skipped] | None = None,
    lexical: bool = True,
) -> IndexReport:
    """Index ``root`` into ``segment`` incrementally (see the module docstring for order).

    ``listing`` replaces the walk of ``root`` (an overlay indexes the files that differ
    from its base); ``lexical=False`` keeps tantivy out (an overlay is scored in memory).
    A segment built in one run from empty records its BM25 statistics (``lexical_stats``)
    so a View can combine them with an overlay's.
    """
    progress = progress or NullProgress()
    timings: dict[str, float] = {}
    meta = segment.meta

    # Walk: list everything first so the chunking stage has a total (and an ETA).
    start = time.perf_counter()
    progress.stage("reading files", None, "files")
    sources: list[SourceFile] = []
    skipped: list[Skipped] = []
    for item in walk(root, config.walk_options()) if listing is None else listing:
        if isinstance(item, Skipped):
            skipped.append(item)
        else:
            sources.append(item)
        progress.advance()
    progress.end()
    known = meta.files()
    pending = set(json.loads(meta.get_info("pending") or "[]"))
    fresh = not known and not pending
    # Chunks depend on the chunker and its settings, not only on the bytes: an index made
    # with others re-does every file (vectors of unchanged text come from the cache).
    fingerprint = chunker_fingerprint(config, counter)
    if known and meta.get_info("chunker") != fingerprint:
        pending |= set(known)
    todo: list[tuple[SourceFile, str]] = []
    seen: set[str] = set()
    for src in sources:
        seen.add(src.path)
        sha = content_sha(src.data)
        old = known.get(src.path)
        if old is None or old.content_sha256 != sha or src.path in pending:
            todo.append((src, sha))
    removed = sorted((set(known) - seen) | (pending - seen))
    timings["walk"] = time.perf_counter() - start

    # Chunk what changed.
    start = time.perf_counter()
    chunker = Chunker(root, options=config.chunk_options(), counter=counter)
    chunked: list[tuple[ChunkedFile, SourceFile, str]] = []
    progress.stage("chunking", len(todo), "files")
    for src, sha in todo:
        chunked.append((chunker.chunk(src), src, sha))
        progress.advance()
    progress.end()
    timings["chunk"] = time.perf_counter() - start

    touched = sorted({src.path for _, src, _ in chunked} | set(removed))
    old_int_ids = [int_id(c.id) for p in touched if p in known for c in meta.chunks_of(p)]
    stats = meta.get_info("lexical_stats") or ""
    if touched and lexical:
        # 1. journal, 2. lexical, 3. metadata.
        start = time.perf_counter()
        meta.set_info("pending", json.dumps(touched))
        progress.stage("lexical index", len(chunked), "files")
        with segment.lexical.writer() as writer:
            if not fresh:
                for path in touched:
                    writer.delete_path(path)
            for cf, _, _ in chunked:
                writer.add_page(cf.page, cf.text)
                writer.add_sections(cf.chunks)
                progress.advance()
        progress.end()
        # Deleted documents keep counting in tantivy's statistics until a merge: only a
        # segment written in one batch from empty knows its exact ones.
        stats = json.dumps(writer.totals, sort_keys=True) if fresh else ""
        timings["lexical"] = time.perf_counter() - start
    start = time.perf_counter()
    with meta.transaction():
        meta.remove_paths(removed)
        for cf, src, sha in chunked:
            meta.put_file(_record(cf, src, sha), cf.chunks)
        meta.replace_skipped(skipped)
        if touched:
            meta.bump_generation()
        meta.set_info("pending", "[]")
        meta.set_info("indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        meta.set_info("encoding", counter.name)
        meta.set_info("chunker", fingerprint)
        meta.set_info("lexical_stats", stats)
    if chunked:
        meta.checkpoint()
    timings["metadata"] = time.perf_counter() - start

    computed = reused = 0
    if embedder is not None and cache is not None:
        start = time.perf_counter()
        computed, reused = _update_dense(
            segment, embedder, cache, [c for cf, _, _ in chunked for c in cf.chunks],
            old_int_ids if touched else None, config, progress,
        )  # fmt: skip
        timings["dense"] = time.perf_counter() - start

    files, chunks, _ = meta.counts()
    added = sum(1 for _, src, _ in chunked if src.path not in known)
    return IndexReport(
        files=files,
        added=added,
        changed=len(chunked) - added,
        removed=len(removed),
        unchanged=len(sources) - len(chunked),
        chunks=chunks,
        chunks_added=sum(len(cf.chunks) for cf, _, _ in chunked),
        chunks_removed=len(old_int_ids),
        skipped=dict(Counter(s.reason.value for s in skipped)),
        embeddings_computed=computed,
        embeddings_reused=reused,
        dense_model=embedder.model_id if embedder is not None else None,
        seconds=timings,
    )


def _record(cf: ChunkedFile, src: SourceFile, sha: str) -> FileRecord:
    page = cf.page
    return FileRecord(
        path=page.path,
        content_sha256=sha,
        size=src.size,
        mtime_ns=src.mtime_ns,
        page_id=page.id,
        language=page.language,
        doc_type=page.doc_type.value,
        license=page.license,
        line_count=page.line_count,
        chunks=len(cf.chunks),
        tokens=sum(c.tokens for c in cf.chunks),
    )


def is_trivial(chunk: Chunk) -> bool:
    """A tiny section that is not a function: a class header line, an import, a heading
    with one word under it. It stays searchable but gets no vector and is not packed (a
    method's context already shows its class header). Small functions are never trivial."""
    return chunk.tokens < TRIVIAL_TOKENS and chunk.kind not in (
        ChunkKind.FUNCTION,
        ChunkKind.METHOD,
    )


def _embeddable(chunks: Sequence[Chunk]) -> list[Chunk]:
    return [c for c in chunks if not is_trivial(c)]


def _update_dense(
    segment: Segment,
    embedder: Embedder,
    cache: EmbeddingCache,
    new_chunks: list[Chunk],
    old_int_ids: list[int] | None,
    config: Config,
    progress: Progress,
) -> tuple[int, int]:
    """Bring the dense index of ``embedder`` up to the metadata's generation.

    ``old_int_ids`` are the vectors this run's changes replace (None: this run changed
    nothing). The index is patched only when it was current before this run's changes;
    otherwise (new model, an earlier run killed mid-way) it is rebuilt from the cache.
    """
    model_id = embedder.model_id
    meta = segment.meta
    generation = meta.generation
    existing = segment.dense(model_id)
    if existing is not None and segment.dense_generation(model_id) == generation:
        return 0, 0
    rebuild = (
        existing is None
        or old_int_ids is None
        or segment.dense_generation(model_id) != generation - 1
    )
    targets = _embeddable(list(meta.iter_chunks()) if rebuild else new_chunks)
    texts = [embedding_text(c) for c in targets]
    stage = _EmbedStage(progress, f"embedding ({model_id})")
    result = embed_with_cache(
        embedder, cache, texts, batch_size=config.embed_batch_size, on_progress=stage.update
    )
    stage.finish()
    ids = np.array([int_id(c.id) for c in targets], dtype=np.int64)
    if rebuild or existing is None:
        index = DenseIndex.build(ids, result.vectors, model_id=model_id, seed=config.seed)
    else:
        index = existing
        if old_int_ids:  # never None here: `rebuild` covers it
            index.remove(np.array(old_int_ids, dtype=np.int64))
        if len(ids):
            index.add(ids, result.vectors)
        if _needs_retraining(index):
            all_targets = _embeddable(list(meta.iter_chunks()))
            again = embed_with_cache(embedder, cache, [embedding_text(c) for c in all_targets])
            all_ids = np.array([int_id(c.id) for c in all_targets], dtype=np.int64)
            index = DenseIndex.build(all_ids, again.vectors, model_id=model_id, seed=config.seed)
    index.save(segment.dense_dir(model_id))
    segment.forget_dense(model_id)
    meta.set_info(f"dense:{model_id}:generation", str(generation))
    meta.set_info("dense_model", model_id)
    return result.computed, result.reused


def _needs_retraining(index: DenseIndex) -> bool:
    """Whether patches moved the index far from what it was built for.

    An exact index that outgrew ``EXACT_MAX`` should become IVF; an IVF index whose list
    count is off by 2x for its current size (its corpus changed ~4-fold) is re-trained.
    """
    if index.kind == "exact":
        return index.ntotal >= EXACT_MAX
    ideal = nlist_for(index.ntotal)
    return not ideal / 2 <= (index.nlist or ideal) <= ideal * 2


class _EmbedStage:
    """Opens a progress stage on the first batch (nothing to embed: no bar at all)."""

    def __init__(self, progress: Progress, name: str) -> None:
        self.progress = progress
        self.name = name
        self.done = -1

    def update(self, done: int, total: int) -> None:
        if self.done < 0:
            self.progress.stage(self.name, total, "chunks")
            self.done = 0
        self.progress.advance(done - self.done)
        self.done = done

    def finish(self) -> None:
        if self.done >= 0:
            self.progress.end()
