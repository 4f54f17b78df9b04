"""A persisted, deterministic faiss index of vectors keyed by int64 ids, searched by inner product.

Small collections get an exact flat index; large ones an IVF index whose ``nprobe`` is
measured at build time to reach ``TARGET_RECALL``. The same input gives byte-identical
files, and ties are broken by id ascending. faiss is imported lazily, where it is used.

>>> index = DenseIndex.build(ids, vectors, model_id="all-MiniLM-L6-v2")  # doctest: +SKIP
>>> index.save(Path(".cortex/dense"))                                    # doctest: +SKIP
>>> ids, scores = DenseIndex.load(Path(".cortex/dense")).search(query, 50)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from engine.core import DenseIndexError

__all__ = [
    "EXACT_MAX",
    "SCHEMA_VERSION",
    "TARGET_RECALL",
    "DenseIndex",
    "DenseKind",
    "int_id",
    "nlist_for",
]

DenseKind = Literal["exact", "ivf"]
IdArray = npt.NDArray[np.int64]
ScoreArray = npt.NDArray[np.float32]
Floats = npt.NDArray[np.floating[Any]]
Ints = npt.NDArray[np.integer[Any]]

SCHEMA_VERSION = 1  # bump when the manifest or file layout changes; old layouts are rebuilt
# A flat scan of 20k x 384 takes ~1 ms per query (measured, one thread): below that, IVF's
# seconds of k-means and its recall loss buy nothing.
EXACT_MAX = 20_000
NLIST_PER_SQRT_N = 4  # faiss's guideline is 4..16 * sqrt(N); the low end keeps k-means cheap
MIN_NLIST = 16  # fewer lists barely prune anything
MAX_NLIST = 65_536  # the top of faiss's guideline table; reached only near 2.7e8 vectors
MIN_POINTS_PER_LIST = 39  # faiss's k-means minimum; below it centroids are noise (and it warns)
TRAIN_POINTS_PER_LIST = 64  # > 39, and at nlist = 4*sqrt(N) keeps k-means linear in N
KMEANS_ITERATIONS = 10  # faiss's default; 20 gave the same nprobe and recall, 1.6x slower
TARGET_RECALL = 0.95  # recall@10 against exact search that the chosen nprobe must reach
RECALL_AT = 10
TUNING_QUERIES = 256  # >= 200: one missed neighbour moves measured recall by < 0.0004
NPROBE_LADDER = (8, 16, 32, 64, 128)  # then doubling up to nlist, which is exhaustive
RECALL_SCORE_EPS = 1e-5  # faiss's IVF and BLAS kernels round the same score differently
TIE_EXTRA = 8  # candidates fetched beyond k, so ties at the k-th place are ordered by id
MAX_BUILD_THREADS = 8  # past this k-means is memory-bound; the bytes never depend on it
LOAD_ATTEMPTS = 3  # a concurrent save may swap the pair between reading manifest and data

MANIFEST_NAME = "dense.json"
_DATA_NAME = re.compile(r"dense\.[0-9a-f]{16}\.faiss")
_TMP_PREFIX = ".dense-"
_REBUILD = "run `cortex index --rebuild` to rebuild the dense index"
_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")
_INT_ID_HEX = 15  # 60 bits: always a positive int64, and -1 stays free as faiss's "no result"


def int_id(chunk_id: str) -> int:
    """Map a 32-hex-digit chunk id to a positive int64: its first 15 hex digits (60 bits).

    Chunk ids are sha256 prefixes, so two of n chunks collide with probability about
    n**2 / 2**61 (birthday bound): 4e-7 for a million chunks, 4e-5 for ten million.

    >>> int_id("00000000000000ff" + "0" * 16)
    15
    """
    if not _HEX_ID.fullmatch(chunk_id):
        raise ValueError(f"chunk id must be 32 hex digits, got {chunk_id!r}")
    return int(chunk_id[:_INT_ID_HEX], 16)


@dataclass(frozen=True, slots=True)
class _Manifest:
    """What ``dense.json`` records beside the faiss file, and what ``load`` checks."""

    schema_version: int
    model_id: str
    dim: int
    kind: DenseKind
    nlist: int | None
    nprobe: int | None
    measured_recall: float
    ntotal: int
    seed: int
    faiss_version: str
    faiss_file: str
    faiss_sha256: str

    @classmethod
    def parse(cls, text: str, where: Path) -> _Manifest:
        """Read a manifest, or raise ``DenseIndexError`` naming the problem."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DenseIndexError(f"{where} is not valid JSON ({exc}); {_REBUILD}") from exc
        version = raw.get("schema_version") if isinstance(raw, dict) else None
        if version != SCHEMA_VERSION:
            raise DenseIndexError(
                f"{where} has schema version {version!r}, this cortex reads {SCHEMA_VERSION}; "
                f"{_REBUILD}"
            )
        try:
            manifest = cls(**raw)
        except TypeError as exc:
            raise DenseIndexError(f"{where} has unexpected fields ({exc}); {_REBUILD}") from exc
        if manifest.kind not in ("exact", "ivf") or not _DATA_NAME.fullmatch(manifest.faiss_file):
            raise DenseIndexError(f"{where} is malformed; {_REBUILD}")
        return manifest


