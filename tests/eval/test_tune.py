"""eval.tune over work folders of the layouts eval.swebench makes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eval import swebench
from eval.tune import main
from tests.eval.test_swebench import GIT_ENV

ISSUE = "use raises RuntimeError: all middlewares must be defined before routes\n"
SOURCE = (
    "def use(middleware):\n"
    '    """Add a middleware to the stack."""\n'
    "    raise RuntimeError('all middlewares must be defined before routes')\n"
)


def _row(instance_id: str, gold: str, functions: list[str]) -> str:
    return json.dumps({"instance_id": instance_id, "repo": "acme/router",
                       "base_commit": "0" * 40, "problem_statement": ISSUE,
                       "gold_files": [gold], "gold_functions": functions}) + "\n"  # fmt: skip


def _figures(out: str) -> dict[str, list[str]]:
    """The printed table: variant -> its cells."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("variant"))
    return {ln.split()[0]: ln.split()[1:] for ln in lines[start + 1 :] if ln.strip()}


def test_a_hash_in_a_gold_path_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A packed ``path#Lx-Ly`` is cut at its last "#": a gold file named with one is hit."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    tree = tmp_path / "work" / "acme__router-1" / "tree"
    (tree / "mid#dle").mkdir(parents=True)
    (tree / "mid#dle" / "use#it.py").write_text(SOURCE)
    (tree / "colors.py").write_text("def blend(a, b):\n    return (a + b) / 2\n")
    data = tmp_path / "dev.jsonl"
    data.write_text(_row("acme__router-1", "mid#dle/use#it.py", ["mid#dle/use#it.py:use"]))
    assert main(["--workdir", str(tmp_path / "work"), "--data", str(data)]) == 0
    baseline = _figures(capsys.readouterr().out)["baseline"]
    assert baseline[-2:] == ["100.0", "100.0"]  # hit, fcov


def _git(root: Path, *args: str, date: str = "") -> str:
    env = {**GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else GIT_ENV
    proc = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env
    )
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def layered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Repos dir, a JSONL file of two instances at two commits of acme/router (one without
    gold functions), and the work folder eval.swebench left in its default layout."""
    base = tmp_path_factory.mktemp("tune")
    repo = base / "repos" / "acme+router" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "router.py").write_text(SOURCE)
    (repo / "colors.py").write_text("def blend(a, b):\n    return (a + b) / 2\n")
    rows = ""
    for day, (instance_id, functions) in enumerate(
        [("acme__router-1", ["router.py:use"]), ("acme__router-2", [])], start=1
    ):
        (repo / "notes.md").write_text(f"# Notes\n\nday {day}\n")
        _git(repo, "add", "-A")
        date = f"2024-01-0{day}T12:00:00+00:00"
        _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q",
             "-m", instance_id, date=date)  # fmt: skip
        row = json.loads(_row(instance_id, "router.py", functions))
        rows += json.dumps({**row, "base_commit": _git(repo, "rev-parse", "HEAD")}) + "\n"
    data = base / "dev.jsonl"
    data.write_text(rows)
    work = base / "work"
    argv = ["--data", str(data), "--repos", str(base / "repos"), "--out", str(base / "out"),
            "--workdir", str(work), "--dense", "hash", "--budgets", "8000",
            "--no-baseline"]  # fmt: skip
    assert swebench.main(argv) == 0
    return base / "repos", data, work


def test_the_overlays_layout_is_read_and_matches_swebench(
    layered: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """In eval.swebench's default layout each instance's tree is swapped in: the baseline
    variant gives eval.swebench's figures; fcov without gold functions is "-", not 0."""
    repos, data, work = layered
    results = (work.parent / "out" / "results.jsonl").read_text().splitlines()
    done = [json.loads(x)["ours"] for x in results]
    capsys.readouterr()
    argv = ["--workdir", str(work), "--repos", str(repos), "--data", str(data), "--dense",
            "hash", "--variant", "pack.mmr_lambda=0.9"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 instances, budget 8000")
    figures = _figures(out)
    expected = [f"{100 * sum(r[k] for r in done) / len(done):.1f}"
                for k in ("acc@1", "acc@3", "acc@5", "acc@10", "hit@8000")]  # fmt: skip
    assert figures["baseline"][:5] == expected and expected[-1] == "100.0"
    assert set(figures) == {"baseline", "pack.mmr_lambda=0.9"}
    assert main([*argv[:6], "--instances", "acme__router-2"]) == 0
    assert _figures(capsys.readouterr().out)["baseline"][-1] == "-"


def test_a_workdir_without_trees_or_without_repos_says_what_it_needs(
    layered: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tree for any selected instance, or the overlays layout without --repos, is a
    message naming the layout needed and exit 1 (not a KeyError)."""
    _, data, work = layered
    assert main(["--workdir", str(tmp_path), "--data", str(data)]) == 1
    assert "WORKDIR/<owner__name>/" in capsys.readouterr().err
    assert main(["--workdir", str(work), "--data", str(data)]) == 1
    assert "--repos is needed" in capsys.readouterr().err
