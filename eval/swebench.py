"""SWE-bench localisation and budgeted context recall, with a BM25 baseline beside it.

    python -m eval.swebench --data ../shared/eval/swebench_dev.jsonl --repos DIR --out DIR \\
        [--instances ID,ID|GLOB] [--limit N] [--retriever context|hybrid|bm25|dense] \\
        [--budgets 4000,8000,16000] [--compare PREVIOUS_OUT] [--no-baseline]

For each instance the tree at ``base_commit`` is materialised with ``git archive`` into a
temporary folder (the repositories are never written to), indexed with cortex's own
pipeline (the vector cache is shared by every instance: ``OUT/cache``), and asked with the
problem statement. Results go to ``OUT/results.jsonl`` one row per instance, appended as
each finishes, so an interrupted run continues where it stopped; ``OUT/report.md`` and
``OUT/recall_vs_budget.png`` are written at the end.

Repository naming rule (``--repos DIR``): for ``owner/name`` the first that exists of
``DIR/owner+name/repo`` (what the workplace's fetch tool makes), ``DIR/owner+name``,
``DIR/owner__name.git``, ``DIR/owner__name``, ``DIR/name.git``, ``DIR/name``; each a bare
git directory or a clone.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import Config, SearchHit, Workspace, rank_files
from eval import metrics
from eval.baseline_bm25 import Bm25Files
from eval.metrics import Section

__all__ = ["Instance", "evaluate_instance", "find_git_dir", "load_instances", "main"]

DEFAULT_BUDGETS = (4000, 8000, 16000)
RANK_DEPTH = 100  # sections retrieved per query: enough for file Acc@10 and recall@20
SNIPPET_OVERHEAD = 24  # tokens a packed section's header costs ([n] title, source, lines)
RESULTS = "results.jsonl"


@dataclass(frozen=True, slots=True)
class Instance:
    """One SWE-bench task, reduced to what the harness uses."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    gold_files: tuple[str, ...]
    gold_functions: tuple[str, ...]
    agentless_class: dict[str, str] | None


def load_instances(
    path: Path, select: Sequence[str] = (), limit: int | None = None
) -> list[Instance]:
    """Instances from a JSONL file, filtered by ids or globs, in (repo, id) order."""
    rows = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        if select and not any(fnmatch.fnmatchcase(raw["instance_id"], s) for s in select):
            continue
        rows.append(
            Instance(
                instance_id=raw["instance_id"],
                repo=raw["repo"],
                base_commit=raw["base_commit"],
                problem_statement=raw["problem_statement"],
                gold_files=tuple(raw.get("gold_files") or ()),
                gold_functions=tuple(raw.get("gold_functions") or ()),
                agentless_class=raw.get("agentless_class"),
            )
        )
    rows.sort(key=lambda r: (r.repo, r.instance_id))
    return rows[:limit] if limit else rows


def find_git_dir(repos: Path, repo: str) -> Path:
    """The git directory for ``owner/name`` under ``repos`` (naming rule in the module doc)."""
    owner, _, name = repo.partition("/")
    candidates = [
        repos / f"{owner}+{name}" / "repo",
        repos / f"{owner}+{name}",
        repos / f"{owner}__{name}.git",
        repos / f"{owner}__{name}",
        repos / f"{name}.git",
        repos / name,
    ]
    for candidate in candidates:
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no git directory for {repo} under {repos} (tried {tried})")


