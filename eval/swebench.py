"""SWE-bench localisation and budgeted context recall, with a BM25 baseline beside it.

    python -m eval.swebench --data ../shared/eval/swebench_dev.jsonl --repos DIR --out DIR \\
        [--instances ID,ID|GLOB] [--limit N] [--retriever context|hybrid|bm25|dense] \\
        [--budgets 4000,8000,16000] [--compare PREVIOUS_OUT] [--no-baseline] \\
        [--workdir DIR] [--no-overlays] [--dump]

For each instance the tree at ``base_commit`` is materialised (every tracked file, as a
checkout holds it; the repositories are never written to), indexed with cortex's own
pipeline, and asked with the problem statement. Results go to ``OUT/results.jsonl``, one
row per instance, appended as each finishes, so an interrupted run continues where it
stopped; ``OUT/report.md`` and
``OUT/recall_vs_budget.png`` are written at the end. The vector cache is shared by every
instance (``OUT/cache``, or ``WORKDIR/cache`` with ``--workdir``).

Overlays (the default): one base index per repository and one overlay per instance, as a
developer switching branches would use them. Each repository gets ``WORK/<owner__name>/``
(``WORK`` is ``--workdir``, else a temporary folder for the run) holding ``tree`` and
``state``. The base is the tree of the instance whose base commit is the median by commit
date; that instance goes first, then the later ones in date order, then the earlier ones
going back in time from the base, so that consecutive trees differ little (an overlay
re-chunks only files whose bytes changed since the previous one). Each instance's tree is
materialised beside ``tree`` and swapped in under the same path, and ``ws.index()``
refreshes the overlay against the base. Rows add ``overlay_files``, ``tombstones`` and
``base_build`` (true for the instance whose index built the base); ``index_s`` is the
refresh (the base build, for that instance). Every row has ``materialise_s`` and
``first_query_ms`` (the first question after indexing, which loads what later ones reuse;
``query_ms`` is the median over the budgets' later calls, the first one's alone when there
is one budget). Resuming without ``--workdir`` first rebuilds
the same base when its instance is already done; with ``--workdir`` the base is kept.

``--no-overlays``: each instance is indexed from scratch in a folder of its own
(``WORKDIR/<instance_id>`` with ``--workdir``, kept and reused by later runs).

Repository naming rule (``--repos DIR``): for ``owner/name`` the first that exists of
``DIR/owner+name/repo`` (what the workplace's fetch tool makes), ``DIR/owner+name``,
``DIR/owner__name.git``, ``DIR/owner__name``, ``DIR/name.git``, ``DIR/name``; each a bare
git directory or a clone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine import Config, CortexError, SearchHit, Workspace, uri_path
from engine.core import MAX_TEXT_BYTES
from eval import metrics
from eval.baseline_bm25 import Bm25Files, source_suffixes
from eval.metrics import Section
from eval.report import timing_summary
from eval.swebench_data import (
    DEFAULT_DATA,
    TREE_FORMAT,
    Instance,
    check_workdir,
    find_git_dir,
    load_instances,
    materialise,
    plan_repository,
)
from eval.swebench_runs import (
    RESULTS,
    Results,
    check_run,
    done_rows,
    drop_changed,
    input_digest,
    parse_budgets,
)
from indexers import CHUNKER_VERSION
from overlays import read_history

__all__ = ["RepoOverlays", "evaluate_instance", "main"]

DEFAULT_BUDGETS = (4000, 8000, 16000)
RANK_DEPTH = 100  # sections retrieved per query: enough for file Acc@10 and recall@20
ALL_FILES = 10_000  # files ranked per query: every file among the reranked candidates (MRR)
SNIPPET_OVERHEAD = 24  # tokens a packed section's header costs ([n] title, source, lines)


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
    dump: list[dict[str, Any]] | None = None,
    pool: set[str] | None = None,
) -> tuple[list[str], list[Section], list[float]]:
    """Rankings from the public search (files with ``search_files``, sections with
    ``search``: the ranking build_context packs from, so what users get is what is
    reported); packs from build_context's citations; the milliseconds of each budget's
    build_context call. ``pool`` receives the files of every reranked candidate."""
    pool = set() if pool is None else pool
    times = []
    # A planner passes a short goal (pinned verbatim in the prompt) and a query: here the
    # issue's title and its whole text. The query steers retrieval but is not rendered.
    query = _query(inst)
    title = next((ln.strip() for ln in query.splitlines() if ln.strip()), "")
    for budget in budgets:
        start = time.perf_counter()
        pack = ws.build_context(title[:500], query, budget_tokens=budget)
        times.append((time.perf_counter() - start) * 1000)
        packed = [
            Section(uri_path(s.source_uri), s.symbol, s.span.start_line,
                    s.span.end_line, s.approx_tokens)
            for s in pack.citations
        ]  # fmt: skip
        packs[budget] = (_files_in_order(packed), packed, pack.tokens_used)
    files = ws.search_files(query, goal=title[:500], k=ALL_FILES)
    hits = ws.search(query, goal=title[:500], k=ALL_FILES)
    if dump is not None:
        dump.extend(_candidate(h) for h in hits)
    pool.update(h.chunk.path for h in hits)
    return [f.path for f in files], [_section(h.chunk) for h in hits[:RANK_DEPTH]], times


def _query(inst: Instance) -> str:
    """The problem statement as a planner may send it: cut to the engine's limit on a
    query (``MAX_TEXT_BYTES``; a real issue with pasted logs can be longer), at a
    character's end."""
    raw = inst.problem_statement.encode("utf-8")
    if len(raw) <= MAX_TEXT_BYTES:
        return inst.problem_statement
    return raw[:MAX_TEXT_BYTES].decode("utf-8", errors="ignore")


