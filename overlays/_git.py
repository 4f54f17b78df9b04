"""Git facts about a working tree, read with GitPython (imported on first use)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from indexers import git_overrides
from overlays._diff import _git, _repo

__all__ = ["Hunk", "diff_sides", "git_tracks", "head_commit", "working_diff"]


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
    repo.git.update_environment(**git_overrides())
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
    repo.git.update_environment(**git_overrides())
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
_FILE_HEAD = "diff --git "
# git's C-style quoting of a path with a quote, a backslash or a control character in it
# (non-ASCII is left as is: ``core.quotePath=false``).
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def working_diff(root: Path, *, max_bytes: int = 1 << 20) -> list[Hunk]:
    """Hunks of tracked changes (staged and unstaged) against HEAD under ``root``, with
    paths relative to it (a workspace in a sub-folder sees its own files only); [] outside
    git.

    A diff larger than ``max_bytes`` is cut at a hunk boundary (the caller only shows the
    most relevant hunks anyway). Paths are read whatever the user's git configuration says
    about prefixes and quoting, with spaces, quotes or any script in them; a rename is a
    deletion and an addition.
    """
    repo = _repo(root)  # None outside git and before the first commit
    if repo is None:
        return []
    repo.close()
    import git

    try:  # run in ``root`` (GitPython's ``repo.git`` runs at the top, where "." is all)
        raw = _git(root).execute(
            ["git", "-c", "core.quotePath=false", "-c", "diff.noprefix=false",
             "-c", "diff.mnemonicPrefix=false", "diff", "HEAD", "--relative", "--no-color",
             "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "-U3",
             "--", "."])  # fmt: skip
    except git.GitCommandError:
        return []
    # Bytes no UTF-8 reads (a Latin-1 file, a name from another system) as U+FFFD, as the
    # indexers read them: kept as surrogates they would fail every later encode.
    text = str(raw).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    hunks: list[Hunk] = []
    path = ""
    lines: list[str] = []
    for line in text[:max_bytes].split("\n"):
        head = line.startswith(_FILE_HEAD)
        if head or _HUNK_HEAD.match(line):
            if lines:
                hunks.append(Hunk(path, "\n".join(lines)))
            lines = []
            if head:
                path = _diff_path(line[len(_FILE_HEAD) :])
                continue
        if lines or _HUNK_HEAD.match(line):
            lines.append(line)
    if lines:
        hunks.append(Hunk(path, "\n".join(lines)))
    return hunks


def untracked_files(root: Path) -> list[str]:
    """Files under ``root`` that git neither tracks nor ignores, relative to it, sorted;
    [] outside git and before the first commit (as ``working_diff``)."""
    repo = _repo(root)
    if repo is None:
        return []
    repo.close()
    import git

    try:  # run in ``root``: ls-files prints paths relative to where it runs
        raw = _git(root).execute(
            ["git", "-c", "core.quotePath=false", "ls-files", "--others", "--exclude-standard",
             "-z", "--", "."], stdout_as_string=False)  # fmt: skip
    except git.GitCommandError:
        return []
    names = bytes(raw).decode("utf-8", "surrogateescape").split("\0")
    return sorted(n for n in names if n and not n.endswith("/"))  # "x/": a nested repository


def _diff_path(names: str) -> str:
    """The path of a ``diff --git a/P b/P`` line's rest (both sides name one file: renames
    are off), quoted by git or not."""
    if names.startswith('"'):
        return _unquote(names).removeprefix("a/")
    half = (len(names) - 1) // 2  # "a/P b/P": the two names are equally long
    return names[:half].removeprefix("a/")


def _unquote(text: str) -> str:
    """The first C-quoted string of ``text`` (``"a/x\\"y"``), unescaped as git wrote it
    (octal escapes are UTF-8 bytes)."""
    out = bytearray()
    i = 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and i + 3 < len(text):
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.extend(text[i].encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="replace")


def diff_sides(root: Path, path: str) -> tuple[bytes | None, bytes | None]:
    """A ``working_diff`` path's (relative to ``root``) bytes at HEAD and in the working
    tree (None where that side has no such file, or there is no git)."""
    try:
        import git
    except ImportError:
        return None, None
    try:
        git.Repo(root, search_parent_directories=True).close()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None, None
    try:  # ``HEAD:./P`` is P relative to the folder git runs in
        old: bytes | None = _git(root).execute(["git", "show", f"HEAD:./{path}"],
                                               stdout_as_string=False)  # fmt: skip
    except git.GitCommandError:
        old = None
    try:
        new: bytes | None = (Path(root) / path).read_bytes()
    except OSError:
        new = None
    return old, new
