"""The advisory: say when the evidence is thin, and name what is missing."""

from __future__ import annotations

from collections.abc import Sequence

from engine.core import ContextSettings
from engine.packing._select import Picked, Selection
from engine.retrieval import Scored
from overlays import View

__all__ = ["advise"]

_MENTION_DEPTH = 25  # BM25 hits read for a name no section defines (it read 3)


def advise(
    view: View,
    scored: Sequence[Scored],
    shown: Sequence[Picked],
    idents: Sequence[str],
    settings: ContextSettings,
    selection: Selection | None = None,
) -> tuple[str, ...]:
    """Notes for the planner: too few candidates, names the index does not hold, no
    definition of the names asked about among the evidence ``shown``, or budget left
    unused because what remained was weak."""
    notes: list[str] = []
    weak = [p for p in selection.pointers if p.reason == "weak"] if selection else []
    big = [p for p in selection.pointers if p.reason == "budget"] if selection else []
    if selection is not None and selection.floor_tokens and weak and not big:
        notes.append(
            f"stopped at the relevance floor: ~{selection.floor_tokens:,} tokens of budget "
            f"left unused; {len(weak)} weaker sections found are listed as pointers"
        )
    if big and not shown:  # (not the floor: the budget left no room for any of them)
        notes.append(f"no evidence fits this budget: the {len(big)} sections found are "
                     "listed as pointers; raise the budget or resolve one")  # fmt: skip
    if len(scored) < settings.min_candidates:
        notes.append(f"insufficient evidence: only {len(scored)} candidate sections found")
    asked = list(idents[:20])
    known = view.defining(asked, limit=1) if asked else {}
    known |= _qualified(view, [i for i in asked if i not in known])
    missing = [i for i in asked if i not in known and not _mentioned(view, i)]
    if missing:
        notes.append(
            f"not found in the index: {', '.join(missing[:5])}; need the definition of {missing[0]}"
        )
    defined_here = {d for p in shown for d in _names(p.scored.chunk.symbol, p.scored.chunk.defines)}
    undefined = [i for i in asked if i in known and i not in defined_here]
    if known and len(undefined) == len(known):
        notes.append(
            "weak evidence: no definition of the names asked about fits in the context "
            f"(e.g. {undefined[0]}); raise the budget or ask for it by name"
        )
    return tuple(notes)


def _qualified(view: View, names: Sequence[str]) -> dict[str, list[str]]:
    """The dotted names among ``names`` (``LogCaptureFixture.get_records``) a section
    defines under that qualified symbol: a section defines its bare name (``get_records``),
    so looking the dotted one up said a method in the packed evidence was not indexed."""
    dotted = {n: n.rsplit(".", 1)[1] for n in names if "." in n.strip(".")}
    if not dotted:
        return {}
    found = view.defining(sorted(set(dotted.values())), limit=50)
    chunks = view.chunks(sorted({cid for ids in found.values() for cid in ids}))
    out: dict[str, list[str]] = {}
    for name, tail in dotted.items():
        ids = [cid for cid in found.get(tail, ())
               if cid in chunks and name in _names(chunks[cid].symbol, ())]  # fmt: skip
        if ids:
            out[name] = ids[:1]
    return out


def _names(symbol: str | None, defines: Sequence[str]) -> set[str]:
    """What a section can be asked for by: the names it defines, its symbol, and each
    dotted tail of its symbol (``pkg.Cls.meth`` answers ``Cls.meth``)."""
    out = set(defines)
    parts = (symbol or "").split(".")
    out.update(".".join(parts[i:]) for i in range(len(parts)) if parts[i:] != [""])
    return out


def _mentioned(view: View, name: str) -> bool:
    """Whether any section's text uses ``name``, among its best BM25 hits (deep enough that
    sections matching only its parts, ``RetryPolicy`` for ``retry_backoff``, do not hide
    the one using it whole)."""
    chunks = view.chunks([h.id for h in view.search_sections(name, _MENTION_DEPTH)])
    return any(name in c.references or name in c.text for c in chunks.values())
