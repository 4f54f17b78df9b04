"""What differs between a working tree and a base commit, read with GitPython.

All paths are relative to the workspace root (which may be a folder inside a repository),
with ``/`` separators, as the walker gives them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexers import git_overrides

if TYPE_CHECKING:
    import git

__all__ = [
    "GitState",
    "base_commit",
    "changed_paths",
    "checkout",
    "commit_time_ns",
    "git_state",
    "live_refs",
    "rev_parse",
    "tree_token",
]

_DEFAULT_BRANCHES = ("main", "master", "trunk", "develop")
_SKIP_DIRS = frozenset({".git", ".cortex", "node_modules", "__pycache__", ".venv", ".tox"})


@dataclass(frozen=True, slots=True)
class GitState:
    """Where a working tree stands: its commit, branch, and a token that changes whenever
    anything an index could see changes (a commit, a checkout, an edit, a new file)."""

    commit: str
    branch: str  # "" on a detached HEAD
    token: str


def _repo(root: Path) -> git.Repo | None:
    try:
        import git
    except ImportError:
        return None
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    repo.git.update_environment(**git_overrides())
    if repo.working_tree_dir is None:
        repo.close()
        return None
    try:
        repo.head.commit  # noqa: B018 - an unborn branch has no commit to diff against
    except (ValueError, TypeError, git.GitCommandError):
        repo.close()
        return None
    return repo


def _split(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


def _pathspec(exclude: Sequence[str]) -> list[str]:
    return ["--", ".", *(f":(exclude){e}" for e in exclude)]


def git_state(root: Path, exclude: Sequence[str] = ()) -> GitState | None:
    """The working tree's state, or None outside git (or before the first commit).

    The token hashes HEAD, the porcelain status (staged, unstaged, untracked, with the
    HEAD and index blob ids of each changed path) and the size, modification and change
    times of every file the status names, so a second edit to a file that is already
    modified moves it too (ctime: even one that keeps size and mtime). One ``git status``
    per call, which also names the commit and branch: it uses git's stat cache,
    milliseconds on a few thousand files; build_context pays it every turn.
    ``exclude``: folders under ``root`` that never count (the index's own state folder).
    """
    top = _toplevel(root)
    if top is None:
        return None
    import git

    try:
        status = _git(root).status(
            "--porcelain=v2", "--branch", "-z", "--untracked-files=all", *_pathspec(exclude)
        )
    except (git.GitCommandError, OSError):  # the repository went away since its top was found
        _TOPS.pop(str(root), None)
        return None
    records = _split(status)
    heads = dict(r[2:].split(" ", 1) for r in records if r.startswith("# ") and " " in r[2:])
    commit = heads.get("branch.oid", "(initial)")
    if commit == "(initial)":  # an unborn branch has no commit to diff against
        return None
    branch = heads.get("branch.head", "(detached)")
    branch = "" if branch == "(detached)" else branch
    digest = hashlib.sha256(f"{commit}\0{branch}\0".encode())
    for path, record in _status_paths(records):
        digest.update(record.encode("utf-8", "surrogateescape") + b"\0")
        with contextlib.suppress(OSError):  # porcelain paths are relative to the top
            st = os.lstat(top / path)
            digest.update(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\0".encode())
    return GitState(commit, branch, digest.hexdigest())


# Fields before the path in a porcelain v2 record, by its first letter: ordinary change,
# rename or copy (followed by a record holding the original path), unmerged, untracked,
# ignored. See git-status(1), "Porcelain Format Version 2".
_V2_FIELDS = {"1": 8, "2": 9, "u": 10, "?": 1, "!": 1}

# The top of the work tree holding each root, found once (a root's repository rarely
# moves; when it goes, its status fails and the entry is dropped).
_TOPS: dict[str, Path] = {}


def _toplevel(root: Path) -> Path | None:
    """The top of the git work tree holding ``root`` (None outside one, or in a bare
    repository, or without git)."""
    top = _TOPS.get(str(root))
    if top is not None:
        return top
    try:
        import git
    except ImportError:
        return None
    try:
        top = Path(_git(root).rev_parse("--show-toplevel"))
    except (git.GitCommandError, OSError):  # not a work tree, or no such folder
        return None
    _TOPS[str(root)] = top
    return top


def _status_paths(records: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(path, record) of each entry in ``git status --porcelain=v2 -z`` output; a rename's
    original path comes as an entry of its own."""
    original = False
    for record in records:
        if original:
            original = False
            yield record, record
            continue
        fields = _V2_FIELDS.get(record[:1])
        if fields is None:  # a "# branch..." header
            continue
        parts = record.split(" ", fields)
        if len(parts) > fields:
            yield parts[fields], record
        original = record[:1] == "2"


def _git(root: Path) -> git.Git:
    """Git commands run in ``root`` (GitPython's ``repo.git`` runs at the top), under
    ``git_overrides``: optional locks off (``git status`` would otherwise rewrite the
    user's ``.git/index``, running their ``post-index-change`` hook on every call), and
    no command from the workspace's git configuration (``core.fsmonitor``)."""
    import git

    cmd = git.Git(str(root))
    cmd.update_environment(**git_overrides())
    return cmd


def tree_token(root: Path, exclude: Sequence[str] = ()) -> str:
    """A token over the path, size, mtime and ctime of every file under ``root`` (outside
    git), skipping version-control, cache and virtualenv folders and ``exclude``."""
    digest = hashlib.sha256()
    top = str(root)
    skip = {os.path.join(top, e) for e in exclude}  # noqa: PTH118
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS
                         and os.path.join(folder, d) not in skip)  # noqa: PTH118  # fmt: skip
        for name in sorted(files):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))  # noqa: PTH118 - hot loop
                digest.update(
                    f"{folder}/{name}\0{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\0".encode()
                )
    return digest.hexdigest()


