"""``Ranker``: a request ranked over a workspace's View (recall, fusion, rerank), as search,
the bundle and the outcomes tier read it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from engine._workspace._index import Indexer
from engine._workspace._state import State
from engine.core import (
    ConfigError,
    ContextSettings,
    IndexStateError,
    Learned,
    SearchMode,
    ToolSignal,
    check_k,
    signals_of,
)
from engine.packing import Request, retrieve
from engine.retrieval import Scored
from overlays import View

if TYPE_CHECKING:
    from engine.embed import Embedder


# Rankings of the current View kept for asks that come again (a bundle or a search of the
# same goal): a handful, as each holds every candidate with its text.
_RANKINGS_KEPT = 16


class Ranker:
    """The ranking ``build_context`` packs from, for the other reads.

    A ranking is a function of the View, the request, the embedder, the settings and what
    was learned (DESIGN's determinism): the last few are kept for the View they were read
    from, and dropped as soon as reads get another View (the working tree moved, an index
    or a forget changed a segment), so a kept one is always the answer recall and rerank
    would give again.
    """

    def __init__(self, state: State, indexer: Indexer) -> None:
        self._state = state
        self._indexer = indexer
        self._lock = threading.Lock()
        self._view: View | None = None  # the View the kept rankings were read from
        self._kept: OrderedDict[Hashable, tuple[Scored, ...]] = OrderedDict()

    def ranked(
        self,
        query: str,
        goal: str,
        tool_signals: Sequence[ToolSignal | str] | None,
        mode: SearchMode,
        settings: ContextSettings | None,
        learned: Callable[[], Learned],
    ) -> list[Scored]:
        """Every candidate for ``query``, best first (``learned``: what outcomes taught)."""
        if not query.strip():
            raise ConfigError("search needs a query")
        signals = signals_of(tool_signals)
        state = self._state
        view, _ = self._indexer.view()
        embedder = state.embedder if mode is SearchMode.HYBRID else None
        if embedder is not None and not view.has_dense(embedder.model_id):
            embedder = None
        settings = settings or state.config.context_settings()
        taught = learned()
        model = embedder.model_id if embedder is not None else None
        key = (model, goal or query, query, signals, settings, taught.digest)
        with self._lock:
            if self._view is not view:  # another View: nothing kept answers for it
                self._view, self._kept = view, OrderedDict()
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return list(kept)
        request = Request.parse(goal or query, query, signals)
        scored = retrieve(view, request, embedder, state.cache if embedder is not None else None,
                          settings, learned=taught)  # fmt: skip
        with self._lock:
            if self._view is view:
                self._kept[key] = tuple(scored)
                while len(self._kept) > _RANKINGS_KEPT:
                    self._kept.popitem(last=False)
        return scored

    def dense_embedder(self, view: View) -> Embedder:
        """The embedder dense search reads ``view`` with; an error when there is none."""
        embedder = self._state.embedder
        if embedder is None:
            raise ConfigError("dense search is off (dense_model = none)")
        if not view.has_dense(embedder.model_id):
            raise IndexStateError(
                f"the index has no vectors of {embedder.model_id}; run `cortex index`"
            )
        return embedder


def search_mode(mode: SearchMode | str, k: int) -> SearchMode:
    """``mode`` checked, and ``k`` with it."""
    try:
        checked = SearchMode(mode)
    except ValueError as exc:
        raise ConfigError(f"unknown search mode {mode!r}; use hybrid, bm25 or dense") from exc
    check_k(k, most=None)
    return checked
