"""Benchmark: walk, chunk and token-count a tree; print files/s, MB/s, chunks, peak RSS.

    python -m eval.bench_indexers [PATH] [--repeat N] [--max-tokens N]

PATH defaults to the running interpreter's standard library. Each repeat is a fresh scan in
this process (grammars and the tokenizer stay loaded after the first, as in a server); the
median is reported with every run, so noise on a shared machine is visible.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import sysconfig
import time
from collections import Counter

from engine import Config, survey


def _peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=None)
    args = parser.parse_args(argv)
    config = Config.from_env(max_section_tokens=args.max_tokens)

    print(f"corpus: {args.path}")
    runs: list[float] = []
    last = None
    for i in range(args.repeat):
        start = time.perf_counter()
        totals, items = survey(args.path, config)
        for _ in items:
            pass
        elapsed = time.perf_counter() - start
        runs.append(elapsed)
        last = totals
        print(
            f"run {i + 1}: {elapsed:.2f} s  files={totals.files} chunks={totals.chunks} "
            f"tokens={totals.tokens}",
            flush=True,
        )
    assert last is not None
    med = statistics.median(runs)
    skipped = sum(last.skipped.values())
    print(f"files indexed:   {last.files:,} ({last.bytes / 1e6:.1f} MB); skipped {skipped:,}")
    print(f"skip reasons:    {dict(Counter(last.skipped).most_common())}")
    print(f"chunks:          {last.chunks:,} ({dict(last.by_kind.most_common())})")
    print(f"tokens:          {last.tokens:,}")
    print(
        f"time (median):   {med:.2f} s over {len(runs)} runs "
        f"(min {min(runs):.2f}, max {max(runs):.2f})"
    )
    print(f"throughput:      {last.files / med:,.0f} files/s, {last.bytes / 1e6 / med:.2f} MB/s")
    print(f"peak RSS:        {_peak_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
