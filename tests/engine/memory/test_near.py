"""Neighbours' words in the lexical index: found, ranked below the note itself, and
dropped with the neighbour (deleted, purged, personal, or an old store indexed again)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.core import Config
from engine.embed import make_embedder
from engine.memory import Memory, NoteStore
from engine.segment import code_terms


def _pair(mem: Memory) -> tuple[int, int]:
    """A question and the reply that follows it, among unrelated notes."""
    q = mem.save("which database do we run in staging", "note")
    a = mem.save("postgres sixteen, upgraded last spring", "note")
    mem.relate(a.id, q.id, "follows")
    for i in range(5):
        mem.save(f"unrelated note number {i} about lunch", "note")
    return q.id, a.id


def _lexical(mem: Memory, query: str) -> list[int]:
    return [i for i, _ in mem.recall(query, 10, dense=False)]


def test_a_note_is_found_by_the_words_of_the_note_after_it(mem: Memory) -> None:
    """The question is found by a word only its reply holds, below the reply."""
    q, a = _pair(mem)
    assert _lexical(mem, "postgres")[:2] == [a, q]


def test_a_deleted_neighbours_words_stop_finding_a_note(mem: Memory) -> None:
    """Soft or hard, a deleted note's words no longer find the note beside it."""
    q, a = _pair(mem)
    mem.forget(a)
    assert q not in _lexical(mem, "postgres")
    q2, a2 = _pair(mem)
    mem.forget(a2, hard=True)
    assert q2 not in _lexical(mem, "postgres")


def test_an_updated_neighbours_new_words_find_the_note(mem: Memory) -> None:
    """A topic key's new revision is what its neighbour is indexed with."""
    q = mem.save("which database do we run in staging", "note")
    a = mem.save("the staging database", "note", what="postgres", topic_key="db")
    mem.relate(a.id, q.id, "follows")
    mem.save("the staging database", "note", what="mariadb", topic_key="db")
    assert q.id not in _lexical(mem, "postgres")
    assert q.id in _lexical(mem, "mariadb")


def test_a_personal_neighbours_words_never_find_a_shared_note(mem: Memory) -> None:
    """A project note is not indexed with the words of a personal note beside it."""
    q = mem.save("which database do we run in staging", "note")
    a = mem.save("postgres sixteen, my own setup", "note", scope="personal")
    mem.relate(a.id, q.id, "follows")
    assert q.id not in _lexical(mem, "postgres")


def test_a_purged_string_leaves_the_neighbours_index(mem: Memory) -> None:
    """Purging a string from a note also drops it from the note beside it."""
    _pair(mem)
    mem.store.purge("postgres")
    assert _lexical(mem, "postgres") == []


def test_a_schema_1_store_is_indexed_again_on_open(tmp_path: Path) -> None:
    """A store written before neighbours were indexed opens, with its notes found by their
    own words and their neighbours'."""
    path = tmp_path / "memory.sqlite"

    def store() -> Memory:
        emb = make_embedder("hash", Config())
        return Memory(NoteStore(path, project="p", user="ann", terms=code_terms, embedder=emb))

    mem = store()
    q, a = _pair(mem)
    mem.close()
    db = sqlite3.connect(path)
    db.executescript(
        "DROP TABLE notes_fts; CREATE VIRTUAL TABLE notes_fts USING fts5(title, body, "
        "tokenize = \"porter unicode61 remove_diacritics 0 tokenchars '_'\"); "
        "INSERT INTO notes_fts (rowid, title, body) SELECT id, title, what FROM notes; "
        "UPDATE meta SET value = '1' WHERE key = 'schema';"
    )
    db.close()
    mem = store()
    try:
        assert _lexical(mem, "postgres")[:2] == [a, q]
        assert _lexical(mem, "staging")[0] == q
    finally:
        mem.close()
