"""Try build_context settings on already-indexed dev-set trees; print metrics per variant.

    python -m eval.tune --workdir DIR [--repos DIR] [--data FILE] [--instances ...] \\
        [--budget 8000] [--dense MODEL] \\
        --variant 'fusion=score' --variant 'weights.file=2.0,pack.mmr_lambda=0.9'

Each variant changes fields of ``ContextSettings`` (dotted for nested ones: ``recall.pages``,
``weights.cosine``, ``pack.mmr_lambda``); the baseline (no changes) is always run first.
Trees and indexes come from ``eval.swebench --workdir DIR`` (with the same ``--dense``), in
either of its layouts: ``DIR/<instance_id>/tree`` (``--no-overlays``), used as it is; or
``DIR/<owner__name>/`` (the default: one tree and one base index per repository), where
each instance's tree is swapped in again and its overlay refreshed, as eval.swebench does,
which needs the git directories (``--repos``). Nothing is indexed from scratch.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

from engine import Config, ContextSettings, Workspace, rank_files, uri_path
from eval import metrics
from eval.metrics import Section
from eval.swebench import RepoOverlays
from eval.swebench_data import (
    DEFAULT_DATA,
    Instance,
    find_git_dir,
    load_instances,
    plan_repository,
)
from overlays import read_history

COLUMNS = ("acc@1", "acc@3", "acc@5", "acc@10", "hit", "fcov")
Scores = dict[str, dict[str, list[Any]]]  # variant -> metric -> one value per instance


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


def _ask(
    ws: Workspace,
    inst: Instance,
    variants: Sequence[tuple[str, ContextSettings]],
    budget: int,
    scores: Scores,
) -> None:
    """Ask ``ws`` (indexed over ``inst``'s tree) with each variant; add its metrics."""
    title = next((ln for ln in inst.problem_statement.splitlines() if ln.strip()), "")
    for name, settings in variants:
        ranked: list[Any] = []
        pack = ws.build_context(title[:500], inst.problem_statement, budget_tokens=budget,
                                explain=ranked, settings=settings, record=False)  # fmt: skip
        files = rank_files(ranked, settings.file_ranking)
        # ``path#Lx-Ly``, and a path may hold a "#" itself: cut at the last one.
        packed = [Section(uri_path(s.source_uri), s.symbol,
                          0, 0, 0) for s in pack.citations]  # fmt: skip
        row = scores[name]
        for k in (1, 3, 5, 10):
            row.setdefault(f"acc@{k}", []).append(metrics.file_accuracy(files, inst.gold_files, k))
        row.setdefault("hit", []).append(metrics.gold_file_hit(packed, inst.gold_files))
        # None for an instance without gold functions: left out of the mean, as in swebench.
        row.setdefault("fcov", []).append(
            metrics.gold_function_coverage(packed, inst.gold_functions)
        )


def _layered(
    repo: str,
    members: Sequence[Instance],
    home: Path,
    repos: Path,
    config: Config,
    ask: Callable[[Workspace, Instance], None],
) -> None:
    """One repository's instances in eval.swebench's overlays layout: each tree swapped in
    under ``home/tree`` and its overlay refreshed (in eval.swebench's order), then asked."""
    git_dir = find_git_dir(repos, repo)
    cfg = config.with_(state_dir=str(home / "state"))
    ws: Workspace | None = None
    with RepoOverlays(git_dir, home, config=cfg, mode="context", budgets=(), baseline=False
                      ) as trees:  # fmt: skip
        try:
            for inst in plan_repository(git_dir, members):
                trees.swap_in(inst.base_commit)
                if ws is None:
                    ws = Workspace.open(trees.tree, cfg)
                ws.layers.supply_history(read_history(git_dir, inst.base_commit))
                ws.index()  # the overlay against the base eval.swebench built
                ask(ws, inst)
        finally:
            if ws is not None:
                ws.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--repos", type=Path, default=None,
                        help="where the git dirs are (the overlays layout needs them)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--instances", default="")
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--dense", default=None, help="dense model (eval.swebench's --dense)")
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args(argv)
    select = [s.strip() for s in args.instances.split(",") if s.strip()]
    selected = load_instances(args.data, select)
    alone: list[Instance] = []  # in the --no-overlays layout
    by_repo: dict[str, list[Instance]] = {}  # in the default one, by repository
    for inst in selected:
        if (args.workdir / inst.instance_id / "tree").is_dir():
            alone.append(inst)
        elif (args.workdir / inst.repo.replace("/", "__") / "tree.json").exists():
            by_repo.setdefault(inst.repo, []).append(inst)
    found = len(alone) + sum(len(m) for m in by_repo.values())
    if not found:
        print(f"no trees for the {len(selected)} selected instances under {args.workdir}: "
              f"eval.swebench --workdir makes WORKDIR/<owner__name>/ (tree, tree.json, "
              f"state), --no-overlays --workdir makes WORKDIR/<instance_id>/tree",
              file=sys.stderr)  # fmt: skip
        return 1
    if by_repo and args.repos is None:
        print(f"{args.workdir} holds eval.swebench's overlays layout (one tree per "
              f"repository): --repos is needed to swap each instance's tree in",
              file=sys.stderr)  # fmt: skip
        return 1
    cache = (args.workdir / "cache" / "embeddings.sqlite").resolve()
    config = Config.from_env(ledger=False, embedding_cache=str(cache), dense_model=args.dense)
    base = config.context_settings()
    variants = [("baseline", base)] + [(v, _apply(base, v)) for v in args.variant]
    scores: Scores = {name: {} for name, _ in variants}

    def ask(ws: Workspace, inst: Instance) -> None:
        _ask(ws, inst, variants, args.budget, scores)

    start = time.perf_counter()
    for inst in alone:
        root = args.workdir / inst.instance_id
        with Workspace.open(root / "tree", config.with_(state_dir=str(root / "state"))) as ws:
            ws.index()  # incremental: only what a newer chunker changes is redone
            ask(ws, inst)
    for repo, members in by_repo.items():
        home = args.workdir / repo.replace("/", "__")
        _layered(repo, members, home, args.repos, config, ask)
    missing = len(selected) - found
    left = f" ({missing} selected without a tree, left out)" if missing else ""
    print(f"{found} instances{left}, budget {args.budget}, "
          f"{time.perf_counter() - start:.0f} s")  # fmt: skip
    print(f"{'variant':<60} " + " ".join(f"{c:>6}" for c in COLUMNS))
    for name, row in scores.items():
        means = [metrics.mean(row[c]) for c in COLUMNS]
        cells = ["-" if m is None else f"{100 * m:.1f}" for m in means]
        print(f"{name[:60]:<60} " + " ".join(f"{c:>6}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
