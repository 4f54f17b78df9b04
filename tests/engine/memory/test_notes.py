"""The memory store on real SQLite: dedupe, topic keys, scopes, soft delete, edges, limits,
a corrupt file, and two processes saving one topic key (hygiene as property tests)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import (
    MAX_TITLE_CHARS,
    PREVIEW_CHARS,
    Config,
    ConfigError,
    MemoryStateError,
    NotFoundError,
    SaveAction,
)
from engine.embed import make_embedder
from engine.memory import Memory, NoteStore
from engine.segment import code_terms
from engine.serve._encode import to_json

EMBEDDER = make_embedder("hash", Config())
_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)
_TEXT = st.lists(_WORDS, min_size=1, max_size=12).map(" ".join)
_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def _memory(path: Path, project: str = "p1", user: str = "ann") -> Memory:
    store = NoteStore(path, project=project, user=user, terms=code_terms, embedder=EMBEDDER)
    return Memory(store)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = _memory(tmp_path / "memory.sqlite")
    yield m
    m.close()


_counter = iter(range(1, 1 << 30))


def _fresh(tmp_path: Path) -> Memory:
    return _memory(tmp_path / f"m{next(_counter)}.sqlite")


@_SETTINGS
@given(title=_TEXT, what=_TEXT, spaces=st.sampled_from(["", " ", "  \n"]))
def test_same_content_twice_adds_nothing(tmp_path: Path, title: str, what: str,
                                         spaces: str) -> None:  # fmt: skip
    """The same content (up to case and spacing) saved again is the note already there."""
    m = _fresh(tmp_path)
    first = m.save(title, "decision", what=what)
    again = m.save(spaces + title.upper(), "decision", what=what.replace(" ", "  ") + spaces)
    assert again.action is SaveAction.DUPLICATE and again.id == first.id
    assert m.stats().notes == 1
    m.close()


@_SETTINGS
@given(bodies=st.lists(_TEXT, min_size=1, max_size=6, unique=True))
def test_topic_key_is_one_row_with_its_revisions(tmp_path: Path, bodies: list[str]) -> None:
    """Saves under one topic key update one row; each different body is one revision."""
    m = _fresh(tmp_path)
    results = [m.save("Token refresh", "bugfix", what=b, topic_key="auth/refresh") for b in bodies]
    assert {r.id for r in results} == {results[0].id}
    assert results[-1].revision == len(bodies)
    note = m.get(results[0].id)
    assert note.revision == len(bodies) and note.what == bodies[-1]
    assert m.stats().notes == 1
    m.close()


@_SETTINGS
@given(texts=st.lists(_TEXT, min_size=2, max_size=8, unique=True), data=st.data())
def test_soft_deleted_notes_are_never_returned(tmp_path: Path, texts: list[str],
                                               data: st.DataObject) -> None:  # fmt: skip
    """A forgotten note is in no search, timeline or graph, and get says it is gone."""
    m = _fresh(tmp_path)
    ids = [m.save(f"note {i}", what=t).id for i, t in enumerate(texts)]
    gone = set(data.draw(st.lists(st.sampled_from(ids), max_size=len(ids))))
    for i in gone:
        m.forget(i)
    for t in texts:
        assert not gone & {h.id for h in m.search(t, 100)}
    live = [i for i in ids if i not in gone]
    if live:
        assert not gone & {h.id for h in m.timeline(live[0], 50, 50)}
    for i in gone:
        with pytest.raises(NotFoundError):
            m.get(i)
    m.close()


@_SETTINGS
@given(mine=st.lists(_TEXT, min_size=1, max_size=5), theirs=st.lists(_TEXT, min_size=1, max_size=5))
def test_no_note_crosses_projects(tmp_path: Path, mine: list[str], theirs: list[str]) -> None:
    """Two projects sharing one file never see each other's notes, in any read."""
    path = tmp_path / f"shared{next(_counter)}.sqlite"
    a, b = _memory(path, "project-a"), _memory(path, "project-b")
    a_ids = {a.save(f"a {i}", what=t).id for i, t in enumerate(mine)}
    b_ids = {b.save(f"b {i}", what=t).id for i, t in enumerate(theirs)}
    for t in mine + theirs:
        assert {h.id for h in a.search(t, 100)} <= a_ids
        assert {h.id for h in b.search(t, 100)} <= b_ids
    for i in b_ids:
        with pytest.raises(NotFoundError):
            a.get(i)
        with pytest.raises(NotFoundError):
            a.relate(min(a_ids), i, "relates_to")
    assert a.stats().notes == len(a_ids)
    a.close()
    b.close()


