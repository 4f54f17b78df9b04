"""Fixtures shared by the memory tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core import Config
from engine.embed import make_embedder
from engine.memory import Memory, NoteStore
from engine.segment import code_terms


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """An empty note store of project "p" for user "ann" (real SQLite, the hash embedder)."""
    store = NoteStore(tmp_path / "memory.sqlite", project="p", user="ann", terms=code_terms,
                      embedder=make_embedder("hash", Config()))  # fmt: skip
    m = Memory(store)
    yield m
    m.close()
