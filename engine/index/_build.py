"""A base built from empty in batches, which a killed run continues instead of redoing.

A first index of a large tree takes minutes, and a Ctrl-C, a closed laptop or the OOM
killer used to throw all of it away. The files are now written in batches of about
``BATCH_BYTES`` of source, each in the order ``update_segment`` uses for one change:

1. the batch's paths are journaled in the metadata (``pending``);
2. its pages and sections are added to the lexical index, which commits;
3. the metadata commits its files and chunks, the running BM25 totals (``lexical_stats``)
   and the chunker's fingerprint, and clears the journal.

The next run continues from the batches committed, provided the segment is a clean prefix
of the same build (``_continue_from``): the same chunker, every file it holds still there
with the same bytes, and no batch that reached the lexical index without reaching the
metadata (one page per file: the counts agree). Otherwise it starts over
(``BuildRestart``). Nothing is ever deleted from the lexical index, so the BM25 statistics
are exact, as a one-batch build's are, and the segment holds the same documents; vectors
come last, from the whole segment, through the content-addressed cache (those a killed run
computed are reused). Peak memory is one batch's chunks, not the whole tree's.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.core import (
    Config,
    IndexReport,
    NullProgress,
    Progress,
    chunker_fingerprint,
)
from engine.embed import Embedder, EmbeddingCache
from engine.index._update import (
    _Plan,
    _plan,
    _record,
    _update_dense,
    licence_folders,
    relicensed,
)
from engine.segment import Segment
from indexers import ChunkedFile, Chunker, SourceFile, TokenCounter

__all__ = ["BATCH_BYTES", "BuildRestart", "build_segment"]

BATCH_BYTES = 8 << 20  # source bytes a batch: a few seconds of chunking on two cores
_SO_FAR = "build_report"  # the redactions and fallbacks of the batches committed so far


class BuildRestart(Exception):  # noqa: N818 (a signal to the caller, not an error a user sees)
    """The partial build in the segment cannot be continued: build it again from empty."""


def build_segment(
    segment: Segment,
    root: Path,
    config: Config,
    *,
    counter: TokenCounter,
    embedder: Embedder | None,
    cache: EmbeddingCache | None,
    progress: Progress | None = None,
    batch_bytes: int | None = None,
) -> IndexReport:
    """Index ``root`` into ``segment``, empty or left by a killed build of the same tree,
    in batches (see the module docstring). Raises ``BuildRestart`` before writing anything
    when what the segment holds is not a prefix this run can continue."""
    progress = progress or NullProgress()
    timings = dict.fromkeys(("walk", "chunk", "lexical", "metadata"), 0.0)
    fingerprint = chunker_fingerprint(config, counter)
    start = time.perf_counter()
    plan = _plan(segment, root, config, fingerprint, None, progress)
    timings["walk"] = time.perf_counter() - start
    totals, earlier = _continue_from(segment, plan, fingerprint, root, config, counter)
    kept = len(plan.known)
    meta = segment.meta
    chunker = Chunker(root, options=config.chunk_options(), counter=counter)
    name = f"chunking ({kept:,} files kept from an interrupted run)" if kept else "chunking"
    progress.stage(name, len(plan.todo), "files")
    chunks_added = sum(f.chunks for f in plan.known.values())
    redactions: Counter[str] = Counter(earlier.get("redactions", {}))
    fallbacks: dict[str, str] = dict(earlier.get("fallbacks", {}))
    for batch in _batches(plan.todo, batch_bytes or BATCH_BYTES):
        start = time.perf_counter()
        files: list[tuple[ChunkedFile, SourceFile, str]] = []
        for src, sha in batch:
            files.append((chunker.chunk(src), src, sha))
            progress.advance()
        timings["chunk"] += time.perf_counter() - start
        start = time.perf_counter()
        meta.set_info("pending", json.dumps([src.path for _, src, _ in files]))
        with segment.lexical.writer() as writer:
            for cf, _, _ in files:
                writer.add_page(cf.page, cf.text)
                writer.add_sections(cf.chunks)
        _add(totals, writer.totals)
        timings["lexical"] += time.perf_counter() - start
        start = time.perf_counter()
        chunks_added += sum(len(cf.chunks) for cf, _, _ in files)
        redactions.update(r.kind for cf, _, _ in files for r in cf.redactions)
        fallbacks.update({cf.page.path: cf.fallback for cf, _, _ in files if cf.fallback})
        with meta.transaction():
            for cf, src, sha in files:
                meta.put_file(_record(cf, src, sha), cf.chunks)
            meta.set_info("lexical_stats", json.dumps(totals, sort_keys=True))
            meta.set_info("chunker", fingerprint)
            meta.set_info("encoding", counter.name)
            # What the report says of every batch, should a later run finish this build.
            meta.set_info(_SO_FAR, json.dumps({"redactions": redactions, "fallbacks": fallbacks}))
            meta.set_info("pending", "[]")
        timings["metadata"] += time.perf_counter() - start
    progress.end()
    start = time.perf_counter()
    with meta.transaction():
        meta.replace_skipped(plan.skipped)
        # Generation 1, as one run from empty gives it, however many runs built it: the
        # replay key's mark of the base reads it.
        meta.set_info("generation", "1")
        meta.set_info("lexical_stats", json.dumps(totals, sort_keys=True))
        meta.set_info("chunker", fingerprint)
        meta.set_info("encoding", counter.name)
        meta.set_info("indexed_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        meta.delete_info(_SO_FAR)
    meta.checkpoint()
    timings["metadata"] += time.perf_counter() - start
    computed = reused = 0
    if embedder is not None and cache is not None:
        start = time.perf_counter()
        # From the whole segment (``None``: nothing to patch), the cache supplying what a
        # killed run already computed.
        computed, reused = _update_dense(segment, embedder, cache, [], None, config, progress)
        timings["dense"] = time.perf_counter() - start
    files_n, chunks_n, _ = meta.counts()
    return IndexReport(
        files=files_n,
        added=files_n,
        changed=0,
        removed=0,
        unchanged=0,
        chunks=chunks_n,
        chunks_added=chunks_added,
        chunks_removed=0,
        skipped=dict(Counter(s.reason.value for s in plan.skipped)),
        embeddings_computed=computed,
        embeddings_reused=reused,
        dense_model=embedder.model_id if embedder is not None else None,
        seconds=timings,
        redactions=dict(redactions),
        fallbacks=fallbacks,
        resumed=kept,
    )


def _continue_from(
    segment: Segment,
    plan: _Plan,
    fingerprint: str,
    root: Path,
    config: Config,
    counter: TokenCounter,
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """The running BM25 totals and the report so far of the batches ``segment`` holds
    (empty for an empty one), with the journal of a batch that never reached the lexical
    index cleared; or ``BuildRestart`` where the segment is not a clean prefix of this
    build."""
    meta = segment.meta
    pages = segment.fresh_lexical().num_pages
    if not plan.known:
        if pages:  # a first batch in the lexical index and not in the metadata
            raise BuildRestart("the lexical index holds files the metadata does not")
        meta.set_info("pending", "[]")
        return {}, {}
    if meta.get_info("chunker") != fingerprint:
        raise BuildRestart("built by another chunker or with other settings")
    if pages != len(plan.known):
        raise BuildRestart("a batch reached the lexical index and not the metadata")
    again = {src.path for src, _ in plan.todo}
    if set(plan.known) & again or set(plan.known) - {src.path for src in plan.sources}:
        raise BuildRestart("files it holds changed or left the tree")
    folders = licence_folders(again)
    if folders:
        kept = [src for src in plan.sources if src.path in plan.known]
        chunker = Chunker(root, options=config.chunk_options(), counter=counter)
        if relicensed(kept, plan.known, folders, chunker):
            raise BuildRestart("the licence of files it holds changed")
    raw = meta.get_info("lexical_stats")
    if not raw:
        raise BuildRestart("no BM25 totals were recorded")
    totals: dict[str, dict[str, int]] = json.loads(raw)
    meta.set_info("pending", "[]")
    return totals, json.loads(meta.get_info(_SO_FAR) or "{}")


def _batches(
    todo: Sequence[tuple[SourceFile, str]], limit: int
) -> Iterator[list[tuple[SourceFile, str]]]:
    """``todo`` in runs of about ``limit`` source bytes (one at least, even when empty: an
    empty tree still gets its lexical index committed)."""
    batch: list[tuple[SourceFile, str]] = []
    size = 0
    for item in todo:
        batch.append(item)
        size += len(item[0].data)
        if size >= limit:
            yield batch
            batch, size = [], 0
    if batch or not todo:
        yield batch


def _add(totals: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    """Fold one batch's document and token counts into the running totals."""
    for table, counts in more.items():
        into = totals.setdefault(table, {})
        for name, n in counts.items():
            into[name] = into.get(name, 0) + n
