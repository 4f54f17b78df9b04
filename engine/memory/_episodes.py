"""Episodes: the notes saved in one stretch of time, and how well a query matches each.

An episode is a run of notes, in the order they were made, with no pause longer than
``EPISODE_GAP_S`` between one and the next: a working session, a conversation, an import
of one day's history (a caller that imports saves each note at its own time, see
``NoteStore.save``'s ``created``). Notes of one episode are about one thing, so a
question whose words are spread over several notes of an episode points at that episode
even where no single note holds them all.

- **Grouping** (``Episodes``): every visible note's creation time, kept in memory and
  advanced by the store's change sequence like the vectors; the episodes are recomputed
  only when a note lands before the newest one or leaves (a new note after the newest one
  joins or starts the last episode).
- **Matching** (``episode_scores``): BM25 with episodes as the documents, a term's
  frequency being how many of the episode's notes hold it and an episode's length its
  number of notes, over the same terms the note search uses. Counted with arrays: a
  common term is held by thousands of notes in a large store.

::

    eps = Episodes()
    eps.advance([(1, 0.0, True), (2, 60.0, True), (3, 90_000.0, True)], seq=3)
    of, sizes = eps.groups()  # of[i]: note i's episode (-1: none); sizes: [2, 1]
    episode_scores({"kiln": np.array([1, 2])}, of, sizes)   # {0: 0.87...}
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "EPISODE_B",
    "EPISODE_GAP_S",
    "EPISODE_K1",
    "Episodes",
    "episode_of",
    "episode_scores",
]

EPISODE_GAP_S = 30 * 60.0  # a pause longer than this ends an episode (the usual idle cut)
EPISODE_K1 = 1.2  # BM25's usual term saturation, over episodes as documents
EPISODE_B = 0.75  # BM25's usual length normalisation: a long episode matches more words


class Episodes:
    """The notes of one project as one user sees them, grouped into episodes by time;
    safe to share between threads. ``advance`` applies the store's changes since the
    last call; ``groups`` answers each note's episode and each episode's size."""

    def __init__(self) -> None:
        self.seq = 0  # the last change applied
        self._lock = threading.Lock()
        self._created: dict[int, float] = {}
        self._of: npt.NDArray[np.int64] = np.full(0, -1, dtype=np.int64)
        self._sizes: list[int] = []
        self._last: tuple[float, int] | None = None  # the newest note, once grouped
        self._stale = False

    def advance(self, rows: Sequence[tuple[int, float, bool]], seq: int) -> None:
        """Apply changed rows ``(id, created, live)`` up to change ``seq``."""
        with self._lock:
            for note, created, live in rows:
                known = self._created.get(note)
                if not live:
                    if known is not None:
                        del self._created[note]
                        self._stale = True
                    continue
                if known == created:
                    continue
                self._created[note] = created
                if known is not None or self._stale or not self._append(note, created):
                    self._stale = True
            self.seq = max(self.seq, seq)

    def forget(self, note: int) -> None:
        """Drop one note at once (a hard delete, which leaves no changed row to read)."""
        self.advance([(note, 0.0, False)], 0)

    def _append(self, note: int, created: float) -> bool:
        """Group a note made after every other one; False when it is not."""
        if self._last is not None and (created, note) < self._last:
            return False
        if self._last is None or created - self._last[0] > EPISODE_GAP_S:
            self._sizes.append(0)
        if note >= self._of.shape[0]:  # a new array, so a reader's copy stays whole
            grown = np.full(max(64, 2 * note), -1, dtype=np.int64)
            grown[: self._of.shape[0]] = self._of
            self._of = grown
        self._of[note] = len(self._sizes) - 1
        self._sizes[-1] += 1
        self._last = (created, note)
        return True

    def groups(self) -> tuple[npt.NDArray[np.int64], list[int]]:
        """(each note's episode by note id, -1 for none; each episode's number of notes),
        episodes numbered from the oldest; read-only."""
        with self._lock:
            if self._stale:
                top = max(self._created, default=0)
                self._of, self._sizes, self._last = np.full(top + 1, -1, np.int64), [], None
                for note, created in sorted(self._created.items(), key=lambda p: (p[1], p[0])):
                    self._append(note, created)
                self._stale = False
            return self._of, self._sizes


def episode_of(of: npt.NDArray[np.int64], note: int) -> int | None:
    """One note's episode in ``groups``' answer; None for a note not grouped."""
    found = int(of[note]) if 0 <= note < of.shape[0] else -1
    return found if found >= 0 else None


def episode_scores(
    matches: Mapping[str, npt.NDArray[np.int64]],
    of: npt.NDArray[np.int64],
    sizes: Sequence[int],
) -> dict[int, float]:
    """BM25 of each episode that holds a term: ``matches`` maps each query term to the ids
    of the notes that hold it (notes ``of`` does not group are not the caller's, skipped)."""
    n = len(sizes)
    if n < 2:
        return {}  # one episode: nothing to tell apart
    size = np.asarray(sizes, dtype=np.float64)
    norm = EPISODE_K1 * (1.0 - EPISODE_B + EPISODE_B * size / size.mean())
    total = np.zeros(n)
    for notes in matches.values():
        notes = notes[(notes >= 0) & (notes < of.shape[0])]
        held = of[notes]
        held = held[held >= 0]
        if held.size == 0:
            continue
        tf = np.bincount(held, minlength=n).astype(np.float64)
        df = int(np.count_nonzero(tf))
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        total += idf * tf * (EPISODE_K1 + 1.0) / (tf + norm)
    return {int(e): float(total[e]) for e in np.flatnonzero(total)}
