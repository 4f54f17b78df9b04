"""The history lane: a session's items, newest whole and older ones compacted, in a room of
tokens that is never exceeded and never cut.

The agent's newest exchange (its last action and that action's result) comes first: whole
when it fits the room with every older step folded, else as stubs (``_floor``). Then, with
a request, ``recall_share`` of the room (less, when that leaves too little) is kept for the
lines of compacted tool outputs the request points at (the words it shares with them, the
blocks around those, and whole definitions it names) and for the code the agent drafted
in its own older turns (what it is likely to write again), and those lines come before
stubs: while they want the room, every older item is in the digest; what they do not use
goes back to the rest. The newest items are shown verbatim (L0, at most ``recent_turns``
of the agent's steps, not counting the requests cortex journals between them, and
``recent_share`` of the room left, or all of it once every line the request matches is
in); older tool outputs are masked to stubs (L1); when the stubs do not fit, the oldest of
them are folded into a digest (L2), and when the digest does not fit either, the oldest
part of it into goals and lessons (L3); when even every older step's goals do not fit (a
long session's user messages alone outgrow any room), the oldest steps are named by one
line (L4). Whatever is not shown whole is listed in ``HistoryLane.compacted`` with a
``session:ID#N`` uri that resolves to it; if even the shortest form (one line naming every
step) does not fit, ``build_lane`` raises ``BudgetUnreachableError`` rather than drop
anything.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core import BudgetUnreachableError, HistoryLane, Pointer, Step, StepRole
from engine.memory._history import VERBATIM_CHARS, Memo
from engine.memory._lines import step_lines, words

__all__ = ["LaneSettings", "build_lane", "lane_header"]

# Recalled lines are shown as the step printed them, under one ``~#N`` line per step: a tag
# on every line would cost a few tokens each, and the room is what decides how many fit.
_RECALLED = "Recalled for this request from compacted steps (~#N: lines of step N):"
# Room the joined lane leaves is spent again on recalled lines at most this many times (the
# second round takes what the first's own joined text leaves), and not at all below this
# many tokens (less than a line).
_FILL_ROUNDS = 2
_FILL_MIN = 10


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """How the history lane spends its room (part of a session turn's replay key)."""

    recent_turns: int = 10  # L0: the newest items shown whole, at most this many
    # L0's cap as a share of the room the recalled lines leave: an agent copies most from
    # the last output or two, and the rest of the room keeps every older step visible.
    recent_share: float = 0.7
    # Room kept first for lines of compacted outputs recalled for the request (when there is
    # one): agents copy from older outputs what their request names, rarely a stub's line.
    recall_share: float = 0.6
    # Lines of compacted outputs recalled for the request at most (the room decides first).
    recall_lines: int = 300
    neighbour_weight: float = 0.5  # a recalled line's score gains this share of its neighbours'
    neighbour_span: int = 3  # neighbours this many lines either side count, by 1/distance
    # A line inside a definition the request names gains this many times the name's idf: an
    # agent that names a function rewrites it, so its body comes before lines that merely
    # share a word.
    definition_weight: float = 8.0
    # A recalled line's score is divided by (1 + steps back / this): agents copy most from
    # what they saw last.
    recency_steps: float = 20.0
    # A line of code the agent itself showed in an older turn besides its command (a draft
    # of an edit, code quoted from what it read) gains this much, as much as a line sharing
    # a few rare words with the request: agents write again what they drafted, in words the
    # request rarely repeats.
    draft_weight: float = 20.0


def lane_header(session: str, items: Sequence[Step]) -> str:
    """The lane's first line: which steps it covers and how a ``[#N]`` resolves."""
    span = f"#{items[0].step}-#{items[-1].step}" if items else "none yet"
    return (f"## Session history\nSession {session}, steps {span}; [#N] is step N, "
            f"in full at session:{session}#N")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Floor:
    """What every plan keeps of the agent's newest exchange (``_newest``): its newest
    ``whole`` items verbatim and none of its ``kept`` newest items folded (those not
    whole are stubs); ``shallow`` False when, so kept, not every older item fits in the
    digest (some go to goals and lessons however little the recalled lines take)."""

    whole: int = 0
    kept: int = 0
    shallow: bool = True


_NO_FLOOR = _Floor()
# Steps cortex journals itself (a build_context request, the files changed): they are not
# the agent's action, so they neither start its newest exchange nor use a recent slot.
_ENGINE_ROLES = (StepRole.REQUEST, StepRole.CHANGES)


def _newest(items: Sequence[Step]) -> int:
    """How many of the newest items are the agent's newest exchange: its newest step that
    cortex did not journal itself, with the agent's turn just before it when that step is
    the turn's result (a tool output), and every step after them."""
    at = [n for n, item in enumerate(items) if item.role not in _ENGINE_ROLES][-2:]
    if not at:
        return 0
    first = at[-1]
    if (len(at) == 2 and items[first].role is StepRole.TOOL
            and items[at[0]].role is StepRole.ASSISTANT):  # fmt: skip
        first = at[0]
    return len(items) - first


@dataclass(slots=True)
class _Plan:
    recent: int  # items shown whole (the newest)
    goals: int  # oldest items in L3 (after the ``gone`` ones)
    digest: int  # items in L2 after them; the rest of the older ones are stubs
    gone: int = 0  # the very oldest, named by one line (L4: when even goals do not fit)


def _gone_lines(items: Sequence[Step]) -> list[str]:
    """L4: the oldest items as one line (each still resolves in full)."""
    if not items:
        return []
    asked = sum(1 for item in items if item.role is StepRole.USER)
    return [f"Steps #{items[0].step}-#{items[-1].step} compacted to this line ({len(items)} "
            f"steps, {asked} user messages); each resolves in full."]  # fmt: skip


def _render(items: Sequence[Step], plan: _Plan, memo: Memo, session: str,
            recalled: Sequence[str]) -> list[str]:  # fmt: skip
    gone, older = _split(items, plan)
    lines = [lane_header(session, items), *_gone_lines(gone)]
    lines += memo.run("goals", older[: plan.goals])[0]
    lines += memo.run("digest", older[plan.goals : plan.goals + plan.digest])[0]
    for item in older[plan.goals + plan.digest :]:
        lines += memo.block("stub", item)[0]
    if recalled:
        lines += [_RECALLED, *recalled]
    if plan.recent:
        lines.append(_recent_header(items, plan))
        for item in items[len(items) - plan.recent :]:
            lines += memo.block("verbatim", item)[0]
    return lines


def _split(items: Sequence[Step], plan: _Plan) -> tuple[Sequence[Step], Sequence[Step]]:
    """(the items named by one line, the other older ones) of a plan."""
    return items[: plan.gone], items[plan.gone : len(items) - plan.recent]


def _recent_header(items: Sequence[Step], plan: _Plan) -> str:
    return f"Recent steps, verbatim (#{items[-plan.recent].step}-#{items[-1].step}):"


def _cost(items: Sequence[Step], plan: _Plan, memo: Memo, session: str) -> int:
    """What ``_render`` of the plan (without recalled lines) costs, summed line by line
    from the memoised blocks."""
    gone, older = _split(items, plan)
    total = memo.cost([lane_header(session, items), *_gone_lines(gone)])
    total += memo.run("goals", older[: plan.goals])[1]
    total += memo.run("digest", older[plan.goals : plan.goals + plan.digest])[1]
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
          settings: LaneSettings, reserve: int = 0, share: float | None = None, *,
          stubs: bool = True, floor: _Floor = _NO_FLOOR, deep: bool = True,
          ) -> _Plan | None:  # fmt: skip
    """The plan that shows the most whole and the least folded within ``room`` less
    ``reserve`` (by summed line counts; the newest whole in at most ``share`` of it; with
    ``stubs`` False, every older item folded but the ``floor``'s), or None when not even
    everything folded into goals fits (without ``deep``: into the digest)."""
    room -= reserve
    cap = int(room * (settings.recent_share if share is None else share))
    recent, used, slots = 0, 0, 0
    for item in reversed(items):
        forced = recent < floor.whole  # the newest exchange: whole whatever the cap
        if not forced and (slots >= settings.recent_turns or len(item.text) > VERBATIM_CHARS):
            break
        cost = memo.block("verbatim", item)[1] + 1
        if not forced and used + cost > cap:
            break
        recent, used = recent + 1, used + cost
        slots += item.role is not StepRole.REQUEST
    # Fewer whole steps before any step falls below the digest (which keeps the names
    # and failures of every step it covers); goals and lessons only when nothing else fits,
    # and the oldest steps as one line only when not even every older step's goals do (a
    # long session's user messages alone outgrow any room).
    most = len(items) - floor.kept  # the older items a plan may fold
    for deepest in (False, True) if deep else (False,):
        for whole in range(recent, floor.whole - 1, -1):
            plan = _fold(items, whole, room, memo, session, goals=deepest, stubs=stubs,
                         most=most)  # fmt: skip
            if plan is not None:
                return plan
    for whole in range(recent, floor.whole - 1, -1) if deep else ():
        plan = _gone(items, whole, room, memo, session)
        if plan is not None:
            return plan
    return None


