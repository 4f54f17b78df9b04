"""``build_context``'s pipeline: retrieve, then select, then render, under a hard budget.

- retrieve: clean the request, find the names and places it points at, recall candidates
  from every retriever, and rerank them (``engine.retrieval``);
- select: lay out the fixed lanes (instruction, goal, recent turns, diff), then choose
  evidence for the room left by token-cost-aware MMR (``select_evidence``);
- render: the text in lane order, shed until it fits (``render``), and the advisory.

Ties everywhere are broken by stable ids, so the same view and inputs give byte-identical
output and the same replay key.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.core import (
    Clock,
    ContextPack,
    ContextSettings,
    FileRanking,
    HistoryLane,
    Learned,
    PackSettings,
    Recalled,
    SessionState,
    ToolSignal,
    canonical,
    embedding_text,
    is_trivial,
)
from engine.embed import Embedder, EmbeddingCache, embed_with_cache
from engine.packing._advice import advise
from engine.packing._render import (
    evidence_room,
    fixed_lanes,
    header_cost,
    render,
    request_words,
)
from engine.packing._select import select_evidence
from engine.retrieval import (
    MAX_INTENT_WORDS,
    Candidate,
    Intent,
    Location,
    Scored,
    clean_query,
    cochange_candidates,
    is_question,
    learned_file_scores,
    locations,
    lone_name,
    query_identifiers,
    rank_files,
    recall,
    request_intents,
    request_phrases,
    rerank,
    weights_of,
    with_learned,
)
from indexers import TokenCounter
from overlays import Hunk, View

__all__ = ["Request", "build_pack", "pack_settings_for", "replay_key", "retrieve"]

# Lines around a fragment read to show it with its neighbours: far more than the
# ``fragment_context_tokens`` they may add, without reading a large file's every section.
_NEAR_LINES = 80


@dataclass(frozen=True, slots=True)
class Request:
    """What a call asks, parsed: the cleaned request, the goal when it says something the
    request does not ("" otherwise), the names and places it points at."""

    ask: str
    goal_ask: str
    identifiers: list[str]
    places: list[Location]
    intents: frozenset[Intent] = frozenset()
    phrases: tuple[tuple[str, ...], ...] = ()
    # Places the request itself names (a pasted traceback, a failing test id), apart from
    # those a tool signal gives: the agent's own words, so weighed less than a tool's.
    named: tuple[Location, ...] = ()

    @classmethod
    def parse(cls, goal: str, query: str, signals: Sequence[ToolSignal]) -> Request:
        """Parse a call's goal, query and tool signals."""
        ask = clean_query(query or goal)
        signal_text = "\n".join(s.text for s in signals)
        idents = query_identifiers(f"{goal}\n{ask}\n{signal_text}")
        if (word := lone_name(ask)) and word not in idents:
            idents.append(word)
        places = locations(signal_text) if signal_text else []
        goal_ask = clean_query(goal) if query.strip() else ""
        if goal_ask.strip() == ask.strip():
            goal_ask = ""
        named = tuple(p for p in locations(query or goal) if p not in places)
        return cls(ask, goal_ask, idents, places, request_intents(ask),
                   request_phrases(query or goal, MAX_INTENT_WORDS), named)  # fmt: skip


