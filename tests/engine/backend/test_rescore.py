"""Tantivy's BM25 on Qdrant's candidates: the statistics it is computed with, its bound,
and points written before token totals were kept (``engine.backend._rescore`` and
``_statistics``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.backend import Cond, Point, QdrantBackend, Where
from engine.backend._qdrant import _point_id
from engine.backend._rescore import MAX_ROUNDING, Totals, field_length
from engine.backend._statistics import ScopeStatistics
from engine.core import IndexStateError, page_text
from engine.segment import page_fields, section_fields
from overlays import Scope, stored_length
from tests.engine.backend.corpus import BASE, Built, build, qdrant


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    made = build(tmp_path_factory.mktemp("corpus"))
    yield made
    made.close()


@given(st.integers(1, 1 << 22))
def test_max_rounding_bounds_every_length(length: int) -> None:
    """No length is more than ``MAX_ROUNDING`` times what tantivy stores for it."""
    assert length <= stored_length(length) * MAX_ROUNDING
    assert MAX_ROUNDING < 1.125


def test_totals_count_as_the_segment_writer_does(built: Built) -> None:
    """A file's totals are its documents and per-field tokens, the segment's way of counting."""
    path = "pkg/long0.py"
    chunks = built.base.chunks_of(path)
    sections = [section_fields(c) for c in chunks]
    page = page_fields(path, page_text(chunks))
    totals = Totals.of_file(page, sections)
    assert totals.tables["sections"]["docs"] == len(chunks)
    assert totals.tables["sections"]["body"] == sum(len(f["body"].split()) for f in sections)
    assert totals.tables["pages"] == {"docs": 1, **{n: len(t.split()) for n, t in page.items()}}
    assert Totals.parse(totals.to_json()) == totals
    assert totals.plus(totals).plus(totals, -1) == totals
    assert field_length("") == 0 and field_length("a bb") == 2


def test_a_scope_has_the_statistics_of_one_index_of_the_branch(
    built: Built, tmp_path: Path
) -> None:
    """The base layer's totals, minus the hidden files', plus the overlay's, are what a
    segment of the whole branch recorded; the base alone, what the base recorded."""
    backend = qdrant(built, "edge", tmp_path)
    recorded = json.loads(built.full.meta.get_info("lexical_stats") or "{}")
    assert backend._stats.totals(built.scope).tables == recorded
    base = json.loads(built.base.meta.get_info("lexical_stats") or "{}")
    assert backend._stats.totals(Scope(BASE)).tables == base
    # Without the layer's record (a layer written by ``write`` alone), summed over pages.
    assert ScopeStatistics(backend.store).files_totals(BASE, None).tables == base
    backend.close()


def test_points_written_without_totals_are_refused_then_rewritten(
    built: Built, tmp_path: Path
) -> None:
    """Points written before token totals were kept: BM25 says to index again rather than
    scoring with wrong statistics, and the next mirror writes those files again."""
    backend = qdrant(built, "edge", tmp_path)
    store = backend.store
    scope = Scope(BASE)
    want = backend.search(scope, "sections", "parse value", 10)
    layer = BASE
    pages = list(store.scroll(Where(must=(Cond("t", ("pages",)), Cond("layer", (layer,)))), None))
    older_pages = [{k: v for k, v in p.items() if k != "lengths"} for p in pages]
    store.upsert([Point(_point_id(layer, "pages", p["id"]), {}, p) for p in older_pages])
    record = backend._record(layer)
    assert record is not None
    store.upsert([Point(_point_id(layer, "layers", layer), {},
                        {"t": "layers", "layer": layer, "path": "", "id": layer,
                         "models": record["models"], "digest": record["digest"]})])  # fmt: skip
    older = QdrantBackend(store)
    with pytest.raises(IndexStateError, match="cortex index"):
        older.search(scope, "sections", "parse value", 10)
    written, deleted = older.mirror(built.base, BASE, embedder=built.embedder, cache=built.cache)
    assert (written, deleted) == (len(built.base.files()), 0)
    assert older.search(scope, "sections", "parse value", 10) == want
    backend.close()
