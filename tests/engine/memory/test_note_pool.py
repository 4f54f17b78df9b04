"""A note pool: several searches of one query ranked from one read of the candidates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core import Config, ConfigError
from engine.embed import make_embedder
from engine.memory import Memory, NoteStore
from engine.segment import code_terms

_NOTES = (
    ("we deploy the parser from the release branch", "decision"),
    ("you are the release engineer of the parser", "identity"),
    ("never break the parser's public signature", "constraint"),
    ("ship the new parser in the next release", "goal"),
    ("the tokenizer drops a trailing newline in the parser", "bugfix"),
    ("release notes are written by hand", "note"),
)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    store = NoteStore(tmp_path / "memory.sqlite", project="p", user="ann", terms=code_terms,
                      embedder=make_embedder("hash", Config()),
                      clock=lambda: 1_700_000_000.0)  # fmt: skip
    m = Memory(store)
    for text, kind in _NOTES:
        m.save(text, kind)
    yield m
    m.close()


@pytest.mark.parametrize("query", ["parser release", "newline tokenizer", "signature"])
@pytest.mark.parametrize(
    ("k", "types"), [(8, ("identity", "constraint", "goal")), (4, ()), (2, ("decision",))]
)
def test_a_search_from_a_pool_is_the_search_without(
    mem: Memory, query: str, k: int, types: tuple[str, ...]
) -> None:
    """Each search ranked from the query's pool answers what the same search reading the
    candidates itself does (ids, order, scores, previews)."""
    pool = mem.pool(query)
    assert mem.search(query, k, types=types, pool=pool) == mem.search(query, k, types=types)


def test_a_pool_serves_only_its_own_query(mem: Memory) -> None:
    """A pool read for one query is refused for another (its candidates would be wrong)."""
    with pytest.raises(ConfigError):
        mem.search("tokenizer", 3, pool=mem.pool("parser"))
