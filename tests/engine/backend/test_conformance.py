"""Every backend answers within a scope as one index of the branch does.

The same questions go to each backend holding one base and one overlay (``corpus``): the
embedded one over local segments, Qdrant through qdrant-client's local mode, and Qdrant's
real engine in process (qdrant-edge-py). The reference is a segment of the whole branch
built from scratch. Some of the corpus's fields run past 40 terms, where tantivy rounds a
field's length and Qdrant does not; BM25 must still agree to float precision on every
backend that scores within a scope (qdrant-client's local mode cannot: it has no IDF
corpus for text queries).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.backend import EdgeStore, QdrantBackend
from engine.core import IndexStateError
from overlays import Backend, Scope, View
from tests.engine.backend.corpus import BASE, OVERLAY, Built, build, qdrant

# A live server or cluster joins when QDRANT_URL names one (QDRANT_API_KEY if it needs one).
KINDS = ["embedded", "local", "edge", *(["server"] if os.environ.get("QDRANT_URL") else [])]
QUERIES = ["parse value", "render token cache", "merge query", "fn_3", "notes", "extra cache",
           "value_render", "long_1 index branch", "nothing_matches_this"]  # fmt: skip
# tantivy sums its BM25 in f32 (a few units in the last place per term and field); the
# embedded View's rescoring and the Qdrant backend's score in f64.
REL = 5e-6
DENSE_ABS = 1e-3  # Qdrant renormalises stored vectors for cosine, in f32


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    made = build(tmp_path_factory.mktemp("corpus"))
    yield made
    made.close()


@pytest.fixture(scope="module", params=KINDS)
def backend(
    request: pytest.FixtureRequest, built: Built, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    kind: str = request.param
    if kind == "embedded":
        yield built.embedded()
        return
    made = qdrant(built, kind, tmp_path_factory.mktemp(kind))
    yield made
    made.close()


def _scores_match(got: list[tuple[str, float]], want: list[tuple[str, float]], rel: float) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == pytest.approx(b, rel=rel, abs=1e-6)


def _bm25_capable(backend: Backend) -> None:
    if isinstance(backend, QdrantBackend) and not backend.store.scoped_idf:
        pytest.skip("qdrant-client 1.20 local mode: text queries take no IDF corpus")


@pytest.mark.parametrize("table", ["sections", "pages"])
def test_search_equals_one_index_of_the_branch(backend: Backend, built: Built, table: str) -> None:
    """BM25 within the scope: the same ids in the same order, scores to f32 precision."""
    _bm25_capable(backend)
    ref, whole = built.reference()
    for query in QUERIES:
        for k in (1, 3, 50):
            got = backend.search(built.scope, table, query, k)  # type: ignore[arg-type]
            want = ref.search(whole, table, query, k)  # type: ignore[arg-type]
            _scores_match([(f.id, f.score) for f in got], [(f.id, f.score) for f in want], REL)


def test_search_within_paths(backend: Backend, built: Built) -> None:
    """A path filter narrows the hits, not the statistics."""
    _bm25_capable(backend)
    ref, whole = built.reference()
    paths = ["pkg/m1.py", "pkg/m2.py", "pkg/new.py", "pkg/m4.py"]  # m2: deleted on the branch
    got = backend.search(built.scope, "sections", "parse value merge", 20, paths)
    want = ref.search(whole, "sections", "parse value merge", 20, paths)
    _scores_match([(f.id, f.score) for f in got], [(f.id, f.score) for f in want], REL)
    assert {f.path for f in got} <= set(paths) - {"pkg/m2.py"}
    assert backend.search(built.scope, "sections", "parse", 5, []) == []


def test_local_mode_refuses_bm25_rather_than_answering_with_global_statistics(
    built: Built, tmp_path: Path
) -> None:
    """Local mode raises a clear error for BM25 instead of scoring over the wrong corpus."""
    local = qdrant(built, "local", tmp_path)
    with pytest.raises(IndexStateError, match="edge engine"):
        local.search(built.scope, "sections", "parse", 5)
    local.close()


def test_term_counts(backend: Backend, built: Built) -> None:
    """Document counts of terms are the scope's, not the base's or the collection's."""
    ref, whole = built.reference()
    terms = ["parse", "value", "extra_cache", "extra", "fn_2_0", "notes", "absent"]
    for table in ("sections", "pages"):
        got = backend.term_counts(built.scope, table, terms)  # type: ignore[arg-type]
        assert got == ref.term_counts(whole, table, terms)  # type: ignore[arg-type]


def test_dense(backend: Backend, built: Built) -> None:
    """Nearest sections of the scope: same ids, same order, cosines within f32 slack."""
    ref, whole = built.reference()
    model = built.embedder.model_id
    assert backend.has_dense(built.scope, model) and not backend.has_dense(built.scope, "other")
    for text in ("parse the value", "render a token", "merge the branch index"):
        vector = np.asarray(built.embedder.embed([text]))[0]
        for k in (1, 4, 100):
            got = backend.search_dense(built.scope, vector, model, k)
            _scores_match(got, ref.search_dense(whole, vector, model, k), DENSE_ABS)


