"""Benchmark: ledger append cost per turn, growth per turn, and verify time.

    python -m eval.bench_ledger [--turns N] [--snippets K] [--prompt-tokens T]
                                [--repeat-share R] [--dir PATH]

Turns are shaped like real ones: K snippets of ~40 lines of real Python (windows of the
interpreter's standard library), a share R of them repeated from earlier turns (a session
keeps citing the same code), a rendered prompt of ~T tokens (4 characters a token, what
tiktoken gives for code) stored as a blob, and a small canonical-JSON inputs blob. An
append is what the engine will do per turn: ``put_text`` every snippet, the prompt and the
inputs, then ``append_turn``.

This measures the ``ledger`` package directly (the engine does not wrap it yet), so it is
the one eval module that imports below ``engine``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ledger import Ledger, SnippetRef, TurnDraft, VerifyReport

_WINDOW_LINES = 40  # a typical function-or-so section (~1,600 characters, ~400 tokens)
_CHARS_PER_TOKEN = 4  # cl100k on Python source averages ~4 characters a token


def _windows(root: Path) -> Iterator[tuple[str, int, str]]:
    """(path, start line, text) of successive 40-line windows of the files under ``root``."""
    for path in sorted(root.rglob("*.py")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for start in range(0, len(lines) - _WINDOW_LINES + 1, _WINDOW_LINES):
            text = "\n".join(lines[start : start + _WINDOW_LINES])
            if text.strip():
                yield str(path.relative_to(root)), start + 1, text


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _append_turns(ledger: Ledger, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """Append ``args.turns`` realistic turns; return per-turn total and append_turn seconds."""
    rng = random.Random(args.seed)
    fresh = _windows(Path(sysconfig.get_paths()["stdlib"]))
    seen: list[tuple[str, int, str]] = []
    totals: list[float] = []
    appends: list[float] = []
    prompt_chars = args.prompt_tokens * _CHARS_PER_TOKEN
    for turn in range(args.turns):
        picked: list[tuple[str, int, str]] = []
        while len(picked) < args.snippets:
            repeat = seen and rng.random() < args.repeat_share
            item = rng.choice(seen) if repeat else next(fresh)
            if item not in picked:
                picked.append(item)
                if not repeat:
                    seen.append(item)
        goal = f"turn {turn}: fix the failing test in {picked[0][0]}"
        body = "\n\n".join(f"[{i}] {p}:{s}\n{t}" for i, (p, s, t) in enumerate(picked, 1))
        prompt = f"# Goal\n{goal}\n\n# Evidence\n{body}\n\n# Recent turns\n"
        while len(prompt) < prompt_chars:  # fresh text, as incompressible as real turn notes
            prompt += next(fresh)[2] + "\n"
        prompt = prompt[:prompt_chars]
        inputs = json.dumps({"goal": goal, "query": goal, "budget_tokens": args.prompt_tokens,
                             "tool_signals": []}, sort_keys=True)  # fmt: skip

        start = time.perf_counter()
        snippets = tuple(
            SnippetRef(i, f"file://{p}", s, s + _WINDOW_LINES - 1, ledger.put_text(t), "PSF-2.0",
                       "bm25+dense")
            for i, (p, s, t) in enumerate(picked, 1)
        )  # fmt: skip
        draft = TurnDraft(
            turn_id=f"turn-{turn:06d}",
            goal_ref=hashlib.sha256(goal.encode()).hexdigest(),
            tokens_used=len(prompt) // _CHARS_PER_TOKEN,
            budget=args.prompt_tokens,
            snippets=snippets,
            replay_key=hashlib.sha256(inputs.encode()).hexdigest()[:32],
            render_sha256=ledger.put_text(prompt),
            inputs_sha256=ledger.put_text(inputs),
        )
        mid = time.perf_counter()
        ledger.append_turn(draft)
        end = time.perf_counter()
        totals.append(end - start)
        appends.append(end - mid)
    return totals, appends


def _timed(fn: Callable[[], VerifyReport], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        report = fn()
        runs.append(time.perf_counter() - start)
        assert report.ok, report
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--snippets", type=int, default=12)
    parser.add_argument("--prompt-tokens", type=int, default=6_000)
    parser.add_argument("--repeat-share", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="verify runs (median shown)")
    parser.add_argument("--dir", type=Path, default=None, help="where the ledger goes (temp)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        path = (args.dir or Path(tmp)) / "bench-ledger.db"
        if path.exists():
            parser.error(f"{path} exists; pass an empty --dir")
        print(f"ledger: {path}")
        print(f"turns: {args.turns:,} x {args.snippets} snippets, ~{args.prompt_tokens:,}-token "
              f"prompt, {args.repeat_share:.0%} of snippets repeated", flush=True)  # fmt: skip
        with Ledger.open(path) as ledger:
            totals, appends = _append_turns(ledger, args)
        size = _size(path)  # closing the last connection checkpoints and removes the WAL
        with Ledger.open(path) as ledger:
            chain = _timed(ledger.verify, args.repeat)
            blobs = _timed(lambda: ledger.verify(blobs=True), args.repeat)
        ms = [t * 1e3 for t in totals]
        alone = [t * 1e3 for t in appends]
        print(f"append per turn:  p50 {_percentile(ms, 0.5):.2f} ms, "
              f"p95 {_percentile(ms, 0.95):.2f} ms (append_turn alone: "
              f"p50 {_percentile(alone, 0.5):.2f} ms, p95 {_percentile(alone, 0.95):.2f} ms; "
              "the rest is put_text)")  # fmt: skip
        print(f"growth per turn:  {size / args.turns / 1024:.1f} KiB "
              f"({size / 2**20:.1f} MiB for {args.turns:,} turns, WAL checkpointed)")  # fmt: skip
        print(f"verify chain:     {chain:.3f} s for {args.turns:,} turns "
              f"({chain / args.turns * 1e6:.0f} µs a record; median of {args.repeat})")  # fmt: skip
        print(f"verify + blobs:   {blobs:.3f} s for {args.turns:,} turns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