def _floor(items: Sequence[Step], room: int, memo: Memo, session: str) -> _Floor:
    """What of the agent's newest exchange every plan keeps: as many of its newest items
    verbatim as fit ``room`` with every older item folded (into the digest when it fits
    without them, else into goals and lessons), the rest of it as stubs; nothing when not
    even its stubs fit."""
    kept = _newest(items)
    whole = 0
    while whole < kept and len(items[-1 - whole].text) <= VERBATIM_CHARS:
        whole += 1
    for deepest in (False, True):
        for shown in range(whole, -1, -1):
            most = len(items) - kept
            folded = _Plan(shown, most if deepest else 0, 0 if deepest else most)
            if _cost(items, folded, memo, session) <= room:
                return _Floor(shown, kept, not deepest)
    return _NO_FLOOR


def _gone(items: Sequence[Step], recent: int, room: int, memo: Memo,
          session: str) -> _Plan | None:  # fmt: skip
    """With ``recent`` items whole and the other older ones in goals: the fewest oldest
    items named by one line for the rest to fit ``room``; None when nothing does."""
    older = len(items) - recent

    def cost(gone: int) -> int:
        return _cost(items, _Plan(recent, older - gone, 0, gone), memo, session)

    gone = _smallest(1, older, lambda g: cost(g) <= room) if older else None
    return None if gone is None else _Plan(recent, older - gone, 0, gone)


