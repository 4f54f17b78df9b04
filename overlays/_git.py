"""Git facts about a working tree, read with GitPython (imported on first use)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Hunk", "git_tracks", "head_commit", "working_diff"]


def git_tracks(root: Path) -> bool:
    """Whether ``root`` is inside a git work tree that does not ignore it (a folder that a
    parent repository ignores, like a virtualenv, has no diff of its own)."""
    try:
        import git
    except ImportError:
        return False
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return False
    try:
        if repo.working_tree_dir is None:
            return False
        rel = Path(root).resolve().relative_to(Path(repo.working_tree_dir).resolve())
        if str(rel) == ".":
            return True
        try:
            repo.git.check_ignore("-q", "--", str(rel))
        except git.GitCommandError:
            return True  # exit 1: not ignored
        return False
    except ValueError:
        return False
    finally:
        repo.close()


def head_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None outside git or before the first commit."""
    try:
        import git
    except ImportError:  # GitPython without a git executable
        return None
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        return str(repo.head.commit.hexsha)
    except (ValueError, TypeError, git.GitCommandError):
        return None  # an unborn branch has no commit yet
    finally:
        repo.close()


@dataclass(frozen=True, slots=True)
class Hunk:
    """One hunk of the working tree's diff against HEAD."""

    path: str
    text: str  # the ``@@`` line and the hunk's lines, as git prints them


_HUNK_HEAD = re.compile(r"^@@ ")
_FILE_HEAD = re.compile(r"^diff --git a/(.*) b/(.*)$")


def working_diff(root: Path, *, max_bytes: int = 1 << 20) -> list[Hunk]:
    """Hunks of tracked changes (staged and unstaged) against HEAD; [] outside git.

    A diff larger than ``max_bytes`` is cut at a hunk boundary (the caller only shows the
    most relevant hunks anyway).
    """
    try:
        import git
    except ImportError:
        return []
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return []
    try:
        raw = repo.git.diff("HEAD", "--no-color", "--no-ext-diff", "-U3", "--", ".")
    except git.GitCommandError:
        return []  # no HEAD yet
    finally:
        repo.close()
    hunks: list[Hunk] = []
    path = ""
    lines: list[str] = []
    for line in raw[:max_bytes].split("\n"):
        head = _FILE_HEAD.match(line)
        if head or _HUNK_HEAD.match(line):
            if lines:
                hunks.append(Hunk(path, "\n".join(lines)))
            lines = []
            if head:
                path = head.group(2)
                continue
        if lines or _HUNK_HEAD.match(line):
            lines.append(line)
    if lines:
        hunks.append(Hunk(path, "\n".join(lines)))
    return hunks
