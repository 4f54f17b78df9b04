"""Benchmark: ``build_context`` with many uncommitted files, the working-tree diff kept by
the tree's token (as every call now reads it) against read again on every call (as before).

    python -m eval.bench_diff [--files 500] [--queries 20] [--rounds 3] [--corpus N] [--seed 0]

The corpus is a copy of the running interpreter's standard library committed to a fresh
git repository (as ``eval.bench_overlays`` makes it); then ``--files`` tracked files get a
new function each, uncommitted, and the workspace is indexed. Timed: ``--queries`` calls a
round each way, the rounds alternated in one process (so load on the machine falls on both
alike); the diff lane is dropped before each call to measure the old way. Prints p50/p90
per way and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from engine import Config, Workspace
from eval.bench_context import _pct, _queries
from eval.bench_overlays import _append, _committed_corpus, _git, _say


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500, help="uncommitted edited files")
    parser.add_argument("--queries", type=int, default=20, help="calls a round, each way")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", type=int, default=0, metavar="N",
                        help="copy N of the stdlib's files (default: all)")  # fmt: skip
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="cortex-bench-diff-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        files, size = _committed_corpus(repo, args.corpus, rng)
        _say(f"corpus: {files:,} files, {size / 1e6:.1f} MB, committed")
        tracked = sorted(p for p in _git(repo, "ls-files", "*.py").splitlines() if p)
        for i, rel in enumerate(sorted(rng.sample(tracked, min(args.files, len(tracked))))):
            _append(repo / rel, f"diff_{i}")
        _say(f"{min(args.files, len(tracked)):,} files edited, uncommitted")
        with Workspace.open(repo, Config(state_dir=str(Path(tmp) / "state"))) as ws:
            start = time.perf_counter()
            ws.index()
            _say(f"indexed in {time.perf_counter() - start:.1f} s")
            queries = _queries(ws, args.queries, args.seed)
            ws.build_context(queries[0], record=False)  # models and caches loaded
            took: dict[str, list[float]] = {"kept by token": [], "read every call": []}
            for _ in range(args.rounds):
                for way, times in took.items():
                    for q in queries:
                        if way == "read every call":
                            ws._contexts._diff = ("", (), ())  # the old way: read again
                        start = time.perf_counter()
                        ws.build_context(q, record=False)
                        times.append((time.perf_counter() - start) * 1000)
    for way, times in took.items():
        print(f"{way:16s} p50 {statistics.median(times):7.1f} ms   p90 {_pct(times, 0.9):7.1f} ms"
              f"   ({len(times)} calls)")  # fmt: skip
    kept, every = (statistics.median(t) for t in took.values())
    print(f"ratio of medians (kept / every call): {kept / every:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
