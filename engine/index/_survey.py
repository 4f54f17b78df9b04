"""What the indexers make of a workspace, with the counts a person needs to trust it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import Config, WorkspaceError, WorkspaceNotFoundError
from indexers import ChunkedFile, Skipped, TiktokenCounter, TokenCounter, scan

__all__ = ["Survey", "survey"]


@dataclass(slots=True)
class Survey:
    """Running totals of a scan; complete once the iterator from ``survey`` is exhausted."""

    root: Path
    files: int = 0
    chunks: int = 0
    tokens: int = 0
    bytes: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    by_language: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)  # secrets taken out, by kind
    fallbacks: dict[str, str] = field(default_factory=dict)  # chunker failed: windows, why
    seconds: float = 0.0

    def add(self, item: ChunkedFile | Skipped) -> None:
        """Count one scanned item."""
        if isinstance(item, Skipped):
            self.skipped[item.reason.value] += 1
            return
        self.files += 1
        self.bytes += item.page.size_bytes
        self.chunks += len(item.chunks)
        self.tokens += sum(c.tokens for c in item.chunks)
        self.by_language[item.page.language] += 1
        self.by_kind.update(c.kind.value for c in item.chunks)
        self.redactions.update(r.kind for r in item.redactions)
        if item.fallback:
            self.fallbacks[item.page.path] = item.fallback


def survey(
    path: str | Path,
    config: Config | None = None,
    counter: TokenCounter | None = None,
) -> tuple[Survey, Iterator[ChunkedFile | Skipped]]:
    """Scan ``path`` (a folder or a single file) lazily, counting as items are consumed.

    Returns the live ``Survey`` and the iterator; the survey's ``seconds`` is set when the
    iterator ends.
    """
    config = config or Config()
    root = Path(path)
    if not root.exists():
        raise WorkspaceNotFoundError(f"no such file or directory: {root}")
    totals = Survey(root=root)
    counter = counter or TiktokenCounter(config.encoding)

    def items() -> Iterator[ChunkedFile | Skipped]:
        start = time.perf_counter()
        try:
            for item in scan(
                root,
                walk_options=config.walk_options(),
                options=config.chunk_options(),
                counter=counter,
            ):
                totals.add(item)
                yield item
        except OSError as exc:
            raise WorkspaceError(f"cannot read {root}: {exc}") from exc
        finally:
            totals.seconds = time.perf_counter() - start

    return totals, items()
