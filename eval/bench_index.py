"""Benchmark: index a tree (lexical only, then with dense vectors), re-index it unchanged,
and time queries in each search mode. Prints every figure the index issue asks for.

    python -m eval.bench_index [PATH] [--dense static|minilm|...] [--queries 200]

PATH defaults to the running interpreter's standard library. The index goes to a temporary
state directory, never into PATH. One-off model preparation (unpacking the static model
into the model cache on a fresh machine) is timed separately from indexing.
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from engine import Config, Workspace

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _queries(ws: Workspace, n: int, seed: int) -> list[str]:
    """Half identifier-style queries from real symbols, half prose from real docstrings."""
    rng = random.Random(seed)
    segment = ws.layers.base_segment()
    ids = [cid for cid, _ in segment.meta.all_chunk_ids()]
    picked = segment.meta.chunks(rng.sample(ids, min(len(ids), n * 4)))
    chunks = [picked[i] for i in sorted(picked)]
    symbols = [c.symbol.rsplit(".", 1)[-1] for c in chunks if c.symbol]
    out = [" ".join(_WORD.findall(s)).lower() or s for s in symbols[: n // 2]]
    prose = []
    for c in chunks:
        m = re.search(r'"""\s*([A-Za-z][^\n"]{20,100})', c.text)
        if m:
            prose.append(m.group(1).strip())
    out += prose[: n - len(out)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--dense", default="static", help="dense model (default: static)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    root = Path(args.path).resolve()
    print(f"corpus: {root}")

    with tempfile.TemporaryDirectory(prefix="cortex-bench-") as tmp:
        lexical_cfg = Config.from_env(state_dir=f"{tmp}/lexical", dense_model="none")
        start = time.perf_counter()
        with Workspace.open(root, lexical_cfg) as ws:
            report = ws.index()
        lexical_s = time.perf_counter() - start
        print(
            f"lexical index:       {lexical_s:.1f} s  ({report.files:,} files, "
            f"{report.chunks:,} chunks; stages {_stages(report.seconds)})"
        )

        cfg = Config.from_env(state_dir=f"{tmp}/full", dense_model=args.dense)
        with Workspace.open(root, cfg) as ws:
            start = time.perf_counter()
            embedder = ws.embedder
            model_id = embedder.model_id if embedder is not None else "none"
            print(
                f"model ready:         {time.perf_counter() - start:.1f} s  ({model_id}; "
                "one-off per machine: a static model is unpacked or distilled)"
            )
            start = time.perf_counter()
            report = ws.index()
            full_s = time.perf_counter() - start
            # Stages are per layer ("base dense", "overlay dense"): embedding is all of them.
            dense_s = sum(v for k, v in report.seconds.items() if k.split()[-1] == "dense")
            rate = report.embeddings_computed / dense_s if dense_s else 0.0
            print(f"full index:          {full_s:.1f} s  (stages {_stages(report.seconds)})")
            print(
                f"embeddings:          {report.embeddings_computed:,} computed, "
                f"{report.embeddings_reused:,} reused; {rate:,.0f} chunks/s incl. faiss build"
            )

            start = time.perf_counter()
            again = ws.index()
            print(
                f"unchanged re-index:  {time.perf_counter() - start:.2f} s  "
                f"({again.changed + again.added} files re-done, "
                f"{again.embeddings_computed} embedded)"
            )

            status = ws.status(check_files=False)
            corpus = sum(f.size for f in ws.layers.base_segment().meta.files().values())
            base = ws.layers.base_segment().dir
            state = Path(tmp) / "full"
            total = _tree_bytes(state)
            parts = {
                "meta": _tree_bytes(base)
                - _tree_bytes(base / "lexical")
                - _tree_bytes(base / "dense"),
                "lexical": _tree_bytes(base / "lexical"),
                "dense": _tree_bytes(base / "dense"),
                "vector cache": sum(
                    p.stat().st_size for p in state.glob("embeddings.sqlite*") if p.is_file()
                ),
            }
            print(
                f"index on disk:       {total / 1e6:.1f} MB for {corpus / 1e6:.1f} MB indexed "
                f"({total / corpus:.2f}x): "
                + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in parts.items())
            )
            print(
                f"dense index:         {status.dense_vectors:,} vectors, {status.dense_kind}, "
                f"measured recall@10 {status.dense_recall}"
            )

            queries = _queries(ws, args.queries, seed=0)
            for mode in ("bm25", "dense", "hybrid"):
                ws.search(queries[0], mode=mode, k=args.k)  # warm
                times = []
                for q in queries:
                    t0 = time.perf_counter()
                    ws.search(q, mode=mode, k=args.k)
                    times.append((time.perf_counter() - t0) * 1000)
                print(
                    f"query {mode:<7}       p50 {statistics.median(times):6.2f} ms   "
                    f"p95 {_pct(times, 0.95):6.2f} ms   ({len(times)} queries, k={args.k})"
                )
    print(f"peak RSS:            {_peak_rss_mb():.0f} MB")
    return 0


def _stages(seconds: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in seconds.items())


if __name__ == "__main__":
    sys.exit(main())