def _fold(items: Sequence[Step], recent: int, room: int, memo: Memo, session: str, *,
          goals: bool, stubs: bool = True, most: int | None = None) -> _Plan | None:  # fmt: skip
    """With ``recent`` items whole: the fewest older items folded into the digest (all
    of them without ``stubs``; with ``goals``, then into goals and lessons) for the rest
    to fit ``room``, folding at most the ``most`` oldest; None when nothing does."""
    older = len(items) - recent
    most = older if most is None else min(most, older)

    def cost(to_goals: int, digest: int) -> int:
        return _cost(items, _Plan(recent, to_goals, digest), memo, session)

    digest = _smallest(0 if stubs else most, most, lambda d: cost(0, d) <= room)
    if digest is not None:
        return _Plan(recent, 0, digest)
    if not goals:
        return None
    folded = _smallest(0, most, lambda g: cost(g, most - g) <= room)
    if folded is not None:
        return _Plan(recent, folded, most - folded)
    return None


@dataclass(frozen=True, slots=True)
class _Ranked:
    """The lines of a plan's compacted steps (tool outputs, drafts) a request points at,
    best first as (score, step, line number), with each step's lines and the lines already
    shown."""

    order: list[tuple[float, int, int]]
    texts: dict[int, tuple[str, ...]]  # as shown: a line start reading as the frame escaped
    shown: set[str]


