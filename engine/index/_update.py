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

import json
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.core import (
    Config,
    IndexReport,
    NullProgress,
    Progress,
    chunker_fingerprint,
    content_sha,
    embedding_text,
    is_trivial,
)
from engine.embed import Embedder, EmbeddingCache, embed_with_cache
from engine.segment import (
    EXACT_MAX,
    DenseIndex,
    FileRecord,
    MetaStore,
    Segment,
    int_id,
    nlist_for,
)
from indexers import (
    Chunk,
    ChunkedFile,
    Chunker,
    Skipped,
    SourceFile,
    TokenCounter,
    is_license_source,
    walk,
)

__all__ = ["covered", "ensure_dense", "licence_folders", "relicensed", "update_segment"]

_READ_STEP = 1024  # chunks read back between two advances of the progress bar


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


@dataclass(slots=True)
class _Plan:
    """What a run will do: the files it read, what it skipped, which files must be
    (re-)chunked and which paths leave the segment."""

    sources: list[SourceFile]
    skipped: list[Skipped]
    known: dict[str, FileRecord]
    todo: list[tuple[SourceFile, str]]  # (file, sha256 of its bytes)
    removed: list[str]
    fresh: bool  # the segment was empty and nothing was pending: no deletes needed


@dataclass(slots=True)
class _Chunked:
    """The files chunked this run, and every path whose documents change."""

    files: list[tuple[ChunkedFile, SourceFile, str]] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    old_int_ids: list[int] = field(default_factory=list)  # vectors the changes replace


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
    """Index ``root`` into ``segment`` incrementally (see the module docstring for order):
    plan (walk and compare with the metadata), chunk, write lexical, write metadata, write
    dense, each timed in the report.

    ``listing`` replaces the walk of ``root`` (an overlay indexes the files that differ
    from its base); ``lexical=False`` keeps tantivy out (an overlay is scored in memory).
    A segment built in one run from empty records its BM25 statistics (``lexical_stats``)
    so a View can combine them with an overlay's.
    """
    progress = progress or NullProgress()
    timings: dict[str, float] = {}
    fingerprint = chunker_fingerprint(config, counter)
    start = time.perf_counter()
    plan = _plan(segment, root, config, fingerprint, listing, progress)
    timings["walk"] = time.perf_counter() - start

    start = time.perf_counter()
    chunked = _chunk(segment, plan, root, config, counter, progress)
    timings["chunk"] = time.perf_counter() - start

    stats = segment.meta.get_info("lexical_stats") or ""
    # A segment built from empty records exact BM25 statistics, though no file is indexable
    # (a first commit holding only skipped files): every query over it needs them.
    if lexical and (chunked.touched or (plan.fresh and not stats)):
        start = time.perf_counter()
        stats = _write_lexical(segment, plan, chunked, progress)
        timings["lexical"] = time.perf_counter() - start

    start = time.perf_counter()
    _write_metadata(segment, plan, chunked, stats, fingerprint, counter)
    timings["metadata"] = time.perf_counter() - start

    computed = reused = 0
    if embedder is not None and cache is not None:
        start = time.perf_counter()
        new_chunks = [c for cf, _, _ in chunked.files for c in cf.chunks]
        replaced = chunked.old_int_ids if chunked.touched else None
        computed, reused = _update_dense(
            segment, embedder, cache, new_chunks, replaced, config, progress
        )
        timings["dense"] = time.perf_counter() - start

    files, chunks, _ = segment.meta.counts()
    added = sum(1 for _, src, _ in chunked.files if src.path not in plan.known)
    return IndexReport(
        files=files,
        added=added,
        changed=len(chunked.files) - added,
        removed=len(plan.removed),
        unchanged=len(plan.sources) - len(chunked.files),
        chunks=chunks,
        chunks_added=sum(len(cf.chunks) for cf, _, _ in chunked.files),
        chunks_removed=len(chunked.old_int_ids),
        skipped=dict(Counter(s.reason.value for s in plan.skipped)),
        embeddings_computed=computed,
        embeddings_reused=reused,
        dense_model=embedder.model_id if embedder is not None else None,
        seconds=timings,
        redactions=dict(Counter(r.kind for cf, _, _ in chunked.files for r in cf.redactions)),
        fallbacks={cf.page.path: cf.fallback for cf, _, _ in chunked.files if cf.fallback},
    )


def _plan(
    segment: Segment,
    root: Path,
    config: Config,
    fingerprint: str,
    listing: Iterable[SourceFile | Skipped] | None,
    progress: Progress,
) -> _Plan:
    """Walk (everything first, so chunking has a total and an ETA) and compare with the
    metadata: new or changed bytes, paths an interrupted run left pending, and every file
    when the chunker or its settings changed (vectors of unchanged text come from the
    cache)."""
    meta = segment.meta
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
    return _Plan(sources, skipped, known, todo, removed, fresh)


