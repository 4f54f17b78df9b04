"""Benchmark: memory save and search latency as the store grows (10k and 100k notes).

    python -m eval.bench_memory [--sizes 10000,100000] [--probe 200] [--dense static]
                                [--dir PATH]

Notes are made from the standard library's docstrings (a title, the first paragraph as
``what``, the rest as ``learned``), so their words and lengths are those of real prose
about code. The store is filled through ``Workspace.memory.save`` (what an agent calls,
dedupe, entity extraction and embedding included) up to each size; there ``--probe``
more saves and ``--probe`` searches (a docstring's first line as the query) are timed
one by one. Prints p50/p95 per size, the fill rate and the file size. A ``--dir`` kept
from an earlier run is probed as it is (no fill below its size).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from engine import Config, Workspace

_DOCS = 5_000  # docstrings read once; past them they repeat with a counter in the title


def _docstrings(root: Path) -> Iterator[tuple[str, str, str]]:
    """(title, what, learned) of each docstring under ``root`` that says something."""
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                first, _, rest = doc.strip().partition("\n")
                if len(first) > 20:
                    what, _, learned = rest.strip().partition("\n\n")
                    yield f"{node.name}: {first}"[:200], what[:4000], learned[:4000]


def _notes(found: list[tuple[str, str, str]], start: int) -> Iterator[tuple[str, str, str]]:
    """Docstring notes, cycled with a counter so each is distinct past the first round."""
    for n in itertools.count(start):
        title, what, learned = found[n % len(found)]
        yield (title if n < len(found) else f"{title} ({n // len(found)})"), what, learned


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def main(argv: list[str] | None = None) -> int:
    """Fill, probe, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--probe", type=int, default=200)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rng = random.Random(0)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="bench-memory-"))
    folder.mkdir(parents=True, exist_ok=True)
    ws = Workspace.open(folder, Config(dense_model=args.dense, ledger=False))
    found = list(itertools.islice(_docstrings(Path(sysconfig.get_paths()["stdlib"])), _DOCS))
    saved = ws.memory.stats().notes  # a --dir filled by an earlier run is probed as it is
    notes = _notes(found, saved)
    print("| notes | save p50 ms | save p95 ms | search p50 ms | search p95 ms | fill notes/s "
          "| file MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for size in sizes:
        started = time.perf_counter()
        filled = 0
        while saved < size:
            title, what, learned = next(notes)
            ws.memory.save(title, "note", what=what, learned=learned)
            saved += 1
            filled += 1
            if saved % 10_000 == 0:
                print(f"  {saved:,} saved", file=sys.stderr, flush=True)
        rate = filled / (time.perf_counter() - started) if filled else 0.0
        save_s, search_s = [], []
        for _ in range(args.probe):
            title, what, learned = next(notes)
            t0 = time.perf_counter()
            ws.memory.save(title, "note", what=what, learned=learned)
            save_s.append(time.perf_counter() - t0)
            saved += 1
            query = rng.choice(found)[0].split(":", 1)[-1]
            t0 = time.perf_counter()
            ws.memory.search(query, 10)
            search_s.append(time.perf_counter() - t0)
        mb = sum(p.stat().st_size for p in ws.state_dir.glob("memory.sqlite*")) / 1e6
        print(f"| {size:,} | {_pct(save_s, 0.5):.2f} | {_pct(save_s, 0.95):.2f} | "
              f"{_pct(search_s, 0.5):.2f} | {_pct(search_s, 0.95):.2f} | {rate:,.0f} | "
              f"{mb:.1f} |", flush=True)  # fmt: skip
    print(f"(mean search {statistics.mean(search_s) * 1000:.2f} ms at the last size; "
          f"state in {folder})")  # fmt: skip
    ws.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
