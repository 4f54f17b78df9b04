"""The View's in-memory side, advanced by what changed: the same answers as one built from
scratch, reading only changed paths, immutable snapshots, a term table that stays small, and
a snapshot file another process starts from (or, damaged, ignores)."""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlays import DocTerms, OverlayMemory, TableStats

WEIGHTS = {"body": 1.0, "path_terms": 2.0}
WORDS = ["parse", "token", "cache", "view", "alpha", "beta", "gamma", "delta", "omega", "zeta"]


def _doc(path: str, n: int, words: Sequence[str]) -> DocTerms:
    return DocTerms(
        f"{path}#{n}:{'-'.join(words)}",
        path,
        {"body": (len(words), Counter(words)), "path_terms": (1, Counter([path.split("/")[0]]))},
    )


class FakePart:
    """A segment reduced to what the memory reads: documents and a key per path."""

    def __init__(self, files: dict[str, list[list[str]]]) -> None:
        self.files = files
        self.reads: list[str] = []

    def docs_of(self, table: str, paths: Iterable[str]) -> list[DocTerms]:
        out = []
        for path in sorted(set(paths)):
            self.reads.append(path)
            out.extend(_doc(path, n, words) for n, words in enumerate(self.files.get(path, [])))
        return out

    def file_keys(self, paths: Sequence[str]) -> dict[str, str]:
        return {p: repr(self.files[p]) for p in paths if p in self.files}


BASE = {f"pkg{i % 3}/m{i}.py": [[WORDS[i % 10], WORDS[(i * 3) % 10]], [WORDS[(i + 1) % 10]]]
        for i in range(12)}  # fmt: skip
OWN = TableStats(0, {})  # the base's own statistics, as a segment reports them
OWN.add(FakePart(BASE).docs_of("sections", BASE), WORDS, 1)


