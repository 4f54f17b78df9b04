"""Evidence selection: the best evidence first, under a hard budget, nothing dropped silently.

Relevance is the rerank score scaled between the weakest and the strongest candidate of the
request (``(score - lowest) / (highest - lowest)``), so a feature every candidate shares
(the source prior lifts all code alike) does not flatten it. Each step takes the
candidate with the best marginal relevance,

    mmr = lambda * relevance - (1 - lambda) * max similarity to what is chosen,

and packs it if it fits; a strong one that does not fit is narrowed to its most relevant
contiguous lines; a tiny fragment (an import, a one-line alias, a trivial accessor) is
shown with its neighbours, never alone as filler. With ``breadth_files`` (a long report's),
a file's first look, the lead file's aside, costs at most the room over that many files:
a larger section is cut to its lines holding the request's words, so more files reach a
small context. Breadth first: a file's sections past
its cap (one; for the file of the best candidate, one per ``lead_file_tokens`` of room)
wait until every other file has had its turn, and while a file has its turn, its sections
compete at ``file_turn_bonus`` times the file model's probability for the file more
relevance (the files ``search_files`` ranks high come first); with a ``depth_penalty`` (a short
question's), they compete instead at that much less relevance for each section of the
file already chosen past its first ``cap - 1``, so a strong second section of the right
file still beats a weak first one of an unrelated file. With ``turn_tokens`` (a short
question's), a smaller section counts as its share of one (a seven-line method does not
use up the turn of the file whose next function answers the request); the part next to a
chosen part of a function split for size is the same evidence and does not count. Selection stops at
the relevance floor: what is
left is weak, and padding a model's context with it makes answers worse, so the unused
budget is returned and said.

Everything not chosen becomes a pointer with the reason that is true: ``budget`` only for a
section that did not fit even narrowed when its turn came, and that nothing weaker had
displaced (otherwise ``redundant``: it lost its place to more novel evidence).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.core import PackSettings, Pointer, is_trivial
from engine.retrieval import Scored
from indexers import Chunk, ChunkKind, Span, TokenCounter, sha256_text

__all__ = [
    "LABEL_TOKENS",
    "Neighbours",
    "Picked",
    "Selection",
    "is_fragment",
    "relevance",
    "select_evidence",
    "window_pick",
]

LABEL_TOKENS = 5  # " (narrowed)" or " (with neighbours)" after a snippet's title
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FUNCTIONS = (ChunkKind.FUNCTION, ChunkKind.METHOD)

Neighbours = Callable[[Chunk], Sequence[Chunk]]


@dataclass(frozen=True, slots=True)
class Picked:
    """A chosen section, possibly narrowed to a sub-span or widened to its neighbours (with
    its own text and hash)."""

    scored: Scored
    span: Span
    text: str
    sha256: str
    tokens: int
    narrowed: bool
    widened: bool = False


@dataclass(frozen=True, slots=True)
class Selection:
    """What ``select_evidence`` chose, what it left out and why, and whether it stopped at
    the relevance floor with budget to spare (``floor_tokens``: the room it left)."""

    picked: list[Picked]
    pointers: list[Pointer]
    floor_tokens: int = 0
    # Left out for budget alone, ready to show, best first: the render tries them in the
    # room its conservative per-snippet estimates leave unused.
    spare: list[Picked] = field(default_factory=list)


def relevance(scored: Sequence[Scored]) -> dict[str, float]:
    """Each candidate's score scaled to [0, 1] between the weakest and the strongest."""
    if not scored:
        return {}
    lo = min(s.score for s in scored)
    hi = max(s.score for s in scored)
    span = hi - lo
    return {s.chunk.id: (s.score - lo) / span if span > 1e-12 else 1.0 for s in scored}


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


def is_fragment(chunk: Chunk, settings: PackSettings) -> bool:
    """A section too small to stand alone as evidence: under ``fragment_tokens``, or a
    function of at most two lines (a trivial accessor)."""
    if chunk.tokens < settings.fragment_tokens:
        return True
    return chunk.kind in _FUNCTIONS and chunk.span.lines <= 2


