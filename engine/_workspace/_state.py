"""``State``: what every part of a workspace shares: its folders, its config, its layers
and manifest, the models loaded on first use, and the evidence ledger."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core import (
    Config,
    FeedbackResult,
    LedgerStateError,
    NotFoundError,
    SessionState,
    ToolSignal,
    WorkspaceError,
    unknown_replay_key,
)
from engine.index import Layers, Manifest
from engine.memory import Journal, RecentCitations
from indexers import TiktokenCounter, TokenCounter, redact
from ledger import ToolResult, TurnRecord

if TYPE_CHECKING:
    from engine.embed import Embedder, EmbeddingCache


def _refuse_linked_state(root: Path, state: Path) -> None:
    """A state folder in the workspace reached through a symlink (a repository can commit
    ``.cortex -> ../elsewhere``) would keep this workspace's turns in another one's ledger
    and let a rebuild overwrite a folder cortex did not make: refused, with the way to put
    the state elsewhere on purpose."""
    at = root
    for part in state.parts:
        at = at / part
        if at.is_symlink():
            raise WorkspaceError(
                f"{at} is a symlink (to {at.readlink()}): cortex keeps a workspace's state "
                "in a real folder; remove the link, or set CORTEX_STATE_DIR to an absolute "
                "path to keep it elsewhere"
            )


class State:
    """One workspace's shared state; each resource is loaded on first use, once, whichever
    thread asks first."""

    def __init__(self, root: Path, config: Config) -> None:
        self.root = root
        self.config = config
        state = Path(config.state_dir).expanduser()
        self.state_dir = state if state.is_absolute() else root / state
        if not state.is_absolute():
            _refuse_linked_state(root, state)
        self.lazy = threading.RLock()  # lazy loaders: two first calls create one of each
        self.layers = Layers(root, self.state_dir, config)
        self.manifest = Manifest(self.state_dir)
        self._counter: TokenCounter | None = None
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._cache: EmbeddingCache | None = None
        self._journal: Journal | None = None
        # This process's recent contexts built with record=False: an unknown key among
        # them is answered with why (a caller's replay or feedback on one is a slip).
        self.unrecorded = RecentCitations()

    def close(self) -> None:
        """Release the layers, the vector cache and the ledger."""
        self.layers.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None
        if self._journal is not None:
            self._journal.close()

    @property
    def counter(self) -> TokenCounter:
        """The token counter of the configured encoding."""
        with self.lazy:
            if self._counter is None:
                self._counter = TiktokenCounter(self.config.encoding)
            return self._counter

    @property
    def embedder(self) -> Embedder | None:
        """The dense model (loaded on first embed), or None when dense search is off."""
        with self.lazy:
            if not self._embedder_loaded:
                from engine.embed import make_embedder

                self._embedder = make_embedder(self.config.dense_model, self.config)
                self._embedder_loaded = True
            return self._embedder

    @property
    def cache(self) -> EmbeddingCache:
        """The content-addressed vector cache."""
        with self.lazy:
            if self._cache is None:
                from engine.embed import EmbeddingCache

                self._cache = EmbeddingCache(self.cache_path)
            return self._cache

    @property
    def cache_path(self) -> Path:
        """Where the vector cache lives (it exists once a vector was stored)."""
        return Path(
            self.config.embedding_cache or str(self.state_dir / "embeddings.sqlite")
        ).expanduser()

    # -- the ledger -----------------------------------------------------------------

    @property
    def ledger_path(self) -> Path:
        """Where the evidence ledger lives (it exists once a turn was recorded)."""
        return Path(self.config.ledger_path or str(self.state_dir / "ledger.sqlite")).expanduser()

    @property
    def journal(self) -> Journal:
        """The workspace's evidence ledger (opened, and created, on first use)."""
        with self.lazy:
            if self._journal is None:
                self._journal = Journal(self.ledger_path, self.layers.user)
            return self._journal

    def has_journal(self) -> bool:
        """Whether a ledger is open or on disk (reading never creates one)."""
        return self._journal is not None or self.ledger_path.exists()

    def turn(self, replay_key: str, *, user: str | None = None, all_users: bool = False
             ) -> TurnRecord:  # fmt: skip
        """The turn this user (``user``; with ``all_users``, anyone) recorded under
        ``replay_key``."""
        turn = None
        if self.has_journal():
            turn = self.journal.find(replay_key, user=user, all_users=all_users)
            if turn is None and (other := self.journal.recorder(replay_key)):
                raise unknown_replay_key(replay_key, recorded_by=other)
        if turn is None:
            built = self.unrecorded.get(replay_key) is not None
            raise unknown_replay_key(replay_key, "built with record=False, so never recorded"
                                     if built else self._rotated())  # fmt: skip
        return turn

    def _rotated(self) -> str:
        """Where a turn recorded before this ledger's rotation is, or "" (none was)."""
        before = self.journal.continues() if self.has_journal() else None
        if before is None:
            return ""
        old = self.journal.path.with_name(before.file)
        return (f"this ledger continues {before.file} since its {before.reason.value}; a "
                f"turn recorded before is there: CORTEX_LEDGER_PATH={old}")  # fmt: skip

    def record_feedback(
        self,
        turn: TurnRecord,
        result: FeedbackResult,
        tool_results: Sequence[ToolResult | str],
        outcome: str | None,
    ) -> None:
        """Journal a turn's checked citations and tool results (credentials redacted)."""
        results = [r if isinstance(r, ToolResult) else ToolResult("tool", True, str(r))
                   for r in tool_results]  # fmt: skip
        results = [replace(r, name=scrub(r.name), summary=scrub(r.summary)) for r in results]
        try:
            self.journal.record_feedback(turn, result, results, outcome)
        except LedgerStateError as exc:
            raise LedgerStateError(f"feedback was checked but not recorded: {exc}") from exc

    def recorded_journal(self) -> Journal:
        """The ledger for reading: a ``NotFoundError`` when nothing was ever recorded here."""
        if not self.has_journal():
            raise NotFoundError(f"no ledger at {self.ledger_path}: nothing recorded here yet")
        return self.journal


def scrub(text: str) -> str:
    """``text`` with any credential in it redacted."""
    return redact(text).text if text else text


def scrubbed(
    goal: str, query: str, signals: tuple[ToolSignal, ...], state: SessionState
) -> tuple[str, str, tuple[ToolSignal, ...], SessionState]:
    """A request with every credential the caller sent redacted (goal, query, tool output,
    earlier turns, constraints, sub-goals)."""
    return (
        scrub(goal),
        scrub(query),
        tuple(replace(s, text=scrub(s.text)) for s in signals),
        SessionState(
            tuple(replace(t, text=scrub(t.text)) for t in state.recent_turns),
            tuple(scrub(c) for c in state.constraints),
            tuple(scrub(g) for g in state.subgoals),
            state.session,
        ),
    )
