"""``build_context``: recall, rerank, lanes, MMR packing and rendering under a hard budget.

The budget is checked on the final rendered text with the configured tokenizer, headers
included; if estimates overshoot, the least useful evidence is dropped and the text is
rendered again, so ``count(pack.render()) <= budget`` always holds. Ties everywhere are
broken by stable ids, so the same view and inputs give byte-identical output.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engine._context import Block, ContextPack, Lane, Pointer, SessionState, Snippet
from engine._embed import Embedder, EmbeddingCache, embed_with_cache
from engine._errors import ConfigError
from engine._indexer import embedding_text, is_trivial
from engine._pack import PackSettings, Picked, select_evidence
from engine._query import ToolSignal, clean_query, locations, query_identifiers
from engine._recall import Candidate, Clock, RecallSettings, file_scores, recall
from engine._rerank import RerankWeights, Scored, rerank
from indexers import Chunk, TokenCounter
from overlays import Hunk, View

__all__ = ["ContextSettings", "build_pack", "rank_files"]

INSTRUCTION = (
    "You are working in a code repository. The numbered evidence below was retrieved for "
    "this request. Cite evidence by its number, like [2], wherever you rely on it, and cite "
    "nothing else. If the evidence is not enough, say what is missing."
)
_FENCES = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "tsx": "tsx",
    "go": "go", "rust": "rust", "java": "java", "c": "c", "cpp": "cpp", "shell": "sh",
    "json": "json", "yaml": "yaml", "toml": "toml", "html": "html", "css": "css",
    "sql": "sql", "markdown": "markdown", "rst": "rst",
}  # fmt: skip
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """Everything ``build_context`` can be tuned with (part of the replay key)."""

    recall: RecallSettings = field(default_factory=RecallSettings)
    weights: RerankWeights = field(default_factory=RerankWeights)
    pack: PackSettings = field(default_factory=PackSettings)
    rerank_depth: int = 150  # candidates reranked (by fused recall); the pool packs from these
    recent_turns: int = 4  # the last N turns, verbatim
    goal_share: float = 0.3  # lane caps as shares of the budget; unused room goes to evidence
    recent_share: float = 0.2
    diff_share: float = 0.2
    min_candidates: int = 3


@dataclass(frozen=True, slots=True)
class _Evidence:
    picked: Picked
    header: str


def _fence_for(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    return "`" * max(3, longest + 1)


def _snippet_text(n: int, p: Picked) -> str:
    chunk = p.scored.chunk
    fence = _fence_for(p.text)
    title = chunk.title + (" (narrowed)" if p.narrowed else "")
    uri = f"{chunk.path}#L{p.span.start_line}-L{p.span.end_line}"
    return (
        f"[{n}] {title}\nSource: {uri}\nLines: {p.span.start_line}-{p.span.end_line}\n"
        f"Hash: sha256:{p.sha256[:12]}\n{fence}{_FENCES.get(chunk.language, '')}\n{p.text}\n{fence}"
    )


def _header_cost(chunk: Chunk, counter: TokenCounter, cache: dict[str, int]) -> int:
    cost = cache.get(chunk.id)
    if cost is None:
        probe = f"[99] {chunk.title} (narrowed)\nSource: {chunk.source_uri}\nLines: 1-1\n"
        cost = cache[chunk.id] = counter.count(probe) + 16  # hash line, fences, spacing
    return cost


def replay_key(view: str, goal: str, query: str, signals: Sequence[ToolSignal],
               state: SessionState, budget: int, settings: ContextSettings) -> str:  # fmt: skip
    """A key that names this exact request against this exact view and configuration."""
    body = {
        "v": 1,
        "view": view,
        "goal": goal,
        "query": query,
        "signals": [[s.kind.value, s.text] for s in signals],
        "recent": [[t.role, t.text] for t in state.recent_turns],
        "constraints": list(state.constraints),
        "subgoals": list(state.subgoals),
        "budget": budget,
        "settings": repr(settings),
    }
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


def rank_files(cands: Sequence[Candidate] | Sequence[Scored]) -> list[str]:
    """Files by the sum of their three best section scores."""
    if cands and isinstance(cands[0], Scored):
        per: dict[str, list[float]] = {}
        for s in cands:
            assert isinstance(s, Scored)
            per.setdefault(s.chunk.path, []).append(s.score)
        totals = {p: sum(sorted(v, reverse=True)[:3]) for p, v in per.items()}
    else:
        totals = file_scores([c for c in cands if isinstance(c, Candidate)])
    return sorted(totals, key=lambda p: (-totals[p], p))


def _goal_text(goal: str, state: SessionState) -> str:
    parts = [goal.strip()]
    if state.constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in state.constraints))
    if state.subgoals:
        parts.append("Sub-goals:\n" + "\n".join(f"- {g}" for g in state.subgoals))
    return "## Goal\n" + "\n\n".join(parts)


def _fit_lines(items: Sequence[str], cap: int, counter: TokenCounter) -> list[str]:
    """As many whole items as fit in ``cap`` tokens, in order."""
    out, used = [], 0
    for item in items:
        cost = counter.count(item) + 1
        if used + cost > cap:
            continue
        out.append(item)
        used += cost
    return out


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
) -> ContextPack:
    """Build the context pack (see the module docstring). ``scored_out``, when given,
    receives the full reranked candidate list (for evaluation and ``--explain``);
    ``timings`` accumulates seconds per stage (embed, bm25, dense, symbols, fuse, rerank,
    pack, render)."""
    clock = Clock(timings)
    key = replay_key(view_id, goal, query, tool_signals, state, budget, settings)
    ask = clean_query(query or goal)
    signal_text = "\n".join(s.text for s in tool_signals)
    idents = query_identifiers(f"{goal}\n{ask}\n{signal_text}")
    places = locations(signal_text) if signal_text else []
    dense_model = embedder.model_id if embedder is not None else None
    qvec = embedder.embed_query(ask) if embedder is not None else None
    # The goal is searched on its own when it says something the request does not.
    goal_ask = clean_query(goal) if query.strip() else ""
    if goal_ask.strip() == ask.strip():
        goal_ask = ""
    gvec = embedder.embed_query(goal_ask) if embedder is not None and goal_ask else None
    clock.lap("embed")
    cands = recall(view, ask, idents, places, qvec, dense_model, settings.recall, timings,
                   goal=goal_ask, goal_vector=gvec, keep=settings.rerank_depth)  # fmt: skip
    clock.last = time.perf_counter()
    vectors = _candidate_vectors(cands, embedder, cache)
    mtimes: dict[str, int] = {}
    if cands and settings.weights.recency:  # every file's record: read only when it counts
        mtimes = {p: f.mtime_ns for p, f in view.files().items()}
    scored = rerank(cands, idents, qvec, vectors, mtimes, settings.weights)
    if scored_out is not None:
        scored_out.extend(scored)
    clock.lap("rerank")

    instruction = INSTRUCTION
    goal_block = _goal_text(goal, state)
    fixed = counter.count(f"{instruction}\n\n{goal_block}")
    if fixed > budget:
        raise ConfigError(
            f"budget of {budget} tokens cannot hold the instruction and the goal "
            f"({fixed} tokens); raise the budget or shorten the goal"
        )
    recent = [f"[{t.role}] {t.text}" for t in state.recent_turns[-settings.recent_turns :]]
    recent = list(
        reversed(_fit_lines(list(reversed(recent)), int(budget * settings.recent_share), counter))
    )
    words = {w.lower() for w in _WORD.findall(f"{goal} {ask}")} | {i.lower() for i in idents}
    ranked_hunks = sorted(
        diff, key=lambda h: (-sum(1 for w in _WORD.findall(h.text) if w.lower() in words), h.path)
    )
    hunks = _fit_lines([f"--- {h.path}\n{h.text}" for h in ranked_hunks],
                       int(budget * settings.diff_share), counter)  # fmt: skip

    def lanes(evidence: Sequence[Picked], omitted: Sequence[Pointer]) -> list[tuple[Lane, str]]:
        out = [(Lane.INSTRUCTION, instruction), (Lane.GOAL, goal_block)]
        if recent:
            out.append((Lane.RECENT, "## Recent turns\n" + "\n\n".join(recent)))
        if hunks:
            out.append((Lane.DIFF, "## Working-tree diff\n```diff\n" + "\n".join(hunks) + "\n```"))
        if evidence:
            body = "\n\n".join(_snippet_text(n, p) for n, p in enumerate(evidence, start=1))
            out.append((Lane.EVIDENCE, "## Evidence\n" + body))
        if omitted:
            tokens = sum(p.tokens for p in omitted)
            out.append((Lane.OMITTED, f"## Not shown\n{len(omitted)} more sections "
                        f"(~{tokens:,} tokens) were found but left out; they are listed "
                        "with their sources in this context's pointers."))  # fmt: skip
        return out

    base = lanes([], [])
    used = counter.count("\n\n".join(text for _, text in base)) + 40  # + the omitted line
    header_costs: dict[str, int] = {}
    picked, pointers = select_evidence(
        scored,
        max(0, budget - used),
        lambda chunk, tokens: tokens + _header_cost(chunk, counter, header_costs),
        counter,
        idents + sorted(words),
        settings.pack,
    )
    clock.lap("pack")
    # Shown best first (by rerank score, then id), whatever order MMR chose them in.
    picked.sort(key=lambda p: (-p.scored.score, p.scored.chunk.id))
    show_omitted = True
    while True:
        parts = lanes(picked, pointers if show_omitted else [])
        rendered = "\n\n".join(text for _, text in parts) + "\n"
        total = counter.count(rendered)
        if total <= budget:
            break
        # Over budget (estimates are estimates): shed the least valuable part and retry:
        # the last evidence first, then the "not shown" note, diff hunks, oldest turns.
        if picked:
            dropped = min(picked, key=lambda p: (p.scored.score, p.scored.chunk.id))
            picked.remove(dropped)
            chunk = dropped.scored.chunk
            score = round(dropped.scored.score, 6)
            pointers.insert(
                0, Pointer(chunk.source_uri, chunk.title, dropped.tokens, score, "budget")
            )
        elif show_omitted and pointers:
            show_omitted = False
        elif hunks:
            hunks.pop()
        elif recent:
            recent.pop(0)
        else:  # instruction + goal alone were checked to fit; unreachable in practice
            raise ConfigError(f"budget of {budget} tokens is too small for this request")
    blocks = tuple(Block(lane, text, counter.count(text)) for lane, text in parts)
    citations = tuple(
        Snippet(
            id=n,
            chunk_id=p.scored.chunk.id,
            title=p.scored.chunk.title,
            symbol=p.scored.chunk.symbol,
            source_uri=f"{p.scored.chunk.path}#L{p.span.start_line}-L{p.span.end_line}",
            span=p.span,
            sha256=p.sha256,
            license=p.scored.chunk.license,
            approx_tokens=p.tokens,
            fused_score=round(p.scored.score, 6),
            reason_tag=p.scored.reason + ("+narrowed" if p.narrowed else ""),
            text=p.text,
            contributions=p.scored.contributions,
        )
        for n, p in enumerate(picked, start=1)
    )
    clock.lap("render")
    advisory = _advisory(view, scored, picked, idents, settings)
    clock.lap("advisory")
    return ContextPack(blocks, citations, key, advisory, tuple(pointers), total, budget, rendered)


def _advisory(view: View, scored: Sequence[Scored], picked: Sequence[Picked],
              idents: Sequence[str], settings: ContextSettings) -> tuple[str, ...]:  # fmt: skip
    """Say when the evidence is thin, and name what is missing."""
    notes: list[str] = []
    if len(scored) < settings.min_candidates:
        notes.append(f"insufficient evidence: only {len(scored)} candidate sections found")
    asked = list(idents[:20])
    known = view.defining(asked, limit=1) if asked else {}
    missing = [i for i in asked if i not in known and not _mentioned(view, i)]
    if missing:
        notes.append(
            f"not found in the index: {', '.join(missing[:5])}; need the definition of {missing[0]}"
        )
    defined_here = {d for p in picked for d in p.scored.chunk.defines}
    undefined = [i for i in asked if i in known and i not in defined_here]
    if known and len(undefined) == len(known):
        notes.append(
            "weak evidence: no definition of the names asked about fits in the context "
            f"(e.g. {undefined[0]}); raise the budget or ask for it by name"
        )
    return tuple(notes)


def _mentioned(view: View, name: str) -> bool:
    """Whether any section's text uses ``name`` (a BM25 hit on the exact term)."""
    chunks = view.chunks([h.id for h in view.search_sections(name, 3)])
    return any(name in c.references or name in c.text for c in chunks.values())
