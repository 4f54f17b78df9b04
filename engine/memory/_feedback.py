"""Feedback: what the model cited, checked against the turn it was given.

A citation is a number from the turn's evidence (``3``, ``"3"`` or ``"[3]"``). Numbers
outside the turn's set and malformed markers are dropped and counted; a cited snippet whose
source no longer holds the text it had (by sha256) is flagged stale.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.core import ConfigError, FeedbackResult, Snippet, uri_path, whole_number
from indexers import decode, redact, sha256_text, span_text
from ledger import TurnRecord

__all__ = ["CitedRef", "RecentCitations", "check_citations", "citation_number", "still_matches"]

_CITATION = re.compile(r"^\s*\[?\s*([^\s\[\]]{1,6})\s*\]?\s*$")  # a number, maybe in [ ]
# Turns whose citations are kept in memory for ``feedback`` with the ledger off (the
# ledger keeps them all). Only the citation refs are kept, not whole packs: hundreds of
# packs' objects made each full garbage collection a 60-110 ms pause inside a call.
RECENT_TURNS = 256


@dataclass(frozen=True, slots=True)
class CitedRef:
    """What a turn's citation pointed at: its number, uri, lines and the text's sha256."""

    local_id: int
    source_uri: str
    start_line: int
    end_line: int
    sha256: str

    @classmethod
    def of_snippet(cls, s: Snippet) -> CitedRef:
        """The ref of a packed snippet."""
        return cls(s.id, s.source_uri, s.span.start_line, s.span.end_line, s.sha256)

    @classmethod
    def of_turn(cls, turn: TurnRecord) -> list[CitedRef]:
        """The refs a ledger turn recorded."""
        return [cls(r.local_id, r.source_uri, r.start_line, r.end_line, r.sha256)
                for r in turn.snippets]  # fmt: skip


def citation_number(raw: int | str) -> int | None:
    """``3``, ``"3"`` and ``"[3]"`` are citation 3 (ASCII digits); anything else is not a
    number (a ``memory:N`` uri is looked up among the turn's sources)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    match = _CITATION.match(str(raw))
    if match is None:
        return None
    try:
        return whole_number("a citation", match.group(1))  # ASCII digits: "٣" is no 3
    except ConfigError:
        return None


def check_citations(
    replay_key: str,
    refs: Sequence[CitedRef],
    model_citations: Sequence[int | str],
    matches: Callable[[CitedRef], bool],
) -> FeedbackResult:
    """Valid citations (first mention order, each once), dropped ones (as given), and the
    valid ones whose source no longer ``matches``."""
    by_id = {r.local_id: r for r in refs}
    # A note or a session step is also cited by the uri its Source line shows.
    by_uri = {r.source_uri: r.local_id for r in refs
              if r.source_uri.startswith(("memory:", "session:"))}  # fmt: skip
    valid: list[int] = []
    dropped: list[str] = []
    for raw in model_citations:
        n = citation_number(raw)
        if n is None and isinstance(raw, str):
            n = by_uri.get(raw.strip().strip("[]"))
        if n is None or n not in by_id:
            dropped.append(str(raw))
        elif n not in valid:
            valid.append(n)
    stale = [n for n in valid if not matches(by_id[n])]
    return FeedbackResult(replay_key, tuple(valid), tuple(dropped), tuple(stale))


def still_matches(root: Path, ref: CitedRef, shown: str | None = None) -> bool:
    """Whether the file under ``root`` still holds, at the ref's lines, the text it had.

    ``shown``: the snippet's text as packed, when known. The index keeps no line between
    sections that holds no word, so a snippet across such a line shows it empty: a line of
    only spaces or tabs there still matches its empty line."""
    path = (root / uri_path(ref.source_uri)).resolve()
    if not path.is_relative_to(root):
        return False
    try:
        data = path.read_bytes()
    except OSError:
        return False
    # Compared as indexed: with its secrets redacted (a snippet never holds one).
    clean = redact(decode(data), uri_path(ref.source_uri)).text
    text = span_text(clean.encode("utf-8"), ref.start_line, ref.end_line)
    if text is None:
        return False
    if sha256_text(text) == ref.sha256:
        return True
    if shown is None or sha256_text(shown) != ref.sha256:
        return False
    now, then = text.split("\n"), shown.split("\n")
    return len(now) == len(then) and all(
        a == b or (not b and not a.strip()) for a, b in zip(now, then, strict=True))


class RecentCitations:
    """The citation refs of this process's last turns, by replay key (for ``feedback``
    when the ledger is off); safe to share between threads."""

    def __init__(self, keep: int = RECENT_TURNS) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._turns: dict[str, tuple[CitedRef, ...]] = {}

    def remember(self, replay_key: str, snippets: Sequence[Snippet]) -> None:
        """Keep a turn's refs, forgetting the oldest beyond the limit."""
        refs = tuple(CitedRef.of_snippet(s) for s in snippets)
        with self._lock:
            self._turns[replay_key] = refs
            while len(self._turns) > self._keep:
                self._turns.pop(next(iter(self._turns)))

    def get(self, replay_key: str) -> tuple[CitedRef, ...] | None:
        """A remembered turn's refs, or None."""
        with self._lock:
            return self._turns.get(replay_key)
