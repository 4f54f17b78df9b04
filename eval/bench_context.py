"""Benchmark: build_context latency on a large index, warm process, with a split per stage.

    python -m eval.bench_context [PATH] [--queries 200] [--budget 8000] [--dense static]

PATH defaults to the running interpreter's standard library, indexed into a temporary
state directory (or reused with --state DIR). Queries are varied: identifier-style ones
from real symbols and prose from real docstrings, the same set every run (seeded). Each
query runs twice: with the goal equal to the query (one set of recall lists) and with a
goal of its own, another query of the set (the goal is then searched too: the usual
planner call, and the slower one).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from engine import Config, Workspace

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")
STAGES = ("embed", "bm25", "dense", "symbols", "fuse", "rerank", "pack", "render", "advisory",
          "ledger")  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _queries(ws: Workspace, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    meta = ws.layers.base_segment().meta
    ids = [cid for cid, _ in meta.all_chunk_ids()]
    picked = meta.chunks(rng.sample(ids, min(len(ids), n * 6)))
    chunks = [picked[i] for i in sorted(picked)]
    idents = []
    for c in chunks:
        if c.symbol:
            name = c.symbol.rsplit(".", 1)[-1]
            idents.append(rng.choice([name, " ".join(_WORD.findall(name)).lower() or name]))
    prose = []
    for c in chunks:
        m = re.search(r'"""\s*([A-Za-z][^\n"]{20,100})', c.text)
        if m:
            prose.append(m.group(1).strip())
    half = n // 2
    return (idents[:half] + prose[: n - half])[:n]


def _measure(ws: Workspace, queries: list[str], budget: int, own_goal: bool, label: str) -> None:
    totals: list[float] = []
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    tokens: list[int] = []
    for i, q in enumerate(queries):
        goal = queries[(i + len(queries) // 2) % len(queries)] if own_goal else q
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        pack = ws.build_context(goal, q, budget_tokens=budget, timings=timings)
        totals.append((time.perf_counter() - t0) * 1000)
        tokens.append(pack.tokens_used)
        for s in STAGES:
            stages[s].append(timings.get(s, 0.0) * 1000)
    print(f"build_context ({label}): {len(totals)} queries, budget {budget}, "
          f"mean {statistics.mean(tokens):,.0f} tokens used")  # fmt: skip
    print(f"  total     p50 {statistics.median(totals):7.2f} ms   p95 {_pct(totals, 0.95):7.2f} ms"
          f"   p99 {_pct(totals, 0.99):7.2f} ms")  # fmt: skip
    for s in STAGES:
        v = stages[s]
        print(f"  {s:<9} p50 {statistics.median(v):7.2f} ms   p95 {_pct(v, 0.95):7.2f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--state", default=None, help="reuse an index in this state dir")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cortex-ctx-") as tmp:
        state = args.state or f"{tmp}/state"
        config = Config.from_env(state_dir=state, dense_model=args.dense)
        with Workspace.open(Path(args.path), config) as ws:
            start = time.perf_counter()
            ws.index()
            print(f"index ready:   {time.perf_counter() - start:.1f} s ({args.path})")
            queries = _queries(ws, args.queries, seed=0)
            start = time.perf_counter()
            ws.build_context("warm up", queries[0], budget_tokens=args.budget)
            print(f"first call:    {(time.perf_counter() - start) * 1000:.0f} ms (loads models)")
            for mode in ("goal = query", "own goal"):
                _measure(ws, queries, args.budget, own_goal=mode == "own goal", label=mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
