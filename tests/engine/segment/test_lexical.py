"""BM25 over code with tantivy: the analyser, field weights, deletes, crash safety, and scores
checked against a plain-Python BM25 (``comparison/bm25_reference.py``)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.core import (
    ConfigError,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    IndexStateError,
)
from engine.segment._lexical import (
    LexicalIndex,
    code_terms,
    query_terms,
)
from indexers import Chunk, ChunkKind, DocType, Page, Span, chunk_id, page_id, sha256_text
from overlays import Found
from tests.engine.segment.comparison.bm25_reference import bm25_scores, stored_length

REPO = Path(__file__).resolve().parents[3]
REL = 1e-4  # tantivy scores in f32; the reference in f64


def make_chunk(
    path: str,
    text: str,
    *,
    symbol: str = "",
    defines: tuple[str, ...] = (),
    context: str = "",
    start: int = 1,
) -> Chunk:
    """A section record as the indexers would make it (only the indexed fields matter)."""
    span = Span(start, start + text.count("\n"))
    sha = sha256_text(text)
    return Chunk(
        id=chunk_id(path, span, sha),
        page_id=page_id(path, "0" * 64),
        path=path,
        span=span,
        text=text,
        sha256=sha,
        language="python",
        kind=ChunkKind.FUNCTION,
        doc_type=DocType.IMPLEMENTATION,
        symbol=symbol,
        context=context,
        defines=defines,
        references=(),
        tokens=len(text.split()),
        license="NOASSERTION",
    )


def make_page(path: str, text: str) -> Page:
    """A page record for ``text`` at ``path``."""
    sha = sha256_text(text)
    return Page(
        id=page_id(path, sha),
        path=path,
        sha256=sha,
        language="python",
        doc_type=DocType.IMPLEMENTATION,
        license="NOASSERTION",
        size_bytes=len(text.encode()),
        line_count=text.count("\n") + 1,
    )


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LexicalIndex]:
    """A fresh, empty index in a temporary directory."""
    with LexicalIndex.open(tmp_path / "lexical") as idx:
        yield idx


def ids(hits: list[Found]) -> list[str]:
    """The ids of ``hits``, in order."""
    return [h.id for h in hits]


# --- search ----------------------------------------------------------------------------------


def test_split_identifiers_are_found(index: LexicalIndex) -> None:
    """'register hook' finds sections defining register_hook and registerHook."""
    snake = make_chunk("a.py", "def register_hook(h):\n    pass", symbol="register_hook")
    camel = make_chunk("b.js", "function registerHook(h) {}", symbol="registerHook")
    other = make_chunk("c.py", "def unrelated():\n    return 1", symbol="unrelated")
    with index.writer() as w:
        assert w.add_sections([snake, camel, other]) == 3
    assert set(ids(index.search_sections("register hook"))) == {snake.id, camel.id}
    assert ids(index.search_sections("register_hook"))[0] == snake.id
    assert ids(index.search_sections("registerHook"))[0] == camel.id


def test_symbol_then_path_then_body(index: LexicalIndex) -> None:
    """A symbol match outranks a path match, which outranks a body-only mention."""
    body = "value = compute(items)\nreturn value"
    by_symbol = make_chunk("b/other.py", body, symbol="tokenizer")
    by_path = make_chunk("a/tokenizer.py", body, symbol="run")
    by_body = make_chunk("c/misc.py", body + "  # tokenizer", symbol="helper")
    with index.writer() as w:
        w.add_sections([by_path, by_symbol, by_body])
    assert ids(index.search_sections("tokenizer")) == [by_symbol.id, by_path.id, by_body.id]


def test_defines_and_context_are_searched(index: LexicalIndex) -> None:
    """Names a section defines count as symbol terms; its context counts as body."""
    method = make_chunk(
        "m.py",
        "def go(self):\n    pass",
        symbol="Runner.go",
        defines=("go",),
        context="class Runner(Launcher):",
    )
    with index.writer() as w:
        w.add_sections([method])
    assert ids(index.search_sections("Launcher")) == [method.id]
    assert ids(index.search_sections("runner")) == [method.id]


def test_paths_filter_restricts_without_rescoring(index: LexicalIndex) -> None:
    """`paths` limits hits to those files and leaves their scores unchanged."""
    chunks = [make_chunk(f"p{i}.py", f"parse_config step{i}") for i in range(4)]
    with index.writer() as w:
        w.add_sections(chunks)
    everything = {h.id: h for h in index.search_sections("parse config")}
    only = index.search_sections("parse config", paths={"p1.py", "p3.py"})
    assert {h.path for h in only} == {"p1.py", "p3.py"}
    assert all(h == everything[h.id] for h in only)
    assert index.search_sections("parse config", paths=()) == []
    with pytest.raises(ConfigError):
        index.search_sections("parse config", paths="p1.py")


def test_user_text_with_query_syntax(index: LexicalIndex) -> None:
    """Quotes, colons, parentheses and operators in a query are plain text, not syntax."""
    c = make_chunk("q.py", "def load_yaml(path): ...", symbol="load_yaml")
    with index.writer() as w:
        w.add_sections([c])
    for query in ['"load_yaml"', "title:load_yaml", "load_yaml(", "AND OR NOT load_yaml*"]:
        assert ids(index.search_sections(query)) == [c.id], query
    assert index.search_sections('+-^~:"(') == []


def test_empty_query_and_bad_k(index: LexicalIndex) -> None:
    """An empty or all-punctuation query gives []; k < 1 is a ConfigError."""
    with index.writer() as w:
        w.add_sections([make_chunk("e.py", "something here")])
    assert index.search_sections("") == []
    assert index.search_sections("  ()  ") == []
    assert index.search_pages("") == []
    with pytest.raises(ConfigError):
        index.search_sections("something", k=0)


def test_pages_and_counts(index: LexicalIndex) -> None:
    """Pages are searched by path and whole-file text; counts follow commits."""
    with index.writer() as w:
        w.add_page(make_page("net/http_client.py", "def fetch(url): ..."), "def fetch(url): ...")
        w.add_page(make_page("fs/disk.py", "def read(path): ..."), "def read(path): ...")
        w.add_sections([make_chunk("fs/disk.py", "def read(path): ...")])
    assert (index.num_pages, index.num_sections) == (2, 1)
    assert [h.path for h in index.search_pages("http client")] == ["net/http_client.py"]
    assert [h.path for h in index.search_pages("fetch")] == ["net/http_client.py"]


def test_delete_path_removes_page_and_sections(index: LexicalIndex) -> None:
    """delete_path removes a file's page and every section; other files stay."""
    text = "def shared_name():\n    pass"
    with index.writer() as w:
        for path in ("gone.py", "kept.py"):
            w.add_page(make_page(path, text), text)
            w.add_sections([make_chunk(path, text), make_chunk(path, "x = shared_name", start=3)])
    with index.writer() as w:
        w.delete_path("gone.py")
    assert (index.num_pages, index.num_sections) == (1, 2)
    assert {h.path for h in index.search_sections("shared_name")} == {"kept.py"}
    assert {h.path for h in index.search_pages("shared_name")} == {"kept.py"}


