"""Aggregate per-instance rows into tables, a plot, and deltas against an earlier run.

    python -m eval.report OUT [--compare PREVIOUS_OUT]

rebuilds ``OUT/report.md``, ``OUT/summary.json`` and the plot from ``OUT/results.jsonl``
and ``OUT/run.json`` (an ``eval.swebench`` run, finished or not), and with ``--compare``
prints the deltas against another run over the instances both scored."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.metrics import FILE_KS, FUNCTION_KS, mean

__all__ = ["aggregate", "compare_runs", "main", "write_report"]

_SIDES = ("ours", "baseline")


def _metric_names(budgets: Sequence[int]) -> list[str]:
    names = [f"acc@{k}" for k in FILE_KS] + ["mrr"] + [f"func@{k}" for k in FUNCTION_KS]
    names.append("pool")
    for b in budgets:
        names += [f"hit@{b}", f"fcov@{b}", f"gold@{b}", f"tokens@{b}"]
    return names


def aggregate(rows: Sequence[dict[str, Any]], budgets: Sequence[int]) -> dict[str, Any]:
    """Means of every metric for each side, over ``rows``."""
    out: dict[str, Any] = {"n": len(rows)}
    for side in _SIDES:
        present = [r[side] for r in rows if side in r]
        if present:
            out[side] = {m: mean(p.get(m) for p in present) for m in _metric_names(budgets)}
    return out


def _groups(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per repository; per language, when there are several; per number of gold files
    (acc@k needs every one of them in the top k, so a fix of three files is a harder
    instance than a fix of one; SWE-bench Lite, where published rankers are measured, has
    only fixes of one file); per split (``lite``, ``verified``) when the data says; per
    Agentless label."""
    by: dict[str, dict[str, list[dict[str, Any]]]] = {"repo": {}}
    languages = {row.get("language", "python") for row in rows}
    if len(languages) > 1:
        by["language"] = {}
    by["gold files"] = {}
    if any(row.get("splits") for row in rows):
        by["split"] = {}
    for row in rows:
        by["repo"].setdefault(row["repo"], []).append(row)
        if "language" in by:
            by["language"].setdefault(row.get("language", "python"), []).append(row)
        count = len(row.get("gold_files") or ())
        by["gold files"].setdefault(_gold_count(count), []).append(row)
        for split in row.get("splits") or ():
            by["split"].setdefault(str(split), []).append(row)
        for key, value in sorted((row.get("agentless_class") or {}).items()):
            by.setdefault(f"agentless: {key}", {}).setdefault(str(value), []).append(row)
    return by


def _gold_count(count: int) -> str:
    return {1: "1 file", 2: "2 files"}.get(count, "3+ files" if count > 2 else "none")


