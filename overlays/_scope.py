"""The backend seam: ``Scope`` (what one branch sees) and ``Backend`` (what an engine answers).

A View is a scope over a backend. The scope names a base (the commit its files come from),
an overlay (the branch's own copy of the files that differ) and the base paths the overlay
hides (``overlay_paths`` it replaced, ``tombstones`` it deleted). A backend answers every
question *within* a scope, as one index holding exactly the scope's files would:

- ``search``: BM25 over sections or pages, with the statistics (document count, average
  lengths, document frequencies) of the scope's documents only;
- ``search_dense``: cosine over the scope's sections;
- ``chunks``, ``chunks_of``, ``chunks_near``, ``definitions``, ``paths_like``, ``files``:
  lookups, hidden base entries never returned.

This is the level a remote engine answers at (Zoekt's ``Searcher``): no document terms, no
field statistics cross it. The embedded backend (``overlays.Embedded``) answers it over
local segments; ``engine.backend`` answers it from Qdrant, with the scope as a payload filter
and the BM25 statistics computed over the same filter.

Ties are broken by ids everywhere, so two backends that agree on scores agree on order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from indexers import Chunk
from overlays._part import Found

__all__ = ["Backend", "Scope", "Table"]

Table = Literal["sections", "pages"]


@dataclass(frozen=True, slots=True)
class Scope:
    """What one View sees: the base layer, the overlay layer, and the base paths hidden.

    ``base`` and ``overlay`` name layers in the backend (a base commit; an overlay owner:
    workspace, branch and user). With ``overlay == ""`` the scope is the base alone.

    >>> sorted(Scope("abc123", "ws/main/ana", overlay_paths={"a.py"}, tombstones={"b.py"}).hidden)
    ['a.py', 'b.py']
    """

    base: str
    overlay: str = ""
    overlay_paths: frozenset[str] = field(default_factory=frozenset)
    tombstones: frozenset[str] = field(default_factory=frozenset)
    # Base paths the scope does not see (replaced by the overlay or deleted): derived once,
    # since every read of a View asks for it.
    hidden: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Accept any collection, keep a frozenset: a Scope is hashable and compares by value.
        object.__setattr__(self, "overlay_paths", frozenset(self.overlay_paths))
        object.__setattr__(self, "tombstones", frozenset(self.tombstones))
        object.__setattr__(self, "hidden", self.overlay_paths | self.tombstones)

    @property
    def layered(self) -> bool:
        """Whether anything is laid over the base (else every answer is the base's own)."""
        return bool(self.overlay) and bool(self.hidden)


class Backend(Protocol):
    """What an index engine answers for a View: every call within one ``Scope``."""

    def search(
        self, scope: Scope, table: Table, query: str, k: int, paths: Collection[str] | None = None
    ) -> list[Found]:
        """The ``k`` best documents of ``table`` for ``query`` by BM25 over the scope's
        documents (in ``paths`` if given), best first, ties by id."""
        ...

    def term_counts(self, scope: Scope, table: Table, terms: Sequence[str]) -> dict[str, int]:
        """Per analysed term: how many of ``table``'s documents in the scope hold it (the
        largest count over the table's fields)."""
        ...

    def has_dense(self, scope: Scope, model_id: str) -> bool:
        """Whether the scope's sections have vectors of ``model_id``."""
        ...

    def search_dense(
        self, scope: Scope, vector: np.ndarray, model_id: str, k: int
    ) -> list[tuple[str, float]]:
        """The ``k`` sections of the scope nearest ``vector`` as (chunk id, cosine), best
        first, ties by id."""
        ...

    def chunks(self, scope: Scope, ids: Sequence[str]) -> dict[str, Chunk]:
        """The scope's chunks by id (unknown or hidden ids absent)."""
        ...

    def chunks_of(self, scope: Scope, path: str) -> list[Chunk]:
        """A file's chunks in line order ([] when the scope does not hold the file)."""
        ...

    def chunks_near(self, scope: Scope, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching lines ``first_line..last_line``, in line order."""
        ...

    def definitions(self, scope: Scope, names: Sequence[str], limit: int) -> dict[str, list[str]]:
        """Chunk ids of the scope's sections defining each name, id order, at most
        ``limit`` per name; names with none absent."""
        ...

    def paths_like(self, scope: Scope, suffix: str, limit: int) -> list[str]:
        """The scope's paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        ...

    def files(self, scope: Scope) -> Mapping[str, Any]:
        """Every file record of the scope by path."""
        ...