def test_personal_notes_are_their_owners(tmp_path: Path) -> None:
    """A personal note reaches its user only; a project note reaches every user."""
    path = tmp_path / "memory.sqlite"
    ann, bob = _memory(path, user="ann"), _memory(path, user="bob")
    mine = ann.save("my editor setup", "identity", what="vim keys", scope="personal").id
    shared = ann.save("the build uses make", "config", what="make test").id
    assert {h.id for h in bob.search("vim keys make editor")} == {shared}
    assert {h.id for h in ann.search("vim keys make editor")} == {mine, shared}
    with pytest.raises(NotFoundError):
        bob.get(mine)


def _save_revisions(path: str, who: str, n: int) -> None:
    m = _memory(Path(path))
    for i in range(n):
        m.save("Shared topic", "decision", what=f"{who} revision {i}", topic_key="shared")
    m.close()


def test_two_processes_saving_one_topic_key(tmp_path: Path) -> None:
    """Two processes saving the same topic key at once: one row, every revision counted."""
    path = tmp_path / "memory.sqlite"
    _memory(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_save_revisions, args=(str(path), w, 15)) for w in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    m = _memory(path)
    assert m.stats().notes == 1
    [hit] = m.search("shared topic")
    assert m.get(hit.id).revision == 30


def test_supersedes_hides_and_refuses_cycles(mem: Memory) -> None:
    """A superseded note leaves recall (unless asked for); a cycle is refused."""
    old = mem.save("retries in the client", "decision", what="the client retries").id
    new = mem.save("retries in the transport", "decision", what="the transport retries").id
    mem.relate(new, old, "supersedes")
    assert old not in {h.id for h in mem.search("retries")}
    assert old in {h.id for h in mem.search("retries", include_superseded=True)}
    assert mem.get(old).superseded_by == (new,)
    with pytest.raises(ConfigError, match="cycle"):
        mem.relate(old, new, "supersedes")
    with pytest.raises(ConfigError, match="itself"):
        mem.relate(new, new, "relates_to")


def test_a_contradiction_shows_both_sides(mem: Memory) -> None:
    """Each side of a contradiction names the other, in search and in get."""
    a = mem.save("cache size is 64 MB", "config", what="cache 64").id
    b = mem.save("cache size is 128 MB", "config", what="cache 128").id
    mem.relate(a, b, "contradicts")
    hits = {h.id: h for h in mem.search("cache size")}
    assert hits[a].contradicts == ((b, "cache size is 128 MB"),)
    assert hits[b].contradicts == ((a, "cache size is 64 MB"),)
    assert mem.get(b).contradicts == ((a, "cache size is 64 MB"),)


def test_edges_to_deleted_or_missing_notes_are_refused(mem: Memory) -> None:
    """relate names the end that does not exist or was deleted."""
    a = mem.save("one", what="first").id
    b = mem.save("two", what="second").id
    mem.forget(b)
    with pytest.raises(NotFoundError, match=f"target note {b}"):
        mem.relate(a, b, "references")
    with pytest.raises(NotFoundError, match="source note 999"):
        mem.relate(999, a, "references")
    with pytest.raises(ConfigError, match="unknown edge kind"):
        mem.relate(a, b, "likes")


def test_graph_walks_to_its_depth(mem: Memory) -> None:
    """A chain a→b→c→d: depth 1 reaches b, depth 3 reaches d; depth 0 or 11 is refused."""
    ids = [mem.save(f"step {i}", what=f"chain {i}").id for i in range(4)]
    for x, y in zip(ids[1:], ids, strict=False):
        mem.relate(x, y, "follows")
    assert {n.id for n in mem.graph(ids[0], 1).nodes} == set(ids[:2])
    far = mem.graph(ids[0], 3)
    assert [n.depth for n in far.nodes] == [0, 1, 2, 3] and len(far.edges) == 3
    for bad in (0, 11):
        with pytest.raises(ConfigError, match="depth"):
            mem.graph(ids[0], bad)


