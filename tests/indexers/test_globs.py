"""Gitignore-like globs (``indexers._globs``): paths, folders, classes, and fnmatch parity."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexers._globs import glob_to_regex as _glob_to_regex

# --- _glob_to_regex ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),  # no '/': the basename at any depth
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),  # '*' never crosses '/'
        ("src/*.py", "lib/src/a.py", False),  # an inner '/' anchors at the root
        ("/setup.py", "setup.py", True),
        ("/setup.py", "pkg/setup.py", False),
        ("**/test_*.py", "test_a.py", True),  # '**/' may match no folder at all
        ("**/test_*.py", "a/b/test_a.py", True),
        ("src/**/x.py", "src/x.py", True),
        ("src/**/x.py", "src/a/b/x.py", True),
        ("src/**", "src/a/b.py", True),
        ("src/**", "src", False),
        ("**", "anything/at/all", True),
        ("build/", "build/out.o", True),  # a trailing '/' matches the folder's contents
        ("build/", "a/build/out.o", True),
        ("build/", "build", False),
        ("docs", "docs/a.md", True),  # matching a folder matches everything under it
        ("docs", "docs", True),
        ("docs", "mydocs/a.md", False),
        ("?.py", "a.py", True),
        ("?.py", "ab.py", False),
        ("a?b", "a/b", False),  # '?' never matches '/'
        ("[abc].py", "b.py", True),
        ("[!abc].py", "b.py", False),
        ("[!abc].py", "d.py", True),
        ("[a-c]x.py", "cx.py", True),
        ("a**b.py", "aXYb.py", True),  # '**' inside a segment is a plain '*'
        ("a**b.py", "a/b.py", False),
        (r"\*.py", "*.py", True),
        (r"\*.py", "a.py", False),
        ("a.py", "aXpy", False),  # '.' is literal
        ("file (1).txt", "file (1).txt", True),
        ("*.txt", "line\nbreak.txt", True),
    ],
)
def test_glob_to_regex(pattern: str, path: str, expected: bool) -> None:
    """Gitignore-like globs match the workspace-relative paths they should, and no others."""
    assert bool(_glob_to_regex(pattern).fullmatch(path)) is expected


@given(
    pattern=st.text(alphabet="ab.*?", min_size=1, max_size=6),
    name=st.text(alphabet="ab.", min_size=1, max_size=6),
)
def test_glob_segment_agrees_with_fnmatch(pattern: str, name: str) -> None:
    """On a single name without '/', the glob agrees with fnmatch (the reference)."""
    assert bool(_glob_to_regex(pattern).fullmatch(name)) is fnmatch.fnmatchcase(name, pattern)


@given(st.lists(st.text(alphabet="abc._-", min_size=1, max_size=5), min_size=1, max_size=4))
def test_literal_glob_matches_itself_and_descendants(parts: list[str]) -> None:
    """A wildcard-free glob matches its own path and anything under it, anchored."""
    pattern = "/" + "/".join(parts)
    rx = _glob_to_regex(pattern)
    assert rx.fullmatch(pattern[1:])
    assert rx.fullmatch(pattern[1:] + "/child.py")
    assert not rx.fullmatch("x" + pattern)
