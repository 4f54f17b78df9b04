"""The cold-start bundle's one global trim: every tier's items, deduplicated (pinned >
outcomes > frame-relevant), kept by salience until the budget is spent, at least one.

What does not fit is named by uri (up to ``MAX_OVERFLOW``), never cut silently; the one
case where text is shortened (a single item larger than the whole budget) says so and
where the rest is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.core import MAX_OVERFLOW, BundleItem, Tier
from indexers import TokenCounter

__all__ = ["fit_bundle"]

_ORDER = {Tier.PINNED: 0, Tier.OUTCOMES: 1, Tier.FRAME: 2}
_HEADINGS = {Tier.PINNED: "## Pinned", Tier.OUTCOMES: "## Earlier outcomes",
             Tier.FRAME: "## Relevant now"}  # fmt: skip
_GOAL_CHARS = 300  # the goal as the bundle's title: enough to recognise it


def _block(item: BundleItem) -> str:
    return f"[{item.uri}] {item.title}\n{item.text}\n"


def _render(goal: str, kept: Sequence[BundleItem]) -> str:
    parts = [f"# Start here: {' '.join(goal.split())[:_GOAL_CHARS]}\n"]
    for tier in Tier:
        mine = [i for i in kept if i.tier is tier]
        if mine:
            parts.append(f"\n{_HEADINGS[tier]}\n")
            parts.extend(_block(i) for i in mine)
    return "".join(parts)


def _shortened(item: BundleItem, room: int, counter: TokenCounter) -> BundleItem:
    """``item`` with its text cut at a line to fit ``room`` tokens, saying so."""
    lines = item.text.split("\n")
    note = f"... (shortened to fit; the whole of it: {item.uri})"
    while lines:
        lines.pop()
        cut = replace(item, text="\n".join([*lines, note]))
        if counter.count(_block(cut)) <= room:
            return cut
    return replace(item, text=note[: max(0, room * 3)])


def fit_bundle(goal: str, items: Sequence[BundleItem], budget: int, counter: TokenCounter
               ) -> tuple[tuple[BundleItem, ...], tuple[str, ...], str, int]:  # fmt: skip
    """(kept, overflow uris, text, tokens): the bundle's items under ``budget``."""
    seen: set[str] = set()
    unique: list[BundleItem] = []
    for item in sorted(items, key=lambda i: _ORDER[i.tier]):  # stable: callers' order within
        if item.uri not in seen:
            seen.add(item.uri)
            unique.append(replace(item, tokens=counter.count(_block(item))))
    ranked = sorted(unique, key=lambda i: (-i.salience, _ORDER[i.tier], i.uri))
    room = budget - counter.count(_render(goal, [])) - 4 * len(Tier)  # the headings
    kept: list[BundleItem] = []
    used = 0
    for item in ranked:
        if used + item.tokens <= room:
            kept.append(item)
            used += item.tokens
    if not kept and ranked:
        first = _shortened(ranked[0], room, counter)
        kept = [replace(first, tokens=counter.count(_block(first)))]
    # Shown by tier; in a tier by salience, but outcomes in the caller's order (newest first).
    ranked_at = {i.uri: n for n, i in enumerate(ranked)}
    given_at = {i.uri: n for n, i in enumerate(unique)}

    def shown(chosen: Sequence[BundleItem]) -> tuple[BundleItem, ...]:
        def at(i: BundleItem) -> tuple[int, int]:
            n = given_at[i.uri] if i.tier is Tier.OUTCOMES else ranked_at.get(i.uri, 0)
            return _ORDER[i.tier], n

        return tuple(sorted(chosen, key=at))

    text = _render(goal, shown(kept))
    while counter.count(text) > budget and len(kept) > 1:
        kept.pop()  # the least salient goes first
        text = _render(goal, shown(kept))
    names = {i.uri for i in kept}
    overflow = tuple(i.uri for i in ranked if i.uri not in names)[:MAX_OVERFLOW]
    return shown(kept), overflow, text, counter.count(text)
