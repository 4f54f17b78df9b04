"""The records of the planner contract: what goes in (state, tool signals), what comes out
(the pack, a search hit, what feedback made of the citations)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from engine.core._limits import (
    MAX_ITEMS,
    check_items,
    check_text,
    check_total,
    check_type,
    parse_enum,
)
from engine.core._session import step_role
from indexers import Chunk, Span

__all__ = [
    "Block",
    "ContextPack",
    "Contribution",
    "FeedbackResult",
    "FileHit",
    "HistoryLane",
    "Lane",
    "Pointer",
    "Recalled",
    "SearchHit",
    "SessionState",
    "SignalKind",
    "Snippet",
    "ToolSignal",
    "Turn",
    "check_state",
    "signals_of",
]


class Lane(StrEnum):
    """The ordered parts of a prompt; earlier lanes are kept under budget pressure."""

    INSTRUCTION = "instruction"
    GOAL = "goal"
    RECENT = "recent"
    HISTORY = "history"
    DIFF = "diff"
    MEMORY = "memory"
    EVIDENCE = "evidence"
    OMITTED = "omitted"


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier turn of the session, verbatim: a role ``Session.add`` takes (``user``,
    ``assistant``, ``tool``, ``request``, ``changes``) and its text; anything else is a
    ``ConfigError``, raised here."""

    role: str
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", step_role(self.role).value)
        check_text("turn text", self.text, None)

    @classmethod
    def recorded(cls, role: str, text: str) -> Turn:
        """A turn as a ledger recorded it, read back unchecked: turns recorded before
        roles were checked took any role, and their feedback and replay still work."""
        turn = object.__new__(cls)
        object.__setattr__(turn, "role", role)
        object.__setattr__(turn, "text", text)
        return turn


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the planner knows beyond this turn's request."""

    recent_turns: tuple[Turn, ...] = ()
    constraints: tuple[str, ...] = ()  # hard constraints, pinned with the goal
    subgoals: tuple[str, ...] = ()  # active sub-goals, pinned with the goal
    # A session id chosen by the planner: the engine journals the turn under it and packs
    # the session's history lane (see ``Workspace.session``); "" = no session.
    session: str = ""

    def __post_init__(self) -> None:
        # A list is kept as a tuple (the record stays hashable); one string is refused.
        for name in ("recent_turns", "constraints", "subgoals"):
            object.__setattr__(self, name, check_items(name, getattr(self, name)))
        for turn in self.recent_turns:
            check_type("recent_turns items", turn, Turn, "Turn records")
        for name in ("constraints", "subgoals"):
            for item in getattr(self, name):
                check_type(f"{name} items", item, str, "text")
        check_text("session", self.session, None)


def check_state(state: object) -> None:
    """Refuse a request's session state (``build_context``'s, ``bundle``'s) that is no
    ``SessionState`` or is past the request limits: at most ``MAX_ITEMS`` turns,
    constraints and sub-goals, each a text of at most ``MAX_TEXT_BYTES`` (the record itself
    takes any size: a turn read back from the ledger is never refused)."""
    check_type("state", state, SessionState)
    assert isinstance(state, SessionState)
    for name in ("recent_turns", "constraints", "subgoals"):
        check_items(name, getattr(state, name), MAX_ITEMS)
    for text in (*(t.text for t in state.recent_turns), *state.constraints, *state.subgoals):
        check_text("state", text)


@dataclass(frozen=True, slots=True)
class Contribution:
    """One rerank feature's part in a snippet's score (for ``--explain``)."""

    feature: str
    value: float  # the feature, normalised to about [0, 1]
    weight: float
    points: float  # weight * value


@dataclass(frozen=True, slots=True)
class Snippet:
    """A cited piece of evidence: ``[id]`` in the prompt."""

    id: int
    chunk_id: str
    title: str
    symbol: str  # the section's symbol path ("" for windows and paragraphs)
    source_uri: str
    span: Span
    sha256: str  # of ``text``, exactly as shown (narrowed text has its own)
    license: str
    approx_tokens: int
    fused_score: float
    reason_tag: str  # why it is here: "bm25", "dense", "symbol", "signal", "page", ...
    text: str
    contributions: tuple[Contribution, ...] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """One lane's rendered text."""

    lane: Lane
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Pointer:
    """Evidence that was found but left out, with the reason; reachable by its uri."""

    source_uri: str
    title: str
    tokens: int
    score: float
    reason: str  # "budget", "redundant", "overlap", "source_cap"


