"""Forget: take a file's or a string's text out of one segment, down to the bytes on disk.

A segment is rewritten, not patched around: the metadata (the source of truth) drops the
chunks, the lexical index is rebuilt from what the metadata still holds (tantivy keeps a
deleted document's terms until a merge, and this binding cannot force one), each dense
index drops the vectors, and the SQLite file is vacuumed so freed pages leave the disk.

The order keeps every interruption recoverable: the metadata commits first with a
``forget_pending`` mark, and a segment still marked is finished by the next ``forget``
(searches resolve hits through the metadata, so a dropped chunk is never returned even
while a stale lexical or dense index still names it).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from engine.core import NullProgress, Progress, embedding_text, page_text
from engine.segment import DenseIndex, FileRecord, LexicalIndex, Segment, int_id
from indexers import Chunk, DocType, Page, sha256_text

__all__ = ["SegmentForget", "forget_in_segment", "matches_path", "segment_dirs"]

_PENDING = "forget_pending"  # info key: set while the derived indexes lag the metadata


@dataclass(frozen=True, slots=True)
class SegmentForget:
    """What one segment held of what is forgotten (and, unless a dry run, dropped)."""

    files: tuple[str, ...]  # files removed whole (``paths``)
    chunks: int  # chunks dropped, whole files' included
    touched: tuple[str, ...]  # files that lost chunks holding the string
    vector_keys: frozenset[str]  # sha256 of the embedded texts of the dropped chunks
    # Whether the dropped text left the metadata file (False: another process's read kept
    # old pages in its WAL past the wait; the next forget, with no reader, clears them).
    cleared: bool = True


def matches_path(path: str, targets: Collection[str]) -> bool:
    """Whether ``path`` is one of ``targets`` or lies under one (a folder)."""
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


def forget_in_segment(
    segment: Segment,
    *,
    paths: Collection[str] = (),
    text: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SegmentForget:
    """Drop from ``segment`` the files at (or under) ``paths`` and every chunk whose text
    (title and context included) holds ``text``; rebuild its derived indexes and vacuum.

    A segment left half-done by a killed ``forget`` is finished here even when nothing
    new matches. Returns what was (or, with ``dry_run``, would be) dropped.
    """
    progress = progress or NullProgress()
    meta = segment.meta
    files = sorted(p for p in meta.files() if matches_path(p, paths)) if paths else []
    dropped: list[Chunk] = [c for p in files for c in meta.chunks_of(p)]
    whole = set(files)
    if text:
        dropped += [
            c for c in meta.iter_chunks() if c.path not in whole and text in embedding_text(c)
        ]
    touched = sorted({c.path for c in dropped} - whole)
    result = SegmentForget(
        tuple(files), len(dropped), tuple(touched),
        frozenset(sha256_text(embedding_text(c)) for c in dropped),
    )  # fmt: skip
    pending = meta.get_info(_PENDING) is not None
    if dry_run:
        return result
    if not dropped and not pending:  # an earlier forget's pages a reader held: out now
        return replace(result, cleared=meta.fold())
    before = meta.generation
    if dropped:
        with meta.transaction():
            meta.remove_paths(files)
            meta.remove_chunks([c.id for c in dropped if c.path not in whole])
            meta.set_info(_PENDING, "1")
            meta.bump_generation()
    _rebuild_lexical(segment, progress)
    _drop_vectors(segment, [int_id(c.id) for c in dropped], before)
    with meta.transaction():
        meta.delete_info(_PENDING)
    return replace(result, cleared=meta.vacuum())


def _rebuild_lexical(segment: Segment, progress: Progress) -> None:
    """A new lexical index from the metadata, swapped in for the old one (when the segment
    has one: an overlay is scored in memory and has none)."""
    live = segment.dir / "lexical"
    if not live.is_dir():
        return
    fresh = segment.dir / "lexical.forget"
    shutil.rmtree(fresh, ignore_errors=True)
    records = segment.meta.files()
    progress.stage("forget: lexical index", len(records), "files")
    index = LexicalIndex.open(fresh, create=True)
    try:
        with index.writer() as writer:
            for path in sorted(records):
                chunks = segment.meta.chunks_of(path)
                if chunks:
                    writer.add_page(_page(records[path], chunks), page_text(chunks))
                    writer.add_sections(chunks)
                progress.advance()
        totals = json.dumps(writer.totals, sort_keys=True)
    finally:
        index.close()
    progress.end()
    segment.close_lexical()
    old = segment.dir / "lexical.old"
    shutil.rmtree(old, ignore_errors=True)
    live.replace(old)
    fresh.replace(live)
    shutil.rmtree(old, ignore_errors=True)
    # Built in one batch from empty: its BM25 statistics are exact (a View combines them).
    segment.meta.set_info("lexical_stats", totals)


def _page(record: FileRecord, chunks: Sequence[Chunk]) -> Page:
    return Page(
        id=record.page_id, path=record.path, sha256=record.content_sha256,
        language=record.language, doc_type=DocType(record.doc_type), license=record.license,
        size_bytes=record.size, line_count=record.line_count,
    )  # fmt: skip


def _drop_vectors(segment: Segment, ids: list[int], before: int) -> None:
    """Each dense index loses the dropped chunks' vectors; one that was not current is
    deleted instead (it is rebuilt from the metadata and the vector cache when next used)."""
    root = segment.dir / "dense"
    if not root.is_dir():
        return
    generation = segment.meta.generation
    for directory in sorted(p for p in root.iterdir() if (p / "dense.json").is_file()):
        index = DenseIndex.load(directory)
        model_id = index.model_id
        if segment.dense_generation(model_id) in (before, generation):
            if ids:
                index.remove(np.array(ids, dtype=np.int64))
            index.save(directory)
            segment.meta.set_info(f"dense:{model_id}:generation", str(generation))
        else:
            shutil.rmtree(directory)
            segment.meta.delete_info(f"dense:{model_id}:generation")
        segment.forget_dense(model_id)


def segment_dirs(state_dir: Path, skip: Collection[str] = ()) -> list[Path]:
    """Every segment under a state folder (bases, every user's overlays), except under the
    top-level folders named in ``skip``."""
    found = (p.parent for p in state_dir.rglob("meta.sqlite"))
    return sorted(p for p in found if p.relative_to(state_dir).parts[0] not in skip)
