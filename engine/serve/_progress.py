"""The latest stage of a background index, for ``status`` on both servers: what the CLI's
bars show (stage, done of total, the stage's time left), as data a caller can poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["StageProgress", "StageRecorder"]


@dataclass(frozen=True, slots=True)
class StageProgress:
    """One moment of an index build: the stage (its number from 1, in this build), the units
    done of ``total`` (None while unknown), the seconds since the stage began, and the
    seconds it has left at its pace so far (None until a unit is done or with no total)."""

    stage: str
    number: int
    unit: str
    done: int
    total: int | None
    elapsed_s: float
    eta_s: float | None

    def line(self) -> str:
        """One line, as a person reads it: ``chunking (stage 2): 120/2438 files, ~40 s left``."""
        of = f"/{self.total}" if self.total is not None else ""
        left = f", ~{self.eta_s:.0f} s left in this stage" if self.eta_s is not None else ""
        return f"{self.stage} (stage {self.number}): {self.done}{of} {self.unit}{left}"


class StageRecorder:
    """An ``engine.core.Progress`` that keeps only the latest stage and its count; the
    index thread writes it, request threads read ``snapshot``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._stage: tuple[str, int | None, str] | None = None
        self._number = 0
        self._done = 0
        self._since = 0.0

    def start(self) -> None:
        """A new build: no stage yet, numbering from 1 again."""
        with self._lock:
            self._stage, self._number, self._done = None, 0, 0

    def stage(self, name: str, total: int | None, unit: str) -> None:
        """A new stage starts (``total`` None when unknown)."""
        with self._lock:
            self._stage, self._done, self._since = (name, total, unit), 0, self._clock()
            self._number += 1

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the current stage are done."""
        with self._lock:
            self._done += n

    def end(self) -> None:
        """The current stage is finished (it stays shown until the next begins)."""

    def snapshot(self) -> StageProgress | None:
        """The latest stage and how far it got; None before the first stage."""
        with self._lock:
            if self._stage is None:
                return None
            name, total, unit = self._stage
            done, elapsed = self._done, max(0.0, self._clock() - self._since)
            number = self._number
        eta = None
        if total is not None and done > 0:
            eta = round(max(0, total - done) * elapsed / done, 1)
        return StageProgress(name, number, unit, done, total, round(elapsed, 1), eta)
