"""Vendored code by name: build outputs only when untracked, copied-in library releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexers._walk import SkipReason, WalkOptions, walk
from tests.indexers.test_walk import by_path, commit_all, init_repo, reason_of, write


def test_build_output_names_skip_only_untracked(tmp_path: Path) -> None:
    """A tracked package named build/ is indexed; an untracked build/ output is not."""
    root = init_repo(tmp_path / "r")
    write(root, "src/build/__init__.py", "def main():\n    pass\n")
    commit_all(root)
    write(root, "build/lib/out.py", "x = 1\n")
    write(root, "node_modules/pkg/index.js", "module.exports = 1;\n")
    commit_all(root, "vendored")
    write(root, "dist/bundle.py", "y = 2\n")  # untracked, not ignored
    items = by_path(list(walk(root)))
    assert reason_of(items, "src/build/__init__.py") is None
    assert reason_of(items, "build/lib/out.py") is None  # tracked: somebody meant it
    assert reason_of(items, "node_modules/pkg/index.js") is SkipReason.VENDORED
    assert reason_of(items, "dist/bundle.py") is SkipReason.VENDORED


@pytest.mark.parametrize(
    ("name", "vendored"),
    [
        ("jquery-3.5.1.js", True),
        ("underscore-1.13.1.js", True),
        ("bootstrap-4.6.css", True),
        ("doctools.js", False),
        ("app-v2.ts", False),
        ("searchtools.js", False),
    ],
)
def test_versioned_library_files_are_vendored(tmp_path: Path, name: str, vendored: bool) -> None:
    """A copied-in library release (name-version.js/css) is vendored; app files are not."""
    write(tmp_path, f"static/{name}", "var x = 1;\n")
    items = by_path(list(walk(tmp_path, WalkOptions(use_git=False))))
    assert (reason_of(items, f"static/{name}") is SkipReason.VENDORED) is vendored
