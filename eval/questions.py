"""Developer questions on real repositories: is the code that answers them in the context?

    python -m eval.questions --repos DIR --out OUT [--questions FILE] [--budgets 4000,8000]
        [--workdir DIR] [--repo owner/name] [--compare PREVIOUS_OUT]

The questions (``eval/questions/questions.jsonl``) are what a developer new to a codebase
asks, mostly in behaviour words, of six kinds (where, why with an error message, how end to
end, configuration, documentation, tests), each with answer locations (path and lines at a
pinned commit) read from the code, one marked primary. For each repository and commit the
tree is materialised (every tracked file, as a checkout holds it) into
``WORK/<owner__name>/tree`` (``WORK`` is ``--workdir``, else ``OUT/work``; ``tree.json``
names the commit it holds, and another commit's tree is swapped in under the same path) and
indexed; a commit the repository does
not hold is refused. Each question is asked through ``build_context`` at each budget, and
through ``search_files``.

Per question and budget: whether the primary answer location is in the context (cited
lines cover at least half of it, or 15 lines of a long one), the share of all answer lines
covered, the share of packed snippets that touch an answer, whether the primary answer's
file is among the cited ones, and how many sections were left out for "budget" although
they would have fitted in the budget left unused (should be none). Files: whether the
primary answer's file is first / in the top 5 of ``search_files`` (the fused ranking users
get, and beside it ``bm25`` and ``dense`` alone: fusion should beat both). Beside it, in
the same run, the file-level BM25 baseline (whole files packed in rank order, every language's
source and documentation, tests included). Reported overall, per language and per kind.

Rows go to ``OUT/results.jsonl`` as each question is answered; ``OUT/report.md`` is written
at the end. A question that cannot be asked (no such repository or commit, an engine error)
is a row with its ``error``, listed at the end of the report and left out of its figures;
the exit code is then 1, as it is when no question is selected.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import Config, ContextPack, Pointer, Workspace, uri_path
from eval.baseline_bm25 import Bm25Files, source_suffixes
from eval.swebench import RepoOverlays
from eval.swebench_data import check_workdir, find_git_dir, git_dir_of
from overlays import read_history

__all__ = [
    "Answer",
    "Question",
    "baseline_suffixes",
    "compare",
    "load_questions",
    "main",
    "score_pack",
]

DEFAULT_QUESTIONS = Path(__file__).resolve().parent / "questions" / "questions.jsonl"
DEFAULT_BUDGETS = (4000, 8000)
MODES = ("hybrid", "bm25", "dense")  # search_files modes compared (hybrid: what users get)
PRIMARY_SHARE = 0.5  # share of the primary range's lines the context must hold ...
PRIMARY_LINES = 15  # ... or this many of them, for a long function or section
_SPAN = re.compile(r"\d+-\d+")  # a title's part after the path when the section has no symbol


@dataclass(frozen=True, slots=True)
class Answer:
    """Where an answer is: path, 1-based inclusive lines, and whether it is the primary."""

    path: str
    start_line: int
    end_line: int
    primary: bool

    @property
    def lines(self) -> int:
        """How many lines the range covers."""
        return self.end_line - self.start_line + 1


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its repository, pinned commit, kind and answer locations."""

    id: str
    repo: str
    commit: str
    language: str
    kind: str
    text: str
    answers: tuple[Answer, ...]

    @property
    def primary(self) -> Answer:
        """The answer location a developer most needs to see."""
        return next(a for a in self.answers if a.primary)


