"""What the engine remembers: the evidence ledger's journal (turns, their inputs, feedback)
and the checks behind ``feedback``. Sessions, observations and salience land here next.
Imports only ``engine.core``; its outputs reach packing as plain data through the
workspace."""

from engine.memory._feedback import (
    CitedRef,
    RecentCitations,
    check_citations,
    citation_number,
    still_matches,
)
from engine.memory._journal import Inputs, Journal

__all__ = [
    "CitedRef",
    "Inputs",
    "Journal",
    "RecentCitations",
    "check_citations",
    "citation_number",
    "still_matches",
]