def _spend(items: Sequence[Step], plan: _Plan, memo: Memo, session: str, room: int,
           query: str, settings: LaneSettings, ranked: _Ranked | None = None,
           ) -> list[str]:  # fmt: skip
    """Room left after the plan, spent on the lines of compacted steps the request
    points at (``_rank``; ``ranked`` when already ranked for this plan), grouped under
    their step."""
    if not words(query):
        return []
    left = room - _cost(items, plan, memo, session) - memo.count(_RECALLED) - 1
    if left <= 0:
        return []
    ranked = ranked or _rank(items, plan, memo, query, settings)
    chosen: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    opened: set[int] = set()  # steps whose group header is already paid for
    for _, step, n in ranked.order:
        # (Every line costs two tokens at least: its own and its newline.)
        if len(chosen) >= settings.recall_lines or left < 2:
            break
        # As the step printed it, with a line start that would read as the prompt's frame
        # escaped (a tool output's own "[#2 tool pytest exit 0] … passed" line).
        line = ranked.texts[step][n]
        if line in seen or ("  " + line) in ranked.shown or ("! " + line) in ranked.shown:
            continue
        cost = memo.count(line) + 1
        if step not in opened:
            cost += memo.count(f"~#{step}") + 1
        if cost > left:
            continue
        seen.add(line)
        opened.add(step)
        chosen.append((step, n, line))
        left -= cost
    out: list[str] = []
    last_step = -1
    for step, _, line in sorted(chosen):
        if not out or step != last_step:
            out.append(f"~#{step}")
        last_step = step
        out.append(line)
    return out


def _rank(items: Sequence[Step], plan: _Plan, memo: Memo, query: str,
          settings: LaneSettings) -> _Ranked:  # fmt: skip
    """The lines of the plan's compacted tool outputs and agent turns' drafts that the
    request points at: a line scores the summed idf of the words it shares with the
    request, plus a share of its neighbours' (agents copy blocks), of a definition it sits
    in that the request names (agents rewrite what they name) and ``draft_weight`` for a
    draft's line, divided by how far back it is (ties: newer steps, then earlier lines)."""
    if not items:  # a session's first call, before its first step
        return _Ranked([], {}, set())
    asked = set(words(query))
    older = items[: len(items) - plan.recent]
    stubs = older[plan.gone + plan.goals + plan.digest :]
    shown = {ln for i in stubs for ln in memo.block("stub", i)[0]}
    # A line the newest steps show whole (a file viewed again) is not recalled twice.
    shown.update("  " + ln.rstrip() for i in items[len(older) :]
                 for ln in memo.block("verbatim", i)[0])  # fmt: skip
    outputs = [(item, step_lines(item, memo)) for item in older
               if item.role in (StepRole.TOOL, StepRole.ASSISTANT)]  # fmt: skip
    df: Counter[str] = Counter()
    total = 0
    shared: dict[tuple[int, int], frozenset[str]] = {}
    for item, lines in outputs:
        hits: set[int] = set()
        for word in asked:
            hits.update(lines.where.get(word, ()))
        for n in sorted(hits):
            common = lines.words[n] & asked
            df.update(common)
            shared[(item.step, n)] = common
        total += len(lines.text)
    idf = {w: math.log(1 + total / df[w]) for w in df}
    own = {key: sum(idf[w] for w in common) for key, common in shared.items()}
    span = range(1, settings.neighbour_span + 1)
    score: dict[tuple[int, int], float] = {}
    for (step, n), value in own.items():  # a matching line lends to its neighbours
        score[(step, n)] = score.get((step, n), 0.0) + value
        for d in span:
            for m in (n - d, n + d):
                score[(step, m)] = score.get((step, m), 0.0) + settings.neighbour_weight * value / d
    for item, lines in outputs:  # a definition the request names lends to its lines
        for name in asked & lines.within.keys():
            lend = settings.definition_weight * idf.get(name, 0.0)
            for n in lines.within[name]:
                score[(item.step, n)] = score.get((item.step, n), 0.0) + lend
        if item.role is StepRole.ASSISTANT:  # a draft: whatever words the request uses
            for n in range(len(lines.text)):
                score[(item.step, n)] = score.get((item.step, n), 0.0) + settings.draft_weight
    texts = {item.step: lines.inert for item, lines in outputs}
    last = items[-1].step
    ranked = sorted(
        ((value / (1 + (last - step) / settings.recency_steps), step, n)
         for (step, n), value in score.items() if 0 <= n < len(texts[step]) and value > 0),
        key=lambda h: (-h[0], -h[1], h[2]),
    )  # fmt: skip
    return _Ranked(ranked, texts, shown)


