"""Evidence selection: token-cost-aware MMR under a hard budget, nothing dropped silently.

Each step takes the candidate with the best marginal relevance per token,

    utility = (lambda * relevance - (1 - lambda) * max similarity to what is chosen)
              / (cost / REFERENCE_TOKENS) ** cost_exponent

that still fits. A file past its soft cap of sections pays a penalty; a section whose lines
overlap a chosen one from the same file is dropped; a strong section that does not fit may
be narrowed to its most relevant contiguous lines. Everything not chosen is returned as a
pointer with the reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.core import PackSettings, Pointer, is_trivial
from engine.retrieval import Scored
from indexers import Chunk, Span, TokenCounter, sha256_text

__all__ = ["REFERENCE_TOKENS", "Picked", "select_evidence", "window_pick"]

REFERENCE_TOKENS = 200  # a typical function: the unit that "per token" is measured in


@dataclass(frozen=True, slots=True)
class Picked:
    """A chosen section, possibly narrowed to a sub-span (with its own text and hash)."""

    scored: Scored
    span: Span
    text: str
    sha256: str
    tokens: int
    narrowed: bool


def _overlaps(a: Chunk, span: Span, b: Picked) -> bool:
    return a.path == b.scored.chunk.path and not (
        span.end_line < b.span.start_line or span.start_line > b.span.end_line
    )


def _similarity(a: Scored, b: Scored) -> float:
    if a.vector is not None and b.vector is not None:
        return max(0.0, float(np.dot(a.vector, b.vector)))
    ids_a = set(a.chunk.defines) | set(a.chunk.references)
    ids_b = set(b.chunk.defines) | set(b.chunk.references)
    union = ids_a | ids_b
    return len(ids_a & ids_b) / len(union) if union else 0.0


def select_evidence(
    scored: Sequence[Scored],
    budget: int,
    cost_of: Callable[[Chunk, int], int],
    counter: TokenCounter,
    terms: Sequence[str],
    settings: PackSettings,
) -> tuple[list[Picked], list[Pointer]]:
    """Choose evidence for ``budget`` tokens. ``cost_of(chunk, text_tokens)`` is what a
    snippet costs rendered (header included); ``terms`` guide narrowing."""
    pointers: list[Pointer] = [_pointer(c, "trivial") for c in scored if is_trivial(c.chunk)]
    useful = [c for c in scored if not is_trivial(c.chunk)]
    pool = useful[: settings.pool]
    beyond = useful[settings.pool :]
    top = pool[0].score if pool and pool[0].score > 0 else 1.0
    # Everything the loop needs per candidate, computed once.
    costs = {c.chunk.id: cost_of(c.chunk, c.chunk.tokens) for c in pool}
    words = {c.chunk.id: frozenset(_WORD.findall(c.chunk.text)) for c in pool}
    redundancy = {c.chunk.id: 0.0 for c in pool}  # max similarity to anything picked so far
    picked: list[Picked] = []
    per_file: Counter[str] = Counter()
    remaining = budget
    while pool:
        best: Scored | None = None
        best_u = float("-inf")
        for cand in pool:
            cost = costs[cand.chunk.id]
            if cost > remaining:
                continue
            rel = max(cand.score, 0.0) / top
            mmr = settings.mmr_lambda * rel - (1 - settings.mmr_lambda) * redundancy[cand.chunk.id]
            utility = mmr / (max(cost, 1) / REFERENCE_TOKENS) ** settings.cost_exponent
            if per_file[cand.chunk.path] >= settings.per_source_cap:
                utility *= settings.source_cap_penalty
            if utility > best_u or (
                utility == best_u and best is not None and cand.chunk.id < best.chunk.id
            ):
                best, best_u = cand, utility
        if best is None:
            narrowed = _narrow_one(pool, picked, remaining, top, cost_of, counter, terms, settings)
            if narrowed is None:
                break
            pool.remove(narrowed.scored)
            picked.append(narrowed)
            per_file[narrowed.scored.chunk.path] += 1
            remaining -= cost_of(narrowed.scored.chunk, narrowed.tokens)
            continue
        pool.remove(best)
        chunk = best.chunk
        picked.append(Picked(best, chunk.span, chunk.text, chunk.sha256, chunk.tokens, False))
        per_file[chunk.path] += 1
        remaining -= costs[chunk.id]
        chosen_words = words[chunk.id]
        for other in list(pool):
            if _overlaps(other.chunk, other.chunk.span, picked[-1]):
                pool.remove(other)
                pointers.append(_pointer(other, "overlap"))
            elif _jaccard(words[other.chunk.id], chosen_words, settings.duplicate_similarity):
                pool.remove(other)
                pointers.append(_pointer(other, "redundant"))
            else:
                sim = _similarity(other, best)
                if sim > redundancy[other.chunk.id]:
                    redundancy[other.chunk.id] = sim
    for cand in pool:
        reason = "budget" if costs[cand.chunk.id] > remaining else "redundant"
        pointers.append(_pointer(cand, reason))
    pointers.extend(_pointer(c, "low_score") for c in beyond)
    return picked, pointers


def _jaccard(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Whether two texts' word sets have Jaccard similarity >= ``threshold``: near 1 for
    copies with a rename, whatever the embedding model thinks."""
    small, large = sorted((len(a), len(b)))
    if not large or small < threshold * large:  # Jaccard <= |small| / |large|
        return False
    return len(a & b) / len(a | b) >= threshold