def test_delete_then_add_replaces(index: LexicalIndex) -> None:
    """In one writer, delete_path then add replaces a file; add then delete removes it."""
    old = make_chunk("f.py", "old_body")
    new = make_chunk("f.py", "new_body")
    with index.writer() as w:
        w.add_sections([old])
    with index.writer() as w:
        w.delete_path("f.py")
        w.add_sections([new])
        w.add_sections([make_chunk("g.py", "new_body")])
        w.delete_path("g.py")
    assert ids(index.search_sections("old_body new_body")) == [new.id]


# --- BM25 against the reference ---------------------------------------------------------------

_CORPUS = [
    "def read_file(path): return open(path).read()",
    "def write_file(path, data): open(path, 'w').write(data)",
    "class FileReader: def read(self): return self.stream.read()",
    "def parse_json(text): return json.loads(text)",
    "def parse_yaml(text): return yaml.safe_load(text)",
    "class JsonParser: def parse(self, text): return parse_json(text)",
    "def http_get(url): return urllib.request.urlopen(url).read()",
    "def http_post(url, data): return requests.post(url, data=data)",
    "class HttpClient: def get(self, url): return http_get(url)",
    "def read_config(path): return parse_yaml(read_file(path))",
    "def cache_get(key): return CACHE.get(key)",
    "def cache_set(key, value): CACHE[key] = value",
    # Longer than 40 terms, so tantivy stores their lengths rounded (the fieldnorm code).
    " ".join(f"read_chunk{i} path" for i in range(23)),
    " ".join(["parse", "text", "token", "stream"] * 17),
    " ".join(f"http_header{i} value" for i in range(40)),
]
_QUERIES = ["read file", "parse text", "http get url", "cache key value", "path", "stream token"]


