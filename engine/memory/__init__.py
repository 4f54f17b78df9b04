"""What the engine remembers: the evidence ledger's journal (turns, their inputs, feedback),
the checks behind ``feedback``, and sessions: their steps, the history lane (verbatim,
masked, digested, goals and lessons) and compaction with checkpoints; and the memory store:
notes (observations) an agent saves and finds again, linked to the code and re-checked when
read; and learning from outcomes: attest rules, the EMA step over rerank features, the
rate limit, and salience folded from the journal's attest/weights pairs.
Imports only ``engine.core``; its outputs reach packing as plain data through the
workspace."""

from engine.memory._attest import (
    LEARN_POOL,
    FeatureRow,
    RecentFeatures,
    TokenBucket,
    check_attest,
    cited_keys,
    ema_step,
    item_changes,
    split_rows,
)
from engine.memory._compact import STUB_TOKENS, compact
from engine.memory._entities import Candidate
from engine.memory._feedback import (
    CitedRef,
    RecentCitations,
    check_citations,
    citation_number,
    still_matches,
)
from engine.memory._free_text import name_text
from engine.memory._history import (
    VERBATIM_CHARS,
    Memo,
    changes_text,
    digest_lines,
    goal_lines,
    short_form,
    stub_lines,
    verbatim_lines,
)
from engine.memory._journal import Inputs, Journal
from engine.memory._lane import LaneSettings, build_lane
from engine.memory._lines import search_items
from engine.memory._links import CodeAccess, file_lines
from engine.memory._memory import MAX_K as MAX_MEMORY_K
from engine.memory._memory import MAX_QUERY_CHARS, Memory, MemoryItem, recall_query
from engine.memory._observations import DEDUPE_WINDOW_S, NoteStore
from engine.memory._observe import Observation, command_of, names_in, observe
from engine.memory._outcomes import OutcomeIndex
from engine.memory._pinned import RULES_FILES, rules_sections
from engine.memory._purge import LedgerPurge, purge_ledger
from engine.memory._salience import (
    SalienceState,
    SalienceTables,
    item_salience,
    salience_path,
    weights_payload,
)
from engine.memory._session import SESSION_ID, Session, clean_text, session_uri
from engine.memory._summary import SessionSummary, end_session, session_summary

__all__ = [
    "DEDUPE_WINDOW_S",
    "LEARN_POOL",
    "MAX_MEMORY_K",
    "MAX_QUERY_CHARS",
    "RULES_FILES",
    "SESSION_ID",
    "STUB_TOKENS",
    "VERBATIM_CHARS",
    "Candidate",
    "CitedRef",
    "CodeAccess",
    "FeatureRow",
    "Inputs",
    "Journal",
    "LaneSettings",
    "LedgerPurge",
    "Memo",
    "Memory",
    "MemoryItem",
    "NoteStore",
    "Observation",
    "OutcomeIndex",
    "RecentCitations",
    "RecentFeatures",
    "SalienceState",
    "SalienceTables",
    "Session",
    "SessionSummary",
    "TokenBucket",
    "build_lane",
    "changes_text",
    "check_attest",
    "check_citations",
    "citation_number",
    "cited_keys",
    "clean_text",
    "command_of",
    "compact",
    "digest_lines",
    "ema_step",
    "end_session",
    "file_lines",
    "goal_lines",
    "item_changes",
    "item_salience",
    "name_text",
    "names_in",
    "observe",
    "purge_ledger",
    "recall_query",
    "rules_sections",
    "salience_path",
    "search_items",
    "session_summary",
    "session_uri",
    "short_form",
    "split_rows",
    "still_matches",
    "stub_lines",
    "verbatim_lines",
    "weights_payload",
]
