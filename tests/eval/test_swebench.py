"""The SWE-bench harness on a tiny dataset made here: a two-commit repo and a made-up issue."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from eval import metrics
from eval.metrics import Section
from eval.swebench import find_git_dir, load_instances, main

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
    assert base["top_files"][0] == "widgets/headers.py" and base["acc@1"] is True
    assert base["hit@4000"] is True and base["fcov@4000"] == 1.0
    assert base["hit@60"] is False  # the whole file costs more than 60 tokens
    report = (out / "report.md").read_text()
    assert "| all | 1 | ours |" in report and "| all | 1 | baseline |" in report
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
    """Ids and globs select instances; unknown ones select nothing."""
    _, data = dataset
    assert [i.instance_id for i in load_instances(data, ["acme__*"])] == ["acme__widgets-1"]
    assert load_instances(data, ["nope"]) == []