def select_evidence(
    scored: Sequence[Scored],
    budget: int,
    cost_of: Callable[[Chunk, int], int],
    counter: TokenCounter,
    terms: Sequence[str],
    settings: PackSettings,
    neighbours: Neighbours | None = None,
    file_probs: Mapping[str, float] | None = None,
) -> Selection:
    """Choose evidence for ``budget`` tokens (see the module docstring). ``cost_of(chunk,
    text_tokens)`` is what a snippet costs rendered (header included); ``terms`` guide
    narrowing; ``neighbours(chunk)`` gives a file's sections in line order, for showing a
    fragment with its neighbours (without it, fragments are shown alone); ``file_probs``
    (path -> the file model's probability) lifts each file's turn by
    ``settings.file_turn_bonus`` times its file's."""
    # Without neighbours, a trivial section (a lone header, an import) has nothing to be
    # shown with; with them, it may be the answer (``TIMEOUT = 30``) and comes in context.
    alone = neighbours is None
    pointers: list[Pointer] = [_pointer(c, "trivial") for c in scored
                               if alone and is_trivial(c.chunk)]  # fmt: skip
    useful = [c for c in scored if not (alone and is_trivial(c.chunk))]
    rel = relevance(useful)
    pool = useful[: settings.pool]
    pointers.extend(_pointer(c, "low_score") for c in useful[settings.pool :])
    weak = [c for c in pool if rel[c.chunk.id] < settings.min_relevance]
    pool = [c for c in pool if rel[c.chunk.id] >= settings.min_relevance]
    words = {c.chunk.id: frozenset(_WORD.findall(c.chunk.text)) for c in pool}
    redundancy = {c.chunk.id: 0.0 for c in pool}  # max similarity to anything picked so far
    vectors = [(c.chunk.id, c.vector) for c in pool if c.vector is not None]
    vectored = [cid for cid, _ in vectors]
    matrix = np.stack([v for _, v in vectors]) if vectors else np.zeros((0, 0))
    picked: list[Picked] = []
    spare: list[Picked] = []
    per_file: dict[str, float] = {}  # each file's sections chosen, by ``turn_share``
    remaining = budget
    # Split symbols with one part chosen: the part next to it continues the same evidence
    # and does not count against the file's turn (once: a long one's other parts do).
    started: dict[tuple[str, str], int | None] = {}  # None: its continuation is used

    def continues(c: Scored) -> bool:
        part = started.get((c.chunk.path, c.chunk.symbol))
        return c.chunk.parts > 1 and part is not None and abs(c.chunk.part - part) == 1

    def repeats(c: Scored) -> float:
        """How much of its file is chosen, in ordinary sections (0 for a continuation)."""
        return 0.0 if continues(c) else per_file.get(c.chunk.path, 0.0)

    lead = pool[0].chunk.path if pool else ""

    lead_cap = max(settings.per_source_cap, -(-budget // max(1, settings.lead_file_tokens)))

    def cap(c: Scored) -> int:
        return lead_cap if c.chunk.path == lead else settings.per_source_cap

    penalty = settings.depth_penalty
    breadth_room = budget // settings.breadth_files if settings.breadth_files else 0
    caps = {c.chunk.id: cap(c) for c in pool}  # a candidate's cap and order never change
    orders = {c.chunk.id: _order(c) for c in pool}

    belief = file_probs or {}
    bonus = settings.file_turn_bonus

    def rank(c: Scored, given: float) -> tuple[float, int]:
        """Marginal relevance, less the depth penalty for what its file already gave, plus
        the file model's belief in its file while the file has its turn."""
        past = given - caps[c.chunk.id] + 1
        waits = penalty * past if penalty is not None and past > 0 else 0.0
        lift = bonus * belief.get(c.chunk.path, 0.0) if given < caps[c.chunk.id] else 0.0
        return _mmr(c, rel, redundancy, settings) - waits + lift, -orders[c.chunk.id]

    while pool:
        given = [repeats(c) for c in pool]  # once per step: what each one's file gave
        over = [g >= caps[c.chunk.id] for g, c in zip(given, pool, strict=True)]
        # Strict breadth first (no penalty): a capped section waits for every other file.
        everyone = range(len(pool))
        turn = everyone if penalty is not None else [i for i in everyone if not over[i]]
        ranks = {i: rank(pool[i], given[i]) for i in (turn or everyone)}
        at = max(ranks, key=ranks.__getitem__)  # the first best, as before
        was_capped = over[at]
        cand = pool.pop(at)
        chunk = cand.chunk
        if any(_overlaps(chunk, chunk.span, p) for p in picked):
            pointers.append(_pointer(cand, "overlap"))
            continue
        choice = None
        if neighbours is not None and is_fragment(chunk, settings):
            choice = _widen(cand, neighbours(chunk), settings, counter)
            if choice is not None and any(_overlaps(chunk, choice.span, p) for p in picked):
                choice = None  # its neighbours are shown already: alone, it is filler
            if choice is None and is_trivial(chunk):
                pointers.append(_pointer(cand, "trivial"))
                continue
        if choice is None:
            choice = Picked(cand, chunk.span, chunk.text, chunk.sha256, chunk.tokens, False)
        wanted = choice
        if breadth_room and chunk.path != lead and not repeats(cand):
            # A file's first look (or the next part of a split function it started): at most
            # its share of the room, at least ``narrow_min_tokens`` of text (a few lines
            # less is a pointer, not evidence). Whole continuations instead took the gold
            # file from one dev context in 115 and 2.7 points of its gold share at 4k.
            room = max(breadth_room, cost_of(chunk, LABEL_TOKENS + settings.narrow_min_tokens))
            short = (_window(cand, room, cost_of, counter, terms)
                     if _cost(cost_of, choice) > room else None)  # fmt: skip
            choice = short or choice
        if _cost(cost_of, choice) > remaining:
            choice = _narrow(cand, rel, remaining, cost_of, counter, terms, settings)
        if choice is None:
            displaced = any(p.scored.score < cand.score for p in picked)
            reason = "source_cap" if was_capped else "redundant" if displaced else "budget"
            # What it would have cost shown (with its neighbours, for a fragment).
            pointers.append(_pointer(cand, reason, wanted.tokens))
            if reason == "budget":
                spare.append(wanted)
            continue
        picked.append(choice)
        key = (chunk.path, chunk.symbol)
        if continues(cand):
            started[key] = None
        else:
            per_file[chunk.path] = per_file.get(chunk.path, 0.0) + _turn_share(choice, settings)
            if chunk.parts > 1 and key not in started:
                started[key] = chunk.part
        remaining -= _cost(cost_of, choice)
        chosen_words = words[chunk.id]
        # Cosine to the chosen section for every candidate with a vector, in one product.
        cosines = {} if cand.vector is None else dict(zip(
            vectored, (np.maximum(matrix @ cand.vector, 0.0) if vectored else ()), strict=True))
        kept: list[Scored] = []
        for other in pool:
            if _overlaps(other.chunk, other.chunk.span, choice):
                pointers.append(_pointer(other, "overlap"))
            elif _jaccard(words[other.chunk.id], chosen_words, settings.duplicate_similarity):
                pointers.append(_pointer(other, "redundant"))
            else:
                kept.append(other)
                got = cosines.get(other.chunk.id)
                sim = float(got) if got is not None else _similarity(other, cand)
                if sim > redundancy[other.chunk.id]:
                    redundancy[other.chunk.id] = sim
        pool = kept
    pointers.extend(_pointer(c, "weak") for c in weak)
    return Selection(picked, pointers, remaining if weak else 0, spare)


def _turn_share(p: Picked, settings: PackSettings) -> float:
    """How much of its file's turn a choice uses: one for an ordinary section, less for
    a small one (its share of ``turn_tokens``; None: every section is one)."""
    if settings.turn_tokens is None:
        return 1.0
    return min(1.0, p.tokens / max(1, settings.turn_tokens))


def _cost(cost_of: Callable[[Chunk, int], int], p: Picked) -> int:
    """What a choice costs rendered: its text, its header and, if cut or widened, the label."""
    return cost_of(p.scored.chunk, p.tokens + (LABEL_TOKENS if p.narrowed or p.widened else 0))


def _mmr(c: Scored, rel: dict[str, float], redundancy: dict[str, float], s: PackSettings) -> float:
    return s.mmr_lambda * rel[c.chunk.id] - (1 - s.mmr_lambda) * redundancy[c.chunk.id]


def _order(c: Scored) -> int:
    """A stable tie-break: lower chunk ids first (as an int so ``max`` can negate it)."""
    return int(c.chunk.id[:15], 16)


def _jaccard(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Whether two texts' word sets have Jaccard similarity >= ``threshold``: near 1 for
    copies with a rename, whatever the embedding model thinks."""
    small, large = sorted((len(a), len(b)))
    if not large or small < threshold * large:  # Jaccard <= |small| / |large|
        return False
    return len(a & b) / len(a | b) >= threshold


def _pointer(cand: Scored, reason: str, tokens: int | None = None) -> Pointer:
    c = cand.chunk
    return Pointer(c.source_uri, c.title, c.tokens if tokens is None else tokens,
                   round(cand.score, 6), reason)  # fmt: skip


def _widen(
    cand: Scored, siblings: Sequence[Chunk], settings: PackSettings, counter: TokenCounter
) -> Picked | None:
    """A fragment shown with the sections around it in its file, nearest first, up to
    ``fragment_context_tokens``; None when it has no neighbours."""
    chunk = cand.chunk
    ordered = sorted(siblings, key=lambda c: (c.span.start_line, c.span.end_line))
    at = next((i for i, c in enumerate(ordered) if c.id == chunk.id), None)
    if at is None:
        return None
    lo = hi = at
    total = chunk.tokens
    while True:
        before = ordered[lo - 1] if lo > 0 else None
        after = ordered[hi + 1] if hi + 1 < len(ordered) else None
        options = [(c.tokens, side) for c, side in ((before, -1), (after, 1)) if c is not None]
        grown = False
        for tokens, side in sorted(options):
            if total + tokens <= settings.fragment_context_tokens:
                total += tokens
                lo, hi = (lo - 1, hi) if side < 0 else (lo, hi + 1)
                grown = True
                break
        if not grown:
            break
    if lo == hi:
        return None
    lines: dict[int, str] = {}
    for part in ordered[lo : hi + 1]:
        for offset, line in enumerate(part.text.split("\n")):
            lines.setdefault(part.span.start_line + offset, line)
    span = Span(min(lines), max(lines))
    text = "\n".join(lines.get(n, "") for n in range(span.start_line, span.end_line + 1))
    return Picked(cand, span, text, sha256_text(text), counter.count(text), False, True)


def _narrow(
    cand: Scored,
    rel: dict[str, float],
    remaining: int,
    cost_of: Callable[[Chunk, int], int],
    counter: TokenCounter,
    terms: Sequence[str],
    settings: PackSettings,
) -> Picked | None:
    """``cand`` narrowed to its best lines for the room left, if it is strong enough and
    the room is worth it; None otherwise."""
    if remaining < settings.narrow_min_tokens or rel[cand.chunk.id] < settings.narrow_min_relevance:
        return None
    return _window(cand, remaining, cost_of, counter, terms)


def _window(
    cand: Scored,
    room: int,
    cost_of: Callable[[Chunk, int], int],
    counter: TokenCounter,
    terms: Sequence[str],
) -> Picked | None:
    """``cand``'s best lines for ``room`` tokens rendered (label and header included);
    None when not even one line fits."""
    window = _best_window(cand.chunk, room - cost_of(cand.chunk, LABEL_TOKENS), counter, terms)
    return None if window is None else window_pick(cand, *window, counter)


def _best_window(
    chunk: Chunk, room: int, counter: TokenCounter, terms: Sequence[str]
) -> tuple[int, int] | None:
    """The contiguous lines (indexes into the chunk's lines) with the most term hits that
    fit the room, the fullest of those (then the first): the lines around a hit come with
    it as far as the room goes. Never cuts a line; None when not even one line fits."""
    lines = chunk.text.split("\n")
    costs = [c + 1 for c in counter.count_many(lines)]
    wanted = {t.lower() for t in terms}
    hits = [sum(1 for w in _WORD.findall(ln) if w.lower() in wanted) for ln in lines]
    best: tuple[int, int, int, int] | None = None  # (hits, tokens, -start, end)
    lo, total, found = 0, 0, 0
    for hi in range(len(lines)):
        total += costs[hi]
        found += hits[hi]
        while total > room and lo <= hi:
            total -= costs[lo]
            found -= hits[lo]
            lo += 1
        if lo <= hi and (best is None or (found, total, -lo) > best[:3]):
            best = (found, total, -lo, hi)
    if best is None:
        return None
    start, end = -best[2], best[3]
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
