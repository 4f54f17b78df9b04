"""The citation-validity harness on a tiny repository made here: which snippets cover the
gold code, and a run that keeps going past a bad instance."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine import Snippet, Span
from eval import citations
from eval.citations import _covers_gold, main
from eval.swebench_data import Instance

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
ISSUE = (
    "parse_header crashes on an empty header\n\n"
    "Calling `parse_header('')` raises ValueError instead of returning an empty dict.\n"
)
FILES = {
    "widgets/headers.py": "def parse_header(raw):\n    key, value = raw.split(':', 1)\n"
    "    return {key.strip(): value.strip()}\n\n\ndef format_header(values):\n"
    "    return '; '.join(f'{k}: {v}' for k, v in values.items())\n",
    "widgets/render.py": "def render_page(title, body):\n    return f'<h1>{title}</h1>{body}'\n",
    "widgets/colors.py": "def blend(a, b):\n    return (a + b) / 2\n",
    "big.txt": "payload\n" * 50,
}


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=GIT_ENV
    )
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Repos dir (acme/widgets, whose big.txt blob is missing from the git directory) and
    a JSONL file: two instances on it, one on a repository that is not there."""
    base = tmp_path_factory.mktemp("cit")
    repo = base / "repos" / "acme+widgets" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q", "-m", "b")
    commit = _git(repo, "rev-parse", "HEAD")
    blob = _git(repo, "rev-parse", "HEAD:big.txt")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # a partial mirror's gap
    row = {"instance_id": "acme__widgets-1", "repo": "acme/widgets", "base_commit": commit,
           "problem_statement": ISSUE, "gold_files": ["widgets/headers.py"],
           "gold_functions": ["widgets/headers.py:parse_header"]}  # fmt: skip
    rows = [row, {**row, "instance_id": "acme__widgets-2"},
            {**row, "instance_id": "nobody__nothing-1", "repo": "nobody/nothing"}]  # fmt: skip
    data = base / "dev.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return base / "repos", data


def _argv(dataset: tuple[Path, Path], out: Path, *extra: str) -> list[str]:
    repos, data = dataset
    return ["--data", str(data), "--repos", str(repos), "--out", str(out), *extra]


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    lines = (out / "citations.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")


def test_a_bad_instance_is_its_error_row_and_the_run_goes_on(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """An instance whose repository is missing is an error row listed in the report, the
    others are measured, the exit code is 1; the blobs materialise reported missing are
    recorded, not 0."""
    out = tmp_path / "out"
    assert main(_argv(dataset, out)) == 1
    rows = _rows(out)
    assert "no git directory for nobody/nothing" in rows["nobody__nothing-1"]["error"]
    for good in ("acme__widgets-1", "acme__widgets-2"):
        assert rows[good]["ledger_ok"] and rows[good]["missing_blobs"] == 1
        adversary = rows[good]["adversary"]
        assert adversary["invalid_caught"] == adversary["invalid_injected"] > 0
    marker = json.loads((out / "work" / "acme__widgets-1" / "materialised.json").read_text())
    assert marker == {"missing_blobs": 1}
    report = (out / "citations.md").read_text()
    assert "Instances: 2, budget 8000. 1 failed" in report
    assert "- nobody__nothing-1: FileNotFoundError: no git directory" in report


def test_rows_are_written_as_they_are_made(
    dataset: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped during its second instance keeps the first one's row."""
    evaluate = citations._evaluate

    def stop_second(inst: Instance, *args: Any) -> dict[str, Any]:
        if inst.instance_id == "acme__widgets-2":
            raise KeyboardInterrupt
        return evaluate(inst, *args)

    monkeypatch.setattr(citations, "_evaluate", stop_second)
    with pytest.raises(KeyboardInterrupt):
        main(_argv(dataset, tmp_path / "out"))
    assert list(_rows(tmp_path / "out")) == ["acme__widgets-1"]


def test_a_tree_left_edited_by_a_killed_run_is_written_again(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """The adversary names the file it edits until it is restored: a kept work folder
    where a killed run left it edited gets the commit's tree again."""
    work = tmp_path / "work"
    argv = _argv(dataset, tmp_path / "out", "--workdir", str(work), "--instances",
                 "acme__widgets-1")  # fmt: skip
    assert main(argv) == 0
    home = work / "acme__widgets-1"
    assert not (home / "editing.json").exists()
    source = home / "tree" / "widgets" / "render.py"
    source.write_text(FILES["widgets/render.py"] + "# edited after the turn\n")
    (home / "editing.json").write_text(json.dumps({"path": "widgets/render.py"}))
    assert main(argv) == 0
    assert source.read_text() == FILES["widgets/render.py"]
    assert not (home / "editing.json").exists()


def test_nothing_selected_and_a_work_folder_in_a_checkout_are_refused(
    dataset: tuple[Path, Path], tmp_path: Path
) -> None:
    """No instance selected exits 1; an --out inside a git working tree (its work folder
    would be taken for part of that checkout) is refused before anything is done."""
    assert main(_argv(dataset, tmp_path / "out", "--instances", "none-*")) == 1
    checkout = dataset[0] / "acme+widgets" / "repo" / "out"
    with pytest.raises(SystemExit, match="inside a git working tree"):
        main(_argv(dataset, checkout))
    assert not checkout.exists()


def _snippet(uri: str, symbol: str) -> Snippet:
    return Snippet(1, "c1", uri, symbol, uri, Span(1, 3), "0" * 64, "MIT", 10, 1.0, "bm25", "x")


def test_a_hash_in_a_path_is_part_of_the_path() -> None:
    """A snippet's ``path#Lx-Ly`` is cut at its last "#": gold named with one is covered."""
    inst = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",),
                    ("mid#dle/use#it.py:use",), None)  # fmt: skip
    assert _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "use"), inst)
    assert not _covers_gold(_snippet("mid#dle/use#it.py#L1-L3", "other"), inst)
    files_only = Instance("o__r-1", "o/r", "0" * 40, "issue", ("mid#dle/use#it.py",), (), None)
    assert _covers_gold(_snippet("mid#dle/use#it.py#L5-L9", ""), files_only)
