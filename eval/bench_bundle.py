"""Benchmark: cold-start bundle latency with a large memory store and a long ledger.

    python -m eval.bench_bundle [--notes 20000] [--turns 10000] [--attest-every 10]
                                [--calls 100] [--dense static] [--dir PATH]

A repository is made from a few standard-library packages (committed, indexed); the memory
store is filled with ``--notes`` notes from the standard library's docstrings through
``Workspace.memory.save`` (plus a few identity and constraint notes for the pinned tier);
the ledger gets ``--turns`` recorded turns (inputs, render and snippet texts stored, as
``build_context`` records them), every ``--attest-every``-th with an attest/weights pair,
so the outcomes tier has thousands of earlier intents to rank. Then ``--calls`` bundles
for distinct goals are timed one by one (after one warm-up call), and ``--calls`` repeats
of one goal must give the same bytes. Prints p50/p95 and the sizes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

from engine import Config, SessionState, Workspace
from eval.bench_memory import _docstrings
from indexers import sha256_text
from ledger import Ledger, RecordKind, SnippetRef, TurnDraft

__all__ = ["main"]

_PACKAGES = ("json", "email", "http", "logging", "urllib")  # a repository of ~100 modules
_PINNED = (("identity", "You are the release engineer of this project."),
           ("constraint", "Never change a public function's signature without a deprecation."),
           ("goal", "Ship the 2.0 release with the new parser."))  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _repo(folder: Path) -> Path:
    root = folder / "repo"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in _PACKAGES:
        shutil.copytree(stdlib / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "AGENTS.md").write_text("# Rules\n\nRun `make test` before every commit.\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.email=b@example.com", "-c", "user.name=B", "commit", "-q", "-m",
                  "init"]):  # fmt: skip
        subprocess.run(["git", "-C", str(root), *args], check=True)
    return root


def _fill_ledger(path: Path, intents: list[str], files: list[str], turns: int,
                 every: int) -> None:  # fmt: skip
    """``turns`` recorded turns, every ``every``-th attested, written as the engine does."""
    with Ledger.open(path) as ledger:
        for n in range(turns):
            intent = intents[n % len(intents)] + f" (task {n})"
            body = {"budget": 3000, "constraints": [], "goal": intent, "query": intent,
                    "recent_turns": [], "subgoals": [], "tool_signals": []}  # fmt: skip
            inputs = json.dumps(body, sort_keys=True, separators=(",", ":"))
            snippet = f"def step_{n}():\n    return {n}\n"
            shas = [ledger.put_text(t) for t in (inputs, f"render {n}", snippet)]
            path_n = files[n % len(files)]
            turn = ledger.append_turn(TurnDraft(
                turn_id=uuid.uuid4().hex, goal_ref=sha256_text(intent), tokens_used=100,
                budget=3000, replay_key=f"k{n:08d}", render_sha256=shas[1],
                inputs_sha256=shas[0],
                snippets=(SnippetRef(1, f"{path_n}#L1-L2", 1, 2, shas[2], "", "bm25"),),
            ))  # fmt: skip
            if n % every == 0:
                ledger.append_entries([
                    (RecordKind.SALIENCE, turn.turn_id,
                     {"user": "", "intent": sha256_text(intent), "outcome": "success",
                      "reason": None, "cited": [1], "dropped": 0, "stale": [],
                      "items": [[f"file:{path_n}", 1, 1]]}),
                    (RecordKind.WEIGHTS, turn.turn_id,
                     {"before": {}, "after": {"source": 0.01}, "rate": 0.1, "skipped": False}),
                ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Build, fill, time, print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--attest-every", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--dense", default="static")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="bench-bundle-"))
    folder.mkdir(parents=True, exist_ok=True)
    root = folder / "repo" if (folder / "repo").is_dir() else _repo(folder)
    ws = Workspace.open(root, Config(dense_model=args.dense))
    started = time.perf_counter()
    ws.index()
    print(f"indexed in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    found = list(itertools.islice(_docstrings(Path(sysconfig.get_paths()["stdlib"])), 5000))
    saved = ws.memory.stats().notes
    started = time.perf_counter()
    if saved == 0:
        for kind, text in _PINNED:
            ws.memory.save(text, kind, what=text)
    for n in range(saved, args.notes):
        title, what, learned = found[n % len(found)]
        ws.memory.save(f"{title} #{n}", "note", what=what, learned=learned)
    print(f"{args.notes:,} notes in {time.perf_counter() - started:.0f} s", file=sys.stderr,
          flush=True)  # fmt: skip
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    intents = [t for t, _, _ in found]
    if not ws.ledger_path.exists():
        started = time.perf_counter()
        _fill_ledger(ws.ledger_path, intents, files, args.turns, args.attest_every)
        print(f"{args.turns:,} turns in {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    state = SessionState(constraints=("keep the public API",), subgoals=("fix the parser",))
    goals = [f"{intents[(n * 37) % len(intents)]}" for n in range(args.calls)]
    ws.bundle(goals[0], state=state)  # warm-up: loads the models, the outcome index
    times = []
    for goal in goals:
        t0 = time.perf_counter()
        ws.bundle(goal, ["json/decoder.py"], 3000, state=state)
        times.append(time.perf_counter() - t0)
    same, renders = [], set()
    for _ in range(args.calls):
        t0 = time.perf_counter()
        renders.add(ws.bundle(goals[0], ["json/decoder.py"], 3000, state=state).render())
        same.append(time.perf_counter() - t0)
    print("| notes | ledger turns | attested | calls | p50 ms | p95 ms | mean ms | same goal "
          "p50 / p95 ms | distinct renders of one goal |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.notes:,} | {args.turns:,} | {len(range(0, args.turns, args.attest_every)):,} "
          f"| {args.calls} | {_pct(times, 0.5):.1f} | {_pct(times, 0.95):.1f} | "
          f"{statistics.mean(times) * 1000:.1f} | {_pct(same, 0.5):.1f} / {_pct(same, 0.95):.1f} "
          f"| {len(renders)} |", flush=True)  # fmt: skip
    ws.close()
    return 0 if len(renders) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