@pytest.mark.parametrize("query", _QUERIES)
def test_page_scores_match_reference_bm25(tmp_path: Path, query: str) -> None:
    """One field: tantivy's BM25 equals the plain-Python reference, rounded lengths included."""
    docs = [code_terms(text).split() for text in _CORPUS]
    assert any(stored_length(len(d)) != len(d) for d in docs)  # rounding is exercised
    pages = [make_page(f"doc{i:02d}.txt", text) for i, text in enumerate(_CORPUS)]
    # path_boost 0: the query only reads the body, the one field the reference scores.
    with LexicalIndex.open(tmp_path, path_boost=0.0, body_boost=1.0) as idx:
        with idx.writer() as w:
            for page, text in zip(pages, _CORPUS, strict=True):
                w.add_page(page, text)
        got = idx.search_pages(query, k=len(pages))
    ref = bm25_scores(docs, query_terms(query))
    expected = sorted(
        ((s, p.id) for s, p in zip(ref, pages, strict=True) if s > 0), key=lambda x: (-x[0], x[1])
    )
    assert ids(got) == [pid for _, pid in expected]
    for hit, (score, _) in zip(got, expected, strict=True):
        assert math.isclose(hit.score, score, rel_tol=REL)


def test_section_scores_are_weighted_field_sums(tmp_path: Path) -> None:
    """A section's score is the boost-weighted sum of per-field BM25 scores (reference)."""
    boosts = {"symbol": 3.0, "path": 2.0, "body": 1.0}
    rows = [
        (f"pkg{i % 3}/{name}.py", name, text)
        for i, (name, text) in enumerate(
            [
                ("read_file", "return open(path).read()"),
                ("parse_json", "return json.loads(text)"),
                ("read_config", "return parse_yaml(read_file(path))"),
                ("http_get", "return urlopen(url).read()"),
                ("json_reader", "return parse_json(read_file(path))"),
                ("cache_get", "return CACHE.get(key)"),
            ]
        )
    ]
    chunks = [make_chunk(path, text, symbol=name) for path, name, text in rows]
    with LexicalIndex.open(
        tmp_path, symbol_boost=boosts["symbol"], path_boost=boosts["path"], body_boost=1.0
    ) as idx:
        with idx.writer() as w:
            w.add_sections(chunks)
        for query in ["read file", "parse json", "json read path", "cache"]:
            terms = query_terms(query)
            fields = {
                "symbol": [code_terms(c.symbol).split() for c in chunks],
                "path": [code_terms(c.path).split() for c in chunks],
                "body": [code_terms(c.text).split() for c in chunks],
            }
            total = [0.0] * len(chunks)
            for name, docs in fields.items():
                for i, s in enumerate(bm25_scores(docs, terms)):
                    total[i] += boosts[name] * s
            expected = {c.id: s for c, s in zip(chunks, total, strict=True) if s > 0}
            got = idx.search_sections(query, k=len(chunks))
            assert {h.id for h in got} == set(expected), query
            for h in got:
                assert math.isclose(h.score, expected[h.id], rel_tol=REL), (query, h)


_VOCAB = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(st.lists(st.sampled_from(_VOCAB), max_size=120), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=4),
)
def test_random_corpora_match_reference_bm25(docs: list[list[str]], query: list[str]) -> None:
    """For random corpora (empty to 120-term docs), every page score equals the reference."""
    texts = [" ".join(d) for d in docs]
    pages = [make_page(f"d{i}.txt", t) for i, t in enumerate(texts)]
    with tempfile.TemporaryDirectory() as tmp, LexicalIndex.open(Path(tmp), path_boost=0) as idx:
        with idx.writer() as w:
            for page, text in zip(pages, texts, strict=True):
                w.add_page(page, text)
        got = idx.search_pages(" ".join(query), k=len(pages))
    ref = {p.id: s for p, s in zip(pages, bm25_scores(docs, query), strict=True) if s > 0}
    assert {h.id for h in got} == set(ref)
    for h in got:
        assert math.isclose(h.score, ref[h.id], rel_tol=REL)
    assert got == sorted(got, key=lambda h: (-h.score, h.id))


# --- determinism ------------------------------------------------------------------------------


def test_ties_break_by_id_across_the_cut(index: LexicalIndex) -> None:
    """Equal scores rank by id ascending, even when k cuts through the tie."""
    chunks = [make_chunk(f"t{i:02d}.py", "same_text here", symbol="same") for i in range(30)]
    with index.writer() as w:
        w.add_sections(chunks)
    best = sorted(c.id for c in chunks)
    hits = index.search_sections("same_text", k=7)
    assert len({h.score for h in hits}) == 1
    assert ids(hits) == best[:7]