def materialise(git_dir: Path, commit: str, dest: Path) -> int:
    """Write the tree of ``commit`` into ``dest`` without touching ``git_dir``.

    Returns how many blobs were missing from the git directory (a partial mirror may lack
    its largest files): ``git archive`` refuses such a tree, so it is then written blob by
    blob with ``git cat-file --batch``, leaving the missing ones out.
    """
    dest.mkdir(parents=True, exist_ok=True)
    gd = f"--git-dir={_git_dir_of(git_dir)}"
    archive = subprocess.Popen(
        ["git", gd, "archive", "--format=tar", commit],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert archive.stdout is not None
    extract = subprocess.run(
        ["tar", "-x", "-C", str(dest)],
        stdin=archive.stdout,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    archive.stdout.close()
    if archive.wait() == 0 and extract.returncode == 0:
        return 0
    listing = subprocess.run(
        ["git", gd, "ls-tree", "-r", "-z", commit], capture_output=True, check=True
    ).stdout
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        info, _, raw_path = record.partition(b"\t")
        mode, kind, sha = info.split()
        if kind == b"blob" and mode != b"120000":
            entries.append((sha.decode(), os.fsdecode(raw_path)))
    batch = subprocess.run(
        ["git", gd, "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha, _ in entries).encode(),
        capture_output=True,
        check=True,
    ).stdout
    missing, pos = 0, 0
    for _sha, rel in entries:
        end = batch.index(b"\n", pos)
        header = batch[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[pos : pos + size])
        pos += size + 1  # the blob, then a newline
    return missing


def _git_dir_of(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def _section(hit_chunk: Any) -> Section:
    return Section(
        hit_chunk.path,
        hit_chunk.symbol,
        hit_chunk.span.start_line,
        hit_chunk.span.end_line,
        hit_chunk.tokens,
    )


def _pack_sections(sections: Sequence[Section], budget: int) -> list[Section]:
    """Greedy packing of ranked sections (stands in until build_context packs for us)."""
    packed, used = [], 0
    for s in sections:
        cost = s.tokens + SNIPPET_OVERHEAD
        if used + cost <= budget:
            packed.append(s)
            used += cost
    return packed


def _ask_context(
    ws: Workspace,
    inst: Instance,
    budgets: Sequence[int],
    packs: dict[int, tuple[list[str], list[Section], int]],
) -> tuple[list[str], list[Section], float]:
    """Rankings from build_context's reranked candidates; packs from its citations."""
    times = []
    ranked: list[Any] = []
    # A planner passes a short goal (pinned verbatim in the prompt) and a query: here the
    # issue's title and its whole text. The query steers retrieval but is not rendered.
    title = next((ln.strip() for ln in inst.problem_statement.splitlines() if ln.strip()), "")
    for i, budget in enumerate(budgets):
        explain: list[Any] = []
        start = time.perf_counter()
        pack = ws.build_context(
            title[:500], inst.problem_statement, budget_tokens=budget, explain=explain
        )
        times.append((time.perf_counter() - start) * 1000)
        if i == 0:
            ranked = explain
        packed = [
            Section(s.source_uri.split("#")[0], s.symbol, s.span.start_line, s.span.end_line,
                    s.approx_tokens)
            for s in pack.citations
        ]  # fmt: skip
        packs[budget] = (_files_in_order(packed), packed, pack.tokens_used)
    sections = [_section(s.chunk) for s in ranked[:RANK_DEPTH]]
    return rank_files(ranked), sections, round(sorted(times)[len(times) // 2], 2)


def _files_in_order(sections: Sequence[Section]) -> list[str]:
    return list(dict.fromkeys(s.path for s in sections))


def _score(
    inst: Instance,
    files: Sequence[str],
    sections: Sequence[Section],
    packs: dict[int, tuple[list[str], list[Section], int]],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"acc@{k}": metrics.file_accuracy(files, inst.gold_files, k) for k in metrics.FILE_KS
    }
    out["mrr"] = metrics.reciprocal_rank(files, inst.gold_files)
    for k in metrics.FUNCTION_KS:
        out[f"func@{k}"] = metrics.function_recall(sections, inst.gold_functions, k)
    for budget, (packed_files, packed_sections, used) in packs.items():
        present = set(packed_files)
        out[f"hit@{budget}"] = all(g in present for g in inst.gold_files)
        out[f"fcov@{budget}"] = metrics.gold_function_coverage(packed_sections, inst.gold_functions)
        out[f"tokens@{budget}"] = used
    return out


def evaluate_instance(
    inst: Instance,
    git_dir: Path,
    *,
    config: Config,
    mode: str,
    budgets: Sequence[int],
    baseline: bool,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Index the instance's tree, ask, and score ours (and the baseline).

    With ``workdir``, the tree and its index are kept in ``workdir/<instance_id>`` and
    reused by later runs (re-indexing an unchanged tree is incremental: nothing is redone),
    which makes tuning loops cheap; otherwise both live in a temporary folder.
    """
    row: dict[str, Any] = {
        "instance_id": inst.instance_id,
        "repo": inst.repo,
        "gold_files": list(inst.gold_files),
        "gold_functions": list(inst.gold_functions),
        "agentless_class": inst.agentless_class,
    }
    with tempfile.TemporaryDirectory(prefix="cortex-swe-") as scratch:
        tmp = workdir / inst.instance_id if workdir is not None else Path(scratch)
        tree = tmp / "tree"
        done_marker = tmp / "materialised.json"
        if done_marker.exists():
            row["missing_blobs"] = json.loads(done_marker.read_text())["missing_blobs"]
        else:
            if tree.exists():
                shutil.rmtree(tree)  # an interrupted materialisation: start over
            row["missing_blobs"] = materialise(git_dir, inst.base_commit, tree)
            done_marker.write_text(json.dumps({"missing_blobs": row["missing_blobs"]}))
        cfg = config.with_(state_dir=str(tmp / "state"))
        packs: dict[int, tuple[list[str], list[Section], int]] = {}
        with Workspace.open(tree, cfg) as ws:
            start = time.perf_counter()
            report = ws.index()
            row["index_s"] = round(time.perf_counter() - start, 3)
            row["chunks"] = report.chunks
            if mode == "context":
                files, sections, row["query_ms"] = _ask_context(ws, inst, budgets, packs)
            else:
                start = time.perf_counter()
                hits: list[SearchHit] = ws.search(inst.problem_statement, mode=mode, k=RANK_DEPTH)
                row["query_ms"] = round((time.perf_counter() - start) * 1000, 2)
                sections = [_section(h.chunk) for h in hits]
                files = _files_in_order(sections)
                for budget in budgets:
                    packed = _pack_sections(sections, budget)
                    used = sum(s.tokens + SNIPPET_OVERHEAD for s in packed)
                    packs[budget] = (_files_in_order(packed), packed, used)
        row["ours"] = _score(inst, files, sections, packs)
        row["ours"]["top_files"] = files[:10]
        if baseline:
            start = time.perf_counter()
            bm25 = Bm25Files(tree)
            ranked = bm25.rank(inst.problem_statement)
            base_packs: dict[int, tuple[list[str], list[Section], int]] = {}
            for budget in budgets:
                whole = bm25.pack(ranked, budget)
                # A whole file holds every function in it: one pseudo-section per gold one.
                covered = [
                    Section(g.partition(":")[0], g.partition(":")[2], 0, 0, 0)
                    for g in inst.gold_functions
                    if g.partition(":")[0] in {f.path for f in whole}
                ]
                base_packs[budget] = (
                    [f.path for f in whole],
                    covered,
                    sum(f.tokens for f in whole),
                )
            row["baseline"] = _score(inst, ranked, [], base_packs)
            for k in metrics.FUNCTION_KS:
                row["baseline"][f"func@{k}"] = None  # files, not sections: not comparable
            row["baseline"]["top_files"] = ranked[:10]
            row["baseline_s"] = round(time.perf_counter() - start, 3)
    return row


def _done(out: Path) -> dict[str, dict[str, Any]]:
    path = out / RESULTS
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["instance_id"]] = row
    return rows


def _check_run(out: Path, settings: dict[str, Any]) -> None:
    """Refuse to resume a run made with other settings (its rows would not compare)."""
    path = out / "run.json"
    if path.exists():
        previous = json.loads(path.read_text("utf-8"))
        if previous != settings:
            raise SystemExit(
                f"{out} holds a run with other settings ({previous}); use another --out"
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n", "utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval/swebench_dev.jsonl"))
    parser.add_argument("--repos", type=Path, required=True, help="where the git dirs are")
    parser.add_argument("--out", type=Path, required=True, help="results folder")
    parser.add_argument("--instances", default="", help="comma-separated ids or globs")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--retriever", default="context", choices=["context", "hybrid", "bm25", "dense"]
    )
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)))
    parser.add_argument("--dense", default=None, help="dense model (default: the config's)")
    parser.add_argument("--compare", type=Path, default=None, help="a previous --out folder")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep trees and indexes here for reuse"
    )
    args = parser.parse_args(argv)

    from eval.report import compare_runs, write_report

    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    select = [s.strip() for s in args.instances.split(",") if s.strip()]
    instances = load_instances(args.data, select, args.limit)
    # One vector cache for the whole run (with --workdir, for every run over those trees).
    cache = (args.workdir or args.out) / "cache" / "embeddings.sqlite"
    config = Config.from_env(embedding_cache=str(cache.resolve()), dense_model=args.dense)
    settings = {
        "retriever": args.retriever,
        "budgets": budgets,
        "dense_model": config.dense_model,
        "max_section_tokens": config.max_section_tokens,
        "baseline": not args.no_baseline,
    }
    _check_run(args.out, settings)
    done = _done(args.out)
    started = time.perf_counter()
    with (args.out / RESULTS).open("a", encoding="utf-8") as results:
        for n, inst in enumerate(instances, start=1):
            if inst.instance_id in done:
                continue
            t0 = time.perf_counter()
            try:
                row = evaluate_instance(
                    inst,
                    find_git_dir(args.repos, inst.repo),
                    config=config,
                    mode=args.retriever,
                    budgets=budgets,
                    baseline=not args.no_baseline,
                    workdir=args.workdir,
                )
            except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
                # One broken checkout must not end a long run; it is reported, not scored.
                print(f"[{n}/{len(instances)}] {inst.instance_id}: ERROR {exc}", flush=True)
                continue
            row["wall_s"] = round(time.perf_counter() - t0, 2)
            results.write(json.dumps(row, sort_keys=True) + "\n")
            results.flush()
            os.fsync(results.fileno())
            done[inst.instance_id] = row
            ours = row["ours"]
            print(
                f"[{n}/{len(instances)}] {inst.instance_id}: acc@1 {int(ours['acc@1'])} "
                f"acc@5 {int(ours['acc@5'])} hit@{budgets[0]} {int(ours[f'hit@{budgets[0]}'])} "
                f"({row['wall_s']:.0f} s)",
                flush=True,
            )
    rows = [done[i.instance_id] for i in instances if i.instance_id in done]
    summary = write_report(args.out, rows, budgets, settings, time.perf_counter() - started)
    print((args.out / "report.md").read_text("utf-8"))
    if args.compare is not None:
        print(compare_runs(args.compare, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
