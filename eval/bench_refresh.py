"""Benchmark: the first query after a refresh, over a large overlay, advanced versus rebuilt.

    python -m eval.bench_refresh --repo GIT_DIR --base REF --head REF [--edits 7] [--seed 0]

A shared clone of ``GIT_DIR`` is checked out at ``head`` and indexed with its base pinned at
``base`` (``CORTEX_BASE_REF``), so the overlay holds every file the two commits differ in.
Then, ``--edits`` times: one file is edited, the overlay refreshed, and the next
``build_context`` timed twice over, in the same process and run: once with the View's
in-memory side advanced by what changed (the default), once with it rebuilt from the
overlay's documents as it was before (the shared state dropped and its saved file moved
away first). Medians of each, with the warm query beside them, and the paths the query's
advance read (none once the refresh advances it: cortex after 65978e3).

Then a new process (a CLI call, a server's start) opens the workspace and times its first
query, ``--rounds`` times each, alternating: starting from the in-memory side the refresh
saved in the overlay's folder (``memory.npz``), and with that file moved away (built from
the overlay's documents, as every new process did before). The index line shows what the
first refresh spent building and saving it (``overlay memory``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine import Config, Workspace
from engine.index import MEMORY_FILE

_GIT = ("git", "-c", "advice.detachedHead=false")


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms (max {max(values) * 1000:.0f})"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git directory (bare is fine)")
    parser.add_argument("--base", required=True, help="the base commit or tag")
    parser.add_argument("--head", required=True, help="the commit the working tree is at")
    parser.add_argument("--edits", type=int, default=7)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3, help="new processes per mode")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="cortex-refresh-") as tmp:
        tree = Path(tmp) / "repo"
        subprocess.run([*_GIT, "clone", "-q", "--shared", "--no-checkout", str(args.repo),
                        str(tree)], check=True)  # fmt: skip
        subprocess.run([*_GIT, "checkout", "-q", args.head], cwd=tree, check=True)
        config = Config.from_env(dense_model=args.dense, base_ref=args.base, ledger=False)
        with Workspace.open(tree, config) as ws:
            start = time.perf_counter()
            report = ws.index()
            built = time.perf_counter() - start
            status = ws.status(check_files=False)
            state_dir = ws.state_dir
            stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()
                               if k.startswith("overlay"))  # fmt: skip
            print(f"{args.repo} {args.base[:12]}..{args.head[:12]}: index {built:.1f} s, "
                  f"overlay {status.overlay_files} files, "
                  f"{status.tombstones} tombstones ({stages})")  # fmt: skip
            overlay = sorted(ws.layers.current()[0].paths)
            words = sorted({w for p in overlay for w in Path(p).stem.split("_") if len(w) > 3})
            queries = [" ".join(rng.sample(words, 3)) for _ in range(args.edits)]
            for q in queries[:2]:  # warm everything a first query loads (models, caches)
                ws.build_context(q, record=False)
            warm: list[float] = []
            advanced: list[float] = []
            rebuilt: list[float] = []
            refresh: list[float] = []
            reads: list[int] = []
            targets = rng.sample(overlay, args.edits)
            for i, (path, query) in enumerate(zip(targets, queries, strict=True)):
                file = tree / path
                original = file.read_bytes()
                modes = (
                    ("advanced", "rebuilt")
                    if hasattr(ws.layers, "drop_memories")
                    else ("advanced",)
                )  # an older cortex, measured for comparison: no shared memory
                for mode in modes:
                    file.write_bytes(original + f"\n// edit {i} {mode}\n".encode())
                    start = time.perf_counter()
                    ws.index()
                    refresh.append(time.perf_counter() - start)
                    # Rebuilt: what every refresh did before, from the documents.
                    saved = _saved(state_dir) if mode == "rebuilt" else []
                    with _aside(saved):
                        if mode == "rebuilt":
                            ws.layers.drop_memories()
                        start = time.perf_counter()
                        ws.build_context(query, record=False)
                        (advanced if mode == "advanced" else rebuilt).append(
                            time.perf_counter() - start
                        )
                    if mode == "advanced" and hasattr(ws.layers, "memory_reads"):
                        reads.append(ws.layers.memory_reads())
                    start = time.perf_counter()
                    ws.build_context(query, record=False)
                    warm.append(time.perf_counter() - start)
                file.write_bytes(original)
            ws.index()
        fresh = _new_processes(tree, state_dir, args, queries[0])
    print(f"refresh after a 1-file edit: {_ms(refresh)}")
    read = f"; paths read per advance: {statistics.median(reads):.0f}" if reads else ""
    print(f"first query after it, memory advanced: {_ms(advanced)}{read}")
    if rebuilt:
        print(f"first query after it, memory rebuilt:  {_ms(rebuilt)}")
    print(f"warm query:                            {_ms(warm)}")
    for mode, times in fresh.items():
        print(f"new process, first query, {mode}: {_ms(times)}")
    return 0


def _new_processes(
    tree: Path, state_dir: Path, args: argparse.Namespace, query: str
) -> dict[str, list[float]]:
    """A new process's first ``build_context`` over the indexed tree, ``args.rounds`` times
    per mode, alternating: from the saved in-memory side, and with its file moved away."""
    saved = _saved(state_dir)
    code = (
        "import json, sys, time\n"
        "from engine import Config, Workspace\n"
        "tree, state, dense, base, query = sys.argv[1:]\n"
        "config = Config.from_env(dense_model=dense, base_ref=base, ledger=False,"
        " state_dir=state)\n"
        "with Workspace.open(tree, config) as ws:\n"
        "    start = time.perf_counter()\n"
        "    ws.build_context(query, record=False)\n"
        "    print(json.dumps(time.perf_counter() - start))\n"
    )
    modes = ("from the saved memory", "memory built again") if saved else ("(nothing saved)",)
    out: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            with _aside(saved if mode == "memory built again" else []):
                done = subprocess.run(
                    [sys.executable, "-c", code, str(tree), str(state_dir), args.dense,
                     args.base, query],
                    check=True, capture_output=True, text=True,
                )  # fmt: skip
            out[mode].append(float(json.loads(done.stdout.strip().splitlines()[-1])))
    return out


def _saved(state_dir: Path) -> list[Path]:
    """The overlays' saved in-memory sides."""
    return sorted(state_dir.glob(f"overlays/**/{MEMORY_FILE}"))


@contextmanager
def _aside(paths: list[Path]) -> Iterator[None]:
    """``paths`` moved away while the block runs, then back."""
    for p in paths:
        p.rename(p.with_suffix(".aside"))
    try:
        yield
    finally:
        for p in paths:
            p.with_suffix(".aside").rename(p)


if __name__ == "__main__":
    sys.exit(main())