def replay_key(view: str, goal: str, query: str, signals: Sequence[ToolSignal],
               state: SessionState, budget: int, settings: ContextSettings,
               history: str = "", memory: str = "", learned: str = "") -> str:  # fmt: skip
    """A key that names this exact request against this exact view and configuration
    (the settings in their canonical JSON, so the key is the same on every machine), and,
    in a session, the history lane it was given, and the memory lane when it had one."""
    body = {
        "v": 2,
        "view": view,
        "goal": goal,
        "query": query,
        "signals": [[s.kind.value, s.text] for s in signals],
        "recent": [[t.role, t.text] for t in state.recent_turns],
        "constraints": list(state.constraints),
        "subgoals": list(state.subgoals),
        "budget": budget,
        "settings": canonical(settings),
    }
    if state.session:  # keys of calls without a session stay what they were
        body["session"] = state.session
        body["history"] = hashlib.sha256(history.encode("utf-8")).hexdigest()
    if memory:  # nor do keys of calls that recalled no note
        body["memory"] = hashlib.sha256(memory.encode("utf-8")).hexdigest()
    if learned:  # nor those of a workspace that has learned nothing (its digest)
        body["learned"] = learned
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def _candidate_vectors(
    cands: Sequence[Candidate], embedder: Embedder | None, cache: EmbeddingCache | None
) -> dict[str, np.ndarray]:
    """Candidates' vectors from the cache; any missing (a cache deleted or shared with
    another machine) are embedded now and cached, so cosine never silently reads 0."""
    if embedder is None or cache is None or not cands:
        return {}
    targets = [c for c in cands if not is_trivial(c.chunk)]  # trivial ones have no vector
    result = embed_with_cache(embedder, cache, [embedding_text(c.chunk) for c in targets])
    return {c.chunk.id: result.vectors[i] for i, c in enumerate(targets)}


def retrieve(
    view: View,
    request: Request,
    embedder: Embedder | None,
    cache: EmbeddingCache | None,
    settings: ContextSettings,
    timings: dict[str, float] | None = None,
    learned: Learned | None = None,
) -> list[Scored]:
    """Recall and rerank: the candidates for ``request``, best first, with the features
    behind each score. ``timings`` accumulates seconds per stage (embed, bm25, dense,
    symbols, fuse, rerank). ``learned``: what this workspace learned from outcomes, added
    as the ``salience`` and ``learned`` features."""
    clock = Clock(timings)
    dense_model = embedder.model_id if embedder is not None else None
    qvec = embedder.embed_query(request.ask) if embedder is not None else None
    gvec = (embedder.embed_query(request.goal_ask)
            if embedder is not None and request.goal_ask else None)  # fmt: skip
    clock.lap("embed")
    cands = recall(view, request.ask, request.identifiers, request.places, qvec, dense_model,
                   settings.recall, timings, goal=request.goal_ask, goal_vector=gvec,
                   keep=settings.rerank_depth, named=request.named)  # fmt: skip
    clock.last = time.perf_counter()
    vectors = _candidate_vectors(cands, embedder, cache)
    mtimes: dict[str, int] = {}
    if cands and settings.weights.recency:  # every file's record: read only when it counts
        mtimes = {p: f.mtime_ns for p, f in view.files().items()}

    def ranked(cands: list[Candidate]) -> list[Scored]:
        related = (view.related({c.chunk.path for c in cands})
                   if cands and settings.weights.cochange else {})  # fmt: skip
        return rerank(cands, request.identifiers, qvec, vectors, mtimes, settings.weights,
                      request.intents, request.phrases, related,
                      is_question(request.ask))  # fmt: skip

    scored = ranked(cands)
    if cands and view.history is not None and settings.recall.cochange_from and (
        weights_of(settings.recall).get("cochange", 0.0) > 0
    ):  # the files that usually change with the best ones join, and all are ranked again
        extra = cochange_candidates(view, request.ask, rank_files(scored, FileRanking.SECTIONS),
                                    {c.chunk.path for c in cands}, settings.recall)  # fmt: skip
        if extra:
            vectors |= _candidate_vectors(extra, embedder, cache)
            scored = ranked([*cands, *extra])
    scored = with_learned(scored, learned)
    clock.lap("rerank")
    return scored


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def _unrepeated(memory: Sequence[Recalled], evidence: Sequence[str]) -> tuple[Recalled, ...]:
    """The notes that do not repeat chosen evidence (a note whose text is inside a
    snippet's, or holds a whole snippet, adds nothing the evidence does not show)."""
    shown = [_flat(t) for t in evidence if t.strip()]
    out = []
    for r in memory:
        note = _flat(r.text)
        if not any(note in s or s in note for s in shown):
            out.append(r)
    return tuple(out)


