"""Progress of long work: the protocol the CLI's bars implement, and one that goes nowhere."""

from __future__ import annotations

from typing import Protocol

__all__ = ["NullProgress", "Progress"]


class Progress(Protocol):
    """Receives progress from long work; the CLI draws bars, libraries pass ``NullProgress``."""

    def stage(self, name: str, total: int | None, unit: str) -> None:
        """A new stage starts (``total`` None when unknown)."""
        ...

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the current stage are done."""
        ...

    def end(self) -> None:
        """The current stage is finished."""
        ...


class NullProgress:
    """Progress that goes nowhere."""

    def stage(self, name: str, total: int | None, unit: str) -> None:
        """Ignore."""

    def advance(self, n: int = 1) -> None:
        """Ignore."""

    def end(self) -> None:
        """Ignore."""
