"""Benchmark: the embedded backend against Qdrant's engine (edge), and Qdrant at scale.

    python -m eval.bench_backend [PATH] [--queries 100] [--dense static] [--scales 1,10]
                                 [--no-latency] [--no-optimise] [--work DIR]

Latency: PATH (default: this interpreter's standard library) is indexed twice, into two
state folders: embedded, and ``CORTEX_BACKEND=qdrant`` on an edge shard (the same segments,
mirrored). The same queries (``eval.bench_context``'s: half identifiers, half docstring
prose) go to ``search`` (hybrid, k 10) and ``build_context`` (goal = query) on each, in
turns; p50/p95 per backend.

Scale: the Qdrant layer of PATH is written again as N synthetic copies with distinct paths
(``copyI/...``: the same chunks and vectors, their own ids) into a fresh edge shard, for
each N of ``--scales``; per N: points, write time, the optimiser's time (HNSW graphs and
indexed segments: a server runs it in the background), shard size on disk, process peak memory,
and BM25 / dense / lookup latency p50/p95 over the same queries, as written and optimised.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar
from unittest import mock

import numpy as np

from engine import Config, Workspace
from engine.backend import EdgeStore, QdrantBackend
from engine.embed import EmbeddingCache, make_embedder
from engine.segment import Segment
from eval.bench_context import _pct, _queries
from indexers import Chunk, chunk_id, page_id
from overlays import Scope

T = TypeVar("T")


@contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    with mock.patch.dict(os.environ, values):
        for key in ("CORTEX_BACKEND", "CORTEX_QDRANT_URL"):
            if key not in values:
                os.environ.pop(key, None)
        yield


def _timed(call: Callable[[T], object], items: Sequence[T]) -> tuple[float, float]:
    """p50 and p95 in milliseconds of ``call`` over ``items``."""
    spent = []
    for item in items:
        t0 = time.perf_counter()
        call(item)
        spent.append((time.perf_counter() - t0) * 1000)
    return statistics.median(spent), _pct(spent, 0.95)


def _ws_times(ws: Workspace, what: str, queries: Sequence[str]) -> tuple[float, float]:
    if what == "search":
        return _timed(lambda q: ws.search(q, mode="hybrid", k=10), queries)
    return _timed(lambda q: ws.build_context(q, budget_tokens=8000, record=False), queries)


def _backend_times(
    store: EdgeStore, model: str, queries: Sequence[str], vectors: Sequence[np.ndarray]
) -> tuple[tuple[float, float], ...]:
    """BM25, dense and definitions p50/p95 over ``store``'s base layer: one untimed pass to
    warm the engine (its first reads of a segment are several times slower), then a timed
    pass through a fresh backend, which remembers nothing of the first (point names, term
    counts): a long-running process, asked new questions."""
    scope = Scope("base")

    def passes(backend: QdrantBackend) -> tuple[tuple[float, float], ...]:
        return (
            _timed(lambda q: backend.search(scope, "sections", q, 50), queries),
            _timed(lambda v: backend.search_dense(scope, v, model, 50), vectors),
            _timed(lambda q: backend.definitions(scope, q.split()[:1], 5), queries),
        )

    passes(QdrantBackend(store))
    return passes(QdrantBackend(store))


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _print_times(label: str, times: tuple[tuple[float, float], ...]) -> None:
    (bm25, nn, defs) = times
    print(f"       {label:<10}  bm25 top-50 p50 {bm25[0]:8.2f} ms p95 {bm25[1]:8.2f} ms   "
          f"dense top-50 p50 {nn[0]:8.2f} ms p95 {nn[1]:8.2f} ms   definitions p50 "
          f"{defs[0]:6.2f} ms p95 {defs[1]:6.2f} ms", flush=True)  # fmt: skip


def latency(path: Path, top: Path, dense: str, n: int) -> None:
    """search and build_context p50/p95, embedded and Qdrant edge, on the same queries."""
    envs = {"embedded": {}, "qdrant-edge": {"CORTEX_BACKEND": "qdrant"}}
    spaces: dict[str, Workspace] = {}
    for name, env in envs.items():
        config = Config.from_env(state_dir=str(top / f"state-{name}"), dense_model=dense)
        with _env(env):
            ws = Workspace.open(path, config)
            t0 = time.perf_counter()
            ws.index()
            print(f"{name:<12} index {time.perf_counter() - t0:7.1f} s")
        spaces[name] = ws
    queries = _queries(spaces["embedded"], n, seed=0)
    for name, ws in spaces.items():  # warm: models loaded, caches filled once
        with _env(envs[name]):
            ws.build_context("warm up", queries[0], budget_tokens=8000, record=False)
    for what in ("search", "build_context"):
        for name, ws in spaces.items():
            with _env(envs[name]):
                p50, p95 = _ws_times(ws, what, queries)
            print(f"{what:<14} {name:<12} {len(queries)} queries  p50 {p50:8.2f} ms  "
                  f"p95 {p95:8.2f} ms")  # fmt: skip
    for name, ws in spaces.items():
        with _env(envs[name]):
            ws.close()


def _copy(chunk: Chunk, prefix: str) -> Chunk:
    path = f"{prefix}/{chunk.path}"
    return replace(chunk, id=chunk_id(path, chunk.span, chunk.sha256), path=path,
                   page_id=page_id(path, chunk.page_id))  # fmt: skip


def _size(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())  # allocated


def scale(
    path: Path, top: Path, dense: str, n: int, scales: list[int], *, optimise: bool = True
) -> None:
    """Write N synthetic copies of PATH's base layer into a fresh edge shard; time it and
    the queries; report points, disk and peak memory."""
    config = Config.from_env(state_dir=str(top / "state-embedded"), dense_model=dense)
    with _env({}):
        ws = Workspace.open(path, config)
        ws.index()
        queries = _queries(ws, n, seed=0)
        segment: Segment = ws.layers.base_segment()
    embedder = make_embedder(dense, config)
    assert embedder is not None
    cache = EmbeddingCache(top / "state-embedded" / "embeddings.sqlite")
    records = segment.files()
    files = [(records[p], segment.chunks_of(p)) for p in sorted(records)]
    texts = [c for _, chunks in files for c in chunks]
    from engine.core import embedding_text, is_trivial
    from engine.embed import embed_with_cache

    targets = [c for c in texts if not is_trivial(c)]
    got = embed_with_cache(embedder, cache, [embedding_text(c) for c in targets])
    by_id = {c.id: row for c, row in zip(targets, got.vectors.tolist(), strict=True)}
    qvecs = [np.asarray(embedder.embed([q]))[0] for q in queries]
    print(f"base: {len(files)} files, {len(texts)} sections, {len(by_id)} vectors")
    for copies in scales:
        shard = top / f"edge-{copies}x"
        shutil.rmtree(shard, ignore_errors=True)  # fresh, also in a reused --work folder
        backend = QdrantBackend(EdgeStore(shard))
        t0 = time.perf_counter()
        for i in range(copies):
            prefix = f"copy{i}"
            batch, vectors = [], {}
            for record, chunks in files:
                moved = [_copy(c, prefix) for c in chunks]
                vectors.update({m.id: by_id[c.id] for m, c in zip(moved, chunks, strict=True)
                                if c.id in by_id})  # fmt: skip
                moved_path = f"{prefix}/{record.path}"
                rec = replace(record, path=moved_path, page_id=page_id(moved_path, record.page_id))
                batch.append((rec, "", moved))
            for start in range(0, len(batch), 64):
                backend.write("base", batch[start : start + 64], embedder.model_id, vectors)
        wrote = time.perf_counter() - t0
        backend.store.close()  # flush to disk, then reopen as a reader would
        store = EdgeStore(shard)
        points = len(texts) * copies + len(files) * copies
        print(f"{copies:>4}x  {points:>9,} points  write {wrote:8.1f} s "
              f"({points / wrote:,.0f} points/s)  disk {_size(shard) / 2**20:8.1f} MiB  "
              f"peak RSS {_peak_mib():8.0f} MiB", flush=True)  # fmt: skip
        _print_times("as written", _backend_times(store, embedder.model_id, queries, qvecs))
        if not optimise:
            store.close()
            continue
        t0 = time.perf_counter()
        store.optimize()  # a server does it in the background; the edge engine on request
        print(f"       optimize {time.perf_counter() - t0:8.1f} s  disk "
              f"{_size(shard) / 2**20:8.1f} MiB  peak RSS {_peak_mib():8.0f} MiB", flush=True)
        _print_times("optimised", _backend_times(store, embedder.model_id, queries, qvecs))
        store.close()
    ws.close()
    cache.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--scales", default="", help="e.g. 1,10: run the scale part")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--no-optimise", action="store_true",
                        help="scale: skip the optimiser (and the queries after it)")  # fmt: skip
    parser.add_argument("--work", default=None, help="keep state here (reused when present)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cortex-backend-") as tmp:
        top = Path(args.work or tmp)
        if not args.no_latency:
            latency(Path(args.path), top, args.dense, args.queries)
        if args.scales:
            scales = [int(s) for s in args.scales.split(",")]
            scale(Path(args.path), top, args.dense, args.queries, scales,
                  optimise=not args.no_optimise)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
