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

from engine.core import BudgetUnreachableError, HistoryLane, Pointer
from engine.memory._history import (
    VERBATIM_CHARS,
    Item,
    Memo,
    Role,
    digest_lines,
    goal_lines,
    stub_lines,
    verbatim_lines,
)
from engine.memory._observe import MAX_LINE_CHARS

__all__ = ["LaneSettings", "build_lane", "lane_header", "recall_lines", "search_items"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_MIN_LINE = 25  # shorter lines carry too little to be worth recalling into a stub


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """How the history lane spends its room (part of a session turn's replay key)."""

    recent_turns: int = 10  # L0: the newest items shown whole, at most this many
    # L0's cap as a share of the lane's room: an agent copies most from the last output or
    # two, and the rest of the room keeps every older step visible as a stub.
    recent_share: float = 0.85
    # Lines recalled into masked stubs per item at most, by words shared with the request.
    recall_per_item: int = 40


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def lane_header(session: str, items: Sequence[Item]) -> str:
    """The lane's first line: which steps it covers and how a ``[#N]`` resolves."""
    span = f"#{items[0].step}-#{items[-1].step}" if items else "none yet"
    return (f"## Session history\nSession {session}, steps {span}; [#N] is step N, "
            f"in full at session:{session}#N")  # fmt: skip


@dataclass(slots=True)
class _Plan:
    recent: int  # items shown whole (the newest)
    goals: int  # oldest items in L3
    digest: int  # items in L2 after them; the rest of the older ones are stubs


def _render(items: Sequence[Item], plan: _Plan, memo: Memo, session: str,
            extra: dict[int, list[str]]) -> list[str]:  # fmt: skip
    older = items[: len(items) - plan.recent]
    lines = [lane_header(session, items)]
    lines += goal_lines(older[: plan.goals], memo)
    lines += digest_lines(older[plan.goals : plan.goals + plan.digest], memo)
    for item in older[plan.goals + plan.digest :]:
        lines += stub_lines(item, memo, extra.get(item.step, ()))
    if plan.recent:
        lines.append(f"Recent steps, verbatim (#{items[-plan.recent].step}-#{items[-1].step}):")
        for item in items[len(items) - plan.recent :]:
            lines += verbatim_lines(item)
    return lines


def _minimal(items: Sequence[Item], session: str) -> list[str]:
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


def _plan(items: Sequence[Item], room: int, memo: Memo, session: str,
          settings: LaneSettings) -> _Plan | None:  # fmt: skip
    """The plan that shows the most whole and the least folded within ``room`` (by summed
    line counts), or None when not even everything folded into goals fits."""
    cap = int(room * settings.recent_share)
    recent, used = 0, 0
    for item in reversed(items):
        if recent >= settings.recent_turns or len(item.text) > VERBATIM_CHARS:
            break
        cost = memo.cost(verbatim_lines(item)) + 1
        if used + cost > cap:
            break
        recent, used = recent + 1, used + cost
    while recent >= 0:
        plan = _fold(items, recent, room, memo, session)
        if plan is not None:
            return plan
        recent -= 1
    return None


def _fold(items: Sequence[Item], recent: int, room: int, memo: Memo,
          session: str) -> _Plan | None:  # fmt: skip
    """With ``recent`` items whole: the fewest older items folded into the digest (then
    into goals) for the rest to fit ``room``; None when nothing does."""
    older = len(items) - recent

    def cost(goals: int, digest: int) -> int:
        return memo.cost(_render(items, _Plan(recent, goals, digest), memo, session, {}))

    digest = _smallest(0, older, lambda d: cost(0, d) <= room)
    if digest is not None:
        return _Plan(recent, 0, digest)
    goals = _smallest(0, older, lambda g: cost(g, older - g) <= room)
    if goals is not None:
        return _Plan(recent, goals, older - goals)
    return None


def recall_lines(item: Item, query_words: set[str], limit: int) -> list[str]:
    """Up to ``limit`` lines of a masked item that share most words with the request
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


def _spend(items: Sequence[Item], plan: _Plan, memo: Memo, session: str, room: int,
           query: str, settings: LaneSettings) -> dict[int, list[str]]:  # fmt: skip
    """Room left after the plan, spent on recalled lines of the masked items, newest first."""
    extra: dict[int, list[str]] = {}
    words = set(_words(query))
    if not words:
        return extra
    older = items[: len(items) - plan.recent]
    masked = [i for i in older[plan.goals + plan.digest :] if i.role is Role.TOOL]
    left = room - memo.cost(_render(items, plan, memo, session, extra))
    for item in reversed(masked):
        if left <= 0:
            break
        shown = set(stub_lines(item, memo))
        for line in recall_lines(item, words, settings.recall_per_item):
            cost = memo.count("~ " + line) + 1
            if ("  " + line) in shown or ("! " + line) in shown or cost > left:
                continue
            extra.setdefault(item.step, []).append(line)
            left -= cost
    return extra


def build_lane(
    items: Sequence[Item],
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
        extra = {} if plan is None else _spend(items, plan, memo, session, room - margin,
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


def _compacted(items: Sequence[Item], plan: _Plan | None, session: str,
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
        label = item.tool if item.role is Role.TOOL and item.tool else item.role.value
        out.append(Pointer(f"session:{session}#{item.step}", f"step {item.step} {label}",
                           memo.item_tokens(item), 0.0, reason))  # fmt: skip
    return tuple(out)


def search_items(items: Sequence[Item], query: str, k: int = 3) -> list[Item]:
    """The ``k`` items whose text best matches ``query`` by BM25 (ties: newest first): how a
    stubbed step is found again by what a later step says."""
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