@dataclass(frozen=True, slots=True)
class HistoryLane:
    """A session's history as packed: the lane's text and what it compacted.

    ``compacted`` lists every step not shown verbatim, each a pointer whose
    ``source_uri`` (``session:ID#STEP``) resolves to the original text and whose
    ``reason`` says how it is shown: ``masked`` (a stub), ``digest`` or ``goals``."""

    session: str
    text: str
    tokens: int
    upto: int  # the last step the lane covers
    compacted: tuple[Pointer, ...] = ()


@dataclass(frozen=True, slots=True)
class Recalled:
    """A saved note recalled for a request, as the memory lane shows it (plain data from
    memory to packing): citable by number like evidence. ``text`` is what is shown, with
    any stale code link and contradiction already written in; ``sha256`` is of ``text``."""

    uri: str  # memory:ID
    title: str
    text: str
    sha256: str
    score: float
    tokens: int


@dataclass(frozen=True, slots=True)
class ContextPack:
    """What ``build_context`` returns; ``render()`` is exactly the text the model gets."""

    prompt_blocks: tuple[Block, ...]
    citations: tuple[Snippet, ...]
    replay_key: str
    advisory: tuple[str, ...]
    reachable: tuple[Pointer, ...]
    tokens_used: int
    budget_tokens: int
    rendered: str = field(repr=False)
    compacted: tuple[Pointer, ...] = ()  # session steps the history lane did not show whole

    def render(self) -> str:
        """The prompt text, byte for byte what was counted against the budget."""
        return self.rendered

    @property
    def omitted_tokens(self) -> int:
        """Tokens of evidence found but not packed."""
        return sum(p.tokens for p in self.reachable)


@dataclass(frozen=True, slots=True)
class FeedbackResult:
    """What ``feedback`` made of the model's citations."""

    replay_key: str
    valid: tuple[int, ...]
    dropped: tuple[str, ...]  # out-of-set or malformed, as given
    stale: tuple[int, ...]  # cited, but the source no longer matches its sha256
    # The same outcome with the same citations was given for this turn before: it was
    # learned from then, and nothing was recorded again (a retried call counts once).
    repeated: bool = False


class SignalKind(StrEnum):
    """What a tool signal is, as far as grounding cares."""

    TRACEBACK = "traceback"
    TEST_FAILURE = "test_failure"
    COMPILER_ERROR = "compiler_error"
    LOG = "log"
    TEXT = "text"


@dataclass(frozen=True, slots=True, init=False)
class ToolSignal:
    """Output from a tool the agent ran (a traceback, a failing test, a compiler error).

    ``kind`` is a ``SignalKind`` or its value (``"traceback"``); anything else is a
    ``ConfigError`` naming the kinds, raised here, before any call records a thing.

    >>> ToolSignal("ValueError: empty header", "traceback").kind
    <SignalKind.TRACEBACK: 'traceback'>
    """

    text: str
    kind: SignalKind

    def __init__(self, text: str, kind: SignalKind | str = SignalKind.TEXT) -> None:
        object.__setattr__(self, "text", check_text("tool signal", text, None))
        object.__setattr__(self, "kind", parse_enum(SignalKind, kind, "tool signal kind"))


def signals_of(tool_signals: Iterable[ToolSignal | str] | None) -> tuple[ToolSignal, ...]:
    """A request's tool signals as records (a plain string is a ``text`` signal); one
    string for the whole list, an item of another type, more than ``MAX_ITEMS`` signals or
    more than ``MAX_SIGNAL_BYTES`` of them together are refused."""
    signals = []
    for s in check_items("tool_signals", tool_signals, MAX_ITEMS):
        check_type("tool_signals items", s, (ToolSignal, str), "ToolSignal records or text")
        signals.append(s if isinstance(s, ToolSignal) else ToolSignal(s))
    check_total("tool_signals", (s.text for s in signals))
    return tuple(signals)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A ranked section: its score in the ranking ``build_context`` uses, each retriever's
    rank and score (None where it did not find it), the lists it came from and, for
    ``--explain``, each rerank feature's part."""

    chunk: Chunk
    score: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    reason: str = ""
    contributions: tuple[Contribution, ...] = ()


@dataclass(frozen=True, slots=True)
class FileHit:
    """A file in the same ranking: its score and its best three sections, best first. The
    score is the file model's probability that the request is about this file (the
    default, ``FileRanking.LEARNED``), or with ``FileRanking.SECTIONS`` the sum of those
    sections' scores above the request's weakest candidate."""

    path: str
    score: float
    sections: tuple[SearchHit, ...]