def test_bad_input_gets_clear_errors(mem: Memory) -> None:
    """Empty and enormous fields, unknown types and ids: each a clear error."""
    with pytest.raises(ConfigError, match="needs a title"):
        mem.save("   ")
    with pytest.raises(ConfigError, match=f"at most {MAX_TITLE_CHARS}"):
        mem.save("x" * (MAX_TITLE_CHARS + 1))
    with pytest.raises(ConfigError, match="what has"):
        mem.save("big", what="y" * 20_000)
    with pytest.raises(ConfigError, match="unknown note type"):
        mem.save("t", "opinion")
    with pytest.raises(ConfigError, match="unknown scope"):
        mem.save("t", scope="team")
    for k in (0, 101, True):  # k in the words search uses on every surface
        with pytest.raises(ConfigError, match=f"^k must be a whole number within 1..100, got {k}$"):
            mem.search("t", k=k)
    with pytest.raises(NotFoundError):
        mem.get(12345)
    with pytest.raises(NotFoundError):
        mem.get(-1)
    with pytest.raises(ConfigError, match="needs a query"):
        mem.search(" ")


def test_search_answers_previews_and_get_the_whole(mem: Memory) -> None:
    """search previews are at most PREVIEW_CHARS; get has the full text; secrets redacted."""
    body = "the retry loop " * 200
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    saved = mem.save("retry loop", "pattern", what=body, why=f"token {token}")
    [hit] = mem.search("retry loop")
    assert len(hit.preview) <= PREVIEW_CHARS
    note = mem.get(saved.id)
    assert note.what == body.strip() and token not in note.why and "REDACTED" in note.why
    assert note.access_count == 1 and {p[0] for p in note.importance.parts} >= {"type", "age"}


def test_a_corrupt_store_names_its_file(tmp_path: Path) -> None:
    """A file that is not SQLite gives MemoryStateError with its path."""
    path = tmp_path / "memory.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(MemoryStateError, match=str(path)):
        _memory(path)


def test_an_id_past_sqlite_integers_is_not_found(mem: Memory) -> None:
    """An id too large for SQLite is NotFoundError on every read, never an overflow."""
    saved = mem.save("a note", "note")
    huge = 2**70
    for call in (lambda: mem.get(huge), lambda: mem.timeline(str(huge)),
                 lambda: mem.relate(saved.id, huge, "references"), lambda: mem.graph(huge),
                 lambda: mem.forget(huge), lambda: mem.item(huge)):  # fmt: skip
        with pytest.raises(NotFoundError):
            call()


def test_a_note_saved_while_it_is_re_embedded_keeps_the_vector_of_its_new_text(
    tmp_path: Path,
) -> None:
    """Re-embedding reads a note, embeds it, then writes: a save of the same note in
    between (another process) wins, and its vector is of its new text, not the old one."""
    import sqlite3

    import numpy as np

    from engine.memory._observations import body_text

    path = tmp_path / "memory.sqlite"
    new_model = make_embedder("hash:64", Config())

    def store(embedder: object) -> NoteStore:
        return NoteStore(path, project="p", user="ann", terms=code_terms,
                         embedder=embedder)  # type: ignore[arg-type]  # fmt: skip

    old = Memory(store(make_embedder("hash:32", Config())))
    note = old.save("Retries", what="old text about redis", topic_key="k").id
    old.close()
    other = Memory(store(new_model))

    class SavesMeanwhile:
        """The new model; while it embeds the old text, another writer updates the note."""

        model_id, dim = new_model.model_id, new_model.dim

        def embed(self, texts: list[str]) -> object:
            if any("old text" in t for t in texts):
                other.save("Retries", what="new text about exponential backoff", topic_key="k")
            return new_model.embed(texts)

        def embed_query(self, text: str) -> object:
            return new_model.embed_query(text)

    racing = store(SavesMeanwhile())
    try:
        racing.reembed()
    finally:
        racing.close()
        other.close()
    db = sqlite3.connect(path)
    title, what, vector = db.execute(
        "SELECT title, what, vector FROM notes WHERE id = ?", (note,)
    ).fetchone()
    db.close()
    assert what == "new text about exponential backoff"
    fresh = new_model.embed([f"{title}\n{body_text(what, '', '', '')}"])[0]
    assert np.allclose(np.frombuffer(vector, np.float32), fresh)