def _planned(items: Sequence[Step], room: int, memo: Memo, session: str, query: str,
             settings: LaneSettings) -> tuple[_Plan | None, list[str]]:  # fmt: skip
    """The plan and the lines recalled for the request: the agent's newest exchange is
    kept first (``_floor``), then room is kept for the recalled lines, and what they do
    not use goes back to the plan."""
    floor = _floor(items, room, memo, session)
    # (A room below one token has none to keep: halving a negative reserve never ends.)
    reserve = int(room * settings.recall_share) if room > 0 and words(query) else 0

    def first(reserve: int) -> _Plan | None:
        # The lines the request points at come before the stubs: every older step is in
        # the digest (which keeps its names) while the recalled lines want the room. A plan
        # deeper than the digest is never kept with them: not searched for.
        return _plan(items, room, memo, session, settings, reserve, stubs=False, floor=floor,
                     deep=False)  # fmt: skip

    if not floor.shallow:  # no reserve leaves every older step in the digest
        reserve = 0
    plan = first(reserve) if reserve else None
    while reserve and plan is None:
        # Recalled lines never push a step below the digest (which keeps its names).
        reserve //= 2
        plan = first(reserve) if reserve else None
    if plan is not None:
        extra = _spend(items, plan, memo, session, room, query, settings)
        used = memo.cost([_RECALLED, *extra]) if extra else 0
        if used >= reserve - room // 50:
            return plan, extra
        # Every line the request matches is in: the rest of the room shows the newest whole.
        plan = _plan(items, room, memo, session, settings, used, 1.0, floor=floor)
    else:
        plan = _plan(items, room, memo, session, settings, floor=floor)
    extra = [] if plan is None else _spend(items, plan, memo, session, room, query, settings)
    return plan, extra


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
        plan, extra = _planned(items, room - margin, memo, session, query, settings)
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
    if plan is not None and query:
        text, tokens = _fill(items, plan, memo, session, room, query, settings, extra, lines,
                             tokens)  # fmt: skip
    return HistoryLane(session, text, tokens, items[-1].step if items else 0,
                       _compacted(items, plan, session, memo))  # fmt: skip


def _fill(items: Sequence[Step], plan: _Plan, memo: Memo, session: str, room: int,
          query: str, settings: LaneSettings, extra: list[str], lines: list[str],
          tokens: int) -> tuple[str, int]:  # fmt: skip
    """The lane with more recalled lines in the room its joined text leaves: lines counted
    one by one overstate their joined text (a newline often merges with what is next to
    it: ``.\n``, ``>\n<``, a blank line), so a lane planned by their sum falls short of
    ``room``."""
    text = "\n".join(lines)
    ranked: _Ranked | None = None  # the same plan each round: ranked once
    for _ in range(_FILL_ROUNDS):
        over = memo.cost(lines) - 1 - tokens
        if room - tokens < _FILL_MIN or over <= 0:
            break
        ranked = ranked or _rank(items, plan, memo, query, settings)
        more = _spend(items, plan, memo, session, room + over, query, settings, ranked)
        if len(more) <= len(extra):
            break
        candidate = _render(items, plan, memo, session, more)
        joined = "\n".join(candidate)
        count = memo.counter.count(joined)
        if count > room:
            break
        lines, text, tokens, extra = candidate, joined, count, more
    return text, tokens


def _compacted(items: Sequence[Step], plan: _Plan | None, session: str,
               memo: Memo) -> tuple[Pointer, ...]:  # fmt: skip
    older = list(items) if plan is None else list(items[: len(items) - plan.recent])
    out = []
    for i, item in enumerate(older):
        if plan is None or i < plan.gone + plan.goals:
            reason = "goals"
        elif i < plan.gone + plan.goals + plan.digest:
            reason = "digest"
        else:
            reason = "masked"
        label = item.tool if item.role is StepRole.TOOL and item.tool else item.role.value
        out.append(Pointer(f"session:{session}#{item.step}", f"step {item.step} {label}",
                           memo.item_tokens(item), 0.0, reason))  # fmt: skip
    return tuple(out)
