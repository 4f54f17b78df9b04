"""What a View composes: ``Found`` (a BM25 hit) and ``Part`` (what a segment must answer)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from indexers import Chunk
from overlays._bm25 import DocTerms, TableStats

__all__ = ["Found", "Part"]


@dataclass(frozen=True, slots=True)
class Found:
    """A BM25 hit: a chunk id (sections) or page id (pages), its path, its score."""

    id: str
    path: str
    score: float


class Part(Protocol):
    """What a segment offers to be composed into a View (engine adapts its Segment)."""

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms a query searches for."""
        ...

    def lexical_weights(self, table: str) -> Mapping[str, float]:
        """Field -> boost of the BM25 query on ``table``."""
        ...

    def lexical_search(
        self, table: str, query: str, k: int, paths: Collection[str] | None
    ) -> list[Found]:
        """Top ``k`` of ``table`` by this segment's own BM25 (ties by id)."""
        ...

    def lexical_stats(self, table: str, terms: Sequence[str]) -> TableStats:
        """This segment's exact statistics of ``table`` for ``terms``."""
        ...

    def doc_terms(self, table: str, found: Sequence[Found]) -> dict[str, DocTerms]:
        """The analysed documents behind ``found``, by id."""
        ...

    def docs_of(self, table: str, paths: Iterable[str]) -> list[DocTerms]:
        """Every document of ``table`` under ``paths``."""
        ...

    def file_keys(self, paths: Sequence[str]) -> dict[str, str]:
        """A key per indexed path among ``paths`` that changes whenever the path's
        documents change (its content, or how it was chunked)."""
        ...

    def dense_ids(
        self, vector: np.ndarray, model_id: str, k: int, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, cosine) outside the paths ``exclude``, ties by chunk id
        ([] without a dense index for ``model_id``)."""
        ...

    def has_dense(self, model_id: str) -> bool:
        """Whether this segment has vectors of ``model_id``."""
        ...

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id (unknown ids absent)."""
        ...

    def chunks_of(self, path: str) -> list[Chunk]:
        """A file's chunks in line order."""
        ...

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching lines ``first_line..last_line``, in line order."""
        ...

    def definitions(self, names: Sequence[str], limit: int) -> dict[str, list[tuple[str, str]]]:
        """(chunk id, path) of sections defining each name, id order, ``limit`` per name."""
        ...

    def paths_like(self, suffix: str, limit: int) -> list[str]:
        """Paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        ...

    def files(self) -> Mapping[str, Any]:
        """Every file's record by path."""
        ...
