"""Fit the rerank weights offline on dumped candidates (the training split, never dev).

    python -m eval.swebench --data ../shared/eval/swebench_train.jsonl --repos DIR \\
        --out TRAIN --budgets 4000 --no-baseline --dump
    python -m eval.fit_weights TRAIN/results.jsonl [--rounds 2] [--folds 2]

Each dumped candidate carries its feature values (each scaled to [0, 1] per request); its
score under other weights is ``sum(weight * value)`` exactly as the rerank computes it, and
files rank by the summed ranking (``FileRanking.SECTIONS``: the sum of a file's best three
sections above the weakest candidate; ``eval.fit_files`` fits the learned one on top).
Coordinate ascent over a multiplicative grid maximises the mean of file MRR and Acc@5 over
the rows; the current defaults are the starting point and the
baseline. With ``--folds 2`` the rows are split by instance (even / odd) and each half's
fit is scored on the other half, so a fit that only memorises shows up before it is
carried to the dev set. The defaults it prints are then to be chosen between on dev with
``eval.tune`` (``--variant 'weights.source=2.0,...'``), never fitted there.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine import RerankWeights
from engine.retrieval import section_totals
from eval import metrics

# Multipliers tried for each weight in turn (a weight may also be switched off), and the
# values tried for a weight at 0. Mild steps: with tens of instances, wide ones memorise
# (on 28 django rows a 0.25-4x grid fitted 75.0 Acc@1 in-sample, and no better than the
# defaults on the other half).
_STEPS = (0.0, 0.5, 0.75, 1.25, 1.5, 2.0)
_FROM_ZERO = (0.05, 0.1, 0.3)


class Row:
    """One instance: its gold files and, per candidate, (path, feature values)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.id = str(raw["instance_id"])
        self.gold = list(raw["gold_files"])
        self.cands = [(c["path"], c["features"]) for c in raw.get("candidates", [])]


def load(path: Path) -> list[Row]:
    """The dumped rows that have candidates."""
    rows = [Row(json.loads(line)) for line in path.open(encoding="utf-8") if line.strip()]
    return [r for r in rows if r.cands]


def ranked_files(row: Row, weights: dict[str, float]) -> list[str]:
    """The row's files under ``weights`` by the summed ranking (``FileRanking.SECTIONS``)."""
    totals = section_totals((path, sum(weights.get(f, 0.0) * v for f, v in feats.items()))
                            for path, feats in row.cands)  # fmt: skip
    return sorted(totals, key=lambda p: (-totals[p], p))


def evaluate(rows: Sequence[Row], weights: dict[str, float]) -> dict[str, float]:
    """File Acc@1/5 and MRR (percent, MRR as a fraction) of ``weights`` over ``rows``."""
    acc1 = acc5 = mrr = 0.0
    for row in rows:
        files = ranked_files(row, weights)
        acc1 += metrics.file_accuracy(files, row.gold, 1)
        acc5 += metrics.file_accuracy(files, row.gold, 5)
        mrr += metrics.reciprocal_rank(files, row.gold)
    n = max(1, len(rows))
    return {"acc@1": 100 * acc1 / n, "acc@5": 100 * acc5 / n, "mrr": mrr / n}


def objective(m: dict[str, float]) -> float:
    """What the ascent maximises: MRR and Acc@5 alike (both in [0, 1])."""
    return m["mrr"] + m["acc@5"] / 100


def fit(rows: Sequence[Row], start: dict[str, float], rounds: int) -> dict[str, float]:
    """Coordinate ascent from ``start``: each weight in turn takes the grid value that
    raises the objective most (a strict gain only, so ties keep the current value)."""
    weights = dict(start)
    best = objective(evaluate(rows, weights))
    for _ in range(rounds):
        moved = False
        for name in sorted(weights):
            current = weights[name]
            options = [current * s for s in _STEPS] if current else list(_FROM_ZERO)
            for value in options:
                trial = {**weights, name: round(value, 4)}
                got = objective(evaluate(rows, trial))
                if got > best + 1e-9:
                    best, weights, moved = got, trial, True
        if not moved:
            break
    return weights


def _show(label: str, m: dict[str, float]) -> str:
    return f"{label}: acc@1 {m['acc@1']:.1f}  acc@5 {m['acc@5']:.1f}  mrr {m['mrr']:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("results", type=Path, help="results.jsonl of an eval.swebench --dump run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--folds", type=int, choices=(1, 2), default=2)
    args = parser.parse_args(argv)
    rows = load(args.results)
    if not rows:
        print(f"no dumped candidates in {args.results}: run eval.swebench with --dump",
              file=sys.stderr)  # fmt: skip
        return 2
    start = dict(RerankWeights().items())
    print(f"{len(rows)} instances with candidates")
    print(_show("defaults, all rows", evaluate(rows, start)))
    if args.folds == 2:
        halves = (rows[0::2], rows[1::2])
        for i, (train, held) in enumerate((halves, halves[::-1]), start=1):
            fitted = fit(train, start, args.rounds)
            print(f"fold {i}: " + _show("defaults, other half", evaluate(held, start)))
            print(f"fold {i}: " + _show("fitted here, other half", evaluate(held, fitted)))
    fitted = fit(rows, start, args.rounds)
    print(_show("fitted on all rows (in-sample)", evaluate(rows, fitted)))
    changed = {k: v for k, v in fitted.items() if v != start[k]}
    print("changed weights: " + json.dumps(changed, sort_keys=True))
    print("variant for eval.tune: " + ",".join(f"weights.{k}={v}" for k, v in changed.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