def _file_belief(scored: Sequence[Scored], settings: ContextSettings) -> dict[str, float]:
    """Each candidate file's probability under the file model, for lifting its turn in
    selection; none when the lift is off or files are ranked by their sections."""
    if not settings.pack.file_turn_bonus or settings.file_ranking is not FileRanking.LEARNED:
        return {}
    return learned_file_scores(scored)


def pack_settings_for(ask: str, settings: PackSettings) -> PackSettings:
    """The selection settings for a request: a short question (at most
    ``MAX_INTENT_WORDS`` words) counts its files' turns its own way, a long report keeps
    whole sections and strict breadth first (see ``PackSettings``)."""
    if not is_question(ask):
        return settings
    return replace(settings, turn_tokens=settings.question_turn_tokens,
                   depth_penalty=settings.question_depth_penalty,
                   breadth_files=settings.question_breadth_files)  # fmt: skip


def build_pack(
    view: View,
    *,
    goal: str,
    query: str,
    tool_signals: Sequence[ToolSignal],
    state: SessionState,
    budget: int,
    counter: TokenCounter,
    embedder: Embedder | None,
    cache: EmbeddingCache | None,
    diff: Sequence[Hunk],
    view_id: str,
    settings: ContextSettings,
    scored_out: list[Scored] | None = None,
    timings: dict[str, float] | None = None,
    history: HistoryLane | None = None,
    memory: Sequence[Recalled] = (),
    learned: Learned | None = None,
) -> ContextPack:
    """Build the context pack (see the module docstring). ``scored_out``, when given,
    receives the full reranked candidate list (for evaluation and ``--explain``);
    ``timings`` accumulates seconds per stage (embed, bm25, dense, symbols, fuse, rerank,
    pack, render, advisory). ``history``: the session's history lane, fitted by the caller,
    shown between the goal and the evidence. ``memory``: saved notes recalled for the
    request, fitted to their room by the caller, shown before the evidence and cited
    first; a note that repeats chosen evidence is left out. ``learned``: see ``retrieve``."""
    lane_text = history.text if history is not None else ""
    notes = "\n".join(f"{r.uri}\n{r.sha256}" for r in memory)
    key = replay_key(view_id, goal, query, tool_signals, state, budget, settings, lane_text,
                     notes, learned.digest if learned else "")  # fmt: skip
    request = Request.parse(goal, query, tool_signals)
    scored = retrieve(view, request, embedder, cache, settings, timings, learned)
    if scored_out is not None:
        scored_out.extend(scored)
    clock = Clock(timings)

    words = request_words(f"{goal} {request.ask}") | {i.lower() for i in request.identifiers}
    lanes = fixed_lanes(goal, state, diff, words, budget, counter, settings, lane_text)
    lanes.memory = tuple(memory)
    header_costs: dict[str, int] = {}
    chosen = select_evidence(
        scored,
        evidence_room(lanes, budget, counter),
        lambda chunk, tokens: tokens + header_cost(chunk, counter, header_costs),
        counter,
        request.identifiers + sorted(words),
        pack_settings_for(request.ask, settings.pack),
        lambda chunk: view.chunks_near(chunk.path, chunk.span.start_line - _NEAR_LINES,
                                       chunk.span.end_line + _NEAR_LINES),
        _file_belief(scored, settings),
    )
    lanes.memory = _unrepeated(lanes.memory, [p.text for p in chosen.picked])
    clock.lap("pack")
    out = render(lanes, chosen.picked, chosen.pointers, budget, counter, chosen.spare)
    clock.lap("render")
    advisory = advise(view, scored, out.shown, request.identifiers, settings, chosen)
    clock.lap("advisory")
    compacted = history.compacted if history is not None else ()
    return ContextPack(out.blocks, out.citations, key, advisory, out.pointers, out.tokens,
                       budget, out.text, compacted)  # fmt: skip