def licence_folders(changed: Iterable[str]) -> set[str]:
    """The folders whose files' licence a change to ``changed`` may have moved: those of
    the manifests and licence texts among them (a file's licence may be its folder's)."""
    return {p.rsplit("/", 1)[0] if "/" in p else "" for p in changed if is_license_source(p)}


def covered(path: str, folders: Collection[str]) -> bool:
    """Whether ``path`` is in one of ``folders`` or below it."""
    return any(not f or path.startswith(f + "/") for f in folders)


def relicensed(sources: Iterable[SourceFile], known: Mapping[str, FileRecord],
               folders: Collection[str], chunker: Chunker) -> list[SourceFile]:  # fmt: skip
    """The files among ``sources`` under ``folders`` whose licence is no longer the one
    ``known`` records (their bytes unchanged): chunked again to carry it."""
    return [src for src in sources if src.path in known and covered(src.path, folders)
            and chunker.license_of(src) != known[src.path].license]  # fmt: skip


def _chunk(
    segment: Segment,
    plan: _Plan,
    root: Path,
    config: Config,
    counter: TokenCounter,
    progress: Progress,
) -> _Chunked:
    """Chunk what changed; note the paths touched and the vectors their old chunks had."""
    chunker = Chunker(root, options=config.chunk_options(), counter=counter)
    out = _Chunked()
    again = {src.path for src, _ in plan.todo}
    folders = licence_folders([*again, *plan.removed])
    others = (src for src in plan.sources if src.path not in again)
    moved = relicensed(others, plan.known, folders, chunker) if folders else []
    todo = plan.todo + [(src, content_sha(src.data)) for src in moved]
    progress.stage("chunking", len(todo), "files")
    for src, sha in todo:
        out.files.append((chunker.chunk(src), src, sha))
        progress.advance()
    progress.end()
    out.touched = sorted({src.path for _, src, _ in out.files} | set(plan.removed))
    meta = segment.meta
    out.old_int_ids = [int_id(c.id) for p in out.touched if p in plan.known
                       for c in meta.chunks_of(p)]  # fmt: skip
    return out


def _write_lexical(segment: Segment, plan: _Plan, chunked: _Chunked, progress: Progress) -> str:
    """Steps 1 and 2: journal the touched paths, then drop and re-add them in tantivy.
    Returns the exact BM25 statistics of a segment written in one batch from empty ("" for
    a patched one: deleted documents keep counting in tantivy's statistics until a merge)."""
    segment.meta.set_info("pending", json.dumps(chunked.touched))
    progress.stage("lexical index", len(chunked.files), "files")
    with segment.lexical.writer() as writer:
        if not plan.fresh:
            for path in chunked.touched:
                writer.delete_path(path)
        for cf, _, _ in chunked.files:
            writer.add_page(cf.page, cf.text)
            writer.add_sections(cf.chunks)
            progress.advance()
    progress.end()
    return json.dumps(writer.totals, sort_keys=True) if plan.fresh else ""


def _write_metadata(
    segment: Segment,
    plan: _Plan,
    chunked: _Chunked,
    stats: str,
    fingerprint: str,
    counter: TokenCounter,
) -> None:
    """Step 3: files, chunks and text in one transaction, and the journal cleared."""
    meta = segment.meta
    with meta.transaction():
        meta.remove_paths(plan.removed)
        for cf, src, sha in chunked.files:
            meta.put_file(_record(cf, src, sha), cf.chunks)
        meta.replace_skipped(plan.skipped)
        if chunked.touched:
            meta.bump_generation()
        meta.set_info("pending", "[]")
        meta.set_info("indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        meta.set_info("encoding", counter.name)
        meta.set_info("chunker", fingerprint)
        meta.set_info("lexical_stats", stats)
    if chunked.files:
        meta.checkpoint()


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
    # Reading every chunk back and looking each up in the vector cache took 4-8 s of the
    # standard library's first index with no bar at all: each is a stage of its own.
    targets = _embeddable(_read_all(meta, progress, model_id) if rebuild else new_chunks)
    texts = [embedding_text(c) for c in targets]
    progress.stage(f"vectors ({model_id}): looking up the cache", None, "chunks")
    stage = _EmbedStage(progress, f"embedding ({model_id})")
    result = embed_with_cache(
        embedder, cache, texts, batch_size=config.embed_batch_size, on_progress=stage.update
    )
    progress.end()  # the lookup's stage when all was cached, else the embedding's
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


def _read_all(meta: MetaStore, progress: Progress, model_id: str) -> list[Chunk]:
    """Every chunk of the segment, read back with a stage of its own."""
    total = meta.counts()[1]
    progress.stage(f"vectors ({model_id}): reading chunks", total, "chunks")
    out: list[Chunk] = []
    for chunk in meta.iter_chunks():
        out.append(chunk)
        if len(out) % _READ_STEP == 0:
            progress.advance(_READ_STEP)
    progress.advance(len(out) % _READ_STEP)
    progress.end()
    return out


class _EmbedStage:
    """Opens a progress stage on the first batch (nothing to embed: no bar at all); the
    caller ends it."""

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
