"""git_state on real temporary repositories: what moves the freshness token and what does
not, the commit and branch it reads, and None where there is no commit to stand on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from overlays import git_state
from tests.engine.test_workspace import GIT_ENV, make_repo


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          env=GIT_ENV, text=True)  # fmt: skip
    return done.stdout.strip()


def _token(root: Path, exclude: tuple[str, ...] = ()) -> str:
    state = git_state(root, exclude)
    assert state is not None
    return state.token


def test_commit_and_branch_are_read(tmp_path: Path) -> None:
    """The state names HEAD's commit and branch; a detached HEAD has no branch."""
    repo = make_repo(tmp_path / "repo")
    state = git_state(repo)
    assert state is not None
    assert (state.commit, state.branch) == (_git(repo, "rev-parse", "HEAD"), "main")
    _git(repo, "checkout", "-q", "-b", "feature/x")
    assert git_state(repo) == git_state(repo)
    assert git_state(repo).branch == "feature/x"  # type: ignore[union-attr]
    _git(repo, "checkout", "-q", "--detach")
    assert git_state(repo).branch == ""  # type: ignore[union-attr]


def test_every_change_moves_the_token(tmp_path: Path) -> None:
    """An edit, a second edit of a modified file, staging, a new file, a rename, a delete
    and a commit each give a new token; asking again without a change gives the same."""
    repo = make_repo(tmp_path / "repo")
    seen = [_token(repo)]

    def step() -> None:
        token = _token(repo)
        assert token not in seen
        assert _token(repo) == token
        seen.append(token)

    (repo / "hooks.py").write_text("x = 1\n")
    step()
    (repo / "hooks.py").write_text("x = 22\n")  # already modified: the status reads the same
    step()
    _git(repo, "add", "hooks.py")
    step()
    (repo / "new.py").write_text("y = 2\n")
    step()
    _git(repo, "mv", "README.md", "READ.md")
    step()
    (repo / "READ.md").write_text("# Renamed\n")
    step()
    (repo / "READ.md").write_text("# Renamed twice\n")  # a renamed path is read, not its old one
    step()
    (repo / "new.py").unlink()
    step()
    _git(repo, "commit", "-qam", "work")
    step()


def test_an_edit_keeping_size_and_mtime_moves_the_token(tmp_path: Path) -> None:
    """Same size, same mtime, different bytes: the change time still differs."""
    repo = make_repo(tmp_path / "repo")
    path = repo / "hooks.py"
    path.write_text(path.read_text() + "# a\n")
    before = _token(repo)
    st = path.stat()
    path.write_text(path.read_text()[:-2] + "b\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _token(repo) != before


def test_excluded_folders_and_paths_outside_the_root_do_not_count(tmp_path: Path) -> None:
    """The index's own state folder and files beside a sub-folder root never move it."""
    repo = make_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a.py").write_text("a = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "pkg")
    before, inner = _token(repo, ("state",)), _token(repo / "pkg")
    (repo / "state").mkdir()
    (repo / "state" / "index.bin").write_bytes(b"\0")
    (repo / "outside.py").write_text("o = 1\n")
    assert _token(repo / "pkg") == inner
    assert _token(repo, ("state",)) != before  # outside.py is in the root
    (repo / "outside.py").unlink()
    assert _token(repo, ("state",)) == before
    (repo / "pkg" / "a.py").write_text("a = 2\n")
    assert _token(repo / "pkg") != inner


def test_no_state_without_a_commit(tmp_path: Path) -> None:
    """Outside git, before the first commit, and after the repository is removed: None."""
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_state(plain) is None
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    _git(unborn, "init", "-q")
    (unborn / "a.py").write_text("a = 1\n")
    assert git_state(unborn) is None
    repo = make_repo(tmp_path / "repo")
    assert git_state(repo) is not None
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    assert git_state(repo) is None