def _answer(memory: OverlayMemory, base: FakePart, overlay: FakePart, hidden: set[str]) -> object:
    got = memory.memory("sections", base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    stats = got.stats(OWN, WORDS)
    top = sorted(got.top(WORDS[:4], stats, WEIGHTS, 5, None))
    some = sorted(got.top(WORDS[:4], stats, WEIGHTS, 5, {"pkg1/m1.py", "pkg0/new.py"}))
    return stats, top, some


edits = st.lists(
    st.tuples(
        st.sampled_from([*sorted(BASE), "pkg0/new.py", "pkg2/other.py"]),
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), max_size=3),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(edits)
def test_advanced_memory_answers_as_one_built_from_scratch(
    steps: list[tuple[str, list[list[str]], bool]],
) -> None:
    """After every edit (change, add, delete a file), statistics and top documents of the
    advanced memory equal those of a memory built from nothing, scores bit for bit."""
    base = FakePart(dict(BASE))
    overlay = FakePart({})
    shared = OverlayMemory()
    hidden: set[str] = set()
    for path, docs, delete in steps:
        if delete:
            overlay.files.pop(path, None)
            if path in BASE:
                hidden.add(path)  # a tombstone
        else:
            overlay.files[path] = docs
            hidden.add(path)
        hide = hidden | set(overlay.files)
        assert _answer(shared, base, overlay, hide) == _answer(OverlayMemory(), base, overlay, hide)


def test_a_one_file_edit_reads_one_file() -> None:
    """A new View after one overlay file changed reads that file's documents only."""
    base = FakePart(dict(BASE))
    overlay = FakePart({p: [["parse", "view"]] for p in sorted(BASE)[:6]})
    memory = OverlayMemory()
    hidden = set(overlay.files)
    memory.memory("sections", base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    overlay.reads.clear()
    base.reads.clear()
    overlay.files[sorted(BASE)[0]] = [["parse", "cache", "omega"]]
    memory.memory("sections", base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    assert overlay.reads == [sorted(BASE)[0]] and base.reads == []
    assert memory.last_read == 1


def test_snapshots_are_immutable() -> None:
    """A View's memory answers the same after a later View advanced the shared state."""
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha", "beta"]]})
    memory = OverlayMemory()
    first = memory.memory("sections", base, overlay, {"pkg0/m0.py"}, {"pkg0/m0.py"})  # type: ignore[arg-type]
    before = (
        first.stats(OWN, WORDS),
        sorted(first.top(WORDS, first.stats(OWN, WORDS), WEIGHTS, 9, None)),
    )
    overlay.files = {"pkg1/m1.py": [["gamma"]]}
    memory.memory("sections", base, overlay, {"pkg1/m1.py"}, {"pkg1/m1.py"})  # type: ignore[arg-type]
    after = (
        first.stats(OWN, WORDS),
        sorted(first.top(WORDS, first.stats(OWN, WORDS), WEIGHTS, 9, None)),
    )
    assert before == after


def test_the_term_table_holds_what_is_live() -> None:
    """A file edited 300 times with new words each time: the term table stays bounded by
    what the live documents hold (it is renumbered when the dead outgrow the live)."""
    base = FakePart(dict(BASE))
    overlay = FakePart({})
    memory = OverlayMemory()
    for i in range(300):
        overlay.files = {"pkg0/m0.py": [[f"word{i}", f"other{i}", "parse"]]}
        got = memory.memory("sections", base, overlay, {"pkg0/m0.py"}, {"pkg0/m0.py"})  # type: ignore[arg-type]
    assert len(got.added.table) <= 16
    assert got.added.count == 1 and len(got.added.docs) <= 4


def test_small_blocks_merge_and_answers_stay_the_same() -> None:
    """Many one-file edits over a large overlay: the small blocks merge (each field keeps at
    most MAX_BLOCKS), nothing is rebuilt, and every answer equals a fresh build's."""
    from overlays._memory import MAX_BLOCKS

    files = {f"pkg{i % 3}/m{i}.py": [[WORDS[i % 10], WORDS[(i * 7) % 10]]] for i in range(120)}
    base = FakePart(dict(BASE))
    overlay = FakePart(dict(files))
    memory = OverlayMemory()
    hidden = set(files)
    first = memory.memory("sections", base, overlay, set(files), hidden)  # type: ignore[arg-type]
    for i in range(3 * MAX_BLOCKS):
        overlay.files[f"pkg0/m{3 * i}.py"] = [[WORDS[i % 10], "omega", "zeta"]]
        got = memory.memory("sections", base, overlay, set(files), hidden)  # type: ignore[arg-type]
        assert max(len(b) for b in got.added.blocks.values()) <= MAX_BLOCKS
        assert got.added.table is first.added.table  # merged, not rebuilt
        assert _answer(memory, base, overlay, hidden) == _answer(
            OverlayMemory(), base, overlay, hidden
        )


# -- the snapshot file ------------------------------------------------------------------


def _saved(memory: OverlayMemory, path: Path, ident: str = "base-1") -> OverlayMemory:
    """``memory`` saved to ``path``, and a new memory (a new process) that reads it."""
    memory.snapshot, memory.ident = path, ident
    memory.save()
    return OverlayMemory(path, ident)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(edits, edits)
def test_a_memory_read_from_its_snapshot_answers_as_one_built_from_scratch(
    before: list[tuple[str, list[list[str]], bool]],
    after: list[tuple[str, list[list[str]], bool]],
) -> None:
    """Saved after some edits and read back by a new memory, then advanced through more
    edits (a snapshot's side holds no documents: when it is due a rebuild it reads every
    path again): every answer equals a fresh build's, bit for bit."""
    with tempfile.TemporaryDirectory() as folder:
        base = FakePart(dict(BASE))
        overlay = FakePart({})
        memory = OverlayMemory()
        hidden: set[str] = set()
        for i, (path, docs, delete) in enumerate([*before, *after]):
            if i == len(before):
                for table in ("sections", "pages"):
                    memory.memory(table, base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
                memory = _saved(memory, Path(folder) / "memory.npz")
            if delete:
                overlay.files.pop(path, None)
                if path in BASE:
                    hidden.add(path)
            else:
                overlay.files[path] = docs
                hidden.add(path)
            hidden |= set(overlay.files)
            assert _answer(memory, base, overlay, hidden) == _answer(
                OverlayMemory(), base, overlay, hidden
            )
        assert memory.loaded


def test_a_new_process_reads_no_documents_from_an_up_to_date_snapshot(tmp_path: Path) -> None:
    """``prepare`` (what a refresh does) builds both tables and saves them; a memory that
    reads the file answers without reading a document, and reads only the file that
    changed after it was saved."""
    base = FakePart(dict(BASE))
    overlay = FakePart({p: [["parse", "view"], ["omega"]] for p in sorted(BASE)[:5]})
    hidden = set(overlay.files) | {sorted(BASE)[7]}
    writer = OverlayMemory(tmp_path / "memory.npz", "base-1")
    assert writer.prepare(base, overlay, set(overlay.files), hidden) > 0  # type: ignore[arg-type]
    base.reads.clear()
    overlay.reads.clear()
    reader = OverlayMemory(tmp_path / "memory.npz", "base-1")
    assert _answer(reader, base, overlay, hidden) == _answer(OverlayMemory(), base, overlay, hidden)
    assert reader.loaded
    base.reads.clear()
    overlay.reads.clear()
    reader = OverlayMemory(tmp_path / "memory.npz", "base-1")
    reader.memory("sections", base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    assert reader.last_read == 0 and base.reads == [] and overlay.reads == []
    overlay.files[sorted(BASE)[0]] = [["gamma"]]
    reader = OverlayMemory(tmp_path / "memory.npz", "base-1")
    reader.memory("sections", base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    assert overlay.reads == [sorted(BASE)[0]] and base.reads == []


def test_a_snapshot_of_another_base_or_format_is_not_read(tmp_path: Path) -> None:
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha"]]})
    one = {"pkg0/m0.py"}
    OverlayMemory(tmp_path / "m.npz", "base-1").prepare(base, overlay, one, one)  # type: ignore[arg-type]
    other = OverlayMemory(tmp_path / "m.npz", "base-2")
    other.memory("sections", base, overlay, {"pkg0/m0.py"}, {"pkg0/m0.py"})  # type: ignore[arg-type]
    assert not other.loaded and other.last_read == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"not a zip file"),
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        lambda p: _rewrite(p, "sections/added/block/body/0/rows", np.array([10**6])),
        lambda p: _rewrite(p, "meta", np.frombuffer(b"{not json", dtype=np.uint8)),
    ],
    ids=["not-a-zip", "truncated", "rows-out-of-range", "bad-meta"],
)
def test_an_unreadable_snapshot_is_logged_and_built_again(
    tmp_path: Path, damage: Callable[[Path], object], caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged file never breaks a query or changes an answer: it is named in a warning
    and the memory is built from the documents."""
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha", "beta"]], "pkg1/m1.py": [["gamma"]]})
    hidden = set(overlay.files)
    path = tmp_path / "memory.npz"
    OverlayMemory(path, "base-1").prepare(base, overlay, set(overlay.files), hidden)  # type: ignore[arg-type]
    damage(path)
    with caplog.at_level(logging.WARNING):
        got = _answer(OverlayMemory(path, "base-1"), base, overlay, hidden)
    assert got == _answer(OverlayMemory(), base, overlay, hidden)
    assert str(path) in caplog.text


def test_a_view_hiding_nothing_removes_its_snapshot(tmp_path: Path) -> None:
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha"]]})
    memory = OverlayMemory(tmp_path / "memory.npz", "base-1")
    memory.prepare(base, overlay, {"pkg0/m0.py"}, {"pkg0/m0.py"})  # type: ignore[arg-type]
    assert (tmp_path / "memory.npz").exists()
    memory.prepare(base, FakePart({}), set(), set())  # type: ignore[arg-type]
    assert not (tmp_path / "memory.npz").exists()


def _rewrite(path: Path, name: str, value: np.ndarray) -> None:
    with np.load(path) as got:
        arrays = {k: got[k] for k in got.files}
    arrays[name] = value
    with path.open("wb") as out:
        np.savez(out, **arrays)


def test_a_snapshot_side_due_a_rebuild_reads_every_path_again(tmp_path: Path) -> None:
    """A side read from a file holds no documents; when the dead rows outgrow the live ones
    it is rebuilt from every path's documents, read again, and still answers the same."""
    files = {"pkg0/m0.py": [["alpha"]], "pkg1/m1.py": [["beta"]], "pkg2/m2.py": [["gamma"]]}
    base = FakePart(dict(BASE))
    overlay = FakePart(dict(files))
    hidden = set(files)
    OverlayMemory(tmp_path / "m.npz", "b").prepare(base, overlay, set(files), hidden)  # type: ignore[arg-type]
    memory = OverlayMemory(tmp_path / "m.npz", "b")
    for round_ in range(3):
        overlay.files = {p: [["omega", f"v{round_}"]] for p in files}
        overlay.reads.clear()
        got = memory.memory("sections", base, overlay, set(files), hidden)  # type: ignore[arg-type]
        read = list(overlay.reads)
        assert _answer(memory, base, overlay, hidden) == _answer(
            OverlayMemory(), base, overlay, hidden
        )
    assert memory.loaded and got.added.docs is not None  # rebuilt from the documents
    assert read == sorted(files)


def test_prepare_writes_the_file_again_only_after_enough_was_read(tmp_path: Path) -> None:
    """A one-file edit is read again by the next process rather than rewriting the file;
    once ``SAVE_AFTER_PATHS`` paths were read since the last save, it is written."""
    from overlays._memory import SAVE_AFTER_PATHS

    path = tmp_path / "memory.npz"
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha"]]})
    memory = OverlayMemory(path, "b")
    memory.prepare(base, overlay, set(overlay.files), set(overlay.files))  # type: ignore[arg-type]
    written = path.read_bytes()
    overlay.files["pkg0/m0.py"] = [["beta"]]
    memory.prepare(base, overlay, set(overlay.files), set(overlay.files))  # type: ignore[arg-type]
    assert path.read_bytes() == written
    overlay.files |= {f"new{i}.py": [["gamma"]] for i in range(SAVE_AFTER_PATHS)}
    memory.prepare(base, overlay, set(overlay.files), set(overlay.files))  # type: ignore[arg-type]
    assert path.read_bytes() != written
    reader = OverlayMemory(path, "b")
    reader.memory("sections", base, overlay, set(overlay.files), set(overlay.files))  # type: ignore[arg-type]
    assert reader.loaded and reader.last_read == 0


def test_a_snapshot_that_cannot_be_written_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk or an unwritable folder never fails the refresh that prepares the
    memory: the file is a cache, and the memory in this process is complete."""
    (tmp_path / "blocked").write_text("a file where the folder should be")
    path = tmp_path / "blocked" / "memory.npz"
    base = FakePart(dict(BASE))
    overlay = FakePart({"pkg0/m0.py": [["alpha"]]})
    memory = OverlayMemory(path, "b")
    with caplog.at_level(logging.WARNING):
        memory.prepare(base, overlay, {"pkg0/m0.py"}, {"pkg0/m0.py"})  # type: ignore[arg-type]
    assert str(path) in caplog.text and not path.exists()
    assert _answer(memory, base, overlay, {"pkg0/m0.py"}) == _answer(
        OverlayMemory(), base, overlay, {"pkg0/m0.py"}
    )
