"""Co-change history: counts from commits' file lists, the Jaccard share between files, the
JSON form a base stores, and ``git log`` of a real temporary repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from overlays import ChangeHistory, read_history
from overlays._history import MIN_CHANGES
from tests.engine.test_workspace import GIT_ENV


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=GIT_ENV)


def _commit(root: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)


def test_counts_pairs_and_skips_sweeping_commits() -> None:
    """Each commit counts once per file and once per pair; a commit over the file limit
    (a rename, a reformat) counts nothing; repeated paths in one commit count once."""
    history = ChangeHistory.of(
        [["a.py", "b.py"], ["a.py", "b.py", "a.py"], ["a.py", "c.py"], [f"x{i}" for i in range(5)]],
        max_files=4,
    )
    assert history.commits == 3
    assert history.changes == {"a.py": 3, "b.py": 2, "c.py": 1}
    assert history.together["a.py"] == {"b.py": 2, "c.py": 1}
    assert history.together["b.py"] == {"a.py": 2}


def test_related_is_the_jaccard_share_among_the_given_paths() -> None:
    """both / (a + b - both), only between the paths asked about; a path changed fewer than
    MIN_CHANGES times lends nothing (it was added with whatever was beside it)."""
    history = ChangeHistory.of([["a", "b"], ["a", "b"], ["a"], ["a", "c"], ["b", "d"], ["b", "d"]])
    related = history.related(["a", "b", "c"])
    assert related["a"] == {"b": pytest.approx(2 / (4 + 4 - 2))}
    assert related["b"] == {"a": pytest.approx(2 / 6)}
    assert MIN_CHANGES == 2 and "c" in related and "c" not in related["a"]
    assert related["c"] == {"a": pytest.approx(1 / (1 + 4 - 1))}
    assert history.related(["d"]) == {} and ChangeHistory().related(["a"]) == {}


def test_a_hub_file_is_near_nothing() -> None:
    """A changelog touched by every commit is far from each file, though each file's every
    change touched it."""
    sets = [["CHANGES", f"f{i % 10}.py"] for i in range(100)] + [["f1.py", "f2.py"]] * 3
    related = ChangeHistory.of(sets).related(["CHANGES", "f1.py", "f2.py"])
    assert related["f1.py"]["f2.py"] > related["f1.py"]["CHANGES"]


def test_json_round_trip_and_damage() -> None:
    """The stored form reads back equal; another format or a damaged file is no history."""
    history = ChangeHistory.of([["a", "b", "c"], ["b", "c"], ["c", "d"]], commit="abc")
    back = ChangeHistory.from_json(history.to_json())
    assert back is not None
    assert (back.commit, back.commits, back.changes, back.together) == (
        "abc", 3, history.changes, history.together)  # fmt: skip
    assert ChangeHistory.from_json('{"format": 99}') is None
    assert ChangeHistory.from_json(history.to_json()[:-9]) is None
    assert ChangeHistory.from_json('{"format": 1, "paths": ["a"], "changes": []}') is None


def test_read_history_from_git(tmp_path: Path) -> None:
    """Up to the commit asked for, merges and sweeping commits left out, paths relative to
    the folder read (files outside it not counted)."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    _commit(root, {"pkg/a.py": "a = 1\n", "pkg/b.py": "b = 1\n", "docs/x.md": "x\n"}, "one")
    _commit(root, {"pkg/a.py": "a = 2\n", "pkg/b.py": "b = 2\n"}, "two")
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                           text=True, check=True, env=GIT_ENV).stdout.strip()  # fmt: skip
    _commit(root, {"pkg/a.py": "a = 3\n", "pkg/c.py": "c = 3\n"}, "three")
    history = read_history(root, "HEAD")
    assert history is not None and history.commits == 3
    assert history.changes == {"pkg/a.py": 3, "pkg/b.py": 2, "docs/x.md": 1, "pkg/c.py": 1}
    assert history.together["pkg/a.py"]["pkg/b.py"] == 2
    older = read_history(root, first)
    assert older is not None and older.commits == 2 and "pkg/c.py" not in older.changes
    inside = read_history(root / "pkg", "HEAD")
    assert inside is not None and set(inside.changes) == {"a.py", "b.py", "c.py"}
    assert read_history(root, "HEAD", max_files=2) is not None
    assert read_history(root, "HEAD", max_files=2).commits == 2  # type: ignore[union-attr]
    assert read_history(root, "HEAD", limit=1).commits == 1  # type: ignore[union-attr]
    assert read_history(root, "0" * 40) is None
    assert read_history(tmp_path / "nowhere", "HEAD") is None


def test_a_clone_missing_old_objects_gives_the_commits_before_them(tmp_path: Path) -> None:
    """Reading stops where an object is missing (a partial or damaged clone): the newer
    commits still count; the history does not fail."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    _commit(root, {"old.py": "o = 1\n", "other.py": "x = 1\n"}, "old")
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=root, capture_output=True,
                          text=True, check=True, env=GIT_ENV).stdout.strip()  # fmt: skip
    _commit(root, {"a.py": "a = 1\n", "b.py": "b = 1\n"}, "one")
    _commit(root, {"a.py": "a = 2\n", "b.py": "b = 2\n"}, "two")
    (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    history = read_history(root, "HEAD")
    assert history is not None and history.commits == 1  # "two"; "one" needs the lost tree
    assert history.together["a.py"] == {"b.py": 1} and "old.py" not in history.changes


def test_neighbours_are_the_strongest_partners_over_a_share() -> None:
    """Partners of one path by Jaccard share, strongest first, at least ``min_share``,
    each changed at least MIN_CHANGES times, ``limit`` of them."""
    history = ChangeHistory.of([["a", "b"]] * 3 + [["a", "c"], ["c"], ["a", "d"]] + [["e"]] * 3)
    assert history.neighbours("a", 0.0, 10) == [("b", 3 / 5), ("c", pytest.approx(1 / 6))]
    assert history.neighbours("a", 0.5, 10) == [("b", 0.6)]
    assert history.neighbours("a", 0.0, 1) == [("b", 0.6)]
    assert history.neighbours("e", 0.0, 10) == [] and history.neighbours("zz", 0.0, 10) == []


def test_any_path_reads_back(tmp_path: Path) -> None:
    """Names git would quote (a tab, a quote, a backslash) and non-ASCII ones count as
    they are on disk."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    odd = ['say "hi".py', "tab\there.py", "back\\slash.py", "naïve résumé.py"]
    _commit(root, dict.fromkeys(odd, "x = 1\n"), "odd names")
    history = read_history(root, "HEAD")
    assert history is not None and set(history.changes) == set(odd)
