"""Fit the file model (``engine.retrieval``'s learned file ranking) on dumped candidates of
the training split; never on dev.

    python -m eval.swebench --data ../shared/eval/swebench_train.jsonl --repos DIR \\
        --out TRAIN --budgets 4000 --no-baseline --dump
    python -m eval.fit_files TRAIN/results.jsonl [MORE/results.jsonl ...] [--C 10] \\
        [--check DEV/results.jsonl ...] \\
        [--write engine/retrieval/data/file_model.json]

Each dumped candidate carries its rerank feature values; its score is the default weights'
sum, exactly as the rerank computes it, and each request's files get the aggregates of
``engine.retrieval.file_table``. A logistic regression (scikit-learn, L2, ``--C``) learns
which files are gold. Printed: the two halves of the rows (even / odd instances), each
scored by the other half's fit, against the summed ranking; the fit on all rows; and, with
``--check``, other dumps (dev, the multilingual split) scored by that fit, for choosing,
never for fitting. ``--write`` saves the fit where the engine reads it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from engine import RerankWeights
from engine.retrieval import FileModel, file_table
from eval import metrics
from eval.fit_weights import Row, load, ranked_files

_KS = (1, 5, 10)
_ROUND = 6  # decimals kept in the written model: small diffs, the same ranking


def features() -> tuple[str, ...]:
    """The rerank features the model reads: those the default weights use."""
    return tuple(name for name, weight in RerankWeights().items() if weight)


def _table(row: Row, names: Sequence[str]) -> tuple[list[str], np.ndarray]:
    weights = dict(RerankWeights().items())
    rows = [(path, sum(weights.get(f, 0.0) * v for f, v in feats.items()), feats)
            for path, feats in row.cands]  # fmt: skip
    return file_table(rows, names)


def fit(rows: Sequence[Row], c: float, note: str = "") -> FileModel:
    """The model fitted on ``rows`` (every candidate file of each, gold or not); ``note``
    says on what, for the record."""
    names = features()
    tables = [_table(r, names) for r in rows]
    x = np.vstack([t for _, t in tables])
    y = np.concatenate([[p in r.gold for p in paths]
                        for r, (paths, _) in zip(rows, tables, strict=True)])  # fmt: skip
    if y.all() or not y.any():
        raise SystemExit("the rows need gold and other candidate files to fit on")
    lr = LogisticRegression(C=c, max_iter=5000).fit(x, y)
    how = f"eval.fit_files: logistic regression, C={c}, {len(rows)} instances" + (
        f" ({note})" if note else "")
    return FileModel(names, tuple(round(float(v), _ROUND) for v in lr.coef_[0]),
                     round(float(lr.intercept_[0]), _ROUND), how)  # fmt: skip


def learned_files(row: Row, model: FileModel) -> list[str]:
    """The row's files by the model, ties by path."""
    paths, table = _table(row, model.features)
    logits = model.logits(table)
    return [paths[i] for i in sorted(range(len(paths)), key=lambda i: (-logits[i], paths[i]))]


def evaluate(rows: Sequence[Row], model: FileModel | None) -> dict[str, float]:
    """File Acc@1/5/10 (percent) and MRR of the model (None: the summed ranking)."""
    start = dict(RerankWeights().items())
    got = {f"acc@{k}": 0.0 for k in _KS} | {"mrr": 0.0}
    for row in rows:
        files = ranked_files(row, start) if model is None else learned_files(row, model)
        for k in _KS:
            got[f"acc@{k}"] += metrics.file_accuracy(files, row.gold, k)
        got["mrr"] += metrics.reciprocal_rank(files, row.gold)
    n = max(1, len(rows))
    return {k: (v / n if k == "mrr" else 100 * v / n) for k, v in got.items()}


def _show(label: str, m: dict[str, float]) -> str:
    accs = "  ".join(f"acc@{k} {m[f'acc@{k}']:5.1f}" for k in _KS)
    return f"{label:<34} {accs}  mrr {m['mrr']:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+",
                        help="results.jsonl of eval.swebench --dump (training; several are "
                             "read as one set)")  # fmt: skip
    parser.add_argument("--C", type=float, default=10.0,
                        help="inverse L2 strength (default 10: the shipped model's)")
    parser.add_argument("--check", type=Path, nargs="*", default=[],
                        help="other dumps to score with the fit (dev: to choose, never to fit)")
    parser.add_argument("--write", type=Path, help="save the fit on all rows here (JSON)")
    parser.add_argument("--note", default="", help="what the rows are, kept in the model")
    args = parser.parse_args(argv)
    rows = [row for path in args.results for row in load(path)]
    if len(rows) < 2:
        where = ", ".join(str(p) for p in args.results)
        print(f"need dumped candidates of 2 or more instances in {where}: "
              "run eval.swebench with --dump", file=sys.stderr)  # fmt: skip
        return 2
    print(f"{len(rows)} instances with candidates; features: {', '.join(features())}")
    halves = (rows[0::2], rows[1::2])
    for i, (train, held) in enumerate((halves, halves[::-1]), start=1):
        print(_show(f"fold {i}: summed, other half", evaluate(held, None)))
        print(_show(f"fold {i}: fitted here, other half", evaluate(held, fit(train, args.C))))
    model = fit(rows, args.C, args.note)
    print(_show("summed, all rows", evaluate(rows, None)))
    print(_show("fitted, all rows (in-sample)", evaluate(rows, model)))
    for path in args.check:
        other = load(path)
        print(f"{path} ({len(other)} instances):")
        print(_show("  summed", evaluate(other, None)))
        print(_show("  fitted on the training rows", evaluate(other, model)))
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(model.to_json(), encoding="utf-8")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