def test_notes_of_another_dense_model_are_embedded_again(tmp_path: Path) -> None:
    """After the dense model changes (an upgrade of the default), the first search embeds
    the old notes with the new model, so dense recall still reaches them; deleted notes
    and other projects' notes are left alone."""
    import sqlite3

    path = tmp_path / "memory.sqlite"

    def open_store(model: str, project: str = "p") -> Memory:
        return Memory(NoteStore(path, project=project, user="ann", terms=code_terms,
                                embedder=make_embedder(model, Config())))  # fmt: skip

    old = open_store("hash:32")
    kept = old.save("Retries use exponential backoff", what="capped at 30 s").id
    gone = old.save("Cache lives in redis", what="eviction is LRU").id
    old.forget(gone)
    old.close()
    other = open_store("hash:32", project="q")
    theirs = other.save("Their note", what="another project").id
    other.close()

    new = open_store("hash:64")
    try:
        dense = new.recall("exponential backoff retries", lexical=False)
        assert [i for i, _ in dense][:1] == [kept]
    finally:
        new.close()
    db = sqlite3.connect(path)
    models = dict(db.execute("SELECT id, model FROM notes").fetchall())
    db.close()
    new_id = make_embedder("hash:64", Config()).model_id
    old_id = make_embedder("hash:32", Config()).model_id
    assert models[kept] == new_id
    assert models[gone] == old_id and models[theirs] == old_id
    again = open_store("hash:64")
    try:
        assert again.store.reembed() == 0  # nothing left to do
        # The check runs once per process: later searches do not scan the project again.
        calls = 0
        reembed = again.store.reembed

        def counted() -> int:
            nonlocal calls
            calls += 1
            return reembed()

        again.store.reembed = counted  # type: ignore[method-assign]
        for _ in range(3):
            again.recall("exponential backoff retries", lexical=False)
        assert calls == 1
    finally:
        again.close()


def test_a_search_answers_after_another_connection_opens_and_hard_deletes(
    tmp_path: Path,
) -> None:
    """A reader's search after another process opened the store and hard-deleted a note
    answers (no "SQL logic error"), also when the text index's ranking was rewritten."""
    path = tmp_path / "memory.sqlite"
    reader = _memory(path)
    for title in ("Parser rejects empty", "Retries live in transport", "Kiln fires Tuesdays"):
        reader.save(title, what=f"{title} body")
    assert [h.id for h in reader.search("parser empty")][:1] == [1]
    other = _memory(path)  # what `cortex memory forget 2 --hard` does in its own process
    assert other.forget(2, hard=True)
    other.close()
    assert [h.id for h in reader.search("parser empty")][:1] == [1]
    with sqlite3.connect(path) as db:  # a ranking written anew: the reader reloads it
        db.execute("INSERT INTO notes_fts (notes_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0)')")
    assert [h.id for h in reader.search("parser empty")][:1] == [1]
    reader.close()


def test_an_archived_note_says_so_and_is_counted(mem: Memory) -> None:
    """Archiving was not observable: the note, the stats and the CLI's line were the same
    before and after. The note now says `archived`, stats count them, `--undo` clears it."""
    kept = mem.save("retry budget lives in the transport", "decision", what="retry budget")
    other = mem.save("retry jitter is random", "discovery", what="retry jitter")
    assert mem.get(kept.id).archived is False
    assert mem.stats().archived == 0
    note = mem.archive(kept.id)
    assert note.archived is True and mem.get(kept.id).archived is True
    assert [h.id for h in mem.search("retry")] == [other.id]
    stats = mem.stats()
    assert (stats.notes, stats.archived) == (2, 1)
    assert to_json(note)["archived"] is True
    assert mem.archive(kept.id, False).archived is False
    assert mem.stats().archived == 0
    assert sorted(h.id for h in mem.search("retry")) == sorted([kept.id, other.id])
