"""Try build_context settings on already-indexed dev-set trees; print metrics per variant.

    python -m eval.tune --workdir DIR [--data FILE] [--instances ...] [--budget 8000] \\
        --variant 'fusion=score' --variant 'weights.file=2.0,pack.mmr_lambda=0.9'

Each variant changes fields of ``ContextSettings`` (dotted for nested ones: ``recall.pages``,
``weights.cosine``, ``pack.mmr_lambda``); the baseline (no changes) is always run first.
Trees and indexes come from ``eval.swebench --workdir DIR``; nothing is re-indexed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

from engine import Config, ContextSettings, Workspace, rank_files
from eval import metrics
from eval.metrics import Section
from eval.swebench_data import load_instances


def _apply(settings: ContextSettings, spec: str) -> ContextSettings:
    """``settings`` with ``spec``'s ``field=value`` items (``part.field`` for a nested
    one) applied; a value takes the type the field has (an enum's by its value)."""
    for item in filter(None, (p.strip() for p in spec.split(","))):
        key, _, raw = item.partition("=")
        part, _, name = key.rpartition(".")
        holder: Any = getattr(settings, part) if part else settings
        current = getattr(holder, name)
        value: Any = type(current)(raw) if isinstance(current, Enum) else type(current)(float(raw))
        holder = replace(holder, **{name: value})
        settings = replace(settings, **{part: holder}) if part else holder
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/swebench_dev.jsonl"))
    parser.add_argument("--instances", default="")
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args(argv)
    select = [s.strip() for s in args.instances.split(",") if s.strip()]
    instances = [
        i for i in load_instances(args.data, select) if (args.workdir / i.instance_id).exists()
    ]
    base = Config.from_env().context_settings()
    variants = [("baseline", base)] + [(v, _apply(base, v)) for v in args.variant]
    scores: dict[str, dict[str, list[Any]]] = {name: {} for name, _ in variants}
    start = time.perf_counter()
    for inst in instances:
        root = args.workdir / inst.instance_id
        cache = args.workdir / "cache" / "embeddings.sqlite"
        cfg = Config.from_env(
            state_dir=str(root / "state"), ledger=False, embedding_cache=str(cache)
        )
        title = next((ln for ln in inst.problem_statement.splitlines() if ln.strip()), "")
        with Workspace.open(root / "tree", cfg) as ws:
            ws.index()  # incremental: only what a newer chunker changes is redone
            for name, settings in variants:
                ranked: list[Any] = []
                pack = ws.build_context(title[:500], inst.problem_statement,
                                        budget_tokens=args.budget, explain=ranked,
                                        settings=settings, record=False)  # fmt: skip
                files = rank_files(ranked, settings.file_ranking)
                # ``path#Lx-Ly``, and a path may hold a "#" itself: cut at the last one.
                packed = [Section(s.source_uri.rpartition("#")[0] or s.source_uri, s.symbol,
                                  0, 0, 0) for s in pack.citations]  # fmt: skip
                row = scores[name]
                for k in (1, 3, 5, 10):
                    row.setdefault(f"acc@{k}", []).append(
                        metrics.file_accuracy(files, inst.gold_files, k)
                    )
                row.setdefault("hit", []).append(metrics.gold_file_hit(packed, inst.gold_files))
                row.setdefault("fcov", []).append(
                    metrics.gold_function_coverage(packed, inst.gold_functions)
                )
    print(f"{len(instances)} instances, budget {args.budget}, "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    print(f"{'variant':<60} acc@1  acc@3  acc@5 acc@10  hit   fcov")
    for name, row in scores.items():
        cells = [100 * (metrics.mean(row[m]) or 0.0)
                 for m in ("acc@1", "acc@3", "acc@5", "acc@10", "hit", "fcov")]  # fmt: skip
        print(f"{name[:60]:<60} " + " ".join(f"{c:5.1f}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
