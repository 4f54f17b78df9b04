"""A View: one branch's scope over a backend, asked the questions recall and packing ask.

``View(base, overlay, overlay_paths=..., tombstones=...)`` is the embedded View: the scope's
layers are local segments, composed by ``overlays.Embedded``. ``View.over(backend, scope)``
is the same View over any ``Backend`` (``engine.backend``'s Qdrant one), so recall, rerank
and packing never know which engine answers. A View may carry the ``ChangeHistory`` up to HEAD
(which files changed together), which the rerank reads. Each method is the backend's answer within
the View's scope; see ``overlays._scope`` for what a backend must guarantee.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from indexers import Chunk
from overlays._embedded import Embedded
from overlays._history import ChangeHistory
from overlays._memory import OverlayMemory
from overlays._part import Found, Part
from overlays._scope import Backend, Scope

__all__ = ["Found", "Part", "View"]

_BASE, _OVERLAY = "base", "overlay"  # layer names of an embedded View's scope


class View:
    """A scope over a backend; the embedded one (base plus overlay segments) by default."""

    def __init__(
        self,
        base: Part,
        overlay: Part | None = None,
        *,
        overlay_paths: Collection[str] = (),
        tombstones: Collection[str] = (),
        ident: str = "",
        memory: OverlayMemory | None = None,
        history: ChangeHistory | None = None,
    ) -> None:
        self.backend: Backend = Embedded(base, overlay, memory=memory)
        self.history = history
        self.scope = Scope(
            _BASE, _OVERLAY if overlay is not None else "", frozenset(overlay_paths),
            frozenset(tombstones))  # fmt: skip
        self.ident = ident

    @classmethod
    def over(
        cls, backend: Backend, scope: Scope, *, ident: str = "",
        history: ChangeHistory | None = None,
    ) -> View:  # fmt: skip
        """The View of ``scope`` answered by ``backend``, e.g.
        ``View.over(qdrant, Scope("abc123", "ws/main/ana", tombstones={"gone.py"}))``."""
        view = cls.__new__(cls)
        view.backend, view.scope, view.ident = backend, scope, ident
        view.history = history
        return view

    def related(self, paths: Collection[str]) -> dict[str, dict[str, float]]:
        """How strongly each pair of ``paths`` has changed together in the history up to HEAD
        (``ChangeHistory.related``); nothing without a history (a folder outside git)."""
        return self.history.related(paths) if self.history is not None else {}

    def neighbours(
        self, path: str, min_share: float, limit: int, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """The files outside ``exclude`` that most often changed together with ``path`` in
        the history up to HEAD (``ChangeHistory.neighbours``); none without a history."""
        if self.history is None:
            return []
        return self.history.neighbours(path, min_share, limit, exclude)

    @property
    def overlay_paths(self) -> frozenset[str]:
        """Base paths the overlay holds its own copy of."""
        return self.scope.overlay_paths

    @property
    def tombstones(self) -> frozenset[str]:
        """Base paths the branch deleted (or no longer indexes)."""
        return self.scope.tombstones

    @property
    def hidden(self) -> frozenset[str]:
        """Every base path this View does not see."""
        return self.scope.hidden

    # -- BM25 -----------------------------------------------------------------------

    def search_sections(
        self, query: str, k: int, *, paths: Collection[str] | None = None
    ) -> list[Found]:
        """The ``k`` best sections for ``query`` (in ``paths`` if given), best first."""
        return self.backend.search(self.scope, "sections", query, k, paths)

    def search_pages(self, query: str, k: int) -> list[Found]:
        """The ``k`` best pages (whole files) for ``query``, best first."""
        return self.backend.search(self.scope, "pages", query, k, None)

    def term_counts(self, table: str, terms: Sequence[str]) -> dict[str, int]:
        """How many of ``table``'s documents in this View hold each term (in any field)."""
        return self.backend.term_counts(self.scope, "pages" if table == "pages" else "sections",
                                        terms)  # fmt: skip

    # -- dense ----------------------------------------------------------------------

    def has_dense(self, model_id: str) -> bool:
        """Whether the View can answer dense queries for ``model_id``."""
        return self.backend.has_dense(self.scope, model_id)

    def search_dense(self, vector: np.ndarray, model_id: str, k: int) -> list[tuple[Chunk, float]]:
        """The ``k`` sections nearest ``vector`` (cosine), best first, ties by id."""
        hits = self.search_dense_ids(vector, model_id, k)
        chunks = self.chunks([cid for cid, _ in hits])
        return [(chunks[cid], s) for cid, s in hits if cid in chunks]

    def search_dense_ids(
        self, vector: np.ndarray, model_id: str, k: int
    ) -> list[tuple[str, float]]:
        """``search_dense`` as (chunk id, cosine) pairs, reading no chunk."""
        return self.backend.search_dense(self.scope, vector, model_id, k)

    # -- metadata -------------------------------------------------------------------

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id; a hidden base chunk is absent unless the overlay holds it too."""
        return self.backend.chunks(self.scope, ids)

    def chunks_of(self, path: str) -> list[Chunk]:
        """A file's chunks in line order, from whichever layer holds the file."""
        return self.backend.chunks_of(self.scope, path)

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching lines ``first_line..last_line``, in line order, from
        whichever layer holds the file."""
        return self.backend.chunks_near(self.scope, path, first_line, last_line)

    def defining(self, names: Sequence[str], limit: int = 50) -> dict[str, list[str]]:
        """Chunk ids defining each name (id order, at most ``limit`` per name)."""
        return self.backend.definitions(self.scope, names, limit)

    def paths_like(self, suffix: str, limit: int = 20) -> list[str]:
        """Paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        return self.backend.paths_like(self.scope, suffix, limit)

    def files(self) -> dict[str, Any]:
        """Every file's record by path (the overlay's where it holds the file)."""
        return dict(self.backend.files(self.scope))
