"""A Segment: one searchable unit over a set of files, in one directory.

    <dir>/meta.sqlite        files, chunks, chunk text (the source of truth)
    <dir>/lexical/           tantivy BM25 over sections and pages
    <dir>/dense/<model>/     faiss over the section vectors of one embedding model

Lexical and dense indexes are derived from the metadata; every hit is resolved through it,
so a hit on something the metadata no longer holds (an interrupted write) is dropped.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine._errors import IndexNotBuiltError
from engine._meta import MetaStore
from indexers import Chunk

if TYPE_CHECKING:
    from engine._dense import DenseIndex
    from engine._lexical import LexicalIndex

__all__ = ["Hit", "Segment", "model_slug"]


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk a retriever found, with that retriever's score (higher is better)."""

    chunk: Chunk
    score: float


def model_slug(model_id: str) -> str:
    """A directory name for a model id (``static:ab12`` → ``static-ab12``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip("-")[:80] or "model"


class Segment:
    """Metadata plus lazily opened lexical and dense indexes for one directory."""

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        if not create and not (directory / "meta.sqlite").exists():
            raise IndexNotBuiltError(f"no index in {directory}; run `cortex index` first")
        self.dir = directory
        self.meta = MetaStore(directory / "meta.sqlite")
        self._lock = threading.Lock()
        self._lexical: LexicalIndex | None = None
        self._dense: dict[str, tuple[int, DenseIndex]] = {}
        self._lexical_generation = -1

    def close(self) -> None:
        """Release files and connections."""
        with self._lock:
            if self._lexical is not None:
                self._lexical.close()
                self._lexical = None
            self._dense.clear()
        self.meta.close()

    # -- lexical --------------------------------------------------------------------

    @property
    def lexical(self) -> LexicalIndex:
        """The BM25 index (opened on first use)."""
        with self._lock:
            if self._lexical is None:
                from engine._lexical import LexicalIndex

                self._lexical = LexicalIndex.open(self.dir / "lexical", create=True)
            return self._lexical

    def fresh_lexical(self) -> LexicalIndex:
        """The lexical index, reloaded if another writer committed since we last looked."""
        lexical = self.lexical
        generation = self.meta.generation
        if generation != self._lexical_generation:
            lexical.refresh()
            self._lexical_generation = generation
        return lexical

    def search_bm25(self, query: str, k: int) -> list[Hit]:
        """Top ``k`` sections by BM25, resolved to chunks."""
        hits = self.fresh_lexical().search_sections(query, k)
        chunks = self.meta.chunks([h.id for h in hits])
        return [Hit(chunks[h.id], h.score) for h in hits if h.id in chunks]

    # -- dense ----------------------------------------------------------------------

    def dense_dir(self, model_id: str) -> Path:
        """Where the dense index of ``model_id`` lives."""
        return self.dir / "dense" / model_slug(model_id)

    def dense_generation(self, model_id: str) -> int:
        """The metadata generation the dense index of ``model_id`` was last brought up to."""
        return int(self.meta.get_info(f"dense:{model_id}:generation") or -1)

    def dense(self, model_id: str) -> DenseIndex | None:
        """The dense index for ``model_id``, or None if there is none on disk."""
        directory = self.dense_dir(model_id)
        if not (directory / "dense.json").exists():
            return None
        generation = self.dense_generation(model_id)
        with self._lock:
            cached = self._dense.get(model_id)
            if cached is not None and cached[0] == generation:
                return cached[1]
            from engine._dense import DenseIndex

            index = DenseIndex.load(directory, model_id=model_id)
            self._dense[model_id] = (generation, index)
            return index

    def forget_dense(self, model_id: str) -> None:
        """Drop a cached in-memory dense index (after it was rewritten)."""
        with self._lock:
            self._dense.pop(model_id, None)

    def search_dense(self, vector: np.ndarray, model_id: str, k: int) -> list[Hit]:
        """Top ``k`` sections by cosine with ``vector``, resolved to chunks."""
        index = self.dense(model_id)
        if index is None or index.ntotal == 0:
            return []
        ids, scores = index.search(vector, k)
        pairs = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        chunks = self.meta.chunks_by_int_id([i for i, _ in pairs])
        return [Hit(chunks[i], s) for i, s in pairs if i in chunks]
