"""The history lane: a session's items, newest whole and older ones compacted, in a room of
tokens that is never exceeded and never cut.

The newest items are shown verbatim (L0, at most ``recent_turns`` and ``recent_share`` of
the room); older tool outputs are masked to stubs (L1); when the stubs do not fit, the
oldest of them are folded into a digest (L2), and when the digest does not fit either, the
oldest part of it into goals and lessons (L3). Room left over is spent on the lines of the
masked outputs that share most words with the request. Whatever is not shown whole is
listed in ``HistoryLane.compacted`` with a ``session:ID#N`` uri that resolves to it; if
even the shortest form (one line naming every step) does not fit, ``build_lane`` raises
``BudgetUnreachableError`` rather than drop anything.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core import BudgetUnreachableError, HistoryLane, Pointer, Step, StepRole
from engine.memory._history import (
    VERBATIM_CHARS,
    Memo,
    digest_lines,
    goal_lines,
)
from engine.memory._observe import MAX_LINE_CHARS

__all__ = ["LaneSettings", "build_lane", "lane_header", "recall_lines", "search_items"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_MIN_LINE = 25  # shorter lines carry too little to be worth recalling into a stub
_RECALLED = "Recalled for this request from compacted steps:"


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """How the history lane spends its room (part of a session turn's replay key)."""

    recent_turns: int = 10  # L0: the newest items shown whole, at most this many
    # L0's cap as a share of the lane's room: an agent copies most from the last output or
    # two, and the rest of the room keeps every older step visible as a stub.
    recent_share: float = 0.7
    # Lines of compacted outputs recalled for the request at most (the room decides first).
    recall_lines: int = 300
    neighbour_weight: float = 0.5  # a recalled line's score gains this share of its neighbours'
    recency_weight: float = 2.0  # the newest output's lines score (1 + this) times, decaying


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def lane_header(session: str, items: Sequence[Step]) -> str:
    """The lane's first line: which steps it covers and how a ``[#N]`` resolves."""
    span = f"#{items[0].step}-#{items[-1].step}" if items else "none yet"
    return (f"## Session history\nSession {session}, steps {span}; [#N] is step N, "
            f"in full at session:{session}#N")  # fmt: skip


@dataclass(slots=True)
class _Plan:
    recent: int  # items shown whole (the newest)
    goals: int  # oldest items in L3
    digest: int  # items in L2 after them; the rest of the older ones are stubs


def _render(items: Sequence[Step], plan: _Plan, memo: Memo, session: str,
            recalled: Sequence[str]) -> list[str]:  # fmt: skip
    older = items[: len(items) - plan.recent]
    lines = [lane_header(session, items)]
    lines += goal_lines(older[: plan.goals], memo)
    lines += digest_lines(older[plan.goals : plan.goals + plan.digest], memo)
    for item in older[plan.goals + plan.digest :]:
        lines += memo.block("stub", item)[0]
    if recalled:
        lines += [_RECALLED, *recalled]
    if plan.recent:
        lines.append(_recent_header(items, plan))
        for item in items[len(items) - plan.recent :]:
            lines += memo.block("verbatim", item)[0]
    return lines


def _recent_header(items: Sequence[Step], plan: _Plan) -> str:
    return f"Recent steps, verbatim (#{items[-plan.recent].step}-#{items[-1].step}):"


def _cost(items: Sequence[Step], plan: _Plan, memo: Memo, session: str) -> int:
    """What ``_render`` of the plan (without recalled lines) costs, summed line by line
    from the memoised blocks."""
    older = items[: len(items) - plan.recent]
    total = memo.cost([lane_header(session, items)])
    total += memo.cost(goal_lines(older[: plan.goals], memo))
    total += memo.cost(digest_lines(older[plan.goals : plan.goals + plan.digest], memo))
    total += sum(memo.block("stub", item)[1] for item in older[plan.goals + plan.digest :])
    if plan.recent:
        total += memo.cost([_recent_header(items, plan)])
        total += sum(memo.block("verbatim", i)[1] for i in items[len(items) - plan.recent :])
    return total


def _minimal(items: Sequence[Step], session: str) -> list[str]:
    """The shortest honest lane: one line naming every step, all reachable."""
    if not items:
        return [lane_header(session, items)]
    return [lane_header(session, items),
            f"All {len(items)} steps compacted (#{items[0].step}-#{items[-1].step}); "
            "none fits this budget, each resolves in full."]  # fmt: skip


def _smallest(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """The smallest x in [lo, hi] with ``fits(x)``, assuming fits is monotone; else None."""
    if not fits(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _plan(items: Sequence[Step], room: int, memo: Memo, session: str,
          settings: LaneSettings) -> _Plan | None:  # fmt: skip
    """The plan that shows the most whole and the least folded within ``room`` (by summed
    line counts), or None when not even everything folded into goals fits."""
    cap = int(room * settings.recent_share)
    recent, used = 0, 0
    for item in reversed(items):
        if recent >= settings.recent_turns or len(item.text) > VERBATIM_CHARS:
            break
        cost = memo.block("verbatim", item)[1] + 1
        if used + cost > cap:
            break
        recent, used = recent + 1, used + cost
    # Fewer whole steps before any step falls below the digest (which keeps the names
    # and failures of every step it covers); goals and lessons only when nothing else fits.
    for deepest in (False, True):
        for whole in range(recent, -1, -1):
            plan = _fold(items, whole, room, memo, session, goals=deepest)
            if plan is not None:
                return plan
    return None


def _fold(items: Sequence[Step], recent: int, room: int, memo: Memo, session: str, *,
          goals: bool) -> _Plan | None:  # fmt: skip
    """With ``recent`` items whole: the fewest older items folded into the digest (with
    ``goals``, then into goals and lessons) for the rest to fit ``room``; None when
    nothing does."""
    older = len(items) - recent

    def cost(to_goals: int, digest: int) -> int:
        return _cost(items, _Plan(recent, to_goals, digest), memo, session)

    digest = _smallest(0, older, lambda d: cost(0, d) <= room)
    if digest is not None:
        return _Plan(recent, 0, digest)
    if not goals:
        return None
    folded = _smallest(0, older, lambda g: cost(g, older - g) <= room)
    if folded is not None:
        return _Plan(recent, folded, older - folded)
    return None


def recall_lines(item: Step, query_words: set[str], limit: int) -> list[str]:
    """Up to ``limit`` lines of a compacted item that share most words with the request
    (ties: earlier lines first)."""
    if not query_words or limit <= 0 or len(item.text) > VERBATIM_CHARS:
        return []
    scored = []
    for i, line in enumerate(item.text.splitlines()):
        text = line.rstrip()
        if len(text.strip()) < _MIN_LINE or len(text) > MAX_LINE_CHARS:
            continue
        hits = len(set(_words(text)) & query_words)
        if hits:
            scored.append((-hits, i, text))
    scored.sort()
    return [text for _, _, text in sorted(scored[:limit], key=lambda s: s[1])]


def _line_words(item: Step, memo: Memo) -> list[tuple[str, frozenset[str]]]:
    """The recallable lines of an item with their words (memoised)."""
    key = ("words", item)
    found = memo.blocks.get(key)
    if found is None:
        lines = []
        if len(item.text) <= VERBATIM_CHARS:
            for line in item.text.splitlines():
                text = line.rstrip()
                if len(text.strip()) >= _MIN_LINE and len(text) <= MAX_LINE_CHARS:
                    lines.append(text)
        found = memo.blocks[key] = (lines, 0)
    words = memo.words.get(item)
    if words is None:
        words = memo.words[item] = [frozenset(_words(ln)) for ln in found[0]]
    return list(zip(found[0], words, strict=True))


def _spend(items: Sequence[Step], plan: _Plan, memo: Memo, session: str, room: int,
           query: str, settings: LaneSettings) -> list[str]:  # fmt: skip
    """Room left after the plan, spent on the lines of compacted tool outputs that share the
    rarest words with the request (by the summed idf of the shared words; ties: newer
    steps, then earlier lines), each tagged with its step."""
    words = set(_words(query))
    if not words:
        return []
    older = items[: len(items) - plan.recent]
    left = room - _cost(items, plan, memo, session) - memo.count(_RECALLED) - 1
    if left <= 0:
        return []
    shown = {ln for i in older[plan.goals + plan.digest :] for ln in memo.block("stub", i)[0]}
    hits: list[tuple[int, int, str, frozenset[str]]] = []
    df: Counter[str] = Counter()
    total = 0
    for item in older:
        if item.role is not StepRole.TOOL:
            continue
        for n, (line, line_words) in enumerate(_line_words(item, memo)):
            total += 1
            shared = line_words & words
            if shared:
                df.update(shared)
                hits.append((item.step, n, line, shared))
    own = {(h[0], h[1]): sum(math.log(1 + total / df[w]) for w in h[3]) for h in hits}

    newest = {s: n for n, s in enumerate(sorted({h[0] for h in hits}, reverse=True))}

    def score(h: tuple[int, int, str, frozenset[str]]) -> float:
        # Agents copy blocks: a line among matching neighbours is worth more; and they
        # copy most from the outputs they saw last.
        near = own.get((h[0], h[1] - 1), 0.0) + own.get((h[0], h[1] + 1), 0.0)
        base = own[(h[0], h[1])] + settings.neighbour_weight * near
        return base * (1 + settings.recency_weight / (1 + newest[h[0]]))

    ranked = sorted(hits, key=lambda h: (-score(h), -h[0], h[1]))
    chosen: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for step, n, line, _ in ranked[: settings.recall_lines]:
        if line in seen or ("  " + line) in shown or ("! " + line) in shown:
            continue
        cost = memo.count(f"~#{step} {line}") + 1
        if cost > left:
            continue
        seen.add(line)
        chosen.append((step, n, line))
        left -= cost
    return [f"~#{step} {line}" for step, _, line in sorted(chosen)]


def build_lane(
    items: Sequence[Step],
    room: int,
    memo: Memo,
    *,
    session: str,
    query: str = "",
    settings: LaneSettings = LaneSettings(),
) -> HistoryLane:
    """The history lane of ``items`` (oldest first) in at most ``room`` tokens, counted
    exactly with ``memo.counter`` on the final text.

    Raises ``BudgetUnreachableError`` when not even the one-line form fits ``room``.
    """
    margin = 0
    while True:
        plan = _plan(items, room - margin, memo, session, settings)
        extra = [] if plan is None else _spend(items, plan, memo, session, room - margin,
                                                query, settings)  # fmt: skip
        lines = (_minimal(items, session) if plan is None
                 else _render(items, plan, memo, session, extra))  # fmt: skip
        text = "\n".join(lines)
        tokens = memo.counter.count(text)
        if tokens <= room:
            break
        if plan is None:
            raise BudgetUnreachableError(
                f"the history lane needs {tokens} tokens even with every step compacted to "
                f"one line, and has {room}; nothing was truncated: raise the budget",
                tokens, room,
            )  # fmt: skip
        # Lines counted one by one can undercount their joined text by a few tokens.
        margin += max(tokens - room, 1 + room // 100)
    return HistoryLane(session, text, tokens, items[-1].step if items else 0,
                       _compacted(items, plan, session, memo))  # fmt: skip


def _compacted(items: Sequence[Step], plan: _Plan | None, session: str,
               memo: Memo) -> tuple[Pointer, ...]:  # fmt: skip
    older = list(items) if plan is None else list(items[: len(items) - plan.recent])
    out = []
    for i, item in enumerate(older):
        if plan is None or i < plan.goals:
            reason = "goals"
        elif i < plan.goals + plan.digest:
            reason = "digest"
        else:
            reason = "masked"
        label = item.tool if item.role is StepRole.TOOL and item.tool else item.role.value
        out.append(Pointer(f"session:{session}#{item.step}", f"step {item.step} {label}",
                           memo.item_tokens(item), 0.0, reason))  # fmt: skip
    return tuple(out)


def search_items(items: Sequence[Step], query: str, k: int = 3,
                 role: StepRole | None = None) -> list[Step]:  # fmt: skip
    """The ``k`` items (of ``role``, when given) whose text best matches ``query`` by BM25
    (ties: newest first): how a stubbed step is found again by what a later step says."""
    if role is not None:
        items = [i for i in items if i.role is role]
    words = _words(query)
    if not words or not items:
        return []
    docs = [Counter(_words(i.text)) for i in items]
    lengths = [sum(d.values()) for d in docs]
    avg = sum(lengths) / len(docs) or 1.0
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    k1, b = 1.2, 0.75
    scores = []
    for idx, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        s = 0.0
        for w in set(words):
            tf = doc.get(w, 0)
            if tf:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        if s > 0:
            scores.append((-s, -items[idx].step, idx))
    scores.sort()
    return [items[idx] for _, _, idx in scores[:k]]
