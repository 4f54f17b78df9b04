"""The records of the memory store: what an agent saves (a ``Note``), what it links to in
the code, how notes relate, and what a search or a read answers.

A note is an *observation* in the issue's words; it is called ``Note`` here because
``Observation`` already names a session step's extracted facts (``_observe.py``).
Every record is frozen; the store (``engine.memory``) makes them and the surfaces encode
them with the one JSON encoder. The limits are here too, so every surface checks the same.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from engine.core._errors import ConfigError, PayloadTooLargeError

__all__ = [
    "EDGE_KINDS",
    "MAX_BODY_CHARS",
    "MAX_DEPTH",
    "MAX_ENTITIES",
    "MAX_LINKS",
    "MAX_TITLE_CHARS",
    "MAX_TOPIC_KEY_CHARS",
    "PREVIEW_CHARS",
    "CodeLink",
    "Edge",
    "EdgeKind",
    "GraphNode",
    "Importance",
    "LinkCheck",
    "LinkState",
    "MemoryStats",
    "Note",
    "NoteGraph",
    "NoteHit",
    "NoteType",
    "SaveAction",
    "SaveResult",
    "Scope",
    "body_text",
    "clean_field",
    "normalised",
    "preview",
]

MAX_TITLE_CHARS = 200  # a title is one line a reader scans in a list
MAX_BODY_CHARS = 16_000  # each of what/why/where/learned: a page of notes, not a log dump
MAX_TOPIC_KEY_CHARS = 200  # a key names a topic ("auth/token-refresh"), it is not content
MAX_ENTITIES = 64  # entities kept per note (first seen): more is a pasted file, not a note
MAX_LINKS = 32  # code links per note: each one is re-checked on every read
MAX_DEPTH = 10  # graph traversal depth: past this a walk returns most of the store
PREVIEW_CHARS = 300  # search answers titles and previews; ``get`` gives the full text


class NoteType(StrEnum):
    """What kind of thing was learned (its type weighs in its importance)."""

    DECISION = "decision"
    BUGFIX = "bugfix"
    PATTERN = "pattern"
    DISCOVERY = "discovery"
    CONFIG = "config"
    IDENTITY = "identity"
    CONSTRAINT = "constraint"
    GOAL = "goal"
    NOTE = "note"


class Scope(StrEnum):
    """Who sees a note: everyone working on the project, or only the user who saved it."""

    PROJECT = "project"
    PERSONAL = "personal"


class EdgeKind(StrEnum):
    """How one note relates to another (``src`` → ``dst``)."""

    REFERENCES = "references"
    RELATES_TO = "relates_to"
    FOLLOWS = "follows"
    SUPERSEDES = "supersedes"  # ``dst`` is out of date: not recalled by default
    CONTRADICTS = "contradicts"  # shown with both sides wherever either is shown


EDGE_KINDS = tuple(k.value for k in EdgeKind)


class LinkState(StrEnum):
    """A code link as read now: the same lines (``current``), the same lines elsewhere in
    the file (``moved``), changed (``stale``) or the file gone (``missing``)."""

    CURRENT = "current"
    MOVED = "moved"
    STALE = "stale"
    MISSING = "missing"


class SaveAction(StrEnum):
    """What a save did."""

    CREATED = "created"
    UPDATED = "updated"  # same topic key: updated in place, revision counted
    DUPLICATE = "duplicate"  # same normalised content within the window: nothing added


@dataclass(frozen=True, slots=True)
class CodeLink:
    """An entity that resolved to indexed code: the lines and their sha256 when saved."""

    entity: str  # as written in the note (``engine/_workspace.py:120``, ``Workspace``)
    path: str
    start_line: int
    end_line: int
    sha256: str

    @property
    def uri(self) -> str:
        """``path#La-Lb``, as evidence is cited."""
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


@dataclass(frozen=True, slots=True)
class LinkCheck:
    """One link checked against the caller's view at read time."""

    link: CodeLink
    state: LinkState
    now: str = ""  # where the lines are now, for ``moved``

    @property
    def stale(self) -> bool:
        """Whether the link no longer shows what the note was written about."""
        return self.state in (LinkState.STALE, LinkState.MISSING)


@dataclass(frozen=True, slots=True)
class Importance:
    """A note's importance in [0, 1] and the parts it is the weighted sum of."""

    score: float
    parts: tuple[tuple[str, float, float], ...]  # (name, value in [0, 1], weight)