def _pointer(cand: Scored, reason: str) -> Pointer:
    c = cand.chunk
    return Pointer(c.source_uri, c.title, c.tokens, round(cand.score, 6), reason)


def _narrow_one(
    pool: list[Scored],
    picked: list[Picked],
    remaining: int,
    top: float,
    cost_of: Callable[[Chunk, int], int],
    counter: TokenCounter,
    terms: Sequence[str],
    settings: PackSettings,
) -> Picked | None:
    """Narrow the most relevant candidate that does not fit to its best lines, if any."""
    if remaining < settings.narrow_min_tokens:
        return None
    for cand in pool:  # pool is in score order
        if cand.score / top < settings.narrow_min_relevance:
            return None
        if any(_overlaps(cand.chunk, cand.chunk.span, p) for p in picked):
            continue
        room = remaining - (cost_of(cand.chunk, 0))
        window = _best_window(cand.chunk, room, counter, terms)
        if window is not None:
            return window_pick(cand, *window, counter)
    return None


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _best_window(
    chunk: Chunk, room: int, counter: TokenCounter, terms: Sequence[str]
) -> tuple[int, int] | None:
    """The contiguous lines (indexes into the chunk's lines) with the most term hits per the
    room available; never cuts a line. None when not even one line fits."""
    lines = chunk.text.split("\n")
    costs = [c + 1 for c in counter.count_many(lines)]
    wanted = {t.lower() for t in terms}
    hits = [sum(1 for w in _WORD.findall(ln) if w.lower() in wanted) for ln in lines]
    best: tuple[int, int, int] | None = None  # (hits, -start, end)
    lo, total, found = 0, 0, 0
    for hi in range(len(lines)):
        total += costs[hi]
        found += hits[hi]
        while total > room and lo <= hi:
            total -= costs[lo]
            found -= hits[lo]
            lo += 1
        if lo <= hi and (best is None or (found, -lo) > (best[0], best[1])):
            best = (found, -lo, hi)
    if best is None:
        return None
    start, end = -best[1], best[2]
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end].strip():
        end -= 1
    return start, end


def window_pick(cand: Scored, start: int, end: int, counter: TokenCounter) -> Picked:
    """The candidate narrowed to its lines ``start..end`` (0-based, inclusive)."""
    chunk = cand.chunk
    text = "\n".join(chunk.text.split("\n")[start : end + 1])
    span = Span(chunk.span.start_line + start, chunk.span.start_line + end)
    return Picked(cand, span, text, sha256_text(text), counter.count(text), True)
