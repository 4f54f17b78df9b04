"""Recall: gather candidate sections from every retriever, then fuse their ranks.

Two stages: BM25 and dense hits on sections, plus BM25 on whole pages (files) whose best
few sections are then pulled in; sections that define a name the request mentions; and
sections a tool signal points at (a traceback frame, a failing test, a compiler error),
and those the request's own text points at the same way.
A goal that differs from the request is searched on its own too. Each list keeps its own
ranks; fusion is reciprocal-rank (RRF) or max-normalised scores.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from engine.core import Clock, RecallSettings
from engine.retrieval._fusion import Candidate, fuse_lists
from engine.retrieval._query import Location, is_question, word_forms
from engine.retrieval._resolve import relative_path
from indexers import Chunk
from overlays import View

__all__ = [
    "FORM_MIN_SHARE",
    "MAX_PLACE_PATHS",
    "cochange_candidates",
    "recall",
    "weights_of",
    "with_word_forms",
]

# Distinct paths of a request's places looked up per call (a traceback names a few dozen;
# a pasted CI log can name thousands: 4,000 frames cost 1.2 s of lookups before this cap).
MAX_PLACE_PATHS = 64

FORM_MIN_SHARE = 4  # see ``with_word_forms``


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
    named: Sequence[Location] = (),
) -> list[Candidate]:
    """Candidates for ``query``, fused and sorted best first (ties by chunk id).

    A ``goal`` that differs from the query gets its own BM25, page and dense lists
    (``goal_bm25``, ``goal_page``, ``goal_dense``): a short statement of the task is a
    sharper query than a long request whose words drown it. Only the best ``keep``
    candidates are returned (all when None). ``named``: places the request itself names
    (its own ``place`` list, apart from the tool signals' ``signal`` list). ``timings``,
    when given, accumulates seconds per stage (bm25, dense, symbols, fuse).
    """
    clock = Clock(timings)
    # Other forms of the words only for a short request (a question), in its own lists and
    # its goal's. A long report's goal is its title, and there they were noise: on the 34
    # pytest dev instances, forms in the titles' lists cost file Acc@5 88.2 -> 79.4.
    question = is_question(query)
    forms = settings.word_forms if question else 0
    if not question and settings.report_depth != 1:
        # A long report names many things: its BM25 lists (and its goal's) read deeper.
        settings = replace(
            settings,
            bm25_sections=settings.bm25_sections * settings.report_depth,
            pages=settings.pages * settings.report_depth,
        )
    lists = _text_lists(view, query, query_vector, dense_model, settings, clock, "", forms)
    if goal.strip() and goal.strip() != query.strip():
        lists |= _text_lists(view, goal, goal_vector, dense_model, settings, clock, "goal_",
                             forms)  # fmt: skip
    if identifiers:
        defined = view.defining(identifiers, limit=settings.symbol_hits)
        lists["symbol"] = [(cid, 1.0) for name in identifiers for cid in defined.get(name, [])]
    if signal_locations:
        lists["signal"] = _signal_hits(view, signal_locations)
    if named:
        lists["place"] = _signal_hits(view, named)
    clock.lap("symbols")
    fused = fuse_lists(view, lists, settings, keep)
    if settings.expand_from and weights_of(settings).get("expand", 0.0) > 0:
        lists["expand"] = _expansion(view, fused, settings)
        fused = fuse_lists(view, lists, settings, keep, {c.chunk.id: c.chunk for c in fused})
    clock.lap("fuse")
    return fused


def cochange_candidates(
    view: View, query: str, best: Sequence[str], have: Collection[str], settings: RecallSettings
) -> list[Candidate]:
    """Candidates from the files that most often changed together with the ``best`` files
    (the reranked ones, best first: ``cochange_from`` of them) and hold none of ``have``
    yet: their best sections for ``query``, strongest partner first, ``cochange_sections``
    per file, as the ``cochange`` list fused alone (``cochange`` weight over RRF's rank)."""
    share: dict[str, float] = {}
    for path in best[: settings.cochange_from]:
        near = view.neighbours(path, settings.cochange_share, settings.cochange_files, have)
        for other, value in near:
            share[other] = max(share.get(other, 0.0), value)
    chosen = sorted(share, key=lambda p: (-share[p], p))[: settings.cochange_files]
    if not chosen:
        return []
    per: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for hit in view.search_sections(query, len(chosen) * settings.cochange_sections * 4,
                                    paths=chosen):  # fmt: skip
        if len(per[hit.path]) < settings.cochange_sections:
            per[hit.path].append((hit.id, hit.score))
    pairs = [pair for path in chosen for pair in per.get(path, [])]
    return fuse_lists(view, {"cochange": pairs}, settings)


def _text_lists(
    view: View,
    query: str,
    query_vector: np.ndarray | None,
    dense_model: str | None,
    settings: RecallSettings,
    clock: Clock,
    prefix: str,
    forms: int = 0,
) -> dict[str, list[tuple[str, float]]]:
    """The BM25 section, BM25 page and dense lists for one text, named ``prefix + list``
    (chunk ids and scores: no chunk is read here); the BM25 lists also search up to
    ``forms`` other forms of each plain word (``with_word_forms``)."""
    lists: dict[str, list[tuple[str, float]]] = {}
    query = with_word_forms(view, query, forms)
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


def with_word_forms(view: View, query: str, per_word: int) -> str:
    """``query`` with up to ``per_word`` other forms of each of its plain words that this
    View's sections use, most common first (a short request only: see ``word_forms``).

    A form used less than ``1 / FORM_MIN_SHARE`` as often as the request's own spelling is
    left out: there the request already speaks the repository's language, and the rare
    form mostly adds noise (on the question set: file@5 73.8 with every form, 83.3 without
    the rare ones, primary answer in the 4k context 59.5 either way)."""
    if per_word <= 0 or not is_question(query):
        return query
    forms = word_forms(query)
    if not forms:
        return query
    wanted = sorted({f for fs in forms.values() for f in fs} | set(forms))
    counts = view.term_counts("sections", wanted)
    extra: list[str] = []
    for word, options in forms.items():
        own = counts.get(word, 0)
        used = [f for f in options if counts.get(f, 0) * FORM_MIN_SHARE > own]
        used.sort(key=lambda f: (-counts[f], f))
        extra.extend(used[:per_word])
    return f"{query} {' '.join(extra)}" if extra else query


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


def _signal_hits(view: View, places: Sequence[Location]) -> list[tuple[str, float]]:
    """Sections containing a signal's line, or defining its function, in matching paths.

    Each distinct path is looked up once however many frames name it, and at most
    ``MAX_PLACE_PATHS`` paths are (the first and the last half of them: a log's first
    error, and a traceback's innermost frames), so a pasted log of thousands of frames
    costs a bounded number of lookups."""
    out: list[tuple[str, float]] = []
    placed = [(relative_path(place.path), place) for place in places]
    paths = list(dict.fromkeys(path for path, _ in placed))
    if len(paths) > MAX_PLACE_PATHS:
        half = MAX_PLACE_PATHS // 2
        paths = paths[:half] + paths[-half:]
    kept = set(paths)
    found: dict[tuple[str, bool], list[str]] = {}
    sections: dict[str, list[Chunk]] = {}
    for path, place in placed:
        if path not in kept:
            continue
        if (path, place.exact) not in found:
            found[(path, place.exact)] = _indexed(view, path, place.exact)
        for indexed in found[(path, place.exact)][:3]:
            if indexed not in sections:
                sections[indexed] = view.chunks_of(indexed)
            for chunk in sections[indexed]:
                inside = place.line is not None and (
                    chunk.span.start_line <= place.line <= chunk.span.end_line
                )
                named = place.name is not None and chunk.symbol.split(".")[-1] == place.name
                if inside or named:
                    out.append((chunk.id, 1.0))
    return list(dict.fromkeys(out))


def _indexed(view: View, path: str, exact: bool) -> list[str]:
    """The indexed paths a place's path names: itself, or (from another machine, unless
    ``exact``) its longest tail that is indexed, never cut past ``_last_cut``."""
    candidates = view.paths_like(path) if path else []
    if not candidates and "/" in path and not exact:
        parts = path.split("/")
        for cut in range(1, _last_cut(parts) + 1):
            candidates = view.paths_like("/".join(parts[cut:]))
            if candidates:
                break
        if not candidates:
            for source in _built_sources(parts[_last_cut(parts) :]):
                candidates = view.paths_like(source)
                if candidates:
                    break
    return candidates


# A JavaScript package ships built files: a bundler writes ``src/plugin/utc/index.js`` as
# ``plugin/utc.js``, tsc writes ``src/core/x.ts`` as ``dist/core/x.js``. A frame in one
# names a file the repository does not have; these are the sources it may come from.
_BUILT = frozenset({".js", ".mjs", ".cjs"})
_BUILD_DIRS = frozenset({"dist", "build", "lib", "es", "esm", "cjs", "umd", "out"})
_SOURCE_FORMS = (".ts", ".tsx", ".mts", ".jsx", "/index.js", "/index.ts", "/index.tsx")


def _built_sources(own: Sequence[str]) -> list[str]:
    """The source paths a built JavaScript file at ``own`` (a package's own path) may come
    from: the same path as TypeScript or as a folder's ``index``, and without a leading
    build folder. At least a folder and a file stay, so a third-party ``dist/index.js``
    never matches any ``index.ts``."""
    stem, ext = posixpath.splitext("/".join(own))
    if ext not in _BUILT:
        return []
    stems = [stem]
    if len(own) >= 3 and own[0] in _BUILD_DIRS:
        stems.append(stem.split("/", 1)[1])
    return [s + form for s in stems if "/" in s for form in _SOURCE_FORMS]


# Where an installed package's files live, and where its own path starts there:
# - Python's site-packages (and the standard library's ``lib/python3.10``): the import
#   package follows, which is a folder of the repository (``matplotlib/axes/_axes.py``);
# - a folder named with its version (Ruby's gems ``fastlane-2.192.0``, Cargo's
#   ``axum-0.6.15``, Go's ``grpc@v1.20.0``): the repository's own path follows;
# - node_modules: the package's name (``axios``, ``@scope/name``), then its own path;
# - vendor (Composer's ``org/name``, Go's ``host/org/repo``): cut down to a folder and a file.
# A frame there is this repository's code only if that path is here. Cut shorter, a
# third-party ``pandas/core/generic.py`` would match any ``generic.py``.
_PACKAGE_DIR = re.compile(
    r"site-packages|dist-packages|python\d+(?:\.\d+)*|.+[-@]v?\d+(?:\.\d+)+.*"
)


def _last_cut(parts: Sequence[str]) -> int:
    """How many leading folders of a foreign path may be dropped at most: up to the package's
    own path when the path runs through an installed package, else all but the file name."""
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "node_modules":
            return min(len(parts) - 1, i + (3 if parts[i + 1].startswith("@") else 2))
        if parts[i] == "vendor":
            return len(parts) - 2
        if _PACKAGE_DIR.fullmatch(parts[i]):
            return i + 1
    return len(parts) - 1
