"""What the engine remembers: the evidence ledger's journal (turns, their inputs, feedback),
the checks behind ``feedback``, and sessions: their steps, the history lane (verbatim,
masked, digested, goals and lessons) and compaction with checkpoints; and the memory store:
notes (observations) an agent saves and finds again, linked to the code and re-checked when
read. Salience lands here next.
Imports only ``engine.core``; its outputs reach packing as plain data through the
workspace."""

from engine.memory._compact import STUB_TOKENS, compact
from engine.memory._entities import Candidate
from engine.memory._feedback import (
    CitedRef,
    RecentCitations,
    check_citations,
    citation_number,
    still_matches,
)
from engine.memory._history import (
    VERBATIM_CHARS,
    Memo,
    digest_lines,
    goal_lines,
    short_form,
    stub_lines,
    verbatim_lines,
)
from engine.memory._journal import Inputs, Journal
from engine.memory._lane import LaneSettings, build_lane, recall_lines, search_items
from engine.memory._links import CodeAccess, file_lines
from engine.memory._memory import MAX_K as MAX_MEMORY_K
from engine.memory._memory import MAX_QUERY_CHARS, Memory, MemoryItem
from engine.memory._observations import DEDUPE_WINDOW_S, NoteStore
from engine.memory._observe import Observation, command_of, names_in, observe
from engine.memory._purge import LedgerPurge, purge_ledger
from engine.memory._session import SESSION_ID, Session, clean_text, session_uri

__all__ = [
    "DEDUPE_WINDOW_S",
    "MAX_MEMORY_K",
    "MAX_QUERY_CHARS",
    "SESSION_ID",
    "STUB_TOKENS",
    "VERBATIM_CHARS",
    "Candidate",
    "CitedRef",
    "CodeAccess",
    "Inputs",
    "Journal",
    "LaneSettings",
    "LedgerPurge",
    "Memo",
    "Memory",
    "MemoryItem",
    "NoteStore",
    "Observation",
    "RecentCitations",
    "Session",
    "build_lane",
    "check_citations",
    "citation_number",
    "clean_text",
    "command_of",
    "compact",
    "digest_lines",
    "file_lines",
    "goal_lines",
    "names_in",
    "observe",
    "purge_ledger",
    "recall_lines",
    "search_items",
    "session_uri",
    "short_form",
    "still_matches",
    "stub_lines",
    "verbatim_lines",
]
