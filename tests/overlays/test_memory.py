"""The View's in-memory side, advanced by what changed: the same answers as one built from
scratch, reading only changed paths, immutable snapshots, and a term table that stays small."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

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
