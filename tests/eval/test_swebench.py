"""The SWE-bench harness on a tiny dataset made here: a two-commit repo and a made-up issue."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval import metrics
from eval.baseline_bm25 import is_test_path, source_suffixes
from eval.metrics import Section
from eval.swebench import main
from eval.swebench_data import find_git_dir, load_instances, plan_repository

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
ISSUE = (
    "parse_header crashes on an empty header\n\n"
    "Calling `parse_header('')` raises IndexError instead of returning an empty dict.\n"
)


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=GIT_ENV
    )
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Repos dir (owner+name/repo layout) and a one-instance JSONL file."""
    base = tmp_path_factory.mktemp("swe")
    repo = base / "repos" / "acme+widgets" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "T")
    (repo / "widgets").mkdir()
    (repo / "widgets" / "headers.py").write_text(
        "def parse_header(raw):\n"
        '    """Parse a header line into a dict."""\n'
        "    key, value = raw.split(':', 1)\n"
        "    return {key.strip(): value.strip()}\n\n\n"
        "def format_header(values):\n"
        "    return '; '.join(f'{k}: {v}' for k, v in values.items())\n"
    )
    (repo / "widgets" / "render.py").write_text(
        "def render_page(title, body):\n    return f'<h1>{title}</h1>{body}'\n"
    )
    (repo / "widgets" / "colors.py").write_text(
        "PALETTE = ['red', 'green', 'blue']\n\n\ndef blend(a, b):\n    return (a + b) / 2\n"
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base_commit = _git(repo, "rev-parse", "HEAD")
    # The fix lands in a later commit: the harness must index the base, not HEAD.
    (repo / "widgets" / "headers.py").write_text("def parse_header(raw):\n    return {}\n")
    _git(repo, "commit", "-qam", "fix")
    row = {
        "instance_id": "acme__widgets-1",
        "repo": "acme/widgets",
        "base_commit": base_commit,
        "problem_statement": ISSUE,
        "patch": "",
        "gold_files": ["widgets/headers.py"],
        "gold_functions": ["widgets/headers.py:parse_header"],
        "new_files": [],
        "agentless_class": {"file location": "None"},
        "splits": ["lite"],
    }
    data = base / "dev.jsonl"
    data.write_text(json.dumps(row) + "\n")
    return base / "repos", data


def test_metrics_by_hand() -> None:
    """File accuracy, MRR, function recall and coverage on values worked out by hand."""
    files = ["a.py", "b.py", "c.py"]
    assert metrics.file_accuracy(files, ["b.py"], 1) is False
    assert metrics.file_accuracy(files, ["b.py"], 3) is True
    assert metrics.file_accuracy(files, ["a.py", "c.py"], 2) is False
    assert metrics.reciprocal_rank(files, ["c.py", "b.py"]) == 0.5
    assert metrics.reciprocal_rank(files, ["z.py"]) == 0.0
    sections = [Section("a.py", "f", 1, 2, 10), Section("b.py", "K.m", 3, 4, 10)]
    gold = ["b.py:K.m", "a.py:g"]
    assert metrics.function_recall(sections, gold, 1) == 0.0
    assert metrics.function_recall(sections, gold, 2) == 0.5
    assert metrics.function_recall(sections, [], 2) is None
    assert metrics.gold_function_coverage(sections, ["a.py:f"]) == 1.0
    assert metrics.gold_file_hit(sections, ["a.py", "b.py"]) is True
    assert metrics.mean([1.0, None, 0.0, True]) == pytest.approx(2 / 3)
    assert metrics.gold_token_share([*sections, Section("c.py", "h", 1, 9, 20)],
                                    ["b.py"]) == 0.25  # fmt: skip
    assert metrics.gold_token_share([], ["b.py"]) is None


def test_naming_rule(dataset: tuple[Path, Path]) -> None:
    """owner/name resolves to DIR/owner+name/repo; a missing one names what was tried."""
    repos, _ = dataset
    assert find_git_dir(repos, "acme/widgets") == repos / "acme+widgets" / "repo"
    with pytest.raises(FileNotFoundError, match="tried"):
        find_git_dir(repos, "acme/nothing")


def test_end_to_end_metrics_resume_and_report(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """The harness scores the made-up issue as worked out by hand, resumes, and reports."""
    repos, data = dataset
    out = tmp_path / "run"
    argv = ["--data", str(data), "--repos", str(repos), "--out", str(out), "--retriever",
            "bm25", "--budgets", "60,4000", "--dense", "hash"]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    ours, base = rows[0]["ours"], rows[0]["baseline"]
    # Only headers.py mentions parse_header: first file, first section.
    assert ours["top_files"][0] == "widgets/headers.py"
    assert (ours["acc@1"], ours["mrr"], ours["func@5"]) == (True, 1.0, 1.0)
    assert ours["hit@4000"] is True and ours["fcov@4000"] == 1.0
    assert 0 < ours["tokens@4000"] <= 4000 and ours["tokens@60"] <= 60
    assert ours["pool"] is None  # one retriever's list is not the reranked pool
    assert base["gold@4000"] == 1.0  # only the gold file was packed whole
    assert base["top_files"][0] == "widgets/headers.py" and base["acc@1"] is True
    assert base["hit@4000"] is True and base["fcov@4000"] == 1.0
    assert base["hit@60"] is False  # the whole file costs more than 60 tokens
    report = (out / "report.md").read_text()
    assert "| all | 1 | ours |" in report and "| all | 1 | baseline |" in report
    # Grouped by how many files the fix edits, and by the SWE-bench set it comes from.
    assert "### Localisation by gold files" in report and "| 1 file | 1 | ours |" in report
    assert "### Localisation by split" in report and "| lite | 1 | ours |" in report
    assert (out / "summary.json").exists()
    # Resume: a second run computes nothing new and gives the same metrics.
    assert main(argv) == 0
    again = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert again == rows
    # A fresh run in another folder reproduces every metric (timings aside).
    other = tmp_path / "run2"
    assert main([*argv[:4], "--out", str(other), *argv[6:], "--compare", str(out)]) == 0
    fresh = json.loads((other / "results.jsonl").read_text())
    assert fresh["ours"] == ours and fresh["baseline"] == base


def test_resume_refuses_other_settings(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """Resuming into a folder made with other settings stops with a message."""
    repos, data = dataset
    out = tmp_path / "run"
    base = ["--data", str(data), "--repos", str(repos), "--out", str(out), "--dense", "hash"]
    assert main([*base, "--retriever", "bm25", "--no-baseline"]) == 0
    with pytest.raises(SystemExit, match="other settings"):
        main([*base, "--retriever", "hybrid", "--no-baseline"])


def test_load_instances_filters(dataset: tuple[Path, Path]) -> None:
    """Ids and globs select instances; one that selects nothing is refused, by name (a
    typo in one of several ids was silent: stop 45's review)."""
    _, data = dataset
    assert [i.instance_id for i in load_instances(data, ["acme__*"])] == ["acme__widgets-1"]
    with pytest.raises(SystemExit, match="matches nope"):
        load_instances(data, ["acme__*", "nope"])


# Four commits, a day apart; instance ids deliberately out of date order.
HISTORY = {
    "acme__gadgets-7": {"widgets/headers.py": "def parse_header(raw):\n    return raw\n"},
    "acme__gadgets-2": {"widgets/cache.py": "def cached(fn):\n    return fn\n"},
    "acme__gadgets-9": {"widgets/colors.py": None},  # deleted
    "acme__gadgets-4": {"widgets/render.py": "def render_page(t, b):\n    return t + b\n"},
}


@pytest.fixture(scope="module")
def history(
    dataset: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """A second repo of four dated commits, and one instance at each commit."""
    repos, first = dataset
    repo = repos / "acme+gadgets" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "T")
    (repo / "widgets").mkdir()
    for name in ("headers.py", "render.py", "colors.py"):  # the first repo's base files
        text = _git(repos / "acme+widgets" / "repo", "show", f"HEAD~1:widgets/{name}") + "\n"
        (repo / "widgets" / name).write_text(text)
    template = json.loads(first.read_text().splitlines()[0])
    rows = []
    for day, (instance_id, changes) in enumerate(HISTORY.items(), start=1):
        for rel, text in changes.items():
            if text is None:
                (repo / rel).unlink()
            else:
                (repo / rel).write_text(text)
        _git(repo, "add", "-A")
        date = f"2024-01-0{day}T12:00:00+00:00"
        subprocess.run(
            ["git", "commit", "-q", "-m", instance_id], cwd=repo, check=True,
            env={**GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )  # fmt: skip
        commit = _git(repo, "rev-parse", "HEAD")
        rows.append({**template, "instance_id": instance_id, "repo": "acme/gadgets",
                     "base_commit": commit})  # fmt: skip
    data = tmp_path_factory.mktemp("history") / "dev.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return repos, data


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def test_plan_starts_at_the_median_commit(history: tuple[Path, Path]) -> None:
    """The base is the (lower) median by commit date; then later ones, then earlier ones."""
    repos, data = history
    plan = plan_repository(find_git_dir(repos, "acme/gadgets"), load_instances(data))
    assert [i.instance_id for i in plan] == [
        "acme__gadgets-2", "acme__gadgets-9", "acme__gadgets-4", "acme__gadgets-7"
    ]  # fmt: skip


def test_overlays_answer_as_fresh_indexes(history: tuple[Path, Path], tmp_path: Path) -> None:
    """One base and an overlay per instance give every instance the answers of a fresh
    index of its tree; overlay sizes and tombstones follow the history; resuming keeps
    the same base and the same answers."""
    repos, data = history
    common = ["--data", str(data), "--repos", str(repos), "--dense", "hash", "--budgets",
              "200,4000"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "fresh"), "--no-overlays"]) == 0
    work = tmp_path / "work"
    layered = tmp_path / "layered"
    assert main([*common, "--out", str(layered), "--workdir", str(work)]) == 0
    fresh, rows = _rows(tmp_path / "fresh"), _rows(layered)
    assert set(rows) == set(HISTORY)
    for instance_id, row in rows.items():
        assert row["ours"] == fresh[instance_id]["ours"], instance_id
        assert row["baseline"] == fresh[instance_id]["baseline"], instance_id
    layers = {i: (r["base_build"], r["overlay_files"], r["tombstones"]) for i, r in rows.items()}
    assert layers == {
        "acme__gadgets-2": (True, 0, 0),  # the base
        "acme__gadgets-9": (False, 0, 1),  # colors.py deleted
        "acme__gadgets-4": (False, 1, 2),  # and render.py changed (replaced: hidden too)
        "acme__gadgets-7": (False, 0, 1),  # before cache.py was added
    }
    assert sorted(p.name for p in (work / "acme__gadgets").iterdir()) == [
        "state", "tree", "tree.json"
    ]  # fmt: skip
    # Resume after losing rows. Without the work folder, a done base instance's tree is
    # indexed first, so the overlays are the same (else the base is the first one left).
    for folder, lost, base_build in (
        (None, {"acme__gadgets-4"}, True),  # -2's row is the first run's
        (None, {"acme__gadgets-2", "acme__gadgets-4"}, True),
        (work, {"acme__gadgets-2", "acme__gadgets-4"}, False),  # the base is kept
    ):
        lines = (layered / "results.jsonl").read_text().splitlines(keepends=True)
        kept = [x for x in lines if json.loads(x)["instance_id"] not in lost]
        (layered / "results.jsonl").write_text("".join(kept))
        extra = [] if folder is None else ["--workdir", str(folder)]
        assert main([*common, "--out", str(layered), *extra]) == 0
        again = _rows(layered)
        assert {i: r["ours"] for i, r in again.items()} == {i: r["ours"] for i, r in rows.items()}
        assert (
            again["acme__gadgets-4"]["base_build"],
            again["acme__gadgets-4"]["overlay_files"],
        ) == (False, 1)
        assert again["acme__gadgets-2"]["base_build"] is base_build


def test_workdir_inside_git_is_refused(history: tuple[Path, Path], tmp_path: Path) -> None:
    """A work folder inside a git working tree would make the trees part of that repo."""
    repos, data = history
    inside = repos / "acme+gadgets" / "repo" / "work"
    argv = ["--data", str(data), "--repos", str(repos), "--out", str(tmp_path / "out"),
            "--workdir", str(inside)]  # fmt: skip
    with pytest.raises(SystemExit, match="inside a git working tree"):
        main(argv)
    assert not inside.exists()


def test_multilingual_rows_are_judged_on_source_files(tmp_path: Path) -> None:
    """A row with gold_source_files is judged on them (not on a changelog the fix also
    edits) and keeps its language; a Python row keeps gold_files."""
    data = tmp_path / "ml.jsonl"
    rows = [
        {"instance_id": "o__rs-1", "repo": "o/rs", "base_commit": "a" * 40,
         "problem_statement": "x", "gold_files": ["CHANGELOG.md", "src/lib.rs"],
         "gold_source_files": ["src/lib.rs"], "language": "rust"},
        {"instance_id": "o__py-1", "repo": "o/py", "base_commit": "b" * 40,
         "problem_statement": "y", "gold_files": ["pkg/mod.py"], "gold_functions": []},
    ]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    py, rs = sorted(load_instances(data), key=lambda i: i.language)
    assert (py.language, py.gold_files) == ("python", ("pkg/mod.py",))
    assert (rs.language, rs.gold_files) == ("rust", ("src/lib.rs",))


def test_baseline_reads_every_source_language_and_skips_their_tests() -> None:
    """The file-level baseline is Python-only for Python repositories (as in the paper) and
    reads every code extension otherwise; test files of each language stay out."""
    assert source_suffixes("python") == (".py",)
    others = source_suffixes("cpp")
    assert {".rs", ".go", ".cpp", ".h", ".ts", ".java", ".rb", ".php"} <= set(others)
    for test in ("pkg/foo_test.go", "src/FooTest.java", "spec/foo_spec.rb", "src/a.test.ts",
                 "__tests__/x.js", "tests/Unit/FooTest.php", "tests/test_x.py"):  # fmt: skip
        assert is_test_path(test), test
    for source in ("src/lib.rs", "pkg/foo.go", "src/Foo.java", "lib/testing_utils_x.rb"):
        assert not is_test_path(source), source


def test_report_groups_by_gold_files_and_split() -> None:
    """An instance is grouped by how many files its fix edits and by each SWE-bench set it
    is in; rows without sets get no split group."""
    from eval.report import _groups

    rows = [{"repo": "a/b", "gold_files": ["x.py"], "splits": ["lite", "verified"]},
            {"repo": "a/b", "gold_files": ["x.py", "y.py"], "splits": ["verified"]},
            {"repo": "a/b", "gold_files": ["x.py", "y.py", "z.py", "w.py"]}]  # fmt: skip
    by = _groups(rows)
    assert {k: len(v) for k, v in by["gold files"].items()} == {"1 file": 1, "2 files": 1,
                                                                 "3+ files": 1}  # fmt: skip
    assert {k: len(v) for k, v in by["split"].items()} == {"lite": 1, "verified": 2}
    assert "split" not in _groups(rows[2:])


def _variant(dataset: tuple[Path, Path], tmp_path: Path, *changes: dict[str, Any]) -> Path:
    """A data file of the made-up instance with each of ``changes`` applied to a copy."""
    row = json.loads(dataset[1].read_text().splitlines()[0])
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({**row, **c}) + "\n" for c in changes))
    return data