def base_commit(root: Path) -> str | None:
    """The commit a base index is built at: the merge-base of HEAD with the default branch
    (``origin/HEAD``, else a local main/master/trunk/develop), or HEAD when there is none."""
    repo = _repo(root)
    if repo is None:
        return None
    try:
        head = repo.head.commit
        default = None
        with contextlib.suppress(Exception):
            default = repo.refs["origin/HEAD"].commit
        if default is None:
            names = {h.name: h for h in repo.heads}
            default = next((names[n].commit for n in _DEFAULT_BRANCHES if n in names), None)
        if default is None:
            return str(head.hexsha)
        bases = repo.merge_base(head, default)
        return str(bases[0].hexsha) if bases else str(head.hexsha)
    finally:
        repo.close()


def _commit(root: Path, ref: str) -> tuple[str, int] | None:
    """(sha, committer time in seconds) of what ``ref`` names at ``root``, or None."""
    repo = _repo(root)
    if repo is None:
        return None
    try:
        commit = repo.commit(ref)
        return str(commit.hexsha), int(commit.committed_date)
    except Exception:  # gitdb, ValueError, BadName: all mean "not a commit here"
        return None
    finally:
        repo.close()


def rev_parse(root: Path, ref: str) -> str | None:
    """The commit ``ref`` names in the repository at ``root``, or None."""
    found = _commit(root, ref)
    return found[0] if found else None


def commit_time_ns(root: Path, commit: str) -> int | None:
    """The committer time of ``commit``, in nanoseconds since the epoch (None if unknown)."""
    found = _commit(root, commit)
    return found[1] * 1_000_000_000 if found else None


