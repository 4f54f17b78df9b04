"""Instances mined from a history made here: only the fix that a report could have asked for
is kept, with its parent as the tree and its edited source file as the gold."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from eval.mine_commits import main, mine
from eval.swebench_data import load_instances

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # a GitHub token's shape
FIX = ("Return an empty mapping for an empty header\n\nCalling it with an empty string raised "
       f"IndexError instead of an empty result; handle that case. Seen with {TOKEN}.\n\n"
       "Signed-off-by: A <a@x>")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True, env=GIT_ENV).stdout.strip()  # fmt: skip


def _commit(root: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD")


def _history(tmp_path: Path) -> tuple[Path, str, str]:
    root = tmp_path / "repos" / "acme+headers"
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    first = _commit(root, {"src/headers.py": "def read(text):\n    return text.split()[0]\n",
                           "tests/test_headers.py": "def test_read():\n    pass\n",
                           "README.md": "# headers\n"}, "Initial import")  # fmt: skip
    fix = _commit(root, {"src/headers.py": "def read(text):\n    return text.split()[:1]\n",
                         "tests/test_headers.py": "def test_empty():\n    pass\n"},
                  FIX)  # fmt: skip
    # Not kept: a docs subject; a message naming the file; an added source file; tests only.
    _commit(root, {"README.md": "# headers\n\nusage\n"},
            "docs: explain how an empty header is handled when reading, with an example " * 2)
    _commit(root, {"src/headers.py": "def read(text):\n    return text.split()[:2]\n"},
            "Fix headers.py so that a folded header line is read when it should be " * 2)
    _commit(root, {"src/headers.py": "def read(text):\n    return text.split()[:3]\n",
                   "src/fold.py": "def fold():\n    pass\n"},
            "Handle folded lines, which failed with an error when a value spanned lines " * 2)
    _commit(root, {"tests/test_headers.py": "def test_fold():\n    pass\n"},
            "A case for the crash when a folded value is empty, which should not fail " * 2)
    return tmp_path / "repos", first, fix


def test_only_the_fix_a_report_could_ask_for_is_kept(tmp_path: Path) -> None:
    """The fix is kept, with its parent and its source file (the test it also edits is in
    gold_files, not in the gold that judges); docs, a message naming the file, a commit
    adding a source file and a tests-only commit are not; trailers are dropped and a
    credential in the message is redacted."""
    repos, first, fix = _history(tmp_path)
    rows, kept = mine(repos, "acme/headers", per_repo=10, depth=100, seed=0)
    assert kept == 1 and len(rows) == 1
    row = rows[0]
    assert row["base_commit"] == first and row["commit"] == fix
    assert row["gold_source_files"] == ["src/headers.py"]
    assert sorted(row["gold_files"]) == ["src/headers.py", "tests/test_headers.py"]
    assert row["language"] == "python" and "Signed-off-by" not in row["problem_statement"]
    assert row["problem_statement"].startswith("Return an empty mapping")
    assert TOKEN not in row["problem_statement"] and "[REDACTED" in row["problem_statement"]


def test_main_writes_rows_the_harness_reads(tmp_path: Path) -> None:
    """The written file loads as the harness's instances, judged by the source gold."""
    repos, first, _ = _history(tmp_path)
    out = tmp_path / "mined" / "rows.jsonl"
    assert main(["--repos", str(repos), "--repo", "acme/headers", "--out", str(out)]) == 0
    (instance,) = load_instances(out)
    assert instance.base_commit == first and instance.gold_files == ("src/headers.py",)
    assert instance.repo == "acme/headers" and instance.language == "python"
    # A language given with the repository is every row's.
    assert main(["--repos", str(repos), "--repo", "acme/headers=cython", "--out", str(out)]) == 0
    assert load_instances(out)[0].language == "cython"
    assert json.loads(out.read_text(encoding="utf-8"))["instance_id"].startswith("acme__headers-")


def test_a_repository_that_is_not_there_is_named(tmp_path: Path, capsys: object) -> None:
    """A missing repository stops the run with exit 2 and its name; nothing is written."""
    out = tmp_path / "rows.jsonl"
    assert main(["--repos", str(tmp_path), "--repo", "acme/none", "--out", str(out)]) == 2
    assert "acme/none" in capsys.readouterr().err and not out.exists()  # type: ignore[attr-defined]