def test_same_docs_same_ranking_in_any_layout(tmp_path: Path) -> None:
    """Insertion order, commit batching (segment layout) and reopening keep the ranked list."""
    chunks = [
        make_chunk(f"f{i}.py", f"value_{i % 4} shared {'extra ' * (i % 5)}", symbol=f"fn{i % 3}")
        for i in range(40)
    ]
    queries = ["shared", "value_1 extra", "fn2 shared", "value"]
    with LexicalIndex.open(tmp_path / "one") as one, LexicalIndex.open(tmp_path / "many") as many:
        with one.writer() as w:
            w.add_sections(chunks)
        for start in range(0, 40, 7):
            with many.writer() as w:
                w.add_sections(reversed(chunks[start : start + 7]))
        first = {q: one.search_sections(q, k=15) for q in queries}
        for q in queries:
            assert many.search_sections(q, k=15) == one.search_sections(q, k=15) == first[q]
    with LexicalIndex.open(tmp_path / "one", create=False) as again:
        assert {q: again.search_sections(q, k=15) for q in queries} == first


_NAME = st.from_regex(r"[a-z]{3,8}(_[a-z]{3,8}|[A-Z][a-z]{2,7}){0,2}", fullmatch=True)
_FILLER = ["self", "return", "value", "data", "items", "result", "none", "true", "pass"]


@settings(max_examples=30, deadline=None)
@given(
    names=st.lists(_NAME, min_size=2, max_size=8),
    filler=st.lists(st.lists(st.sampled_from(_FILLER), max_size=30), min_size=8, max_size=8),
    target=st.integers(min_value=0, max_value=7),
    wrap=st.sampled_from(["{}", "{}()", '"{}":', "where is {}?", "`{}`"]),
)
def test_unique_identifier_is_top_hit(
    names: list[str], filler: list[list[str]], target: int, wrap: str
) -> None:
    """A query naming one doc's unique identifier ranks that doc first."""
    term_sets = [set(code_terms(n).split()) for n in names]
    vocab = set(_FILLER) | {"where", "is"}
    for i, ts in enumerate(term_sets):
        assume(not ts & vocab)
        assume(all(not ts & other for j, other in enumerate(term_sets) if j != i))
    target %= len(names)
    chunks = [
        make_chunk(f"n{i}.py", " ".join([*filler[i][:3], name, *filler[i][3:]]))
        for i, name in enumerate(names)
    ]
    with tempfile.TemporaryDirectory() as tmp, LexicalIndex.open(Path(tmp)) as idx:
        with idx.writer() as w:
            w.add_sections(chunks)
        hits = idx.search_sections(wrap.format(names[target]))
    assert hits[0].id == chunks[target].id


# --- writers, readers and crashes -------------------------------------------------------------


def test_exception_in_writer_rolls_back(index: LexicalIndex) -> None:
    """An exception inside writer() discards the batch and frees the lock for the next one."""
    kept = make_chunk("kept.py", "committed_name")
    with index.writer() as w:
        w.add_sections([kept])
    with pytest.raises(RuntimeError, match="boom"), index.writer() as w:
        w.add_sections([make_chunk("lost.py", "lost_name")])
        w.delete_path("kept.py")
        raise RuntimeError("boom")
    assert index.num_sections == 1
    assert ids(index.search_sections("committed_name")) == [kept.id]
    assert index.search_sections("lost") == []
    with index.writer() as w:  # the lock was released
        w.add_sections([make_chunk("next.py", "next_name")])
    assert index.num_sections == 2


def test_writer_is_unusable_after_its_block(index: LexicalIndex) -> None:
    """Calls on a writer after its block ended raise instead of being silently lost."""
    with index.writer() as w:
        pass
    with pytest.raises(IndexStateError):
        w.add_sections([make_chunk("late.py", "late")])


def test_readers_see_last_commit_while_writing(tmp_path: Path) -> None:
    """A second handle searches while a writer is open; a second writer is refused."""
    first = make_chunk("one.py", "first_name")
    with LexicalIndex.open(tmp_path) as writer_side, LexicalIndex.open(tmp_path) as reader:
        with writer_side.writer() as w:
            w.add_sections([first])
        reader.refresh()
        with writer_side.writer() as w:
            w.add_sections([make_chunk("two.py", "second_name first_name")])
            assert ids(reader.search_sections("first_name")) == [first.id]
            with pytest.raises(IndexBusyError, match="another writer"), reader.writer():
                pass
        assert reader.num_sections == 1  # a reader's view moves only on refresh()
        reader.refresh()
        assert reader.num_sections == 2
        assert writer_side.num_sections == 2


