"""Benchmark: a first index interrupted part-way, then run again. Prints how long the run
that finishes it takes beside an uninterrupted one, how many files it kept, and whether
the base it ends with is the one the uninterrupted run built (files, chunks, BM25 totals).

    python -m eval.bench_resume [PATH] [--at 0.25,0.5,0.75] [--dense static]

PATH defaults to the running interpreter's standard library. Each run is ``cortex index``
in a process of its own, into a temporary state folder (never into PATH); the interrupted
one gets a SIGINT (a Ctrl-C) at the given fractions of the uninterrupted run's time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from engine import Config, Workspace


def _run(
    root: Path, state: Path, dense: str, stop_after: float | None = None
) -> tuple[float, dict[str, Any] | None]:
    """Seconds of one ``cortex index`` of ``root`` (SIGINT after ``stop_after`` seconds),
    and its report (None when it was interrupted)."""
    env = {**os.environ, "CORTEX_STATE_DIR": str(state), "CORTEX_DENSE_MODEL": dense}
    cmd = [sys.executable, "-m", "engine.cli", "index", str(root), "--json"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if stop_after is not None:
        try:
            proc.wait(timeout=stop_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate()
    seconds = time.perf_counter() - start
    if stop_after is None and proc.returncode != 0:
        raise SystemExit(f"cortex index failed (exit {proc.returncode})")
    return seconds, json.loads(out) if proc.returncode == 0 else None


def _base(root: Path, state: Path, dense: str) -> dict[str, Any]:
    config = Config.from_env(state_dir=str(state), dense_model=dense)
    with Workspace.open(root, config) as ws:
        segment = ws.layers.base_segment()
        return {
            "files": {p: r.content_sha256 for p, r in segment.meta.files().items()},
            "chunks": sorted(c for c, _ in segment.meta.all_chunk_ids()),
            "stats": segment.meta.get_info("lexical_stats"),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument(
        "--at", default="0.25,0.5,0.75", help="when to stop it, as fractions of a whole run"
    )
    parser.add_argument("--dense", default="static", help="dense model (default: static)")
    args = parser.parse_args(argv)
    root = Path(args.path).resolve()
    fractions = [float(f) for f in args.at.split(",") if f.strip()]
    if not fractions or not all(0 < f < 1 for f in fractions):
        parser.error("--at takes fractions between 0 and 1, e.g. 0.25,0.5")
    print(f"corpus: {root}")
    with tempfile.TemporaryDirectory(prefix="cortex-bench-resume-") as tmp:
        whole_s, _ = _run(root, Path(tmp, "whole"), args.dense)
        whole = _base(root, Path(tmp, "whole"), args.dense)
        print(f"uninterrupted:  {whole_s:.1f} s  ({len(whole['files']):,} files, "
              f"{len(whole['chunks']):,} chunks)")  # fmt: skip
        for fraction in fractions:
            state = Path(tmp, f"at-{fraction}")
            _, stopped = _run(root, state, args.dense, stop_after=fraction * whole_s)
            again_s, report = _run(root, state, args.dense)
            report = report or {}
            if stopped is not None:
                print(f"Ctrl-C at {fraction:.0%}:  the run had already finished")
                continue
            same = _base(root, state, args.dense) == whole
            print(
                f"Ctrl-C at {fraction:.0%}:  the next run {again_s:.1f} s "
                f"({again_s / whole_s:.2f}x the uninterrupted one), "
                f"{report.get('resumed', 0):,} files kept; "
                f"base {'identical' if same else 'DIFFERENT'}"
            )
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
