"""Recall over notes: importance, the in-memory vector matrix and fusion.

- **Importance** (``importance``): a weighted sum of five parts, each in [0, 1], so a
  reader can see why a note ranks where it does: its type (decisions, constraints and
  identity facts matter longer than a passing note), how often it was read (log-scaled),
  how recently (a month's half-life), how many notes point at it, and its age (a slow
  decay, so an old note that nobody reads sinks).
- **Fusion** (``fuse``): a weighted sum of the lexical and the dense scores, each divided
  by its list's best (so a weak lexical match stays weak, where reciprocal rank would
  give the 50th match nearly the first one's share), times ``1 + IMPORTANCE_WEIGHT *
  importance``: importance orders near-ties, it never lifts an unrelated note over a
  matching one.
- **Diversity** (``diversify``): the head of the list shows distinct stretches of the
  sequence: a note next to one already shown (a ``follows`` edge either way) counts
  ``NEIGHBOUR_PENALTY`` of its score there, and a note of an episode already shown (notes
  saved in one stretch of time, ``_episodes.py``) ``EPISODE_PENALTY``, so one exchange
  does not fill the first five places while another that also matches waits below;
  ``timeline`` shows the neighbours. The first ``HEAD_PLACES`` places, what a reader
  scans first, go breadth first: there a note of an episode already shown counts
  ``HEAD_EPISODE_PENALTY``; past them the milder ``EPISODE_PENALTY``, so the notes that
  made way come right after, not out of the list.
- **Vectors** (``Vectors``): every note's vector, kept in one growing float32 matrix and
  advanced by the store's change sequence, so a search after a save reads one row, not
  the whole store.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from engine.core import Importance, NoteType

__all__ = [
    "EPISODE_PENALTY",
    "HEAD_EPISODE_PENALTY",
    "HEAD_PLACES",
    "IMPORTANCE_WEIGHT",
    "NEIGHBOUR_PENALTY",
    "NoteEmbedder",
    "Vectors",
    "diversify",
    "fuse",
    "importance",
    "importance_score",
]

NEIGHBOUR_PENALTY = 0.9  # a note beside one already shown keeps this share of its score
EPISODE_PENALTY = 0.8  # a note of an episode already shown keeps this share (and the above)
HEAD_PLACES = 5  # the first places a reader scans: one search's usual first screen
# In the first places a note of an episode already shown keeps this share instead: there a
# second episode that matches is worth more than the next note of the first one, which
# still comes among the places after.
HEAD_EPISODE_PENALTY = 0.7
IMPORTANCE_WEIGHT = 0.3  # at most +30% on the fused score: orders near-ties only
_DAY = 86_400.0
_RECENCY_HALF_LIFE_DAYS = 30.0  # a note read a month ago counts half as recent
_AGE_HALF_LIFE_DAYS = 365.0  # a year-old note keeps half its age part
_ACCESS_SATURATION = 20  # reads past this add nothing more
_EDGE_SATURATION = 5  # incoming edges past this add nothing more
_TYPE_WEIGHT = {  # how long a kind of fact stays worth recalling
    NoteType.CONSTRAINT: 1.0,
    NoteType.IDENTITY: 1.0,
    NoteType.DECISION: 0.9,
    NoteType.GOAL: 0.8,
    NoteType.BUGFIX: 0.7,
    NoteType.CONFIG: 0.7,
    NoteType.PATTERN: 0.6,
    NoteType.DISCOVERY: 0.5,
    NoteType.NOTE: 0.3,
}
_PARTS = (("type", 0.35), ("access", 0.2), ("recency", 0.2), ("edges", 0.15), ("age", 0.1))


class NoteEmbedder(Protocol):
    """What recall needs of the code embedder (passed in by the workspace)."""

    @property
    def model_id(self) -> str:
        """The model and settings."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors, one row per text."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The unit vector of one query."""
        ...


def importance(
    kind: NoteType, access_count: int, accessed: float, created: float, incoming: int, now: float
) -> Importance:
    """The importance of a note and its parts (see the module docstring)."""
    values = {
        "type": _TYPE_WEIGHT[kind],
        "access": math.log1p(max(0, access_count)) / math.log1p(_ACCESS_SATURATION),
        "recency": 0.5 ** (max(0.0, now - max(accessed, created)) / _DAY / _RECENCY_HALF_LIFE_DAYS),
        "edges": incoming / _EDGE_SATURATION,
        "age": 0.5 ** (max(0.0, now - created) / _DAY / _AGE_HALF_LIFE_DAYS),
    }
    parts = tuple((n, round(min(1.0, values[n]), 4), w) for n, w in _PARTS)
    return Importance(round(sum(v * w for _, v, w in parts), 4), parts)


_TYPE_VALUE = {k.value: w for k, w in _TYPE_WEIGHT.items()}
_LOG_SATURATION = math.log1p(_ACCESS_SATURATION)
_RECENCY_SCALE = _DAY * _RECENCY_HALF_LIFE_DAYS
_AGE_SCALE = _DAY * _AGE_HALF_LIFE_DAYS


def importance_score(
    kind: str, access_count: int, accessed: float, created: float, incoming: int, now: float
) -> float:
    """``importance(...).score`` unrounded, without its parts: what ranking uses (a search
    weighs a hundred candidates)."""
    return float(
        0.35 * _TYPE_VALUE[kind]
        + 0.2 * min(1.0, math.log1p(max(0, access_count)) / _LOG_SATURATION)
        + 0.2 * 0.5 ** (max(0.0, now - max(accessed, created)) / _RECENCY_SCALE)
        + 0.15 * min(1.0, incoming / _EDGE_SATURATION)
        + 0.1 * 0.5 ** (max(0.0, now - created) / _AGE_SCALE)
    )


def fuse(
    lexical: Sequence[tuple[int, float]],
    dense: Sequence[tuple[int, float]],
    dense_share: float,
    weight: dict[int, float],
) -> list[tuple[int, float]]:
    """Ids by fused score, best first: ``(1 - dense_share)`` of the lexical score plus
    ``dense_share`` of the cosine, each divided by its list's best (a negative cosine
    counts 0), times ``1 + IMPORTANCE_WEIGHT * weight``; ties by id, so the order is the
    same on every run. Only ids in ``weight`` (the notes the caller may rank) are kept."""
    fused: dict[int, float] = {}
    for pairs, share in ((lexical, 1.0 - dense_share), (dense, dense_share)):
        top = max((s for _, s in pairs), default=0.0)
        if top <= 0.0 or share <= 0.0:
            continue
        for note, s in pairs:
            if note in weight:
                fused[note] = fused.get(note, 0.0) + share * max(0.0, s) / top
    scored = [(n, s * (1.0 + IMPORTANCE_WEIGHT * weight[n])) for n, s in fused.items()]
    return sorted(scored, key=lambda p: (-p[1], p[0]))


def diversify(
    scored: Sequence[tuple[int, float]],
    beside: dict[int, set[int]],
    penalty: float,
    episode_of: Mapping[int, int] | None = None,
    episode_penalty: float = 1.0,
    *,
    head: int = 0,
    head_episode_penalty: float = 1.0,
) -> list[tuple[int, float]]:
    """``scored`` reordered so that a note ``beside`` one placed before it counts
    ``penalty`` of its score, and one whose episode (``episode_of``) one placed before it
    shares, ``episode_penalty`` (``head_episode_penalty`` for the first ``head`` places;
    both, when both hold; greedy, best first; ties by id). Scores are returned as they
    came: only the order changes."""
    episode_of = episode_of or {}
    left = list(scored)
    placed: list[tuple[int, float]] = []
    near: set[int] = set()
    shown: set[int] = set()

    def share(note: int) -> float:
        out = penalty if note in near else 1.0
        episode = episode_of.get(note)
        if episode is None or episode not in shown:
            return out
        return out * (head_episode_penalty if len(placed) < head else episode_penalty)

    while left:
        at = min(range(len(left)), key=lambda i: (-left[i][1] * share(left[i][0]), left[i][0]))
        note = left.pop(at)
        placed.append(note)
        near |= beside.get(note[0], set())
        if note[0] in episode_of:
            shown.add(episode_of[note[0]])
    return placed


class Vectors:
    """The notes' vectors of one model in one growing matrix; safe to share between threads.

    Rows are never moved: a note whose text changed gets its row overwritten, a deleted
    one is masked off. ``advance`` applies the store's changes since the last call."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.seq = 0  # the last change applied
        self._lock = threading.Lock()
        self._matrix: npt.NDArray[np.float32] | None = None
        self._ids: list[int] = []
        self._row: dict[int, int] = {}
        self._live = np.zeros(0, dtype=bool)

    def advance(self, rows: Sequence[tuple[int, bytes | None, bool]], seq: int) -> None:
        """Apply changed rows ``(id, vector bytes or None, live)`` up to change ``seq``."""
        with self._lock:
            for note, blob, live in rows:
                at = self._row.get(note)
                if blob is None or not live:
                    if at is not None:
                        self._live[at] = False
                    continue
                vec = np.frombuffer(blob, dtype=np.float32)
                if at is None:
                    at = self._append(note, vec.shape[0])
                assert self._matrix is not None
                if vec.shape[0] != self._matrix.shape[1]:
                    continue  # a vector of another size: another model wrote it
                self._matrix[at] = vec
                self._live[at] = True
            self.seq = max(self.seq, seq)

    def _append(self, note: int, dim: int) -> int:
        if self._matrix is None:
            self._matrix = np.zeros((64, dim), dtype=np.float32)
            self._live = np.zeros(64, dtype=bool)
        if len(self._ids) == self._matrix.shape[0]:
            grown = np.zeros((self._matrix.shape[0] * 2, self._matrix.shape[1]), np.float32)
            grown[: len(self._ids)] = self._matrix
            live = np.zeros(grown.shape[0], dtype=bool)
            live[: len(self._ids)] = self._live[: len(self._ids)]
            self._matrix, self._live = grown, live
        self._row[note] = len(self._ids)
        self._ids.append(note)
        return len(self._ids) - 1

    def nearest(
        self, query: npt.NDArray[np.float32], allowed: set[int] | None, k: int
    ) -> list[tuple[int, float]]:
        """The ``k`` live notes (within ``allowed`` when given) nearest to ``query``."""
        with self._lock:
            n = len(self._ids)
            if self._matrix is None or n == 0 or query.shape[0] != self._matrix.shape[1]:
                return []
            sims = self._matrix[:n] @ query
            mask = self._live[:n].copy()
            if allowed is not None:
                ids = np.fromiter(self._ids, dtype=np.int64, count=n)
                mask &= np.isin(ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            sims = np.where(mask, sims, -np.inf)
            take = min(k, int(mask.sum()))
            if take == 0:
                return []
            top = np.argpartition(-sims, take - 1)[:take]
            pairs = [(self._ids[i], float(sims[i])) for i in top]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))
