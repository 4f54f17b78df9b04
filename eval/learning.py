"""Does ranking learn from outcomes? SWE-bench dev instances, per repository in creation order.

    python -m eval.learning --repos DIR --out DIR [--data JSONL] [--instances ID,GLOB]
        [--repo OWNER/NAME ...] [--limit-per-repo N] [--flip 0.2] [--budget 4000]
        [--workdir DIR]
    python -m eval.learning --summarise OUT/results.jsonl [OUT2/results.jsonl ...]

Each repository's instances are taken in creation order (by pull-request number); each
instance's tree is swapped in under one path and indexed as an overlay (one base per
repository). Three arms read the same index, each with a ledger of its own:

- ``none``: the ledger off, so nothing is ever learned (what cortex does without feedback);
- ``learn``: after each instance, feedback citing the packed snippets from gold files as a
  success (an oracle agent that used the right evidence);
- ``flip``: the same, with ``--flip`` of the outcomes (drawn per instance, seeded) turned
  into failure/wrong_assumption.

Reported on the second half of each repository's sequence (where earlier outcomes can
help): file Acc@1/5 (``search_files``) and hit@budget (every gold file among the packed
snippets of ``build_context``). The outcomes tier is scored in the ``learn`` arm, before the
instance's own feedback: whether the earlier instance it ranks first (top 3, and the rank
of the first) edited one of this instance's gold files, against BM25 over the earlier
instances' issue texts (every earlier instance, feedback or not), beside the ceiling of
each (the share of instances that have such an earlier instance at all: no ranking's
hit@k or MRR can pass it). Rows go to
``OUT/results.jsonl``, the summary to ``OUT/summary.json`` and stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine import Config, ContextPack, Workspace
from engine.core import uri_path
from eval import metrics
from eval.swebench import RepoOverlays
from eval.swebench_data import (
    DEFAULT_DATA,
    Instance,
    check_workdir,
    find_git_dir,
    load_instances,
)

__all__ = ["bm25_rank", "creation_order", "main", "outcome_scores", "outcomes_ceiling"]

ARMS = ("none", "learn", "flip")
FILES_K = 50  # files ranked per question: enough for Acc@5 and the outcomes tier's match
OUTCOMES_K = 10  # earlier intents the tier ranks for scoring hit@1/3/5 and MRR
OUTCOME_FILES = 20  # the request's best files the tier matches earlier citations against
_NUMBER = re.compile(r"-(\d+)$")
_WORD = re.compile(r"[a-z0-9_]+")


def creation_order(instances: Sequence[Instance]) -> list[Instance]:
    """Instances by pull-request number (the id's suffix), then id."""
    def key(i: Instance) -> tuple[int, str]:
        m = _NUMBER.search(i.instance_id)
        return (int(m.group(1)) if m else 0, i.instance_id)

    return sorted(instances, key=key)


def bm25_rank(query: str, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> list[int]:
    """Indices of ``docs`` by BM25 against ``query`` (best first, ties: later first)."""
    toks = [Counter(_WORD.findall(d.lower())) for d in docs]
    if not toks:
        return []
    n, avg = len(toks), sum(sum(t.values()) for t in toks) / len(toks) or 1.0
    q = set(_WORD.findall(query.lower()))
    df = Counter(w for t in toks for w in q if w in t)
    scores = []
    for t in toks:
        length = sum(t.values())
        s = 0.0
        for w in q:
            if t.get(w):
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * t[w] * (k1 + 1) / (t[w] + k1 * (1 - b + b * length / avg))
        scores.append(s)
    return sorted(range(n), key=lambda i: (-scores[i], -i))


def outcome_scores(ranked_gold: Sequence[set[str]], gold: set[str]) -> dict[str, float]:
    """hit@1/3/5 and reciprocal rank of the first earlier instance sharing a gold file."""
    first = next((r for r, g in enumerate(ranked_gold, 1) if g & gold), None)
    return {"hit@1": float(first == 1), "hit@3": float(first is not None and first <= 3),
            "hit@5": float(first is not None and first <= 5),
            "mrr": 1.0 / first if first else 0.0}  # fmt: skip


def _title(inst: Instance) -> str:
    return next((ln.strip() for ln in inst.problem_statement.splitlines() if ln.strip()), "")[:500]


def _ask(ws: Workspace, inst: Instance, budget: int) -> tuple[dict[str, Any], ContextPack]:
    """Acc@1/5 and hit@budget of one arm on one instance, and its pack."""
    files = [f.path for f in ws.search_files(inst.problem_statement, goal=_title(inst),
                                               k=FILES_K)]  # fmt: skip
    pack = ws.build_context(_title(inst), inst.problem_statement, budget_tokens=budget)
    packed = {uri_path(s.source_uri) for s in pack.citations}
    return {
        "acc@1": metrics.file_accuracy(files, inst.gold_files, 1),
        "acc@5": metrics.file_accuracy(files, inst.gold_files, 5),
        f"hit@{budget}": all(g in packed for g in inst.gold_files),
        # The outcomes tier matches earlier citations against these same files (its first
        # OUTCOME_FILES), so a row holds what re-ranking the tier offline needs.
        "top_files": files[:OUTCOME_FILES],
    }, pack


def _teach(ws: Workspace, inst: Instance, pack: ContextPack,
           flipped: bool) -> tuple[int, list[str]]:  # fmt: skip
    """The oracle's feedback: the packed snippets from gold files, cited; how many, and the
    files they are from (0 and none: no feedback was given)."""
    gold = set(inst.gold_files)
    cited = [s for s in pack.citations if uri_path(s.source_uri) in gold]
    if not cited:
        return 0, []
    ids = [s.id for s in cited]
    if flipped:
        ws.feedback(pack.replay_key, ids, outcome="failure", reason="wrong_assumption")
    else:
        ws.feedback(pack.replay_key, ids, outcome="success")
    return len(ids), sorted({uri_path(s.source_uri) for s in cited})


def _run_repo(repo: str, members: list[Instance], args: argparse.Namespace, home: Path,
              out: Any) -> list[dict[str, Any]]:  # fmt: skip
    git_dir = find_git_dir(args.repos, repo)
    base = Config.from_env().with_(state_dir=str(home / "state"))
    configs = {
        "none": base.with_(ledger=False),
        "learn": base.with_(ledger_path=str(home / "learn.sqlite")),
        "flip": base.with_(ledger_path=str(home / "flip.sqlite")),
    }
    rows: list[dict[str, Any]] = []
    turn_of: dict[str, Instance] = {}
    with RepoOverlays(git_dir, home, config=base, mode="context", budgets=(args.budget,),
                      baseline=False) as trees:  # fmt: skip
        spaces: dict[str, Workspace] = {}
        try:
            for pos, inst in enumerate(members):
                t0 = time.perf_counter()
                trees.swap_in(inst.base_commit)
                for arm in ARMS:
                    if arm not in spaces:
                        spaces[arm] = Workspace.open(trees.tree, configs[arm])
                spaces["none"].index()
                row: dict[str, Any] = {"instance_id": inst.instance_id, "repo": repo,
                                       "pos": pos, "n": len(members),
                                       "second_half": pos >= len(members) // 2,
                                       "gold_files": list(inst.gold_files)}  # fmt: skip
                flipped = random.Random(f"{args.seed}:{inst.instance_id}").random() < args.flip
                row["flipped"] = flipped
                earlier = members[:pos]
                if earlier:
                    gold = set(inst.gold_files)
                    order = bm25_rank(inst.problem_statement,
                                      [e.problem_statement for e in earlier])  # fmt: skip
                    row["outcomes_bm25"] = outcome_scores(
                        [set(earlier[i].gold_files) for i in order[:OUTCOMES_K]], gold)
                    shown = spaces["learn"].outcomes(_title(inst), inst.problem_statement,
                                                     k=OUTCOMES_K)  # fmt: skip
                    ranked = [set(turn_of[p.turn_id].gold_files) for p in shown
                              if p.turn_id in turn_of]  # fmt: skip
                    row["outcomes_ours"] = outcome_scores(ranked, gold)
                    row["outcomes_listed"] = len(ranked)
                for arm in ARMS:
                    ws = spaces[arm]
                    row[arm], pack = _ask(ws, inst, args.budget)
                    if arm == "none":
                        continue
                    turn = ws.journal.find(pack.replay_key)
                    if turn is not None and arm == "learn":
                        turn_of[turn.turn_id] = inst
                    row[arm]["cited"], row[arm]["cited_files"] = _teach(
                        ws, inst, pack, flipped and arm == "flip"
                    )
                row["wall_s"] = round(time.perf_counter() - t0, 1)
                rows.append(row)
                out.write(json.dumps(row, sort_keys=True) + "\n")
                out.flush()
                print(f"[{repo} {pos + 1}/{len(members)}] {inst.instance_id}: "
                      + " ".join(f"{a} {int(row[a]['acc@1'])}/{int(row[a]['acc@5'])}/"
                                 f"{int(row[a][f'hit@{args.budget}'])}" for a in ARMS)
                      + f" ({row['wall_s']} s)", flush=True)  # fmt: skip
        finally:
            for ws in spaces.values():
                ws.close()
    return rows


def summarise(rows: Sequence[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Means over the second halves per arm, and the outcomes tier against BM25."""
    half = [r for r in rows if r["second_half"]]
    out: dict[str, Any] = {"instances": len(rows), "second_half": len(half),
                           "repos": dict(Counter(r["repo"] for r in rows))}  # fmt: skip
    for arm in ARMS:
        out[arm] = {m: round(100 * sum(float(r[arm][m]) for r in half) / max(1, len(half)), 1)
                    for m in ("acc@1", "acc@5", f"hit@{budget}")}  # fmt: skip
    scored = [r for r in rows if "outcomes_ours" in r]
    out["outcomes_scored"] = len(scored)
    for name in ("outcomes_ours", "outcomes_bm25"):
        out[name] = {m: round(sum(r[name][m] for r in scored) / max(1, len(scored)), 3)
                     for m in ("hit@1", "hit@3", "hit@5", "mrr")}  # fmt: skip
    out["outcomes_ceiling"] = outcomes_ceiling(rows)
    return out


def outcomes_ceiling(rows: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """The best hit@k (and MRR) any ranking of earlier intents can reach: the share of
    scored instances with an earlier one that edited one of their gold files, among every
    earlier instance (what BM25 ranks) and among those the tier holds (with feedback, i.e.
    a packed gold snippet was cited). None for rows that do not say what they cited."""
    if any("cited_files" not in r["learn"] for r in rows):
        return None
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_repo.setdefault(r["repo"], []).append(r)
    any_earlier = attested = scored = 0
    for members in by_repo.values():
        members = sorted(members, key=lambda r: r["pos"])
        for pos, r in enumerate(members):
            if "outcomes_ours" not in r:
                continue
            scored += 1
            gold = set(r["gold_files"])
            shared = [e for e in members[:pos] if gold & set(e["gold_files"])]
            any_earlier += bool(shared)
            attested += any(e["learn"]["cited_files"] for e in shared)
    return {"bm25": round(any_earlier / max(1, scored), 3),
            "ours": round(attested / max(1, scored), 3)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repos", type=Path, help="where the git dirs are")
    parser.add_argument("--out", type=Path, help="results folder")
    parser.add_argument("--summarise", type=Path, nargs="+", default=None,
                        help="summarise earlier runs' results.jsonl together")  # fmt: skip
    parser.add_argument("--instances", default="", help="comma-separated ids or globs")
    parser.add_argument("--repo", action="append", default=[], help="only these repositories")
    parser.add_argument("--limit-per-repo", type=int, default=None)
    parser.add_argument("--flip", type=float, default=0.2, help="share of flipped outcomes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--workdir", type=Path, default=None, help="keep trees and indexes")
    args = parser.parse_args(argv)
    if args.summarise:
        done = [json.loads(line) for path in args.summarise
                for line in path.read_text("utf-8").splitlines() if line.strip()]  # fmt: skip
        print(json.dumps(summarise(done, args.budget), indent=2))
        return 0
    if args.repos is None or args.out is None:
        parser.error("--repos and --out are required (or --summarise)")
    select = [s for s in args.instances.split(",") if s]
    instances = load_instances(args.data, select)
    by_repo: dict[str, list[Instance]] = {}
    for inst in instances:
        if not args.repo or inst.repo in args.repo:
            by_repo.setdefault(inst.repo, []).append(inst)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.workdir is not None:
        check_workdir(args.workdir)
    rows: list[dict[str, Any]] = []
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as out, \
            tempfile.TemporaryDirectory(prefix="cortex-learn-") as scratch:  # fmt: skip
        for repo, members in sorted(by_repo.items()):
            ordered = creation_order(members)[: args.limit_per_repo]
            home = (args.workdir or Path(scratch)) / repo.replace("/", "__")
            for stale in ("learn", "flip"):  # each run learns from nothing
                for p in home.glob(f"{stale}.*sqlite*"):
                    p.unlink()
            rows += _run_repo(repo, ordered, args, home, out)
            if args.workdir is None:
                shutil.rmtree(home, ignore_errors=True)
    summary = summarise(rows, args.budget)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