def _fmt(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if metric.startswith("tokens"):
        return f"{value:,.0f}"
    return f"{value:.3f}" if metric == "mrr" else f"{100 * value:.1f}"


def _table(title: str, groups: dict[str, list[dict[str, Any]]], columns: list[str],
           budgets: Sequence[int]) -> list[str]:  # fmt: skip
    lines = [f"### {title}", "", "| group | n | side | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]  # fmt: skip
    for name, members in sorted(groups.items()):
        agg = aggregate(members, budgets)
        for side in _SIDES:
            if side in agg:
                cells = " | ".join(_fmt(agg[side][c], c) for c in columns)
                lines.append(f"| {name} | {agg['n']} | {side} | {cells} |")
    return [*lines, ""]


def write_report(
    out: Path,
    rows: Sequence[dict[str, Any]],
    budgets: Sequence[int],
    settings: dict[str, Any],
    wall_s: float,
    coverage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``summary.json``, ``report.md`` and the recall-vs-budget plot; return the summary.

    ``coverage``: how many instances were requested, how many scored, which failed (id ->
    what went wrong) and which have no gold file; the figures are over the scored ones,
    and the report says so first."""
    coverage = coverage or {"requested": len(rows), "scored": len(rows), "failed": {},
                            "no_gold": []}  # fmt: skip
    summary = {"settings": settings, "overall": aggregate(rows, budgets), "groups": {},
               "coverage": coverage}  # fmt: skip
    for group, members in _groups(rows).items():
        summary["groups"][group] = {k: aggregate(v, budgets) for k, v in members.items()}
    index_s = [r["index_s"] for r in rows if "index_s" in r]
    query_ms = sorted(r["query_ms"] for r in rows if "query_ms" in r)
    summary["timing"] = {
        "instances": len(rows),
        "wall_s_this_session": round(wall_s, 1),
        "wall_s_sum_of_instances": round(sum(r.get("wall_s", 0.0) for r in rows), 1),
        "index_s_median": round(statistics.median(index_s), 2) if index_s else None,
        "query_ms_p50": round(statistics.median(query_ms), 1) if query_ms else None,
        "query_ms_p95": round(query_ms[round(0.95 * (len(query_ms) - 1))], 1) if query_ms else None,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")

    file_cols = [f"acc@{k}" for k in FILE_KS] + ["mrr"] + [f"func@{k}" for k in FUNCTION_KS]
    file_cols.append("pool")
    budget_cols = [f"{m}@{b}" for b in budgets for m in ("hit", "fcov", "gold", "tokens")]
    lines = [
        "# SWE-bench localisation report",
        "",
        f"Settings: `{json.dumps(settings, sort_keys=True)}`. Percentages except MRR; "
        "acc@k = every gold file in the top k files; func@k = gold functions among the top k "
        "sections; pool = every gold file among the reranked candidates (the ceiling no "
        "budget passes); hit@B = every gold file has a section in the B-token context; "
        "fcov@B = share of gold functions in it; gold@B = share of its evidence tokens from "
        "gold files. The baseline is file-level BM25 packing whole files.",
        "",
        f"Timing: `{json.dumps(summary['timing'], sort_keys=True)}`",
        "",
        *_coverage_lines(coverage, rows),
    ]
    everyone = {"all": list(rows)}
    lines += _table("Localisation, overall", everyone, file_cols, budgets)
    lines += _table("Budgeted context, overall", everyone, budget_cols, budgets)
    for group, members in _groups(rows).items():
        lines += _table(f"Localisation by {group}", members, file_cols, budgets)
        lines += _table(f"Budgeted context by {group}", members, budget_cols, budgets)
    (out / "report.md").write_text("\n".join(lines) + "\n", "utf-8")
    _plot(out / "recall_vs_budget.png", summary["overall"], budgets)
    return summary


def _coverage_lines(coverage: dict[str, Any], rows: Sequence[dict[str, Any]]) -> list[str]:
    """What the figures cover: instances scored of those requested, the failed ones with
    why, those without gold, and gold files the trees lack."""
    failed: dict[str, str] = coverage.get("failed") or {}
    no_gold: list[str] = coverage.get("no_gold") or []
    lines = [f"Instances: {coverage['scored']} scored of {coverage['requested']} requested"
             + (f"; **{len(failed)} failed** (not in the figures)" if failed else "")
             + (f"; {len(no_gold)} without a gold file (not scored)" if no_gold else ""),
             ""]  # fmt: skip
    lines += [f"- FAILED {name}: {why}" for name, why in sorted(failed.items())]
    if no_gold:
        lines.append(f"- no gold file: {', '.join(no_gold)}")
    absent = [f"{r['instance_id']} ({', '.join(r['gold_missing'])})"
              for r in rows if r.get("gold_missing")]  # fmt: skip
    if absent:
        lines.append(f"- gold files not in the tree at the base commit (never findable): "
                     f"{'; '.join(absent)}")  # fmt: skip
    return [*lines, ""] if len(lines) > 2 else lines


def _plot(path: Path, overall: dict[str, Any], budgets: Sequence[int]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path.with_suffix(".txt").write_text("matplotlib is not installed: no plot\n")
        return
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for side, style in (("ours", "o-"), ("baseline", "s--")):
        if side not in overall:
            continue
        for metric, label in (("hit", "gold-file hit"), ("fcov", "gold-function coverage")):
            ys = [100 * (overall[side].get(f"{metric}@{b}") or 0.0) for b in budgets]
            ax.plot(budgets, ys, style, label=f"{side}: {label}")
    ax.set_xlabel("context budget (tokens)")
    ax.set_ylabel("% of instances / functions")
    ax.set_ylim(0, 100)
    ax.set_xticks(list(budgets))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Recall against budget (n = {overall['n']})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def compare_runs(previous: Path, rows: Sequence[dict[str, Any]], budgets: Sequence[int],
                 summary: dict[str, Any] | None = None) -> str:  # fmt: skip
    """Deltas of this run's ``rows`` against ``previous`` (a result folder), as text, over
    the instances both scored (the rows of each are in its ``results.jsonl``): a changed
    figure is a changed ranking, not a changed set. Says how many are in one run only,
    and which instances moved on acc@1, acc@5 or hit at the first budget."""
    del summary  # the rows are what is compared
    before_rows: dict[str, dict[str, Any]] = {}
    for line in (previous / "results.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            before_rows[row["instance_id"]] = row
    now = {r["instance_id"]: r for r in rows}
    common = sorted(set(now) & set(before_rows))
    old = aggregate([before_rows[i] for i in common], budgets)
    new = aggregate([now[i] for i in common], budgets)
    only_new, only_old = len(set(now) - set(before_rows)), len(set(before_rows) - set(now))
    lines = [f"Compared with {previous} over the {len(common)} instances both scored"
             + (f" ({only_new} only in this run, {only_old} only in that one)"
                if only_new or only_old else "") + ":"]  # fmt: skip
    for side in _SIDES:
        if side not in old or side not in new:
            continue
        for metric, value in new[side].items():
            before = old[side].get(metric)
            if value is None or before is None:
                continue
            scale = 1.0 if metric.startswith("tokens") or metric == "mrr" else 100.0
            delta = (value - before) * scale
            flag = "  <-- worse" if delta < 0 and not metric.startswith("tokens") else ""
            digits = 3 if metric == "mrr" else 2
            lines.append(f"  {side:<8} {metric:<12} {before * scale:9.{digits}f} -> "
                         f"{value * scale:9.{digits}f}  ({delta:+.{digits}f}){flag}")  # fmt: skip
    for metric in ("acc@1", "acc@5", f"hit@{budgets[0]}"):
        was = {i: bool(before_rows[i]["ours"].get(metric)) for i in common}
        gained = [i for i in common if bool(now[i]["ours"].get(metric)) and not was[i]]
        lost = [i for i in common if was[i] and not now[i]["ours"].get(metric)]
        if gained or lost:
            lines.append(f"  ours {metric}: gained {', '.join(gained) or '-'}; "
                         f"lost {', '.join(lost) or '-'}")  # fmt: skip
    return "\n".join(lines)


def timing_summary(rows: Sequence[dict[str, Any]], wall_s: float) -> str:
    """Wall and index time of the run, overall and per repository."""
    index_s = [r["index_s"] for r in rows if "index_s" in r]
    lines = [
        f"Timing: {wall_s:.0f} s elapsed in this session; over {len(rows)} instances, "
        f"sum of wall_s {sum(r.get('wall_s', 0.0) for r in rows):.0f} s, "
        f"sum of index_s {sum(index_s):.0f} s"
    ]
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_repo.setdefault(row["repo"], []).append(row)
    for repo, members in sorted(by_repo.items()):
        times = [r["index_s"] for r in members if "index_s" in r]
        if not times:
            continue
        bases = [f"{r['instance_id']} {r['index_s']:.1f} s" for r in members if r.get("base_build")]
        lines.append(
            f"  {repo}: {len(members)} instances, index_s median {statistics.median(times):.2f} "
            f"sum {sum(times):.0f} s" + (f"; base built by {', '.join(bases)}" if bases else "")
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m eval.report OUT [--compare PREVIOUS_OUT]`` (see the module doc)."""
    import argparse

    from eval.swebench_runs import RESULTS, done_rows

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("out", type=Path, help="an eval.swebench --out folder")
    parser.add_argument("--compare", type=Path, default=None, help="a previous --out folder")
    args = parser.parse_args(argv)
    for folder in (args.out, args.compare):
        if folder is not None and not (folder / RESULTS).is_file():
            raise SystemExit(f"{folder}: no {RESULTS} there (an eval.swebench --out folder)")
    run = args.out / "run.json"
    if not run.is_file():
        raise SystemExit(f"{args.out}: no run.json (the settings the run was made with)")
    settings = json.loads(run.read_text("utf-8"))
    rows = list(done_rows(args.out).values())
    old = args.out / "summary.json"
    coverage = json.loads(old.read_text("utf-8")).get("coverage") if old.is_file() else None
    if coverage is not None:  # the run's failures, as it recorded them, for the rows now
        coverage = {**coverage, "scored": len(rows)}
    write_report(args.out, rows, settings["budgets"], settings, 0.0, coverage)
    print((args.out / "report.md").read_text("utf-8"))
    if args.compare is not None:
        print(compare_runs(args.compare, rows, settings["budgets"]))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