def test_lookups(backend: Backend, built: Built) -> None:
    """Chunks, a file's chunks, definitions, paths and files are the branch's."""
    ref, whole = built.reference()
    scope = built.scope
    files = backend.files(scope)
    assert sorted(files) == sorted(ref.files(whole))
    assert {p: files[p].content_sha256 for p in files} == {
        p: r.content_sha256 for p, r in ref.files(whole).items()
    }
    for path in ("pkg/m1.py", "pkg/m2.py", "pkg/m3.py", "pkg/moved.py", "pkg/m0.py", "nope.py"):
        assert backend.chunks_of(scope, path) == ref.chunks_of(whole, path)
        assert backend.chunks_near(scope, path, 2, 3) == ref.chunks_near(whole, path, 2, 3)
    every = [c.id for p in sorted(files) for c in ref.chunks_of(whole, p)]
    hidden_base = [c.id for c in built.base.chunks_of("pkg/m2.py")]
    assert backend.chunks(scope, [*every, *hidden_base, "unknown"]) == \
        ref.chunks(whole, every)  # fmt: skip
    names = ["fn_1_0", "fn_2_0", "fn_3_1", "extra_cache", "fn_30_0", "missing"]
    for limit in (1, 5):
        assert backend.definitions(scope, names, limit) == ref.definitions(whole, names, limit)
    for suffix in ("m0.py", "pkg/moved.py", "m3.py", "README.md", "py", "sub/m0.py"):
        assert backend.paths_like(scope, suffix, 5) == ref.paths_like(whole, suffix, 5)


def test_the_base_scope_alone(backend: Backend, built: Built) -> None:
    """Without an overlay the scope is the base: deleted files are there, new ones are not."""
    base = Scope(BASE)
    assert "pkg/m2.py" in backend.files(base) and "pkg/new.py" not in backend.files(base)
    assert backend.definitions(base, ["fn_2_0", "extra_cache"], 5).keys() == {"fn_2_0"}
    _bm25_capable(backend)
    plain = built.base
    for query in QUERIES[:4]:
        got = backend.search(base, "sections", query, 10)
        want = plain.lexical_search("sections", query, 10, None)
        _scores_match([(f.id, f.score) for f in got], [(f.id, f.score) for f in want], REL)


def test_a_view_over_the_backend_answers_as_the_embedded_view(
    backend: Backend, built: Built
) -> None:
    """``View.over`` gives recall and packing the same answers whatever the backend: BM25
    ids and scores (long fields included) to float rounding."""
    _bm25_capable(backend)
    embedded = View(built.base, built.overlay, overlay_paths=built.scope.overlay_paths,
                    tombstones=built.scope.tombstones)  # fmt: skip
    view = View.over(backend, built.scope, ident="x")
    for query in ("parse value", "long_0 render token cache", "long_2_3 merge"):
        pairs = [[(f.id, f.score) for f in v.search_sections(query, 12)] for v in (view, embedded)]
        _scores_match(*pairs, REL)
        pairs = [[(f.id, f.score) for f in v.search_pages(query, 5)] for v in (view, embedded)]
        _scores_match(*pairs, REL)
    assert view.defining(["fn_1_0"]) == embedded.defining(["fn_1_0"])
    assert view.paths_like("m1.py") == embedded.paths_like("m1.py")
    assert view.hidden == embedded.hidden and OVERLAY


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "embedded"])
def test_mirror_writes_only_what_changed(built: Built, kind: str, tmp_path: Path) -> None:
    """A second mirror of the same segment writes nothing; a changed layer is rewritten
    for its changed files only, and files gone from it are deleted."""
    store_backend = qdrant(built, kind, tmp_path)
    assert store_backend.mirror(built.base, BASE, embedder=built.embedder,
                                cache=built.cache) == (0, 0)  # fmt: skip
    # The overlay layer takes the full branch's segment: every file differs from the
    # overlay's (new keys), and the layer's old-only paths are deleted.
    written, deleted = store_backend.mirror(built.full, OVERLAY, embedder=built.embedder,
                                            cache=built.cache)  # fmt: skip
    overlay_paths = set(built.overlay.files())
    full_paths = set(built.full.files())
    assert written == len(full_paths - overlay_paths) and deleted == 0
    assert set(store_backend.layer_keys(OVERLAY)) == full_paths
    # And back: the paths only the full segment has are deleted again.
    written, deleted = store_backend.mirror(built.overlay, OVERLAY, embedder=built.embedder,
                                            cache=built.cache)  # fmt: skip
    assert (written, deleted) == (0, len(full_paths - overlay_paths))
    assert set(store_backend.layer_keys(OVERLAY)) == overlay_paths
    ref, whole = built.reference()
    assert store_backend.files(built.scope).keys() == ref.files(whole).keys()
    store_backend.close()


