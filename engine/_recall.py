"""Recall: gather candidate sections from every retriever, then fuse their ranks.

Two stages: BM25 and dense hits on sections, plus BM25 on whole pages (files) whose best
few sections are then pulled in; sections that define a name the request mentions; and
sections a tool signal points at (a traceback frame, a failing test, a compiler error).
A goal that differs from the request is searched on its own too. Each list keeps its own
ranks; fusion is reciprocal-rank (RRF) or max-normalised scores.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from engine._query import Location
from indexers import Chunk
from overlays import View

__all__ = ["Candidate", "Clock", "Fusion", "RecallSettings", "file_scores", "recall"]


class Fusion(StrEnum):
    """How ranked lists are combined."""

    RRF = "rrf"
    SCORE = "score"


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """How wide recall casts its net (named so tuning can move them)."""

    bm25_sections: int = 150  # direct BM25 section hits
    dense_sections: int = 100  # direct dense section hits
    pages: int = 25  # BM25 pages whose best sections are pulled in
    sections_per_page: int = 3  # ... this many per page
    symbol_hits: int = 8  # definitions per named identifier
    # One hop along the call/import graph: definitions of names that the best candidates
    # use (the fix often sits one call away from what the request names). Off by default:
    # measured adding only definitions recall had not found,
    # on the dev set it moved nothing beyond noise (from 20 candidates: Acc@1 46.1 either
    # way, Acc@5 69.6 vs 70.4 off, gold-file hit at 8k 80.9 vs 81.7 off).
    expand_from: int = 0  # best fused candidates whose references are followed (0: off)
    expand_names: int = 40  # most-used names followed
    expand_defs: int = 2  # definitions taken per name (a name defined everywhere is noise)
    fusion: Fusion = Fusion.RRF
    rrf_k: int = 60  # Cormack et al.'s constant: flattens the head of each list
    # Per-list weights: a definition the request names, or a place a tool points at, is
    # stronger evidence than a bag-of-words hit.
    weights: tuple[tuple[str, float], ...] = (
        ("bm25", 1.0),
        ("dense", 0.5),
        ("page", 1.0),
        ("symbol", 1.0),
        ("signal", 2.0),
        ("expand", 0.5),
        # The goal's own lists, weighted like the request's. Measured on the dev set (115
        # SWE-bench instances, goal = issue title): file Acc@1/5 46.1/70.4 -> 53.0/80.0.
        ("goal_bm25", 1.0),
        ("goal_dense", 0.5),
        ("goal_page", 1.0),
    )


@dataclass(slots=True)
class Candidate:
    """A section some retriever found, with its rank and score in each list."""

    chunk: Chunk
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    fused: float = 0.0

    @property
    def sources(self) -> str:
        """The lists it came from, strongest first (the snippet's reason tag)."""
        return "+".join(sorted(self.ranks, key=lambda s: (self.ranks[s], s)))


def recall(
    view: View,
    query: str,
    identifiers: Sequence[str],
    signal_locations: Sequence[Location],
    query_vector: np.ndarray | None,
    dense_model: str | None,
    settings: RecallSettings,
    timings: dict[str, float] | None = None,
    goal: str = "",
    goal_vector: np.ndarray | None = None,
    keep: int | None = None,
) -> list[Candidate]:
    """Candidates for ``query``, fused and sorted best first (ties by chunk id).

    A ``goal`` that differs from the query gets its own BM25, page and dense lists
    (``goal_bm25``, ``goal_page``, ``goal_dense``): a short statement of the task is a
    sharper query than a long request whose words drown it. Only the best ``keep``
    candidates are returned (all when None). ``timings``, when given, accumulates seconds
    per stage (bm25, dense, symbols, fuse).
    """
    clock = Clock(timings)
    lists = _text_lists(view, query, query_vector, dense_model, settings, clock, "")
    if goal.strip() and goal.strip() != query.strip():
        lists |= _text_lists(view, goal, goal_vector, dense_model, settings, clock, "goal_")
    if identifiers:
        defined = view.defining(identifiers, limit=settings.symbol_hits)
        lists["symbol"] = [(cid, 1.0) for name in identifiers for cid in defined.get(name, [])]
    if signal_locations:
        lists["signal"] = _signal_hits(view, signal_locations)
    clock.lap("symbols")
    fused = _fuse(view, lists, settings, keep)
    if settings.expand_from and weights_of(settings).get("expand", 0.0) > 0:
        lists["expand"] = _expansion(view, fused, settings)
        fused = _fuse(view, lists, settings, keep, {c.chunk.id: c.chunk for c in fused})
    clock.lap("fuse")
    return fused


def _text_lists(
    view: View,
    query: str,
    query_vector: np.ndarray | None,
    dense_model: str | None,
    settings: RecallSettings,
    clock: Clock,
    prefix: str,
) -> dict[str, list[tuple[str, float]]]:
    """The BM25 section, BM25 page and dense lists for one text, named ``prefix + list``
    (chunk ids and scores: no chunk is read here)."""
    lists: dict[str, list[tuple[str, float]]] = {}
    lists["bm25"] = [(h.id, h.score) for h in view.search_sections(query, settings.bm25_sections)]
    pages = view.search_pages(query, settings.pages)
    if pages:
        page_rank = {h.path: i for i, h in enumerate(pages)}
        hits = view.search_sections(
            query, settings.pages * settings.sections_per_page * 4, paths=list(page_rank)
        )
        per_page: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for h in hits:
            if len(per_page[h.path]) < settings.sections_per_page:
                per_page[h.path].append((h.id, h.score))
        lists["page"] = [
            pair for path in sorted(per_page, key=page_rank.__getitem__) for pair in per_page[path]
        ]
    clock.lap("bm25")
    if query_vector is not None and dense_model is not None:
        dense = view.search_dense_ids(query_vector, dense_model, settings.dense_sections)
        if dense:
            lists["dense"] = dense
    clock.lap("dense")
    return {prefix + name: pairs for name, pairs in lists.items()}


def weights_of(settings: RecallSettings) -> dict[str, float]:
    """The per-list weights as a dict."""
    return dict(settings.weights)


def _expansion(
    view: View, fused: Sequence[Candidate], settings: RecallSettings
) -> list[tuple[str, float]]:
    """Definitions of the names the best candidates reference, most-referenced first."""
    top = fused[: settings.expand_from]
    counts: dict[str, float] = defaultdict(float)
    for rank, cand in enumerate(top, start=1):
        for name in cand.chunk.references:
            if len(name) >= 4:
                counts[name] += 1.0 / rank
    names = sorted(counts, key=lambda n: (-counts[n], n))[: settings.expand_names]
    defined = view.defining(names, limit=settings.expand_defs + 1)
    out: list[tuple[str, float]] = []
    for name in names:
        ids = defined.get(name, [])
        if len(ids) > settings.expand_defs:  # defined in many places: not a call edge
            continue
        out.extend((cid, counts[name]) for cid in ids)
    return list(dict.fromkeys(out))


class Clock:
    """Adds the time since the last lap to a named stage (no-op without a dict)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now


def _signal_hits(view: View, places: Sequence[Location]) -> list[tuple[str, float]]:
    """Sections containing a signal's line, or defining its function, in matching paths."""
    out: list[tuple[str, float]] = []
    for place in places:
        path = place.path.replace("\\", "/").lstrip("./")
        candidates = view.paths_like(path) if path else []
        if not candidates and "/" in path:  # an absolute path from another machine
            parts = path.split("/")
            for cut in range(1, len(parts)):
                candidates = view.paths_like("/".join(parts[cut:]))
                if candidates:
                    break
        for indexed in candidates[:3]:
            for chunk in view.chunks_of(indexed):
                inside = place.line is not None and (
                    chunk.span.start_line <= place.line <= chunk.span.end_line
                )
                named = place.name is not None and chunk.symbol.split(".")[-1] == place.name
                if inside or named:
                    out.append((chunk.id, 1.0))
    return list(dict.fromkeys(out))


def _fuse(
    view: View,
    lists: dict[str, list[tuple[str, float]]],
    settings: RecallSettings,
    keep: int | None = None,
    known: dict[str, Chunk] | None = None,
) -> list[Candidate]:
    """Fuse the lists; the best ``keep`` (all when None) as candidates, best first.

    Ranks are fused on ids alone; only the kept ones are read from the metadata (``known``
    chunks are not read again), so a wide recall costs the depth it keeps, not its width.
    An id whose chunk is missing (in an index but not in the metadata: half-written) is
    skipped, and the next one takes its place."""
    weights = dict(settings.weights)
    fused: dict[str, float] = defaultdict(float)
    ranks: dict[str, dict[str, int]] = defaultdict(dict)
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    for name, pairs in lists.items():
        top = max((s for _, s in pairs), default=0.0) or 1.0
        weight = weights.get(name, 1.0)
        for rank, (cid, score) in enumerate(pairs, start=1):
            if name in ranks[cid]:
                continue
            ranks[cid][name] = rank
            scores[cid][name] = score
            if settings.fusion is Fusion.RRF:
                fused[cid] += weight / (settings.rrf_k + rank)
            else:
                fused[cid] += weight * max(score, 0.0) / top
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    want = len(order) if keep is None else keep
    chunks = dict(known or {})
    out: list[Candidate] = []
    start = 0
    while len(out) < want and start < len(order):
        batch = order[start : start + want - len(out)]
        start += len(batch)
        missing = [cid for cid in batch if cid not in chunks]
        if missing:
            chunks.update(view.chunks(missing))
        for cid in batch:
            chunk = chunks.get(cid)
            if chunk is not None:
                out.append(Candidate(chunk, ranks[cid], scores[cid], fused[cid]))
    return out


def file_scores(cands: Sequence[Candidate], top: int = 3) -> dict[str, float]:
    """A file's score: the sum of its ``top`` best section scores (large files do not win
    by size, and one lucky section does not carry a file)."""
    per: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        per[c.chunk.path].append(c.fused)
    return {p: sum(sorted(v, reverse=True)[:top]) for p, v in per.items()}
