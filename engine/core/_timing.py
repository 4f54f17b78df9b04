"""Timing of a call's stages (``build_context(timings=...)`` and the benchmarks read it)."""

from __future__ import annotations

import time

__all__ = ["Clock"]


class Clock:
    """Adds the time since the last lap to a named stage (no-op without a dict)."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings = timings
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[stage] = self.timings.get(stage, 0.0) + now - self.last
            self.last = now