def load_questions(path: Path, repo: str | None = None) -> list[Question]:
    """The questions in ``path`` (JSON Lines), optionally of one repository only."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        answers = tuple(
            Answer(a["path"], int(a["start_line"]), int(a["end_line"]), bool(a["primary"]))
            for a in raw["answers"]
        )
        if sum(a.primary for a in answers) != 1:
            raise ValueError(f"{raw['id']}: exactly one answer must be primary")
        for a in answers:  # an empty range would count as held by any context
            if not 1 <= a.start_line <= a.end_line:
                raise ValueError(f"{raw['id']}: answer {a.path} lines {a.start_line}-"
                                 f"{a.end_line}: the first must be 1 or more, the last "
                                 f"no less than the first")  # fmt: skip
        q = Question(raw["id"], raw["repo"], raw["commit"], raw["language"], raw["kind"],
                     raw["question"], answers)  # fmt: skip
        if repo is None or q.repo == repo:
            out.append(q)
    return out


def baseline_suffixes() -> tuple[str, ...]:
    """What the file baseline reads in every repository: each extension cortex chunks as
    code (eval.swebench's baseline rule for a repository not in Python: a question's answer
    may be in another language than the repository's main one) and documentation and text
    files (a ``docs`` question's answer)."""
    from indexers import Family, languages

    docs = {e for lang in languages() if lang.family in (Family.DOC, Family.TEXT)
            for e in lang.extensions}  # fmt: skip
    return tuple(sorted({*source_suffixes("any"), *docs}))


Span = tuple[str, int, int]  # path, first line, last line


def _covered(answer: Answer, spans: Sequence[Span]) -> int:
    lines: set[int] = set()
    for path, start, end in spans:
        if path == answer.path:
            lines.update(range(max(start, answer.start_line), min(end, answer.end_line) + 1))
    return len(lines)


def _touches(span: Span, answers: Sequence[Answer]) -> bool:
    path, start, end = span
    return any(a.path == path and start <= a.end_line and end >= a.start_line for a in answers)


def score_pack(q: Question, spans: Sequence[Span]) -> dict[str, Any]:
    """The context's figures for one question (see the module docstring)."""
    primary = q.primary
    held = _covered(primary, spans)
    total = sum(a.lines for a in q.answers)
    return {
        "primary_in": held >= min(PRIMARY_SHARE * primary.lines, PRIMARY_LINES),
        "coverage": sum(_covered(a, spans) for a in q.answers) / total,
        "relevant": (sum(_touches(s, q.answers) for s in spans) / len(spans)) if spans else None,
        "file_cited": any(path == primary.path for path, _, _ in spans),
        "snippets": len(spans),
    }


def _ours(ws: Workspace, q: Question, budgets: Sequence[int]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    times = []
    for budget in budgets:
        start = time.perf_counter()
        pack: ContextPack = ws.build_context(q.text, budget_tokens=budget, record=False)
        times.append((time.perf_counter() - start) * 1000)
        # ``path#Lx-Ly``, and a path may hold a "#" itself: cut at the last one.
        spans = [(uri_path(c.source_uri), c.span.start_line,
                  c.span.end_line) for c in pack.citations]  # fmt: skip
        scored = score_pack(q, spans)
        left = pack.budget_tokens - pack.tokens_used
        scored["budget_left_out_but_fit"] = sum(
            1 for p in pack.reachable
            if p.reason == "budget" and p.tokens + _header(ws, p) <= left
        )  # fmt: skip
        scored["tokens"] = pack.tokens_used
        row[str(budget)] = scored
    for mode in MODES:  # the fused ranking, and each single retriever beside it
        if mode == "dense":  # files are not ranked from dense alone: first section wins
            hits = ws.search(q.text, mode=mode, k=100)
            files = list(dict.fromkeys(h.chunk.path for h in hits))[:10]
        else:
            files = [f.path for f in ws.search_files(q.text, mode=mode, k=10)]
        suffix = "" if mode == "hybrid" else f"_{mode}"
        row[f"file@1{suffix}"] = files[:1] == [q.primary.path]
        row[f"file@5{suffix}"] = q.primary.path in files[:5]
    row["query_ms"] = round(statistics.median(times), 1)
    return row


def _header(ws: Workspace, p: Pointer) -> int:
    """What the snippet's header and fences would have cost (as the packer counts them: its
    label, the title past the path or for a section without a symbol the file's name, and
    its source; the hash line and fences are the 24)."""
    path = uri_path(p.source_uri)
    label = p.title.removeprefix(f"{path}:")
    if _SPAN.fullmatch(label):  # no symbol: the title is the path and the lines
        label = path.rsplit("/", 1)[-1]
    probe = f"[99] {label}\nSource: {p.source_uri}\n"
    return ws.counter.count(probe) + 24


def _check_commit(git_dir: Path, commit: str) -> None:
    """Refuse a commit ``git_dir`` does not hold: its questions have no tree to be asked on."""
    probe = subprocess.run(
        ["git", f"--git-dir={git_dir_of(git_dir)}", "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        raise LookupError(f"no commit {commit} in {git_dir}")


def _baseline(bm25: Bm25Files, q: Question, budgets: Sequence[int]) -> dict[str, Any]:
    ranked = bm25.rank(q.text)
    row: dict[str, Any] = {}
    for budget in budgets:
        whole = bm25.pack(ranked, budget)
        spans = [(f.path, 1, 10**9) for f in whole]
        row[str(budget)] = score_pack(q, spans)
    row["file@1"] = ranked[:1] == [q.primary.path]
    row["file@5"] = q.primary.path in ranked[:5]
    return row


def _mean(values: Sequence[Any]) -> float | None:
    got = [float(v) for v in values if v is not None]
    return 100.0 * sum(got) / len(got) if got else None


def _summary(rows: Sequence[dict[str, Any]], side: str, budgets: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for b in budgets:
        for metric in ("primary_in", "coverage", "relevant", "file_cited"):
            out[f"{metric}@{b}"] = _mean([r[side][str(b)][metric] for r in rows])
    for key in ("file@1", "file@5", "file@1_bm25", "file@5_bm25", "file@1_dense", "file@5_dense"):
        got = [r[side][key] for r in rows if key in r[side]]
        out[key] = _mean(got) if got else None
    return out


def _table(title: str, groups: dict[str, list[dict[str, Any]]], budgets: Sequence[int]) -> str:
    cols = [f"{m}@{b}" for b in budgets for m in ("primary_in", "coverage", "relevant")]
    cols += ["file@1", "file@5", "file@1_bm25", "file@5_bm25", "file@1_dense", "file@5_dense"]
    lines = [f"### {title}", "", "| group | n | side | " + " | ".join(cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]  # fmt: skip
    for name, rows in sorted(groups.items()):
        for side in ("ours", "baseline"):
            s = _summary(rows, side, budgets)
            cells = ["-" if s.get(c) is None else f"{s[c]:.1f}" for c in cols]
            lines.append(f"| {name} | {len(rows)} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(
    rows: Sequence[dict[str, Any]], budgets: Sequence[int], failed: Sequence[dict[str, Any]] = ()
) -> str:
    """The markdown report: overall, per language, per kind; then the questions that
    failed (not in the figures)."""
    by_lang: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_lang[r["language"]].append(r)
        by_kind[r["kind"]].append(r)
    fit = sum(r["ours"][str(b)]["budget_left_out_but_fit"] for r in rows for b in budgets)
    ms = [r["ours"]["query_ms"] for r in rows]
    lost = f" {len(failed)} failed (listed at the end, not in the figures)." if failed else ""
    head = (f"# Developer questions\n\n{len(rows)} questions, budgets {list(budgets)}.{lost} "
            f"primary_in: the primary answer location is in the context; coverage: share of "
            f"all answer lines in it; relevant: share of packed snippets touching an answer. "
            f"Sections left out for \"budget\" that would have fitted: {fit}. "
            f"build_context p50 {statistics.median(ms) if ms else 0:.0f} ms.\n\n")  # fmt: skip
    text = (head + _table("Overall", {"all": list(rows)}, budgets) + "\n"
            + _table("By language", by_lang, budgets) + "\n"
            + _table("By kind", by_kind, budgets))  # fmt: skip
    if failed:
        text += "\n### Failed\n\n| question | repository @ commit | error |\n|---|---|---|\n"
        for r in failed:
            error = r["error"].replace("|", "\\|")
            text += f"| {r['id']} | {r['repo']} @ {r['commit'][:12]} | {error} |\n"
    return text


def compare(
    before: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]], budgets: Sequence[int]
) -> str:
    """primary_in per budget, a previous run's beside this one's, over the questions both
    answered (a budget the previous run did not use is said, not compared)."""
    old = {r["id"]: r for r in before if "error" not in r}
    new = {r["id"]: r for r in rows if "error" not in r}
    both = sorted(old.keys() & new.keys())
    ran = sorted({int(k) for r in old.values() for k in r["ours"] if k.isdigit()})
    out = []
    for b in budgets:
        if b not in ran:
            out.append(f"primary_in@{b}: the previous run has no budget {b} (it ran {ran})")
            continue
        was, now = (_mean([r["ours"][str(b)]["primary_in"] for r in (side[i] for i in both)])
                    for side in (old, new))  # fmt: skip
        cells = ["-" if v is None else f"{v:.1f}" for v in (was, now)]
        out.append(f"primary_in@{b}: {cells[0]} -> {cells[1]} (n {len(both)})")
    if len(both) < max(len(old), len(new)):
        out.append(f"compared on the {len(both)} questions both runs answered (previous "
                   f"{len(old)}, this one {len(new)})")  # fmt: skip
    return "\n".join(out)


def _error_row(q: Question, exc: Exception) -> dict[str, Any]:
    error = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line: a table cell
    return {"id": q.id, "repo": q.repo, "commit": q.commit, "language": q.language,
            "kind": q.kind, "question": q.text, "error": error}  # fmt: skip


def _ask_commit(
    repos: Path,
    work: Path,
    members: Sequence[Question],
    budgets: Sequence[int],
    dense: str | None,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    """Ask ``members`` (one repository's questions at one commit) and ``emit`` a row for
    each; a question whose asking fails is emitted as its error row."""
    repo, commit = members[0].repo, members[0].commit
    git_dir = find_git_dir(repos, repo)
    _check_commit(git_dir, commit)
    home = work / repo.replace("/", "__")
    config = Config.from_env(state_dir=str(home / "state"), ledger=False,
                             dense_model=dense)  # fmt: skip
    # One tree per repository, swapped to each commit asked about (``tree.json`` names
    # the commit it holds); the index refreshes as an overlay on the first commit's.
    with RepoOverlays(git_dir, home, config=config, mode="context", budgets=budgets,
                      baseline=False) as trees:  # fmt: skip
        trees.swap_in(commit)
    tree = trees.tree
    with Workspace.open(tree, config) as ws:
        # A plain export: the history its checkout would have, up to the question's commit.
        ws.layers.supply_history(read_history(git_dir, commit))
        start = time.perf_counter()
        ws.index()
        print(f"{repo} @ {commit[:12]}: indexed in {time.perf_counter() - start:.1f} s",
              flush=True)  # fmt: skip
        bm25 = Bm25Files(tree, suffixes=baseline_suffixes(), tests=True)
        for q in members:
            try:
                ours, base = _ours(ws, q, budgets), _baseline(bm25, q, budgets)
            except Exception as exc:  # the engine's or the tree's: this question's error
                emit(_error_row(q, exc))
                continue
            emit({"id": q.id, "repo": q.repo, "commit": q.commit, "language": q.language,
                  "kind": q.kind, "question": q.text, "ours": ours, "baseline": base})  # fmt: skip


def _print_row(row: dict[str, Any], budget: int) -> None:
    if "error" in row:
        print(f"  {row['id']}: ERROR {row['error']}", flush=True)
        return
    b = str(budget)
    print(f"  {row['id']} [{row['kind']}] primary@{b} ours {int(row['ours'][b]['primary_in'])} "
          f"baseline {int(row['baseline'][b]['primary_in'])}", flush=True)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the question set and print the report; 1 when a question failed or none was
    selected."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repos", type=Path, required=True, help="where the git dirs are")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)))
    parser.add_argument("--workdir", type=Path, default=None, help="keep trees and indexes")
    parser.add_argument("--repo", default=None, help="only this repository's questions")
    parser.add_argument("--dense", default=None, help="dense model (default: the config's)")
    parser.add_argument("--compare", type=Path, default=None, help="a previous --out folder")
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    questions = load_questions(args.questions, args.repo)
    if not questions:
        which = f" of {args.repo}" if args.repo else ""
        print(f"no questions{which} in {args.questions}", file=sys.stderr)
        return 1
    work = args.workdir or args.out / "work"
    check_workdir(work)  # the trees must not be taken for part of a checkout around them
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    by_commit: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        by_commit[(q.repo, q.commit)].append(q)
    # Each row is written as it is made: a run that stops keeps what it did.
    with (args.out / "results.jsonl").open("w", encoding="utf-8") as out:

        def emit(row: dict[str, Any]) -> None:
            out.write(json.dumps(row) + "\n")
            out.flush()
            (failed if "error" in row else rows).append(row)
            _print_row(row, budgets[0])

        for members in by_commit.values():
            try:
                _ask_commit(args.repos, work, members, budgets, args.dense, emit)
            except Exception as exc:  # no tree or no index: every question left fails
                seen = {r["id"] for r in (*rows, *failed)}
                for q in members:
                    if q.id not in seen:
                        emit(_error_row(q, exc))
    text = report(rows, budgets, failed)
    (args.out / "report.md").write_text(text, "utf-8")
    print(text)
    if args.compare is not None:
        lines = (args.compare / "results.jsonl").read_text("utf-8").splitlines()
        print(compare([json.loads(ln) for ln in lines if ln.strip()], rows, budgets))
    if failed:
        print(f"{len(failed)} of {len(questions)} questions failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