_CHILD = """
import os, sys
from pathlib import Path
from engine.segment import LexicalIndex
from tests.engine.segment.test_lexical import make_chunk, make_page

index = LexicalIndex.open(Path(sys.argv[1]), create=False)
with index.writer() as w:
    w.delete_path("base.py")
    for i in range(int(sys.argv[3])):
        w.add_page(make_page(f"new{i}.py", "novelty"), "novelty")
    w.add_sections(make_chunk(f"new{i}.py", "novelty") for i in range(int(sys.argv[3])))
    if sys.argv[2] == "exit":
        os._exit(1)
    print("committing", flush=True)
"""


def _base(root: Path) -> None:
    """An index with one committed file, base.py."""
    with LexicalIndex.open(root) as idx, idx.writer() as w:
        w.add_page(make_page("base.py", "basalt"), "basalt")
        w.add_sections([make_chunk("base.py", "basalt")])


def _child(root: Path, mode: str, n: int) -> subprocess.Popen[str]:
    """Run the writer script above in a fresh interpreter."""
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root), mode, str(n)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_process_exit_before_commit_keeps_last_commit(tmp_path: Path) -> None:
    """A process that dies inside writer() (no commit) leaves the previous state intact."""
    _base(tmp_path)
    proc = _child(tmp_path, "exit", 50)
    assert proc.wait(timeout=60) == 1
    with LexicalIndex.open(tmp_path, create=False) as idx:
        assert (idx.num_pages, idx.num_sections) == (1, 1)
        assert [h.path for h in idx.search_sections("basalt")] == ["base.py"]
        assert idx.search_pages("novelty") == []
        with idx.writer() as w:  # the dead process's lock is gone
            w.add_sections([make_chunk("after.py", "aftermath")])
        assert idx.num_sections == 2


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15])
def test_process_killed_during_commit_keeps_a_committed_state(tmp_path: Path, delay: float) -> None:
    """SIGKILL while committing leaves each index at its old or its new commit, searchable.

    The delays land the kill in different phases of the two commits (about 0.2 s here):
    flushing sections, between the sections and the pages commit, or after both.
    """
    _base(tmp_path)
    n = 5000
    proc = _child(tmp_path, "commit", n)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "committing"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    with LexicalIndex.open(tmp_path, create=False) as idx:
        assert idx.num_pages in (1, n)
        assert idx.num_sections in (1, n)
        # The base file is either still fully there or fully replaced, per index.
        old_pages, old_sections = idx.num_pages == 1, idx.num_sections == 1
        assert [h.path for h in idx.search_pages("basalt")] == (["base.py"] if old_pages else [])
        assert [h.path for h in idx.search_sections("basalt")] == (
            ["base.py"] if old_sections else []
        )
        with idx.writer() as w:
            w.add_sections([make_chunk("after.py", "aftermath")])
        assert [h.path for h in idx.search_sections("aftermath")] == ["after.py"]


# --- opening ----------------------------------------------------------------------------------


def test_open_missing_without_create(tmp_path: Path) -> None:
    """create=False on a directory with no index raises IndexNotBuiltError."""
    with pytest.raises(IndexNotBuiltError):
        LexicalIndex.open(tmp_path / "nothing", create=False)


def test_open_foreign_layout(tmp_path: Path) -> None:
    """An index written with another schema gets an IndexSchemaError that says how to rebuild."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("something_else", stored=True)
    (tmp_path / "sections").mkdir()
    tantivy.Index(builder.build(), path=str(tmp_path / "sections"))
    with pytest.raises(IndexSchemaError, match="cortex index --rebuild"):
        LexicalIndex.open(tmp_path)


def test_bad_boost_is_config_error(tmp_path: Path) -> None:
    """A negative or infinite boost is rejected before anything is opened."""
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ConfigError):
            LexicalIndex.open(tmp_path, symbol_boost=bad)


def test_closed_index_raises(index: LexicalIndex) -> None:
    """A closed index refuses searches and writers."""
    index.close()
    with pytest.raises(IndexStateError, match="closed"):
        index.search_sections("anything")
    with pytest.raises(IndexStateError, match="closed"), index.writer():
        pass


def test_import_does_not_load_tantivy() -> None:
    """Importing engine.segment loads no tantivy; it is imported on first use."""
    code = "import sys, engine.segment; print('tantivy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
