"""Benchmark: what ``forget`` costs on a large base, and that it leaves no trace.

    python -m eval.bench_forget [PATH] [--dense static|hash|none]

Copies PATH (default: the standard library) into a temporary git repository with a string
planted in a few files, indexes it, records a few turns that show the string, then forgets
it. Prints the time of the dry run and of the purge (and its stages as the report gives
them), the index size before and after, and whether any file under the state folder still
holds the string (raw or zlib-unpacked SQLite values).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sqlite3
import subprocess
import sysconfig
import tempfile
import time
import zlib
from pathlib import Path

from engine import Config, Workspace

NEEDLE = "qx7-bench-forget-marker-5521"
_PLANTED = 5  # files that get the string


def _copy_tree(source: Path, target: Path) -> None:
    # site-packages sits inside some installs' stdlib folder; cortex skips it anyway.
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "site-packages")
    shutil.copytree(source, target, ignore=ignore, symlinks=True)


def _plant(root: Path) -> list[str]:
    files = sorted(p for p in root.rglob("*.py") if p.is_file() and p.stat().st_size > 4000)
    chosen = files[:: max(1, len(files) // _PLANTED)][:_PLANTED]
    for path in chosen:
        with path.open("a", encoding="utf-8") as out:
            out.write(f"\n\n# planted by eval.bench_forget: {NEEDLE}\n")
    return [str(p.relative_to(root)) for p in chosen]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=b@e", "-c", "user.name=B", *args], cwd=root,
                   check=True, capture_output=True)  # fmt: skip


def _holders(state: Path) -> list[str]:
    raw, found = NEEDLE.encode(), []
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if raw in data or raw.lower() in data.lower():
            found.append(str(path.relative_to(state)))
        if data.startswith(b"SQLite format 3"):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")]  # fmt: skip
                for table in tables:
                    for row in conn.execute(f"SELECT * FROM {table}"):
                        for value in row:
                            if isinstance(value, bytes):
                                with contextlib.suppress(zlib.error):
                                    value = zlib.decompress(value)
                                if raw in value:
                                    found.append(f"{path.relative_to(state)}:{table}")
            finally:
                conn.close()
    return found


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--dense", default="static", help="dense model (default: static)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cortex-bench-forget-") as tmp:
        root, state = Path(tmp) / "repo", Path(tmp) / "state"
        _copy_tree(Path(args.path), root)
        planted = _plant(root)
        _git(root, "init", "-q", "-b", "main")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "bench")
        config = Config.from_env(state_dir=str(state), dense_model=args.dense)
        with Workspace.open(root, config) as ws:
            start = time.perf_counter()
            report = ws.index()
            print(f"index:        {time.perf_counter() - start:.1f} s  ({report.files:,} files, "
                  f"{report.chunks:,} chunks; string planted in {len(planted)} files)")  # fmt: skip
            for i in range(3):
                ws.build_context(f"where is the {NEEDLE} marker ({i})", "planted bench marker")
            before = _size_mb(state)
            print(f"holders:      {len(_holders(state))} files/tables hold the string before")
            start = time.perf_counter()
            dry = ws.forget(text=NEEDLE, dry_run=True)
            print(f"dry run:      {time.perf_counter() - start:.1f} s  ({dry.chunks} chunks, "
                  f"{dry.ledger_texts} ledger texts)")  # fmt: skip
            start = time.perf_counter()
            done = ws.forget(text=NEEDLE)
            took = time.perf_counter() - start
            print(
                f"forget:       {took:.1f} s  ({done.chunks} chunks in {done.segments} "
                f"segment(s), {done.vectors} vectors, {done.ledger_texts} ledger texts)"
            )
            print(f"state size:   {before:.1f} MB before, {_size_mb(state):.1f} MB after")
            left = _holders(state)
            print(f"holders:      {len(left)} after{': ' + ', '.join(left) if left else ''}")
            verify = ws.journal.verify(blobs=True)
            print(f"ledger:       {verify.reason}")
            start = time.perf_counter()
            hits = ws.search("planted bench marker", mode="bm25", k=10)
            print(
                f"after:        search {time.perf_counter() - start:.2f} s, "
                f"{sum(NEEDLE in h.chunk.text for h in hits)} hits hold the string"
            )
    return 0 if not left and verify.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