@dataclass(frozen=True, slots=True)
class Edge:
    """A typed edge between two notes."""

    src: int
    dst: int
    kind: EdgeKind
    created: float


@dataclass(frozen=True, slots=True)
class Note:
    """One saved observation, in full (what ``get`` answers)."""

    id: int
    title: str
    type: NoteType
    scope: Scope
    what: str
    why: str
    where: str
    learned: str
    topic_key: str
    revision: int
    entities: tuple[str, ...]
    links: tuple[LinkCheck, ...]
    created: float
    updated: float
    accessed: float
    access_count: int
    importance: Importance
    deleted: bool = False
    archived: bool = False  # out of search, timeline and the lane; ``get`` still finds it
    superseded_by: tuple[int, ...] = ()
    contradicts: tuple[tuple[int, str], ...] = ()  # (id, title) of each other side
    edges: tuple[Edge, ...] = ()

    @property
    def stale(self) -> tuple[str, ...]:
        """The links whose code changed since the note was saved (their uris)."""
        return tuple(c.link.uri for c in self.links if c.stale)

    @property
    def text(self) -> str:
        """The note's body as one text: what, why, where, learned (labelled)."""
        return body_text(self.what, self.why, self.where, self.learned)

    @property
    def uri(self) -> str:
        """``memory:ID``: how a pack cites it and ``get`` finds it."""
        return f"memory:{self.id}"


@dataclass(frozen=True, slots=True)
class NoteHit:
    """A search result: the title, a preview of at most ``PREVIEW_CHARS`` characters, the
    score (fused recall scaled by importance) and what a reader must know before trusting
    it (stale links, the other side of a contradiction)."""

    id: int
    title: str
    type: NoteType
    scope: Scope
    preview: str
    score: float
    importance: float
    updated: float
    stale: tuple[str, ...] = ()
    contradicts: tuple[tuple[int, str], ...] = ()

    @property
    def uri(self) -> str:
        """``memory:ID``."""
        return f"memory:{self.id}"


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A note reached by a graph walk, and how many edges from the start."""

    id: int
    title: str
    type: NoteType
    depth: int


@dataclass(frozen=True, slots=True)
class NoteGraph:
    """The notes within ``depth`` edges of ``root`` (either direction) and those edges."""

    root: int
    depth: int
    nodes: tuple[GraphNode, ...]
    edges: tuple[Edge, ...]


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What a save did, to which note, at which revision."""

    id: int
    action: SaveAction
    revision: int
    entities: tuple[str, ...] = ()
    links: tuple[CodeLink, ...] = ()
    # What the caps left out (``MAX_ENTITIES``, ``MAX_LINKS``: the first seen are kept):
    # a note that names more is a pasted file, and its save says so.
    entities_left_out: int = 0
    links_left_out: int = 0


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Counts over what the caller can see (project notes and their own personal ones)."""

    path: str
    notes: int
    deleted: int
    superseded: int
    edges: int
    archived: int  # among ``notes``: out of search and prompts until brought back
    by_type: tuple[tuple[str, int], ...]
    by_scope: tuple[tuple[str, int], ...]
    dense_model: str


def body_text(what: str, why: str, where: str, learned: str) -> str:
    """The labelled body: one line per non-empty field."""
    parts = (("what", what), ("why", why), ("where", where), ("learned", learned))
    return "\n".join(f"{name}: {value}" for name, value in parts if value)


def clean_field(name: str, value: object, limit: int, *, required: bool = False) -> str:
    """A text field as stored: a string, NUL bytes and lone surrogates gone, stripped, at
    most ``limit`` characters; a clear error otherwise."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be text, not {type(value).__name__}")
    text = value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "").strip()
    if required and not text:
        raise ConfigError(f"a note needs a {name}")
    if len(text) > limit:
        raise PayloadTooLargeError(
            f"{name} has {len(text):,} characters; at most {limit:,} (save the detail in "
            "the code or a document and link it)"
        )
    return text


_SPACE = re.compile(r"\s+")


def normalised(*fields: str) -> str:
    """What dedupe compares: the fields NFKC-folded, lowercased, whitespace collapsed."""
    joined = "\x1f".join(unicodedata.normalize("NFKC", f).casefold() for f in fields)
    return _SPACE.sub(" ", joined).strip()


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + "…"
