"""What the workspace reports: an index run, a gc, its status, a resolved uri, a replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ForgetReport", "GcReport", "IndexReport", "Replay", "Resolved", "Status"]


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What an index run did."""

    files: int
    added: int
    changed: int
    removed: int
    unchanged: int
    chunks: int
    chunks_added: int
    chunks_removed: int
    skipped: dict[str, int]
    embeddings_computed: int
    embeddings_reused: int
    dense_model: str | None
    seconds: dict[str, float] = field(default_factory=dict)
    # Secrets redacted in the files (re)indexed by this run, by kind (``aws-access-key``).
    redactions: dict[str, int] = field(default_factory=dict)
    # Files (re)indexed by this run whose chunker failed on them, each cut into line windows
    # instead, with why: nothing is lost, but their sections have no names.
    fallbacks: dict[str, str] = field(default_factory=dict)
    # Files of a new base that an interrupted run had indexed and this one kept (it went on
    # from them instead of starting over).
    resumed: int = 0

    @property
    def total_seconds(self) -> float:
        """Wall time of the whole run."""
        return sum(self.seconds.values())


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``gc`` removed."""

    overlays: list[str]
    bases: list[str]
    freed_bytes: int
    # Layers dropped from this state folder's own Qdrant edge shard (CORTEX_BACKEND=qdrant):
    # the bases gone and those chunked under older settings.
    layers: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What ``forget`` removed (or, in a dry run, would remove) from everything cortex
    stores: the indexes of every base and overlay, the vector cache, the ledger's texts,
    the memory store's notes."""

    dry_run: bool
    files: list[str]  # indexed files removed whole
    touched: list[str]  # files that lost the chunks holding the string
    chunks: int  # chunks dropped, over every segment
    segments: int  # bases and overlays rewritten
    vectors: int  # cached vectors deleted (a dry run: that would be)
    ledger_texts: int  # stored prompts, inputs and snippet texts purged
    ledger_turns: int  # recorded turns those texts belong to
    # Chained records whose own payload holds the string (a tool's name, a decision's
    # evidence; a failure reason, a decision's rationale or a tool result in records from
    # before those were stored as texts): a hash chain cannot be rewritten, so these stay;
    # the message says so, and ``chained_seqs`` names them.
    ledger_chained: int
    # Working-tree files that still hold it: indexed again when they next change.
    still_present: list[str]
    notes: int = 0  # saved memory notes that held the string ([PURGED] in its place)
    # Points removed from the Qdrant collection's layers (CORTEX_BACKEND=qdrant), every
    # workspace's: their next mirror writes the files again from their own segments.
    remote_points: int = 0
    chained_seqs: list[int] = field(default_factory=list)  # the seqs of those records
    # Files whose old pages still hold removed bytes: another process's read kept them in
    # use past the wait. Run forget again once it is done (a server: stop it first).
    left_on_disk: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Resolved:
    """``Workspace.resolve``'s answer: where, what hash, how big; text only with a proof."""

    uri: str
    path: str
    start_line: int | None
    end_line: int | None
    sha256: str | None  # of the lines' text as indexed
    tokens: int | None
    license: str | None
    text: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Status:
    """What is indexed, with which models, and how far the working tree has moved since."""

    root: Path
    state_dir: Path
    indexed: bool
    commit: str | None = None  # checked out now
    indexed_commit: str | None = None
    indexed_at: str | None = None
    files: int = 0
    chunks: int = 0
    tokens: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    encoding: str | None = None
    dense_model: str | None = None
    dense_vectors: int = 0
    dense_kind: str | None = None
    dense_recall: float | None = None
    dense_current: bool = False
    # Why dense recall cannot run as configured ("" when it can): an unknown or unloadable
    # model, or one the index holds no vectors of.
    dense_problem: str = ""
    changed: int = 0  # files whose content differs from the index
    added: int = 0
    removed: int = 0
    disk_bytes: int = 0
    branch: str = ""  # "detached" on a detached HEAD; "" outside git
    user: str = ""
    overlay_files: int = 0  # files that differ from the base (this branch, this user)
    tombstones: int = 0  # base files the overlay hides (changed, renamed, deleted)
    overlay_bytes: int = 0
    base_bytes: int = 0
    stale: bool = False  # the working tree moved since the overlay was built
    # The git history co-change reads: the commit it runs up to and the commits counted
    # (None and 0 outside git).
    history_commit: str | None = None
    history_commits: int = 0
    # The base was chunked under other settings (a new chunker after an upgrade, changed
    # file rules): answers come from it until the next index builds it again.
    rechunk: bool = False
    # Where the indexes are served from: the embedded engines, or Qdrant (where, which
    # collection); "" before the first index.
    backend: str = ""

    @property
    def stale_files(self) -> int:
        """Files the index does not reflect."""
        return self.changed + self.added + self.removed


@dataclass(frozen=True, slots=True)
class Replay:
    """A recorded turn's prompt, byte for byte, and (with rebuild) today's difference."""

    replay_key: str
    turn_id: str
    time: str
    text: str
    tokens_used: int
    diff: str = ""  # unified diff recorded -> rebuilt; "" when identical or not rebuilt
    # A purge (``forget``) removed parts of this prompt: they read ``[PURGED]`` in ``text``.
    purged: bool = False