def changed_paths(root: Path, base: str, exclude: Sequence[str] = ()) -> set[str] | None:
    """Paths under ``root`` that may differ from commit ``base``: changed in commits since
    it, staged, unstaged, deleted, renamed (both names), untracked (not ignored), or hidden
    from git's own diff (skip-worktree: left out of a sparse checkout or marked so; assumed
    unchanged), whose text in the tree may be anything.

    None when ``root`` is not in git or ``base`` is unknown there (compare everything).
    """
    repo = _repo(root)
    if repo is None:
        return None
    import git

    try:
        cmd = _git(root)
        spec = _pathspec(exclude)
        diff = cmd.diff("--name-only", "-z", "--no-renames", "--relative", base, *spec)
        others = cmd.ls_files("--others", "--exclude-standard", "-z", *spec)
        # One line per tracked path, "TAG MODE SHA STAGE\tPATH": the tag H is plain, S is
        # skip-worktree, lowercase is assume-unchanged; mode 120000 is a symbolic link.
        listed = _split(cmd.ls_files("-v", "-s", "-z", *spec))
        entries = [e.split("\t", 1) for e in listed if "\t" in e]
    except git.GitCommandError:
        return None
    finally:
        repo.close()
    hidden = {path for head, path in entries if not head.startswith("H ")}
    changed = set(_split(diff)) | set(_split(others)) | hidden
    links = [path for head, path in entries if head[2:].startswith("120000 ")]
    return changed | _links_to(root, links, changed)


def _links_to(root: Path, links: Sequence[str], changed: set[str]) -> set[str]:
    """The tracked symbolic ``links`` whose target in the tree is, or is under, a changed
    path: the walk reads a link as its target's text, which git's diff never shows."""
    if not links or not changed:
        return set()
    out: set[str] = set()
    top = os.path.realpath(root)
    for link in links:
        try:
            target = os.path.relpath(os.path.realpath(root / link), top).replace(os.sep, "/")
        except (OSError, ValueError):
            continue
        parts = target.split("/")
        if any("/".join(parts[:i]) in changed for i in range(1, len(parts) + 1)):
            out.add(link)
    return out


def live_refs(root: Path) -> tuple[set[str], set[str]] | None:
    """(local branch names, working tree folders) of the repository at ``root``."""
    repo = _repo(root)
    if repo is None:
        return None
    try:
        branches = {str(h.name) for h in repo.heads}
        listing = repo.git.worktree("list", "--porcelain")
    finally:
        repo.close()
    trees = {
        line[len("worktree ") :] for line in listing.splitlines() if line.startswith("worktree ")
    }
    return branches, {str(Path(t).resolve()) for t in trees}


@contextlib.contextmanager
def checkout(root: Path, commit: str, scratch: Path) -> Iterator[Path]:
    """A temporary, detached working tree of ``commit`` (``git worktree``) in ``scratch``
    (emptied first: a run killed mid-way leaves nothing behind for long); yields the folder
    that corresponds to ``root`` in it, and removes the tree afterwards."""
    repo = _repo(root)
    if repo is None:
        raise ValueError(f"{root} is not in a git repository with commits")
    top = Path(str(repo.working_tree_dir)).resolve()
    rel = Path(root).resolve().relative_to(top)
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    tree = scratch / "tree"
    try:
        # The user's hooks (post-checkout) never run for it, and no filter fetches over
        # the network (Git LFS's smudge): the checkout is ours, and offline. ``-f`` takes
        # over the folder a killed run left registered; ``git worktree prune`` is never run,
        # as it would drop the user's own worktrees whose folders are away for a while.
        repo.git.execute(["git", "-c", f"core.hooksPath={os.devnull}", "worktree", "add",
                          "-f", "--detach", "--no-checkout", "--quiet", str(tree), commit],
                         env={**os.environ, "GIT_LFS_SKIP_SMUDGE": "1"})  # fmt: skip
        # The whole commit, whatever the user's sparse checkout (git copies it to new trees).
        repo.git.execute(["git", "-C", str(tree), "-c", f"core.hooksPath={os.devnull}",
                          "-c", "core.sparseCheckout=false", "checkout", "--quiet", "--detach",
                          commit], env={**os.environ, "GIT_LFS_SKIP_SMUDGE": "1"})  # fmt: skip
        yield tree / rel
    finally:
        with contextlib.suppress(Exception):
            repo.git.worktree("remove", "--force", str(tree))
        repo.close()
        shutil.rmtree(scratch, ignore_errors=True)