def _candidate(hit: SearchHit) -> dict[str, Any]:
    """A reranked candidate as ``--dump`` records it: where, what, each feature's value."""
    c = hit.chunk
    return {
        "path": c.path,
        "symbol": c.symbol,
        "start": c.span.start_line,
        "end": c.span.end_line,
        "tokens": c.tokens,
        "kind": c.kind.value,
        "doc_type": c.doc_type.value,
        "score": hit.score,
        "reason": hit.reason,
        "features": {x.feature: round(x.value, 6) for x in hit.contributions},
    }


def _files_in_order(sections: Sequence[Section]) -> list[str]:
    return list(dict.fromkeys(s.path for s in sections))


def _score(
    inst: Instance,
    files: Sequence[str],
    sections: Sequence[Section],
    packs: dict[int, tuple[list[str], list[Section], int]],
    pool: set[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"acc@{k}": metrics.file_accuracy(files, inst.gold_files, k) for k in metrics.FILE_KS
    }
    out["mrr"] = metrics.reciprocal_rank(files, inst.gold_files)
    # Every gold file among the reranked candidates: the ceiling no budget can pass.
    out["pool"] = None if pool is None else all(g in pool for g in inst.gold_files)
    for k in metrics.FUNCTION_KS:
        out[f"func@{k}"] = metrics.function_recall(sections, inst.gold_functions, k)
    for budget, (packed_files, packed_sections, used) in packs.items():
        present = set(packed_files)
        out[f"hit@{budget}"] = all(g in present for g in inst.gold_files)
        out[f"fcov@{budget}"] = metrics.gold_function_coverage(packed_sections, inst.gold_functions)
        out[f"tokens@{budget}"] = used
        out[f"gold@{budget}"] = metrics.gold_token_share(packed_sections, inst.gold_files)
    return out


def _new_row(inst: Instance) -> dict[str, Any]:
    return {
        "instance_id": inst.instance_id,
        "input": input_digest(inst),
        "repo": inst.repo,
        "language": inst.language,
        "gold_files": list(inst.gold_files),
        "gold_functions": list(inst.gold_functions),
        "agentless_class": inst.agentless_class,
        "splits": list(inst.splits),
    }


def _ask_and_score(
    ws: Workspace,
    tree: Path,
    inst: Instance,
    row: dict[str, Any],
    *,
    mode: str,
    budgets: Sequence[int],
    baseline: bool,
    dump: bool = False,
) -> None:
    """Ask ``ws`` (indexed over ``tree``) and score ours and the baseline into ``row``
    (with ``dump``, also every reranked candidate and its feature values)."""
    packs: dict[int, tuple[list[str], list[Section], int]] = {}
    row["gold_missing"] = [g for g in inst.gold_files if not (tree / g).is_file()]
    if _query(inst) != inst.problem_statement:
        row["query_cut"] = True
    if mode == "context":
        candidates: list[dict[str, Any]] | None = [] if dump else None
        pool: set[str] | None = set()
        files, sections, times = _ask_context(ws, inst, budgets, packs, candidates, pool)
        if candidates is not None:
            row["candidates"] = candidates
            # What each budget's context held, so hit@B and gold@B can be checked too.
            row["packed"] = {str(b): [[s.path, s.start_line, s.end_line, s.tokens]
                                      for s in packs[b][1]] for b in budgets}  # fmt: skip
        # The first question after an index also loads what later ones reuse (reported on
        # its own): with two budgets the middle of all calls would be that first one.
        warm = times[1:] or times
        row["query_ms"] = round(statistics.median(warm), 2)
        row["first_query_ms"] = round(times[0], 2)
    else:
        pool = None  # a single retriever's list is not the reranked pool
        start = time.perf_counter()
        hits: list[SearchHit] = ws.search(_query(inst), mode=mode, k=RANK_DEPTH)
        row["query_ms"] = row["first_query_ms"] = round((time.perf_counter() - start) * 1000, 2)
        sections = [_section(h.chunk) for h in hits]
        files = _files_in_order(sections)
        for budget in budgets:
            packed = _pack_sections(sections, budget)
            used = sum(s.tokens + SNIPPET_OVERHEAD for s in packed)
            packs[budget] = (_files_in_order(packed), packed, used)
    row["ours"] = _score(inst, files, sections, packs, pool)
    row["ours"]["top_files"] = files[:10]
    if baseline:
        start = time.perf_counter()
        bm25 = Bm25Files(tree, suffixes=source_suffixes(inst.language))
        ranked = bm25.rank(inst.problem_statement)
        base_packs: dict[int, tuple[list[str], list[Section], int]] = {}
        gold_share: dict[int, float | None] = {}
        for budget in budgets:
            whole = bm25.pack(ranked, budget)
            # A whole file holds every function in it: one pseudo-section per gold one.
            covered = [
                Section(g.partition(":")[0], g.partition(":")[2], 0, 0, 0)
                for g in inst.gold_functions
                if g.partition(":")[0] in {f.path for f in whole}
            ]
            base_packs[budget] = ([f.path for f in whole], covered, sum(f.tokens for f in whole))
            total = sum(f.tokens for f in whole)
            gold = sum(f.tokens for f in whole if f.path in inst.gold_files)
            gold_share[budget] = gold / total if total else None
        row["baseline"] = _score(inst, ranked, [], base_packs)
        for budget, share in gold_share.items():
            row["baseline"][f"gold@{budget}"] = share
        for k in metrics.FUNCTION_KS:
            row["baseline"][f"func@{k}"] = None  # files, not sections: not comparable
        row["baseline"]["top_files"] = ranked[:10]
        row["baseline_s"] = round(time.perf_counter() - start, 3)


def evaluate_instance(
    inst: Instance,
    git_dir: Path,
    *,
    config: Config,
    mode: str,
    budgets: Sequence[int],
    baseline: bool,
    workdir: Path | None = None,
    dump: bool = False,
) -> dict[str, Any]:
    """Index the instance's tree from scratch, ask, and score ours (and the baseline).

    With ``workdir``, the tree and its index are kept in ``workdir/<instance_id>`` and
    reused by later runs (re-indexing an unchanged tree is incremental: nothing is redone),
    which makes tuning loops cheap; otherwise both live in a temporary folder.
    """
    row = _new_row(inst)
    with tempfile.TemporaryDirectory(prefix="cortex-swe-") as scratch:
        tmp = workdir / inst.instance_id if workdir is not None else Path(scratch)
        tree = tmp / "tree"
        done_marker = tmp / "materialised.json"
        start = time.perf_counter()
        held = json.loads(done_marker.read_text()) if done_marker.exists() else {}
        if held.get("format") == TREE_FORMAT:
            row["missing_blobs"] = held["missing_blobs"]
        else:
            if tree.exists():
                shutil.rmtree(tree)  # an interrupted materialisation, or an older format
            row["missing_blobs"] = materialise(git_dir, inst.base_commit, tree)
            done_marker.write_text(json.dumps({"missing_blobs": row["missing_blobs"],
                                               "format": TREE_FORMAT}))  # fmt: skip
        row["materialise_s"] = round(time.perf_counter() - start, 3)
        cfg = config.with_(state_dir=str(tmp / "state"))
        with Workspace.open(tree, cfg) as ws:
            ws.layers.supply_history(read_history(git_dir, inst.base_commit))  # as overlays do
            start = time.perf_counter()
            report = ws.index()
            row["index_s"] = round(time.perf_counter() - start, 3)
            row["chunks"] = report.chunks
            _ask_and_score(ws, tree, inst, row, mode=mode, budgets=budgets, baseline=baseline,
                           dump=dump)  # fmt: skip
    return row


class RepoOverlays:
    """One repository's instances over one base index and one overlay refreshed per tree.

    ``home`` holds ``tree`` (the instance's tree, swapped in under the same path every
    time, so the workspace and its overlay stay the same) and ``state`` (the index). The
    workspace stays open between instances, as a long-running service's would.
    """

    def __init__(
        self,
        git_dir: Path,
        home: Path,
        *,
        config: Config,
        mode: str,
        budgets: Sequence[int],
        baseline: bool,
        dump: bool = False,
    ) -> None:
        self.git_dir = git_dir
        self.dump = dump
        self.home = home
        self.tree = home / "tree"
        self.config = config.with_(state_dir=str(home / "state"))
        self.mode = mode
        self.budgets = budgets
        self.baseline = baseline
        self._ws: Workspace | None = None

    def __enter__(self) -> RepoOverlays:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the workspace (the next instance opens it again)."""
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def _workspace(self) -> Workspace:
        if self._ws is None:
            self._ws = Workspace.open(self.tree, self.config)
        return self._ws

    def has_base(self) -> bool:
        """Whether the state already holds a complete base."""
        return self.tree.is_dir() and bool(self._workspace().layers.complete_bases())

    def swap_in(self, commit: str) -> int:
        """Make ``tree`` hold the tree of ``commit``; returns the missing blobs' count.

        The new tree is written beside the old one, which is then removed and replaced by
        a rename. ``tree.json`` names the commit in ``tree`` (an interrupted run finds the
        tree it was working on and does not write it again).
        """
        self.home.mkdir(parents=True, exist_ok=True)
        marker = self.home / "tree.json"
        if self.tree.is_dir() and marker.exists():
            held = json.loads(marker.read_text("utf-8"))
            if held.get("commit") == commit and held.get("format") == TREE_FORMAT:
                return int(held["missing_blobs"])
        marker.unlink(missing_ok=True)
        fresh = self.home / "tree.new"
        if fresh.exists():
            shutil.rmtree(fresh)  # an interrupted materialisation: start over
        missing = materialise(self.git_dir, commit, fresh)
        if self.tree.exists():
            shutil.rmtree(self.tree)
        fresh.rename(self.tree)
        marker.write_text(json.dumps({"commit": commit, "missing_blobs": missing,
                                      "format": TREE_FORMAT}), "utf-8")  # fmt: skip
        return missing

    def build_base(self, inst: Instance) -> float:
        """Index ``inst``'s tree as the base without asking (resuming a run whose base
        instance is done); returns the seconds it took."""
        start = time.perf_counter()
        self.swap_in(inst.base_commit)
        self._workspace().index()
        return time.perf_counter() - start

    def evaluate(self, inst: Instance) -> dict[str, Any]:
        """Swap ``inst``'s tree in, refresh its overlay (the base on the first call), ask,
        and score ours (and the baseline)."""
        row = _new_row(inst)
        try:
            start = time.perf_counter()
            row["missing_blobs"] = self.swap_in(inst.base_commit)
            row["materialise_s"] = round(time.perf_counter() - start, 3)
            ws = self._workspace()
            # The tree is a plain export: give it the history its checkout would have (the
            # commits up to the instance's own, never the fix after it).
            ws.layers.supply_history(read_history(self.git_dir, inst.base_commit))
            start = time.perf_counter()
            report = ws.index()
            row["index_s"] = round(time.perf_counter() - start, 3)
            row["chunks"] = report.chunks
            # A run that built a base reports its stages as "base walk", "base chunk", ...
            row["base_build"] = any(k.startswith("base ") for k in report.seconds)
            status = ws.status(check_files=False)
            row["overlay_files"] = status.overlay_files
            row["tombstones"] = status.tombstones
            _ask_and_score(ws, self.tree, inst, row, mode=self.mode, budgets=self.budgets,
                           baseline=self.baseline, dump=self.dump)  # fmt: skip
        except BaseException:
            self.close()  # the next instance starts from a freshly opened workspace
            raise
        return row


# What one instance may raise (a broken checkout, a commit the mirror lacks, a problem
# statement the engine refuses): it is reported as failed, not scored, and the run goes on.
_INSTANCE_ERRORS = (OSError, RuntimeError, subprocess.CalledProcessError, CortexError)


def _run_repository(
    repo: str,
    members: Sequence[Instance],
    results: Results,
    *,
    repos: Path,
    home: Path,
    keep: bool,
    config: Config,
    mode: str,
    budgets: Sequence[int],
    baseline: bool,
    dump: bool = False,
) -> None:
    """One repository's instances over one base and one overlay (see the module doc)."""
    pending = [i for i in members if i.instance_id not in results.done]
    if not pending:
        return
    try:
        git_dir = find_git_dir(repos, repo)
    except _INSTANCE_ERRORS as exc:
        for inst in pending:
            results.error(inst, exc)
        return
    plan = plan_repository(git_dir, members)
    for inst in pending:
        if inst not in plan:  # its commit is not in the git directory
            results.error(inst, RuntimeError(f"commit {inst.base_commit} is not in {git_dir}"))
    if not plan:
        return
    with RepoOverlays(git_dir, home, config=config, mode=mode, budgets=budgets,
                      baseline=baseline, dump=dump) as overlays:  # fmt: skip
        first = plan[0]
        if first.instance_id in results.done:
            try:
                if not overlays.has_base():  # the same base as the interrupted run's
                    seconds = overlays.build_base(first)
                    print(f"{repo}: base built from {first.instance_id} (scored earlier) "
                          f"in {seconds:.0f} s", flush=True)  # fmt: skip
            except _INSTANCE_ERRORS as exc:
                print(f"{repo}: no base from {first.instance_id}: {exc}", flush=True)
        for inst in plan:
            if inst.instance_id in results.done:
                continue
            t0 = time.perf_counter()
            try:
                row = overlays.evaluate(inst)
            except _INSTANCE_ERRORS as exc:
                results.error(inst, exc)
                continue
            row["wall_s"] = round(time.perf_counter() - t0, 2)
            results.add(row)
    if not keep:
        shutil.rmtree(home, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; exit 0 when every selected instance was scored, 1 when any failed
    (each is named in the report), 2 for bad arguments or data."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repos", type=Path, required=True, help="where the git dirs are")
    parser.add_argument("--out", type=Path, required=True, help="results folder")
    parser.add_argument("--instances", default="", help="comma-separated ids or globs")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--retriever", default="context", choices=["context", "hybrid", "bm25", "dense"]
    )
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)),
                        help="token budgets, e.g. 4000,8000 or 4k,8k")  # fmt: skip
    parser.add_argument("--dense", default=None, help="dense model (default: the config's)")
    parser.add_argument("--compare", type=Path, default=None, help="a previous --out folder")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--dump",
        action="store_true",
        help="record every reranked candidate and its feature values, and each budget's "
        "packed sections, in the rows (for fitting weights offline and checking hit@B)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep trees and indexes here for reuse"
    )
    parser.add_argument(
        "--no-overlays",
        action="store_true",
        help="index every instance from scratch (default: one base per repository, one "
        "overlay per instance)",
    )
    args = parser.parse_args(argv)

    from eval.report import compare_runs, write_report

    budgets = parse_budgets(args.budgets, packed=args.retriever == "context")
    if args.compare is not None and not (args.compare / RESULTS).exists():
        raise SystemExit(f"--compare {args.compare}: no {RESULTS} there (a previous --out)")
    if not args.data.is_file():
        raise SystemExit(f"--data {args.data}: no such file")
    select = [s.strip() for s in args.instances.split(",") if s.strip()]
    loaded = load_instances(args.data, select, args.limit)
    instances = [i for i in loaded if i.gold_files]
    no_gold = [i.instance_id for i in loaded if not i.gold_files]
    if no_gold:
        print(f"{len(no_gold)} instances have no gold file (the fix edits no existing source "
              f"file), not scored: {', '.join(no_gold)}", flush=True)  # fmt: skip
    if not instances:
        raise SystemExit(f"no instance to score in {args.data}"
                         + (f" for --instances {args.instances}" if select else ""))  # fmt: skip
    # One vector cache for the whole run (with --workdir, for every run over those trees).
    cache = (args.workdir or args.out) / "cache" / "embeddings.sqlite"
    config = Config.from_env(embedding_cache=str(cache.resolve()), dense_model=args.dense)
    settings = {
        "retriever": args.retriever,
        "budgets": budgets,
        "dense_model": config.dense_model,
        "max_section_tokens": config.max_section_tokens,
        "baseline": not args.no_baseline,
        "overlays": not args.no_overlays,
        "dump": args.dump,
        "chunker": CHUNKER_VERSION,
        "tree_format": TREE_FORMAT,
    }
    if args.workdir is not None:
        check_workdir(args.workdir)
    check_run(args.out, settings)
    done = done_rows(args.out)
    drop_changed(done, instances)
    started = time.perf_counter()
    with (
        (args.out / RESULTS).open("a", encoding="utf-8") as file,
        tempfile.TemporaryDirectory(prefix="cortex-swe-") as scratch,
    ):
        results = Results(file, done, len(instances), budgets[0])
        if args.no_overlays:
            for inst in instances:
                if inst.instance_id in done:
                    results.n += 1
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
                        dump=args.dump,
                    )
                except _INSTANCE_ERRORS as exc:
                    results.error(inst, exc)
                    continue
                row["wall_s"] = round(time.perf_counter() - t0, 2)
                results.add(row)
        else:
            work = args.workdir or Path(scratch)
            by_repo: dict[str, list[Instance]] = {}
            for inst in instances:
                by_repo.setdefault(inst.repo, []).append(inst)
            results.n = sum(1 for i in instances if i.instance_id in done)
            for repo, members in by_repo.items():
                _run_repository(
                    repo,
                    members,
                    results,
                    repos=args.repos,
                    home=work / repo.replace("/", "__"),
                    keep=args.workdir is not None,
                    config=config,
                    mode=args.retriever,
                    budgets=budgets,
                    baseline=not args.no_baseline,
                    dump=args.dump,
                )
    elapsed = time.perf_counter() - started
    rows = [done[i.instance_id] for i in instances if i.instance_id in done]
    coverage = {"requested": len(loaded), "scored": len(rows), "failed": results.failed,
                "no_gold": no_gold}  # fmt: skip
    summary = write_report(args.out, rows, budgets, settings, elapsed, coverage)
    print((args.out / "report.md").read_text("utf-8"))
    print(timing_summary(rows, elapsed))
    if args.compare is not None:
        print(compare_runs(args.compare, rows, budgets, summary))
    if results.failed:
        print(f"{len(results.failed)} of {len(instances)} instances FAILED (not in the "
              "figures; see report.md); a rerun with the same --out retries them",
              flush=True)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