def test_edge_reopens_from_disk(built: Built, tmp_path: Path) -> None:
    """An edge shard closed and opened again answers the same (nothing is rewritten)."""
    first = qdrant(built, "edge", tmp_path)
    before = first.search(built.scope, "sections", "parse value", 10)
    first.close()
    again = QdrantBackend(EdgeStore(tmp_path / "edge"))
    assert again.search(built.scope, "sections", "parse value", 10) == before
    assert again.mirror(built.overlay, OVERLAY, embedder=built.embedder,
                        cache=built.cache) == (0, 0)  # fmt: skip
    assert again.has_dense(built.scope, built.embedder.model_id)
    again.close()


def test_a_killed_mirror_is_finished_by_the_next(built: Built, tmp_path: Path) -> None:
    """Points a mirror wrote before it was killed (no layer record yet) are reconciled:
    files the segment no longer holds are deleted, the rest rewritten."""
    backend = QdrantBackend(EdgeStore(tmp_path / "edge"))
    gone = built.base.files()["pkg/m2.py"]  # deleted on the branch: not in the overlay
    backend.write(OVERLAY, [(gone, "old-key", built.base.chunks_of(gone.path))])
    written, deleted = backend.mirror(built.overlay, OVERLAY, embedder=built.embedder,
                                      cache=built.cache)  # fmt: skip
    assert (written, deleted) == (len(built.overlay.files()), 1)
    assert set(backend.layer_keys(OVERLAY)) == set(built.overlay.files())
    backend.close()


def test_an_unchanged_layer_is_not_read_again(built: Built, tmp_path: Path) -> None:
    """A mirror of the segment the layer was last finished from stops at the layer's
    record: no page keys are read, nothing is written."""
    backend = qdrant(built, "edge", tmp_path)
    store = backend.store
    assert isinstance(store, EdgeStore)
    read: list[object] = []
    real_scroll = store.scroll

    def counting(where: object, fields: object) -> Iterator[object]:
        read.append(fields)
        return real_scroll(where, fields)  # type: ignore[arg-type]

    store.scroll = counting  # type: ignore[method-assign,assignment]
    assert backend.mirror(built.base, BASE, embedder=built.embedder, cache=built.cache) == (0, 0)
    assert read == [("models", "digest", "lengths")]
    backend.close()


def test_a_mirror_killed_after_it_began_is_not_taken_as_finished(
    built: Built, tmp_path: Path
) -> None:
    """A mirror killed half way through changing a layer leaves no finished record: going
    back to the segment the layer was last finished from rewrites what the killed one
    changed."""
    backend = qdrant(built, "edge", tmp_path)
    store = backend.store
    real_upsert = store.upsert
    writes = {"n": 0}

    def dying(points: object) -> None:
        writes["n"] += 1
        if writes["n"] > 2:  # the withdrawn record and one batch got through
            raise KeyboardInterrupt
        real_upsert(points)  # type: ignore[arg-type]

    store.upsert = dying  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        backend.mirror(built.full, OVERLAY, embedder=built.embedder, cache=built.cache)
    store.upsert = real_upsert  # type: ignore[method-assign]
    written, deleted = backend.mirror(built.overlay, OVERLAY, embedder=built.embedder,
                                      cache=built.cache)  # fmt: skip
    assert written + deleted > 0
    assert set(backend.layer_keys(OVERLAY)) == set(built.overlay.files())
    assert backend.layer_keys(OVERLAY) == built.overlay.file_keys(sorted(built.overlay.files()))
    backend.close()



def test_points_written_with_nested_records_are_still_read(built: Built, tmp_path: Path) -> None:
    """Chunks and file records are stored as JSON strings (far cheaper to write through
    the Python binding); points an earlier version wrote as nested mappings read the same."""
    from dataclasses import asdict

    from engine.backend import Point
    from engine.backend._qdrant import _chunk_payload, _point_id

    backend = qdrant(built, "edge", tmp_path)
    scope = Scope(BASE)
    path = sorted(built.base.files())[0]
    chunk = built.base.chunks_of(path)[0]
    record = built.base.files()[path]
    want_chunks, want_file = backend.chunks(scope, [chunk.id]), backend.files(scope)[path]
    import json

    old_section = {"t": "sections", "layer": BASE, "path": path, "id": chunk.id,
                   "defines": list(chunk.defines), "chunk": json.loads(_chunk_payload(chunk))}
    old_page = {"t": "pages", "layer": BASE, "path": path, "id": record.page_id, "key": "k",
                "file": asdict(record)}  # fmt: skip
    backend.store.upsert([Point(_point_id(BASE, "sections", chunk.id), {}, old_section),
                          Point(_point_id(BASE, "pages", record.page_id), {}, old_page)])
    assert backend.chunks(scope, [chunk.id]) == want_chunks
    assert backend.files(scope)[path] == want_file
    backend.close()