class DenseIndex:
    """Inner-product search over float32 vectors keyed by int64 ids.

    Scores are cosines when the vectors are L2-normalised, which is the caller's job:
    other vectors are accepted and then score by plain inner product. ``measured_recall``
    is measured at build time; ``add`` keeps the trained IVF lists, so after heavy churn
    (or once an exact index outgrows ``EXACT_MAX``) rebuild to re-tune.
    """

    __slots__ = ("_index", "_measured_recall", "_model_id", "_seed")

    def __init__(self, index: Any, *, model_id: str, measured_recall: float, seed: int) -> None:
        """Wrap a ready faiss index; use ``build`` or ``load`` rather than calling this."""
        self._index = index
        self._model_id = model_id
        self._measured_recall = measured_recall
        self._seed = seed

    @classmethod
    def build(
        cls,
        ids: Ints,
        vectors: Floats,
        *,
        model_id: str,
        seed: int = 0,
        force: DenseKind | None = None,
    ) -> DenseIndex:
        """Index ``vectors`` (n x d) under ``ids`` (n, unique, >= 0).

        Exact below ``EXACT_MAX`` vectors, IVF at or above; ``force`` overrides the choice
        (for tests and benchmarks). The input is sorted by id first, so its order does not
        matter: the same vectors and seed always give the same bytes.
        """
        import faiss

        if not model_id:
            raise ValueError("model_id must be a non-empty string")
        vecs = _as_matrix(vectors, None, "vectors")
        keys = _as_ids(ids, len(vecs))
        order = np.argsort(keys, kind="stable")
        keys, vecs = keys[order], np.ascontiguousarray(vecs[order])
        n, dim = vecs.shape
        if (force or ("exact" if n < EXACT_MAX else "ivf")) == "exact":
            flat = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
            flat.add_with_ids(vecs, keys)
            return cls(flat, model_id=model_id, measured_recall=1.0, seed=seed)
        if n == 0:
            raise ValueError("an IVF index needs at least one vector to train on")
        nlist = nlist_for(n)
        # float16 storage: half of float32's bytes (this index is the largest file of a
        # workspace otherwise) for ~1e-3 score error; the nprobe tuning below measures recall
        # against exact float32 search, so any loss is paid back with more lists scanned.
        index = faiss.IndexIVFScalarQuantizer(
            faiss.IndexFlatIP(dim),
            dim,
            nlist,
            faiss.ScalarQuantizer.QT_fp16,
            faiss.METRIC_INNER_PRODUCT,
        )
        index.cp.seed = seed
        index.cp.niter = KMEANS_ITERATIONS
        rng = np.random.default_rng(seed)
        # k-means gives the same bytes at any thread count (a test checks): the pin is
        # insurance, capped so that a many-core machine does not thrash memory bandwidth.
        with _pinned_threads(min(os.cpu_count() or 1, MAX_BUILD_THREADS)):
            sample = min(n, TRAIN_POINTS_PER_LIST * nlist)
            picked = np.sort(rng.choice(n, size=sample, replace=False)) if sample < n else None
            index.train(vecs if picked is None else vecs[picked])
            index.add_with_ids(vecs, keys)
            index.nprobe, recall = _tune_nprobe(index, vecs, keys, rng)
        return cls(index, model_id=model_id, measured_recall=recall, seed=seed)

    @property
    def kind(self) -> DenseKind:
        """``"exact"`` (flat scan) or ``"ivf"`` (inverted lists)."""
        return "exact" if self.nlist is None else "ivf"

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self._index.d)

    @property
    def ntotal(self) -> int:
        """How many vectors are stored."""
        return int(self._index.ntotal)

    @property
    def nlist(self) -> int | None:
        """Number of IVF lists; ``None`` for an exact index."""
        return int(self._index.nlist) if hasattr(self._index, "nlist") else None

    @property
    def nprobe(self) -> int | None:
        """Lists scanned per query; ``None`` for an exact index."""
        return int(self._index.nprobe) if hasattr(self._index, "nprobe") else None

    @property
    def model_id(self) -> str:
        """The embedding model the vectors came from; ``load`` can check it."""
        return self._model_id

    @property
    def measured_recall(self) -> float:
        """Recall@10 against exact search, measured at build time (1.0 for exact)."""
        return self._measured_recall

    @property
    def seed(self) -> int:
        """The seed behind the training sample, k-means and the tuning queries."""
        return self._seed

    def search(self, queries: Floats, k: int) -> tuple[IdArray, ScoreArray]:
        """The ``k`` best ids and scores for each query (a ``(d,)`` vector is one query).

        Returns two ``(q, k)`` arrays, best first, ties by id ascending; rows with fewer
        than ``k`` results are padded with id -1 and score -inf. Each query is searched
        alone because faiss switches to a BLAS kernel (other rounding) for big batches,
        and a row's answer must not depend on what else was asked with it.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if isinstance(queries, np.ndarray) and queries.ndim == 1:
            queries = queries[None, :]
        q = _as_matrix(queries, self.dim, "queries")
        out_ids = np.full((len(q), k), -1, dtype=np.int64)
        out_scores = np.full((len(q), k), -np.inf, dtype=np.float32)
        # One query leaves faiss nothing to parallelise, yet each call would still start
        # an OpenMP team: 0.8 ms became 24 ms per query on a busy 2-core machine.
        with _pinned_threads(1):
            for row in range(len(q) if self.ntotal else 0):
                found_ids, found_scores = self._search_one(q[row : row + 1], k)
                out_ids[row, : len(found_ids)] = found_ids
                out_scores[row, : len(found_ids)] = found_scores
        return out_ids, out_scores

    def _search_one(self, query: ScoreArray, k: int) -> tuple[IdArray, ScoreArray]:
        """Up to ``k`` results for one query, fetching more while a tie spans the cut."""
        fetch = min(k + TIE_EXTRA, self.ntotal)
        while True:
            scores, ids = self._index.search(query, fetch)
            keep = ids[0] >= 0
            ids, scores = ids[0][keep], scores[0][keep]
            order = np.lexsort((ids, -scores))
            ids, scores = ids[order], scores[order]
            spills = len(ids) == fetch > k and scores[-1] == scores[k - 1]
            if not spills or fetch == self.ntotal:
                return ids[:k].astype(np.int64), scores[:k].astype(np.float32)
            fetch = min(2 * fetch, self.ntotal)

    def add(self, ids: Ints, vectors: Floats) -> None:
        """Store ``vectors`` under ``ids``; an id already present is replaced."""
        vecs = _as_matrix(vectors, self.dim, "vectors")
        keys = _as_ids(ids, len(vecs))
        order = np.argsort(keys, kind="stable")
        self.remove(keys)
        self._index.add_with_ids(np.ascontiguousarray(vecs[order]), keys[order])

    def remove(self, ids: Ints) -> int:
        """Drop ``ids`` (absent ones are ignored); returns how many were removed."""
        keys = np.unique(_as_ids(ids, None))
        return int(self._index.remove_ids(keys)) if len(keys) and self.ntotal else 0

    def save(self, directory: Path) -> None:
        """Write the index into ``directory`` so that a crash leaves the old or the new pair.

        The faiss file is named by its content hash and ``dense.json`` is replaced last, so
        the manifest swap is the single commit point; faiss files it no longer names are
        deleted afterwards. One writer at a time (the caller holds the index lock).
        """
        import faiss

        directory.mkdir(parents=True, exist_ok=True)
        blob = faiss.serialize_index(self._index).tobytes()
        digest = hashlib.sha256(blob).hexdigest()
        data_name = f"dense.{digest[:16]}.faiss"
        manifest = _Manifest(
            schema_version=SCHEMA_VERSION,
            model_id=self._model_id,
            dim=self.dim,
            kind=self.kind,
            nlist=self.nlist,
            nprobe=self.nprobe,
            measured_recall=self._measured_recall,
            ntotal=self.ntotal,
            seed=self._seed,
            faiss_version=str(faiss.__version__),
            faiss_file=data_name,
            faiss_sha256=digest,
        )
        text = json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n"
        data_tmp = _write_temp(directory, blob)
        try:
            manifest_tmp = _write_temp(directory, text.encode("utf-8"))
            try:
                data_tmp.replace(directory / data_name)
                manifest_tmp.replace(directory / MANIFEST_NAME)
            finally:
                manifest_tmp.unlink(missing_ok=True)
        finally:
            data_tmp.unlink(missing_ok=True)
        _fsync_dir(directory)
        _collect_garbage(directory, keep=data_name)

    @classmethod
    def load(cls, directory: Path, *, model_id: str | None = None) -> DenseIndex:
        """Read an index written by ``save``, checking schema, hash and (if given) model.

        The faiss file is read whole and hashed before faiss parses it, so what is verified
        is exactly what is loaded (faiss's mmap flag covers only some index types and would
        let the file change under us). Any mismatch raises ``DenseIndexError``.
        """
        where = directory / MANIFEST_NAME
        for attempt in range(LOAD_ATTEMPTS):
            try:
                manifest = _Manifest.parse(where.read_text("utf-8"), where)
            except FileNotFoundError as exc:
                raise DenseIndexError(
                    f"no dense index in {directory} ({MANIFEST_NAME} is missing); {_REBUILD}"
                ) from exc
            try:
                blob = (directory / manifest.faiss_file).read_bytes()
            except FileNotFoundError as exc:
                if attempt + 1 < LOAD_ATTEMPTS:
                    continue  # a save committed a new pair and collected ours: read it again
                raise DenseIndexError(
                    f"{manifest.faiss_file} named by {where} is missing; {_REBUILD}"
                ) from exc
            return cls._from_verified(blob, manifest, where, model_id)
        raise AssertionError("unreachable")  # pragma: no cover

    @classmethod
    def _from_verified(
        cls, blob: bytes, manifest: _Manifest, where: Path, model_id: str | None
    ) -> DenseIndex:
        """Check ``blob`` against ``manifest`` and the expected model, then parse it."""
        import faiss

        if model_id is not None and model_id != manifest.model_id:
            raise DenseIndexError(
                f"dense index in {where.parent} was built with model {manifest.model_id!r}, "
                f"but {model_id!r} is configured; {_REBUILD}"
            )
        digest = hashlib.sha256(blob).hexdigest()
        if digest != manifest.faiss_sha256:
            raise DenseIndexError(
                f"{manifest.faiss_file} has sha256 {digest[:16]}…, but {where} expects "
                f"{manifest.faiss_sha256[:16]}… (corrupt or mismatched pair); {_REBUILD}"
            )
        try:
            index: Any = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        except RuntimeError as exc:
            raise DenseIndexError(f"faiss cannot read {manifest.faiss_file}; {_REBUILD}") from exc
        if hasattr(index, "nprobe") and manifest.nprobe is not None:
            index.nprobe = manifest.nprobe
        recall, seed = manifest.measured_recall, manifest.seed
        loaded = cls(index, model_id=manifest.model_id, measured_recall=recall, seed=seed)
        found = (loaded.kind, loaded.dim, loaded.ntotal, loaded.nlist, loaded.nprobe)
        expected = (manifest.kind, manifest.dim, manifest.ntotal, manifest.nlist, manifest.nprobe)
        if found != expected or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise DenseIndexError(
                f"{manifest.faiss_file} holds (kind, dim, ntotal, nlist, nprobe) = {found}, "
                f"but {where} says {expected}; {_REBUILD}"
            )
        return loaded


def nlist_for(n: int) -> int:
    """IVF list count for ``n`` vectors: ~4*sqrt(n), clamped, with >= 39 points per list."""
    scaled = min(max(round(NLIST_PER_SQRT_N * math.sqrt(n)), MIN_NLIST), MAX_NLIST)
    return max(1, min(scaled, n // MIN_POINTS_PER_LIST))


def _nprobe_candidates(nlist: int) -> Iterator[int]:
    """The ladder, then doubling, below ``nlist``; then ``nlist`` itself (a full scan)."""
    probe = 0
    for probe in NPROBE_LADDER:
        if probe >= nlist:
            break
        yield probe
    while (probe := probe * 2) < nlist:
        yield probe
    yield nlist


def _tune_nprobe(
    index: Any, vecs: ScoreArray, keys: IdArray, rng: np.random.Generator
) -> tuple[int, float]:
    """The smallest nprobe whose recall@10 on a sample of stored vectors is ``TARGET_RECALL``.

    Each query is a stored vector, so it finds itself; its own id is left out of both
    lists, lest every query score a free hit. A result is a hit when its score reaches the
    exact 10th score, so duplicates (common in code) are not misses because faiss picked
    another copy.
    """
    import faiss

    n = len(vecs)
    picked = np.sort(rng.choice(n, size=min(n, TUNING_QUERIES), replace=False))
    queries, own = vecs[picked], keys[picked]
    want = min(RECALL_AT, n - 1)
    if want == 0:
        return next(_nprobe_candidates(index.nlist)), 1.0
    exact_scores, rows = faiss.knn(queries, vecs, want + 1, metric=faiss.METRIC_INNER_PRODUCT)
    floor = [s[keys[r] != o][want - 1] for s, r, o in zip(exact_scores, rows, own, strict=True)]
    probe, recall = index.nlist, 1.0
    for probe in _nprobe_candidates(index.nlist):
        index.nprobe = probe
        scores, ids = index.search(queries, want + 1)
        hits = [
            min(want, int(np.count_nonzero(s[(i != o) & (i >= 0)] >= f - RECALL_SCORE_EPS)))
            for s, i, o, f in zip(scores, ids, own, floor, strict=True)
        ]
        recall = sum(hits) / (want * len(queries))
        if recall >= TARGET_RECALL:
            break
    return probe, recall


@contextmanager
def _pinned_threads(threads: int) -> Iterator[None]:
    """Run faiss with ``threads`` OpenMP threads, then restore the caller's setting.

    OpenMP keeps the setting per calling thread, so other Python threads are unaffected.
    """
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _as_matrix(values: Floats, dim: int | None, name: str) -> ScoreArray:
    """``values`` as a C-contiguous float32 (n, d) matrix, or a ``ValueError`` saying why."""
    if not isinstance(values, np.ndarray) or not np.issubdtype(values.dtype, np.floating):
        raise ValueError(f"{name} must be a floating-point numpy array")
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError(f"{name} must have shape (n, d) with d >= 1, got {values.shape}")
    if dim is not None and values.shape[1] != dim:
        raise ValueError(f"{name} have dimension {values.shape[1]}, but the index holds {dim}")
    matrix = np.ascontiguousarray(values, dtype=np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} contain NaN or infinite values")
    return matrix


def _as_ids(ids: Ints, n: int | None) -> IdArray:
    """``ids`` as a non-negative int64 vector; with ``n``, also of length n and unique."""
    if not isinstance(ids, np.ndarray) or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("ids must be an integer numpy array")
    if ids.ndim != 1 or (n is not None and len(ids) != n):
        raise ValueError(f"ids must be one-dimensional, one per vector; got shape {ids.shape}")
    if len(ids) and (ids.min() < 0 or ids.max() > np.iinfo(np.int64).max):
        raise ValueError("ids must be in [0, 2**63): -1 marks 'no result'")
    keys = ids.astype(np.int64)
    if n is not None and len(np.unique(keys)) != len(keys):
        raise ValueError("ids must be unique within one call")
    return keys


def _write_temp(directory: Path, data: bytes) -> Path:
    """Write ``data`` to a fresh temp file in ``directory`` and fsync it."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=_TMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable (POSIX; other systems cannot open a directory)."""
    if os.name == "posix":
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _collect_garbage(directory: Path, *, keep: str) -> None:
    """Delete faiss files the manifest no longer names, and temp files of crashed saves."""
    for path in directory.iterdir():
        stale = path.name.startswith(_TMP_PREFIX) or _DATA_NAME.fullmatch(path.name)
        if stale and path.name != keep:
            with suppress(FileNotFoundError):
                path.unlink()
