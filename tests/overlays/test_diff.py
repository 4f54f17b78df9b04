"""git_state on real temporary repositories: what moves the freshness token and what does
not, the commit and branch it reads, and None where there is no commit to stand on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from overlays import git_state, working_diff
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


def test_working_diff_reads_any_path_whatever_git_is_configured_to_print(
    tmp_path: Path,
) -> None:
    """Spaces, another script, a quote in the name, and a user's ``diff.noprefix`` or
    ``diff.mnemonicPrefix``: each hunk still names its file (a greedy ``a/(.*) b/(.*)``
    cut ``a b/re try.py`` to ``re try.py``; git's quoted names were read as hunk lines)."""
    from overlays import working_diff

    repo = make_repo(tmp_path / "repo")
    names = ["a b/re try.py", "a b/ré.py", 'q"uote.py', "hooks.py"]
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "names")
    for name in names:
        (repo / name).write_text("x = 2\n")
    for config in ((), ("diff.noprefix", "true"), ("diff.mnemonicPrefix", "true")):
        if config:
            _git(repo, "config", *config)
        hunks = working_diff(repo)
        assert sorted(h.path for h in hunks) == sorted(names), config
        assert all(h.text.startswith("@@ ") and "+x = 2" in h.text for h in hunks)


def test_the_diff_lane_never_shows_a_secret_file_or_a_key_body(tmp_path: Path) -> None:
    """A tracked ``.env`` is left out as the index leaves it out; an edit inside a private
    key shows none of the key's lines, though the hunk holds no BEGIN line."""
    from engine._workspace._diff import clean_diff
    from indexers import WalkOptions
    from overlays import working_diff

    repo = make_repo(tmp_path / "repo")
    body = [f"MIIE{i:02d}" + "Zk9q" * 15 for i in range(30)]
    pem = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"])
    (repo / "certs.py").write_text(f'KEY = """\n{pem}\n"""\n\n\ndef load():\n    return KEY\n')
    (repo / ".env").write_text("API_TOKEN=Ee5Wm3Rt6Yp1Kv9Lx2Nc5Bd7Qa4Pj\n")
    _git(repo, "add", "-A", "-f")
    _git(repo, "commit", "-qm", "key")
    text = (repo / "certs.py").read_text()
    (repo / "certs.py").write_text(text.replace(body[15], "MIIEchanged" + "Zk9q" * 14))
    (repo / ".env").write_text("API_TOKEN=Ee5Wm3Rt6Yp1Kv9Lx2Nc5Bd7Qa4Pj\nMORE=1\n")
    raw = working_diff(repo)
    assert {h.path for h in raw} == {"certs.py", ".env"}
    assert any(body[14] in h.text for h in raw)  # the key's lines are in git's hunk
    clean = clean_diff(repo, raw, WalkOptions())
    assert [h.path for h in clean] == ["certs.py"]
    shown = "\n".join(h.text for h in clean)
    assert not any(line in shown for line in body) and "MIIEchanged" not in shown
    certs = next(h for h in raw if h.path == "certs.py")
    assert shown.startswith("@@ ") and shown.count("\n") == certs.text.count("\n")


def test_a_name_no_utf8_reads_is_skipped_and_never_fails_a_call(tmp_path: Path) -> None:
    """A file named in Latin-1 bytes, tracked, then changed, then removed while git history
    keeps it: indexing skips it with the reason, and search, history and a context with
    it in the working-tree diff all answer (each raised on its lone surrogates)."""
    from engine import Config, Workspace
    from indexers import Skipped, SkipReason, walk

    repo = make_repo(tmp_path / "repo")
    bad = os.fsdecode(b"old\xe9.py")
    (repo / bad).write_bytes(b"x = '\xe9'\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "latin-1 name")
    skipped = [s for s in walk(repo) if isinstance(s, Skipped) and "UTF-8" in s.detail]
    assert [(s.path, s.reason) for s in skipped] == [("old\\xe9.py", SkipReason.UNREADABLE)]
    with Workspace.open(repo, Config(dense_model="hash")) as ws:
        ws.index()
        (repo / bad).write_bytes(b"x = '\xe9\xe9'\n")
        pack = ws.build_context("compute_2", budget_tokens=2000)
        assert "compute_2" in pack.render() and "old\ufffd.py" in pack.render()
        _git(repo, "rm", "-q", "--cached", bad)
        (repo / bad).unlink()
        _git(repo, "commit", "-qm", "gone")
        ws.index()
        assert ws.search("compute_2", mode="bm25")[0].chunk.symbol == "compute_2"
        assert ws.build_context("compute_2", budget_tokens=2000).citations


def test_the_base_checkout_runs_none_of_the_users_hooks(tmp_path: Path) -> None:
    """Indexing a dirty tree checks the base out in a worktree of its own: the user's
    post-checkout hook does not run there (it did, inside cortex's state folder)."""
    from engine import Config, Workspace

    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (repo / "hooks.py").write_text((repo / "hooks.py").read_text() + "\n# edited\n")
    with Workspace.open(repo, Config(dense_model="hash")) as ws:
        ws.index()
        assert ws.search("compute_2", mode="bm25")
    assert not marker.exists()
    _git(repo, "checkout", "-q", "-b", "other")  # the hook itself works for the user
    assert marker.exists()


def test_reading_the_trees_state_runs_no_index_hook(tmp_path: Path) -> None:
    """Each call reads ``git status``; with optional locks on, git refreshed the user's
    ``.git/index`` and ran their ``post-index-change`` hook every time."""
    from engine import Config, Workspace

    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "index-hook-ran"
    hook = repo / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    os.utime(repo / "hooks.py")  # a stat change git status would write back to the index
    with Workspace.open(repo, Config(dense_model="hash")) as ws:
        ws.index()
        ws.build_context("compute_2", budget_tokens=2000)
    assert not marker.exists()


def test_the_diff_lane_shows_only_the_workspaces_own_files(tmp_path: Path) -> None:
    """A workspace in a sub-folder of a repository (a monorepo's service) sees its own
    edits, named as its citations name them, and none of its neighbours'; a file the
    user's exclude glob leaves out of the index is left out of the diff lane too."""
    from engine import Config, Workspace

    repo = make_repo(tmp_path / "repo")
    for name in ("svc/pkg/mod.py", "svc/private/plan.py", "other/lib.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("def helper():\n    return 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "tree")
    for name, word in (("svc/pkg/mod.py", "own_edit"), ("svc/private/plan.py", "secret_plan"),
                       ("other/lib.py", "neighbour_edit")):  # fmt: skip
        (repo / name).write_text(f"def helper():\n    return '{word}'\n")
    config = Config(dense_model="hash", ledger=False, exclude=("private/**",))
    assert {h.path for h in working_diff(repo / "svc")} == {"pkg/mod.py", "private/plan.py"}
    with Workspace.open(repo / "svc", config) as ws:
        ws.index()
        shown = ws.build_context("helper own_edit", budget_tokens=2000).render()
    assert "--- pkg/mod.py" in shown and "own_edit" in shown
    assert "neighbour_edit" not in shown and "other/lib.py" not in shown
    assert "secret_plan" not in shown and "private/plan.py" not in shown
