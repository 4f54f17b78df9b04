"""eval.tune over work folders of the layouts eval.swebench makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.tune import main

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
