"""Benchmark: build_context through the servers against the in-process call.

    python -m eval.bench_serve [PATH] [--calls 50] [--clients 4] [--budget 8000]

PATH defaults to a temporary git repository holding part of the running interpreter's
standard library (git, so every call also reads the working-tree diff, as in real use).
The index lives in a temporary state directory, built with ``CORTEX_DENSE_MODEL`` (default
``static``). Prints p50/p95 per call in process, over MCP stdio and over HTTP, the time from
starting each server to its first answer, and the throughput of concurrent HTTP clients.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

from engine import Config, Workspace
from eval.bench_context import _pct, _queries

STDLIB_PARTS = ("asyncio", "email", "json", "http", "logging", "unittest", "concurrent",
                "importlib", "xml", "urllib", "collections", "sqlite3")  # fmt: skip
READY_TIMEOUT_S = 300.0  # a server indexes nothing here, but loading a model can take a while
REPO = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


def stdlib_repo(dest: Path) -> Path:
    """A committed git repository with part of the standard library."""
    src = Path(sysconfig.get_paths()["stdlib"])
    ignore = shutil.ignore_patterns("__pycache__", "test", "tests", "*.pyc")
    for part in STDLIB_PARTS:
        shutil.copytree(src / part, dest / part, ignore=ignore)
    for f in sorted(src.glob("*.py")):
        shutil.copy2(f, dest / f.name)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "-c", "user.email=b@example.com", "-c", "user.name=B", "add", "-A")
    _git(dest, "-c", "user.email=b@example.com", "-c", "user.name=B", "commit", "-q", "-m", "x")
    return dest


def timed(fn: Callable[[], object]) -> float:
    """Milliseconds ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def summary(name: str, ms: list[float]) -> str:
    """One line: p50 and p95 of ``ms``."""
    return f"  {name:<11} p50 {statistics.median(ms):7.1f} ms   p95 {_pct(ms, 0.95):7.1f} ms"


def bench_mcp(path: Path, env: dict[str, str], queries: list[str], budget: int) -> list[str]:
    """Start ``cortex mcp``, time its first answer, then each call."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    cmd = ["-m", "engine.cli", "mcp", str(path), "--watch", "0"]
    params = StdioServerParameters(command=sys.executable, args=cmd, env=env, cwd=str(REPO))

    async def run() -> tuple[float, list[float]]:
        start = time.perf_counter()
        async with Client(params, read_timeout_seconds=READY_TIMEOUT_S) as client:
            await client.call_tool("build_context", {"goal": queries[0], "budget_tokens": budget})
            first = (time.perf_counter() - start) * 1000
            ms = []
            for q in queries:
                t0 = time.perf_counter()
                result = await client.call_tool(
                    "build_context", {"goal": q, "budget_tokens": budget}
                )
                ms.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error, result.content
            return first, ms

    first, ms = anyio.run(run)
    return [f"  start to first answer: {first:,.0f} ms", summary("MCP stdio", ms)]


def bench_http(
    path: Path, env: dict[str, str], queries: list[str], budget: int, clients: int
) -> list[str]:
    """Start ``cortex serve``, time its first answer, each call, and concurrent throughput."""
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "engine.cli", "serve", str(path), "--port", "0", "--watch", "0"]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        line = ""
        while "serving" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise SystemExit("cortex serve exited before it was ready")
        url = line.split(" at ", 1)[1].split()[0] + "/v1/context"
        threading.Thread(target=proc.stderr.read, daemon=True).start()

        def ask(q: str) -> None:
            body = json.dumps({"goal": q, "budget_tokens": budget}).encode()
            req = urllib.request.Request(url, data=body, method="POST")
            with urllib.request.urlopen(req, timeout=120) as resp:
                json.loads(resp.read())

        def ask_all(batch: list[str]) -> None:
            for q in batch:
                ask(q)

        ask(queries[0])
        first = (time.perf_counter() - start) * 1000
        ms = [timed(partial(ask, q)) for q in queries]
        lines = [f"  start to first answer: {first:,.0f} ms", summary("HTTP", ms)]
        for n in sorted({1, clients}):
            t0 = time.perf_counter()
            threads = [threading.Thread(target=ask_all, args=(queries[i::n],)) for i in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rate = len(queries) / (time.perf_counter() - t0)
            lines.append(f"  {n} client{'s' if n > 1 else ''}:  {rate:6.1f} calls/s")
        return lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its numbers."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default=None, help="a git repository (default: stdlib)")
    parser.add_argument("--calls", type=int, default=50, help="build_context calls per path")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cortex-serve-") as tmp:
        path = Path(args.path).resolve() if args.path else stdlib_repo(Path(tmp) / "repo")
        dense = os.environ.get("CORTEX_DENSE_MODEL", "static")
        env = {**os.environ, "CORTEX_DENSE_MODEL": dense, "CORTEX_STATE_DIR": f"{tmp}/state"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        config = Config.from_env(env)
        with Workspace.open(path, config) as ws:
            report = ws.index()
            queries = _queries(ws, args.calls, seed=0)
        print(f"{path}: {report.files:,} files, {report.chunks:,} chunks, dense {dense}, "
              f"indexed in {report.total_seconds:.1f} s; {os.cpu_count()} cores")  # fmt: skip
        with Workspace.open(path, config) as ws:  # a fresh one: the first call loads everything
            first = timed(lambda: ws.build_context(queries[0], budget_tokens=args.budget))
            build = partial(ws.build_context, budget_tokens=args.budget)
            ms = [timed(partial(build, q)) for q in queries]
        print(f"build_context, {len(queries)} calls, budget {args.budget}:")
        print(f"  in process: first call {first:,.0f} ms (loads the model and indexes)")
        print(summary("in process", ms))
        print("\n".join(bench_mcp(path, env, queries, args.budget)))
        print("\n".join(bench_http(path, env, queries, args.budget, args.clients)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
