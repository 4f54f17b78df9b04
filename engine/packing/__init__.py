"""Candidates to prompt: the fixed lanes, evidence chosen by MMR, the text
rendered under a hard budget, the advisory, and the replay key of a request. Imports
``engine.core``, ``engine.retrieval`` and ``engine.embed``; never ``engine.memory``
(what memory knows reaches packing as plain data through the workspace)."""

from engine.packing._advice import advise
from engine.packing._build import Request, build_pack, pack_settings_for, replay_key, retrieve
from engine.packing._bundle import fit_bundle
from engine.packing._render import (
    INSTRUCTION,
    Lanes,
    Rendered,
    evidence_room,
    fixed_lanes,
    header_cost,
    render,
    request_words,
)
from engine.packing._select import (
    Neighbours,
    Picked,
    Selection,
    is_fragment,
    relevance,
    select_evidence,
    window_pick,
)

__all__ = [
    "INSTRUCTION",
    "Lanes",
    "Neighbours",
    "Picked",
    "Rendered",
    "Request",
    "Selection",
    "advise",
    "build_pack",
    "evidence_room",
    "fit_bundle",
    "fixed_lanes",
    "header_cost",
    "is_fragment",
    "pack_settings_for",
    "relevance",
    "render",
    "replay_key",
    "request_words",
    "retrieve",
    "select_evidence",
    "window_pick",
]