def test_gold_comes_from_the_patch_and_a_row_without_gold_is_not_a_success(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """The official SWE-bench rows carry only ``patch``: a row without gold files scored
    100% on Acc@k, hit and pool (stop 45's review). Gold is now the files the patch edits
    (not those it creates); a row whose fix edits no source file is listed, not scored."""
    patch = ("diff --git a/widgets/headers.py b/widgets/headers.py\n"
             "--- a/widgets/headers.py\n+++ b/widgets/headers.py\n@@ -1 +1 @@\n-x\n+y\n"
             "diff --git a/widgets/new.py b/widgets/new.py\nnew file mode 100644\n"
             "--- /dev/null\n+++ b/widgets/new.py\n@@ -0,0 +1 @@\n+z\n")  # fmt: skip
    official = {"instance_id": "acme__widgets-2", "patch": patch, "gold_files": None,
                "gold_functions": None}  # fmt: skip
    empty = {"instance_id": "acme__widgets-3", "gold_source_files": []}
    data = _variant(dataset, tmp_path, official, empty)
    loaded = {i.instance_id: i for i in load_instances(data)}
    assert loaded["acme__widgets-2"].gold_files == ("widgets/headers.py",)
    assert loaded["acme__widgets-2"].gold_from == "patch"
    assert loaded["acme__widgets-3"].gold_files == ()
    out = tmp_path / "out"
    argv = ["--data", str(data), "--repos", str(dataset[0]), "--out", str(out), "--retriever",
            "bm25", "--budgets", "4000", "--dense", "hash", "--no-baseline"]  # fmt: skip
    assert main(argv) == 0
    assert set(_rows(out)) == {"acme__widgets-2"}
    assert "1 scored of 2 requested; 1 without a gold file" in (out / "report.md").read_text()
    coverage = json.loads((out / "summary.json").read_text())["coverage"]
    assert coverage["no_gold"] == ["acme__widgets-3"]
    with pytest.raises(ValueError, match="no gold"):
        metrics.file_accuracy(["a.py"], [], 1)


def test_a_failed_instance_is_named_counted_and_fails_the_run(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """Failures left the figures silently (exit 0); one bad commit failed its whole
    repository; an engine refusal (an empty problem) killed the run. Now each failure is
    that instance's alone, named in report.md and summary.json, and the exit is 1; a
    rerun retries them."""
    data = _variant(dataset, tmp_path, {},
                    {"instance_id": "acme__widgets-bad", "base_commit": "0" * 40},
                    {"instance_id": "acme__widgets-empty", "problem_statement": " "},
                    {"instance_id": "nobody__x-1", "repo": "nobody/x"})  # fmt: skip
    out = tmp_path / "out"
    argv = ["--data", str(data), "--repos", str(dataset[0]), "--out", str(out),
            "--budgets", "4000", "--dense", "hash", "--no-baseline"]  # fmt: skip
    assert main(argv) == 1
    assert set(_rows(out)) == {"acme__widgets-1"}
    failed = json.loads((out / "summary.json").read_text())["coverage"]["failed"]
    assert set(failed) == {"acme__widgets-bad", "acme__widgets-empty", "nobody__x-1"}
    assert f"commit {'0' * 40} is not in" in failed["acme__widgets-bad"]
    report = (out / "report.md").read_text()
    assert "1 scored of 4 requested; **3 failed**" in report and "FAILED nobody__x-1" in report
    assert main(argv) == 1  # retried, and failing again
    nothing = _variant(dataset, tmp_path, {"gold_files": []})
    with pytest.raises(SystemExit, match="no instance to score"):
        main(["--data", str(nothing), *argv[2:]])


def test_resume_rescores_changed_rows_and_survives_a_torn_line(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """A resumed run reused rows scored from other data (another gold), and a last line
    cut short made every later start fail. Both are now redone, with a message."""
    out = tmp_path / "out"
    first = _variant(dataset, tmp_path, {})
    argv = ["--repos", str(dataset[0]), "--out", str(out), "--retriever", "bm25",
            "--budgets", "4000", "--dense", "hash", "--no-baseline"]  # fmt: skip
    assert main(["--data", str(first), *argv]) == 0
    assert _rows(out)["acme__widgets-1"]["ours"]["acc@1"] is True
    moved = tmp_path / "moved.jsonl"
    moved.write_text(first.read_text().replace('"widgets/headers.py"]', '"widgets/colors.py"]'))
    assert main(["--data", str(moved), *argv]) == 0
    assert _rows(out)["acme__widgets-1"]["gold_files"] == ["widgets/colors.py"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["n"] == 1
    text = (out / "results.jsonl").read_text()
    (out / "results.jsonl").write_text(text[:-40])  # the last write cut short
    assert main(["--data", str(moved), *argv]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_compare_is_over_the_instances_both_runs_scored(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """--compare set the means of different instance sets side by side, flagging the
    dropped instance as "worse"; it now compares the rows both runs have."""
    from eval.report import compare_runs

    def row(name: str, acc: bool) -> dict[str, Any]:
        ours = {"acc@1": acc, "acc@5": acc, "mrr": 1.0 if acc else 0.0}
        return {"instance_id": name, "repo": "a/b", "ours": ours}

    old = tmp_path / "old"
    old.mkdir()
    (old / "results.jsonl").write_text(json.dumps(row("x", True)) + "\n"
                                       + json.dumps(row("y", False)) + "\n")  # fmt: skip
    text = compare_runs(old, [row("x", True)], [4000])
    assert "over the 1 instances both scored (0 only in this run, 1 only in that one)" in text
    assert "worse" not in text and "100.00 ->    100.00  (+0.00)" in text
    flipped = compare_runs(old, [row("x", False)], [4000])
    assert "ours acc@1: gained -; lost x" in flipped and "1.000 ->     0.000  (-1.000)" in flipped


def test_data_and_arguments_are_refused_before_any_work(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """A missing field, a repeated id, a bad budget and a missing --compare folder were a
    traceback (or a failure after indexing); a row without a language took Python's."""
    from eval.swebench_runs import parse_budgets

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "a", "repo": "o/r"}\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: no base_commit, problem_statement"):
        load_instances(bad)
    with pytest.raises(SystemExit, match="more than once: acme__widgets-1"):
        load_instances(_variant(dataset, tmp_path, {}, {}))
    go = _variant(dataset, tmp_path, {"gold_files": ["cmd/main.go", "README.md"]})
    assert load_instances(go)[0].language == "go"
    assert parse_budgets("4k, 8000") == [4000, 8000]
    for text, message in (("4kb", "not a number"), ("10", "outside 64..200000"), ("", "one")):
        with pytest.raises(SystemExit, match=message):
            parse_budgets(text)
    argv = ["--data", str(dataset[1]), "--repos", str(dataset[0]), "--out",
            str(tmp_path / "o"), "--compare", str(tmp_path / "nowhere")]  # fmt: skip
    with pytest.raises(SystemExit, match=r"no results\.jsonl"):
        main(argv)
    assert not (tmp_path / "o").exists()


def test_trees_hold_every_tracked_file_as_a_checkout_does(tmp_path: Path) -> None:
    """``git archive`` applied ``export-ignore``: 2,057 of 2,595 files of a PhpSpreadsheet
    commit never reached the index. A tree now holds every tracked file, byte for byte,
    with its symlinks; an unknown commit names itself."""
    from eval.swebench_data import materialise

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / ".gitattributes").write_text("tests export-ignore\nversion.txt export-subst\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (repo / "version.txt").write_text("$Format:%H$\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link.txt").symlink_to("version.txt")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-qm", "x")
    tree = tmp_path / "tree"
    assert materialise(repo / ".git", "HEAD", tree) == 0
    assert (tree / "tests" / "test_a.py").read_text() == "def test_a():\n    pass\n"
    assert (tree / "version.txt").read_text() == "$Format:%H$\n"
    assert os.readlink(tree / "link.txt") == "version.txt" and os.access(tree / "run.sh", os.X_OK)
    with pytest.raises(RuntimeError, match=f"commit {'1' * 40} is not in"):
        materialise(repo / ".git", "1" * 40, tmp_path / "other")


def test_a_runs_report_is_rebuilt_from_its_rows(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """``python -m eval.report`` did nothing and exited 0 (stop 45's review): it rebuilds
    report.md and summary.json from a run's rows, keeps what the run recorded of its
    failures, compares with another run, and refuses a folder that holds no run."""
    from eval.report import main as report

    out = tmp_path / "out"
    data = _variant(dataset, tmp_path, {}, {"instance_id": "nobody__x-1", "repo": "nobody/x"})
    argv = ["--data", str(data), "--repos", str(dataset[0]), "--out", str(out), "--retriever",
            "bm25", "--budgets", "4000", "--dense", "hash", "--no-baseline"]  # fmt: skip
    assert main(argv) == 1
    before = json.loads((out / "summary.json").read_text())
    (out / "report.md").unlink()
    assert report([str(out), "--compare", str(out)]) == 0
    after = json.loads((out / "summary.json").read_text())
    assert after["overall"] == before["overall"] and after["coverage"] == before["coverage"]
    assert "FAILED nobody__x-1" in (out / "report.md").read_text()
    with pytest.raises(SystemExit, match=r"no results\.jsonl"):
        report([str(tmp_path)])
