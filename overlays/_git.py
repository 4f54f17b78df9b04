"""Git facts about a working tree, read with GitPython (imported on first use)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["head_commit"]


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
