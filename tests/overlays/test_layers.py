"""Bases, overlays and tombstones on real temporary git repositories: branch correctness,
privacy between users, freshness, garbage collection, proof of possession."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from engine import Config, Workspace
from engine.core import Lane
from engine.retrieval import Scored
from overlays import ChangeHistory
from tests.engine.test_workspace import GIT_ENV, make_repo

CONFIG = Config(dense_model="hash", ledger=False)


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=GIT_ENV)


def _texts(ws: Workspace, query: str) -> list[str]:
    """Every indexed text the workspace shows for ``query``: search in all modes, and the
    context's evidence (its goal and advisory repeat the query; its diff lane shows git's)."""
    out = [h.chunk.text for mode in ("bm25", "dense", "hybrid")
           for h in ws.search(query, mode=mode, k=50)]  # fmt: skip
    pack = ws.build_context(query, budget_tokens=4000, record=False)
    out += [b.text for b in pack.prompt_blocks if b.lane is Lane.EVIDENCE]
    return out


def test_a_function_deleted_on_the_branch_never_comes_back(tmp_path: Path) -> None:
    """Tombstones: committed on a branch or only in the working tree, a deleted function is
    gone from every answer, though the shared base still holds it."""
    repo = make_repo(tmp_path / "repo")
    (repo / "gone.py").write_text("def vanishing_helper(x):\n    return x * 7\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "helper")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        assert any("vanishing_helper" in t for t in _texts(ws, "vanishing_helper"))
        _git(repo, "checkout", "-q", "-b", "cleanup")
        (repo / "gone.py").write_text("def replacement(x):\n    return x\n")
        assert not any("vanishing_helper" in t for t in _texts(ws, "vanishing_helper"))
        assert ws.status(check_files=False).tombstones == 1
        _git(repo, "commit", "-qam", "drop helper")
        (repo / "gone.py").unlink()  # and then the file itself, uncommitted
        assert not any("vanishing_helper" in t for t in _texts(ws, "vanishing_helper"))
        view, _ = ws.view()
        assert view.defining(["vanishing_helper"]) == {}
        assert ws.resolve("gone.py#L1-L2").text is None
        _git(repo, "checkout", "-q", "-f", "main")  # back: the base's function is right again
        assert any("vanishing_helper" in t for t in _texts(ws, "vanishing_helper"))
        st = ws.status(check_files=False)
        assert (st.overlay_files, st.tombstones) == (0, 0)


def test_branches_share_one_base_and_refresh_costs_the_diff(tmp_path: Path) -> None:
    """Two branches: one base on disk, two small overlays; an edit re-does one file only."""
    repo = make_repo(tmp_path / "repo", files=30)
    with Workspace.open(repo, CONFIG) as ws:
        first = ws.index()
        assert any(k.startswith("base ") for k in first.seconds)
        (repo / "mod3.py").write_text("def edited_three(v):\n    return v\n")
        report = ws.index()
        assert (report.added, report.changed, report.removed) == (0, 1, 0)
        assert not any(k.startswith("base ") for k in report.seconds)  # the base is untouched
        assert report.chunks_added == 1 and report.embeddings_computed <= 1
        _git(repo, "checkout", "-q", "-b", "feature")
        for i in range(5):
            (repo / f"mod{i + 10}.py").write_text(f"def feature_{i}(v):\n    return v + {i}\n")
        _git(repo, "commit", "-qam", "feature")
        ws.index()
        st = ws.status(check_files=False)
        # mod3 (edited on main, committed here) and mod10-14: replaced, so also tombstoned.
        assert st.branch == "feature" and st.overlay_files == 6 and st.tombstones == 6
        assert len(list((ws.state_dir / "bases").iterdir())) == 1
        overlays = list((ws.state_dir / "overlays").glob("*/*/*"))
        assert len(overlays) == 2  # main (one edited file) and feature
        assert st.overlay_bytes < st.base_bytes
        assert ws.search("feature_3", mode="bm25")[0].chunk.path == "mod13.py"


def test_one_users_uncommitted_text_never_reaches_another(tmp_path: Path) -> None:
    """Two users, two working trees, one state folder: each reads the shared base and only
    their own overlay; resolve gives another user's lines to nobody."""
    repo = make_repo(tmp_path / "repo")
    state = str(tmp_path / "shared-state")
    other = tmp_path / "bob-tree"
    _git(repo, "worktree", "add", "-q", "-b", "bob", str(other))
    alice = Workspace.open(repo, CONFIG.with_(state_dir=state, user="alice"))
    bob = Workspace.open(other, CONFIG.with_(state_dir=state, user="bob"))
    with alice, bob:
        alice.index()
        bob.index()
        private = "def alice_private_plan(x):\n    return 'launch codes'\n"
        (repo / "hooks.py").write_text(private)
        assert any("alice_private_plan" in t for t in _texts(alice, "alice_private_plan"))
        assert not any("alice_private_plan" in t or "launch codes" in t
                       for t in _texts(bob, "alice_private_plan launch codes"))  # fmt: skip
        proof = {"path": "hooks.py", "sha256": hashlib.sha256(private.encode()).hexdigest()}
        assert alice.resolve("hooks.py", proof).text == private.rstrip("\n")
        stolen = bob.resolve("hooks.py#L1-L2", proof)  # bob's hooks.py is the committed one
        assert stolen.text is None and "does not match" in stolen.reason
        assert stolen.sha256 != hashlib.sha256(b"def alice_private_plan(x):").hexdigest()
        overlays = sorted(p.name for p in (Path(state) / "overlays").glob("*/*/*"))
        assert overlays == ["alice", "bob"]
        assert len(list((Path(state) / "bases").iterdir())) == 1


def test_stale_advice_or_refresh(tmp_path: Path) -> None:
    """refresh="advise" answers from the index as it is and says so; "auto" refreshes."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG.with_(refresh="advise")) as ws:
        ws.index()
        (repo / "mod1.py").write_text("def late_arrival(v):\n    return v\n")
        assert ws.status(check_files=False).stale
        pack = ws.build_context("late_arrival", record=False)
        assert any(a.startswith("stale:") for a in pack.advisory)
        assert not ws.search("late_arrival", mode="bm25")
    with Workspace.open(repo, CONFIG) as ws:
        pack = ws.build_context("late_arrival", record=False)
        assert not any(a.startswith("stale:") for a in pack.advisory)
        assert ws.search("late_arrival", mode="bm25")[0].chunk.path == "mod1.py"
        assert not ws.status(check_files=False).stale


@pytest.mark.parametrize("git", [True, False])
def test_changed_file_rules_reach_unchanged_committed_files(tmp_path: Path, git: bool) -> None:
    """Excluding a folder (or admitting it again) changes what every answer shows, though
    no file changed since the base: a base indexed under other rules is not reused."""
    if git:
        repo = make_repo(tmp_path / "repo")
    else:
        repo = tmp_path / "plain"
        repo.mkdir()
    (repo / "notes").mkdir()
    (repo / "notes" / "private.md").write_text("# Plans\n\nThe zebra_marker rollout.\n")
    (repo / "po").mkdir()
    (repo / "po" / "fr.po").write_text('msgid "zebra_marker"\nmsgstr "marqueur"\n')
    (repo / "keep.py").write_text("def zebra_marker_user():\n    return 1\n")
    if git:
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "notes")

    def shown(config: Config) -> set[str]:
        with Workspace.open(repo, config) as ws:
            ws.index()
            return {h.chunk.path for h in ws.search("zebra_marker", mode="bm25", k=20)}

    assert shown(CONFIG) == {"notes/private.md", "keep.py"}  # the catalog: a default skip
    assert shown(CONFIG.with_(exclude=("notes/**",))) == {"keep.py"}
    assert shown(CONFIG.with_(include=("**/*.po", "*.py"))) == {"po/fr.po", "keep.py"}
    assert shown(CONFIG) == {"notes/private.md", "keep.py"}


def test_folder_outside_git_diffs_by_content(tmp_path: Path) -> None:
    """Without git the base is the first index; later edits land in the overlay."""
    root = tmp_path / "plain"
    root.mkdir()
    for i in range(4):
        (root / f"m{i}.py").write_text(f"def plain_{i}(v):\n    return v * {i}\n")
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
        (root / "m2.py").write_text("def rewritten_two(v):\n    return v\n")
        (root / "m3.py").unlink()
        assert ws.search("rewritten_two", mode="bm25")[0].chunk.path == "m2.py"
        assert all(h.chunk.path != "m3.py" for h in ws.search("plain_3", k=20))
        st = ws.status(check_files=False)
        assert (st.overlay_files, st.tombstones, st.files, st.branch) == (1, 2, 3, "")


def test_gc_removes_overlays_of_gone_branches_and_trees(tmp_path: Path) -> None:
    """Deleting a branch or a working tree makes its overlay garbage; live ones stay."""
    repo = make_repo(tmp_path / "repo")
    state = str(tmp_path / "state")
    tree = tmp_path / "tree2"
    _git(repo, "worktree", "add", "-q", "-b", "side", str(tree))
    with Workspace.open(repo, CONFIG.with_(state_dir=state)) as ws:
        ws.index()
        _git(repo, "checkout", "-q", "-b", "topic")
        (repo / "mod0.py").write_text("def topic_work(v):\n    return v\n")
        ws.index()
        with Workspace.open(tree, CONFIG.with_(state_dir=state)) as other:
            other.index()
        assert ws.gc().overlays == []  # everything is alive
        _git(repo, "stash", "-q")
        _git(repo, "checkout", "-q", "main")
        _git(repo, "branch", "-q", "-D", "topic")
        _git(repo, "worktree", "remove", "--force", str(tree))
        dry = ws.gc(dry_run=True)
        assert len(dry.overlays) == 2 and (Path(state) / dry.overlays[0]).exists()
        report = ws.gc()
        assert sorted(report.overlays) == sorted(dry.overlays) and report.freed_bytes > 0
        assert report.bases == []  # main still uses the base
        assert [p.name for p in (Path(state) / "overlays").glob("*/*")] == ["main"]
        assert ws.search("compute_2", mode="bm25")[0].chunk.symbol == "compute_2"


def test_gc_keeps_the_base_the_current_branch_reads(tmp_path: Path) -> None:
    """A branch renamed, or merged and deleted, leaves the overlay it was indexed under dead
    while the checkout still reads that base: gc removes the overlay, never the base (it
    did, and the next call said there was no index)."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        _git(repo, "branch", "-m", "main", "trunk")
        report = ws.gc()
        assert len(report.overlays) == 1 and report.bases == []
        assert ws.search("compute_2", mode="bm25")[0].chunk.symbol == "compute_2"
        pack = ws.build_context("compute_2", budget_tokens=2000, record=False)
        assert "compute_2" in pack.render()


@pytest.mark.parametrize("bad", [{"path": "hooks.py", "sha256": "0" * 64}, {"path": "hooks.py"}])
def test_resolve_needs_a_matching_proof(tmp_path: Path, bad: dict[str, str]) -> None:
    """The lines' or the file's sha256 as indexed unlocks the text; anything else does not
    (a proof for another path is refused outright: tests/engine/retrieval/test_resolve.py)."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        meta = ws.resolve("hooks.py#L2-L4")
        assert meta.text is None and meta.sha256 and meta.tokens
        by_lines = ws.resolve("hooks.py#L2-L4", {"path": "hooks.py", "sha256": meta.sha256})
        assert by_lines.text is not None and "def register_hook" in by_lines.text
        data = (repo / "hooks.py").read_bytes()
        whole = ws.resolve(
            "hooks.py", {"path": "hooks.py", "sha256": hashlib.sha256(data).hexdigest()}
        )
        assert whole.text == data.decode().rstrip("\n")
        assert ws.resolve("hooks.py#L2-L4", bad).text is None
        assert ws.resolve("no/such.py").reason.startswith("not in the index")


def test_the_history_follows_head_and_the_rerank_reads_it(tmp_path: Path) -> None:
    """The branch's overlay folder holds which files changed together up to HEAD; the View
    carries it, and a file that changed with the request's strong file scores co-change.
    A commit moves it; a lost file is read again at the next refresh; a folder outside git
    has none unless one is supplied."""
    repo = make_repo(tmp_path / "repo", files=2)
    for i in range(3):  # the parser and its cache always change together
        (repo / "parser.py").write_text(f"def parse_header(text):\n    return text[{i}:]\n")
        (repo / "cache.py").write_text(f"def remember(key):\n    return key * {i + 2}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"parser {i}")
    (repo / "parser.py").write_text("def parse_header(text):\n    return text.strip()\n")
    _git(repo, "commit", "-qam", "parser alone")  # both 3 / (parser 4 + cache 3 - both 3)
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        (stored,) = (ws.state_dir / "overlays").glob("*/*/*/history.json")
        view, _ = ws.view()
        assert view.history is not None and view.history.commits == 5
        assert view.related(["parser.py", "cache.py", "mod0.py"]) == {
            "parser.py": {"cache.py": 0.75}, "cache.py": {"parser.py": 0.75}}  # fmt: skip
        ranked: list[Scored] = []
        ws.build_context("parse_header text remember", budget_tokens=2000, record=False,
                         explain=ranked)  # fmt: skip
        values = {s.chunk.path: {c.feature: c.value for c in s.contributions} for s in ranked}
        assert max(values[p]["cochange"] for p in ("cache.py", "parser.py")) == 1.0
        (repo / "cache.py").write_text("def remember(key):\n    return key\n")
        _git(repo, "commit", "-qam", "cache alone")  # HEAD moved: 3 / (4 + 4 - 3)
        view, _ = ws.view()
        assert view.history is not None and view.history.commits == 6
        assert view.related(["parser.py", "cache.py"])["cache.py"] == {"parser.py": 0.6}
        stored.unlink()  # lost (or never written: an overlay from an older cortex)
    with Workspace.open(repo, CONFIG) as ws:  # nothing to refresh: read from git in memory
        assert ws.view()[0].related(["parser.py", "cache.py"])["cache.py"] == {"parser.py": 0.6}
        assert not stored.exists()  # a read never writes
    (repo / "mod0.py").write_text("def compute_0(value):\n    return value\n")
    with Workspace.open(repo, CONFIG) as ws, Workspace.open(repo, CONFIG) as reader:
        ws.index()
        assert stored.exists()
        before = reader.view()[0]
        assert before.related(["parser.py", "cache.py"])["cache.py"] == {"parser.py": 0.6}
        (repo / "cache.py").write_text("def remember(key):\n    return -key\n")
        _git(repo, "commit", "-qam", "cache again")  # 3 / (4 + 5 - 3)
        ws.index()  # another Workspace refreshes: the reader's next View reads the new file
        after = reader.view()[0]
        assert after.related(["parser.py", "cache.py"])["cache.py"] == {"parser.py": 0.5}
        assert after.ident != before.ident and after.ident.endswith("+7")
        st = reader.status(check_files=False)
        assert (st.history_commit, st.history_commits) == (after.history.commit, 7)  # type: ignore[union-attr]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("def a():\n    return 1\n")
    (plain / "b.py").write_text("def b():\n    return 2\n")
    with Workspace.open(plain, CONFIG.with_(state_dir=str(tmp_path / "plain_state"))) as ws:
        ws.index()
        view, _ = ws.view()
        assert view.history is None and view.related(["a.py"]) == {}
        assert ws.status(check_files=False).history_commits == 0
        ws.layers.supply_history(ChangeHistory.of([["a.py", "b.py"]] * 2))
        assert ws.view()[0].related(["a.py", "b.py"]) == {"a.py": {"b.py": 1.0},
                                                           "b.py": {"a.py": 1.0}}  # fmt: skip


def test_a_new_process_starts_from_the_overlays_saved_memory(tmp_path: Path) -> None:
    """A refresh saves the View's in-memory BM25 side in the overlay's folder; another
    Workspace (a new process) answers its first query from it without reading a document,
    exactly as one that builds it again; forget removes it (it holds indexed terms)."""
    repo = make_repo(tmp_path / "repo", files=30)
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        _git(repo, "checkout", "-q", "-b", "feature")
        for i in range(6):
            (repo / f"mod{i}.py").write_text(f"def feature_{i}(value):\n    return value + {i}\n")
        _git(repo, "commit", "-qam", "feature")
        assert "overlay memory" in ws.index().seconds
        (saved,) = (ws.state_dir / "overlays").glob("*/*/*/memory.npz")

    def answers() -> tuple[list[tuple[str, float]], bool, int]:
        with Workspace.open(repo, CONFIG) as ws:
            hits = [(h.chunk.id, h.score) for h in ws.search("feature value compute", mode="bm25",
                                                             k=30)]  # fmt: skip
            (memory,) = ws.layers._memories.values()  # the View's in-memory side
            return hits, memory.loaded, memory.last_read

    from_file = answers()
    saved.unlink()
    rebuilt = answers()
    assert from_file[0] == rebuilt[0] and from_file[0]
    assert from_file[1:] == (True, 0) and rebuilt[1] is False and rebuilt[2] > 0
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()  # nothing changed, but the file is missing: written again
        assert saved.exists()
        ws.forget(text="def feature_3(value)")
        assert not saved.exists()


def test_a_base_built_again_keeps_the_one_in_use_until_it_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other chunker settings (as a new version's chunker) mean the base is built again:
    killed mid-way, the base in use still answers (it was deleted first, and every call
    said there was no index); finished, it replaces it and leaves nothing beside it."""
    from engine.index._build import build_segment as real

    repo = make_repo(tmp_path / "repo")
    state = str(tmp_path / "state")
    with Workspace.open(repo, CONFIG.with_(state_dir=state)) as ws:
        ws.index()
    other = CONFIG.with_(state_dir=state, max_section_tokens=64)

    def killed(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr("engine.index._layers.build_segment", killed)
    with Workspace.open(repo, other) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    with Workspace.open(repo, other) as ws:  # the new settings: the old base answers
        assert ws.search("compute_2", mode="bm25")[0].chunk.symbol == "compute_2"
    monkeypatch.setattr("engine.index._layers.build_segment", real)
    with Workspace.open(repo, other) as ws:
        ws.index()
        assert ws.search("compute_2", mode="bm25")[0].chunk.symbol == "compute_2"
    bases = [p.name for p in (Path(state) / "bases").iterdir()]
    assert len(bases) == 1 and "." not in bases[0]  # no .building or .retired left


def test_an_edit_put_back_while_the_base_is_read_is_not_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent applies a patch while the first index reads the clean tree, and reverts
    it before the index ends: the tree is clean at both ends, so the base was taken from
    the tree and kept the patch (search kept returning code found nowhere). A file written
    while the tree was read now means the base is taken from the commit instead."""
    from engine.index._build import build_segment as real

    repo = make_repo(tmp_path / "repo")
    original = (repo / "hooks.py").read_text()
    calls: list[Path] = []

    def patched_then_reverted(segment: object, tree: Path, *args: object, **kw: object) -> object:
        calls.append(tree)
        if len(calls) == 1:
            (repo / "hooks.py").write_text(original + "\n\ndef patched_in_marker():\n    pass\n")
        report = real(segment, tree, *args, **kw)  # type: ignore[arg-type]
        if len(calls) == 1:
            (repo / "hooks.py").write_text(original)  # the agent puts it back
        return report

    monkeypatch.setattr("engine.index._layers.build_segment", patched_then_reverted)
    with Workspace.open(repo, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        assert not ws.search("patched_in_marker", mode="bm25")
        assert ws.search("register_hook", mode="bm25")
        assert calls[0] == repo and calls[1] != repo  # read again from the commit


def test_an_edit_put_back_while_an_overlay_is_read_leaves_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race on a refresh: the tree's token read clean, the patch applied before
    the changed files are listed and reverted after they are read. The overlay holds the
    patch with the clean token, so it is recorded stale and the next call reads again."""
    from engine.index._update import update_segment as real_update
    from overlays import changed_paths as real_changed

    repo = make_repo(tmp_path / "repo")
    original = (repo / "hooks.py").read_text()
    with Workspace.open(repo, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        steps: list[str] = []

        def listed(*args: object, **kw: object) -> object:
            if not steps:
                steps.append("patched")
                (repo / "hooks.py").write_text(original + "\ndef patched_in_marker():\n    pass\n")
            return real_changed(*args, **kw)  # type: ignore[arg-type]

        def read(*args: object, **kw: object) -> object:
            report = real_update(*args, **kw)  # type: ignore[arg-type]
            (repo / "hooks.py").write_text(original)  # the agent puts it back
            return report

        monkeypatch.setattr("engine.index._layers.changed_paths", listed)
        monkeypatch.setattr("engine.index._layers.update_segment", read)
        ws.index()
        monkeypatch.undo()
        assert ws.status(check_files=False).stale
        assert not ws.search("patched_in_marker", mode="bm25")


def test_a_long_running_process_reads_folders_another_replaced(tmp_path: Path) -> None:
    """A server keeps its Workspace open while `cortex index` runs in a terminal. When that
    run moves the branch's overlay to a new base (the folder deleted and made again), the
    server answers from the new folder, and its own refresh writes there, not into the
    deleted files (a new process then saw a file tombstoned and found nowhere)."""
    repo = make_repo(tmp_path / "repo", files=20)
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "mod1.py").write_text("def feature_original(v):\n    return v\n")
    _git(repo, "commit", "-qam", "feature")
    with Workspace.open(repo, CONFIG) as server:
        server.index()
        assert server.search("feature_original", mode="bm25")[0].chunk.path == "mod1.py"
        _git(repo, "checkout", "-q", "main")
        for i in range(2, 20):  # main moves far
            (repo / f"mod{i}.py").write_text(f"def main_moved_{i}(v):\n    return v\n")
        _git(repo, "commit", "-qam", "main moves")
        _git(repo, "checkout", "-q", "feature")
        _git(repo, "rebase", "-q", "main")
        (repo / "mod1.py").write_text("def feature_rewritten(v):\n    return v\n")
        _git(repo, "commit", "-qam", "rewritten")
        with Workspace.open(repo, CONFIG) as terminal:  # another process
            terminal.index()
        assert server.search("feature_rewritten", mode="bm25")[0].chunk.path == "mod1.py"
        assert not any("feature_original" in t for t in _texts(server, "feature_original"))
        (repo / "mod2.py").write_text("def later_server_edit(v):\n    return v\n")
        assert server.search("later_server_edit", mode="bm25")[0].chunk.path == "mod2.py"
    with Workspace.open(repo, CONFIG) as later:
        assert later.search("later_server_edit", mode="bm25")[0].chunk.path == "mod2.py"
        assert later.search("main_moved_7", mode="bm25")[0].chunk.path == "mod7.py"


def test_a_first_commit_with_nothing_to_index(tmp_path: Path) -> None:
    """A base with no indexable file (an empty first commit, or a folder indexed before
    its first commit) answers from the overlay; it used to refuse every query for want of
    BM25 statistics, `--rebuild` included. Once there are commits, the base is one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q",
         "--allow-empty", "-m", "root")  # fmt: skip
    (repo / "mod.py").write_text("def only_in_the_tree(v):\n    return v\n")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        assert ws.search("only_in_the_tree", mode="hybrid")[0].chunk.path == "mod.py"
        ws.index(rebuild=True)
        assert ws.search("only_in_the_tree", mode="bm25")[0].chunk.path == "mod.py"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    _git(fresh, "init", "-q", "-b", "main")
    (fresh / "mod.py").write_text("def before_any_commit(v):\n    return v\n")
    with Workspace.open(fresh, CONFIG) as ws:
        ws.index()
        assert ws.status(check_files=False).indexed_commit == "tree"
        _git(fresh, "add", "-A")
        _git(fresh, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "c")
        ws.index()
        st = ws.status(check_files=False)
        assert len(st.indexed_commit) == 40 and st.overlay_files == 0
        assert ws.search("before_any_commit", mode="bm25")[0].chunk.path == "mod.py"


def test_files_git_hides_from_its_diff_stay_out_of_the_shared_base(tmp_path: Path) -> None:
    """A file assumed unchanged, edited in place, and a sparse checkout's missing folder: git's
    diff shows neither, so the shared base was built from that tree, and another user's
    clean tree at the same commit read alice's local text and missed the folder. The base
    is now the commit's; each user's own tree is in their overlay. A checkout made for
    the base never prunes the user's worktrees (one whose folder is away keeps working)."""
    repo = make_repo(tmp_path / "repo")
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.py").write_text("def documented_helper(v):\n    return v\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "docs")
    away = tmp_path / "carol-tree"
    _git(repo, "worktree", "add", "-q", "-b", "carol", str(away))
    away.rename(tmp_path / "carol-away")  # an unmounted disk, for a while
    _git(repo, "sparse-checkout", "set", "--no-cone", "/*", "!/docs/")
    _git(repo, "update-index", "--assume-unchanged", "hooks.py")
    (repo / "hooks.py").write_text("def alice_local_setting(x):\n    return 'private'\n")
    assert not (repo / "docs").exists()
    state = str(tmp_path / "shared-state")
    other = tmp_path / "bob-tree"
    _git(repo, "worktree", "add", "-q", "--detach", str(other), "HEAD")
    _git(other, "sparse-checkout", "disable")
    alice = Workspace.open(repo, CONFIG.with_(state_dir=state, user="alice"))
    bob = Workspace.open(other, CONFIG.with_(state_dir=state, user="bob"))
    with alice, bob:
        alice.index()
        assert any("alice_local_setting" in t for t in _texts(alice, "alice_local_setting"))
        assert not any("documented_helper" in t for t in _texts(alice, "documented_helper"))
        bob.index()
        assert not any("alice_local_setting" in t for t in _texts(bob, "alice_local_setting"))
        assert bob.search("documented_helper", mode="bm25")[0].chunk.path == "docs/guide.py"
        assert len(list((Path(state) / "bases").iterdir())) == 1
    (tmp_path / "carol-away").rename(away)
    subprocess.run(["git", "status"], cwd=away, check=True, capture_output=True, env=GIT_ENV)


def test_a_link_follows_its_target_when_the_target_changes(tmp_path: Path) -> None:
    """The walk reads a symbolic link as its target's text; git's diff names the target
    only, so the link kept the old text forever (status said stale, index changed 0)."""
    repo = make_repo(tmp_path / "repo")
    (repo / "real.py").write_text("def linked_helper(v):\n    return 'old_text'\n")
    (repo / "link.py").symlink_to("real.py")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "link")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        (repo / "real.py").write_text("def linked_helper(v):\n    return 'new_text'\n")
        _git(repo, "commit", "-qam", "edit the target")
        texts = [h.chunk.text for h in ws.search("linked_helper", mode="bm25", k=10)]
        assert len(texts) == 2 and all("new_text" in t for t in texts)
        assert not ws.status().stale


def test_branch_names_one_slug_apart_keep_their_own_overlays(tmp_path: Path) -> None:
    """``feature/x`` and ``feature-x`` shared one overlay folder (each switch re-chunked the
    other's files); a branch named after a credential named its folder with it."""
    token = "ghp_" + "Bw8Xq3Zp7Rk2Nm5Vt9Yb4Hc1Jd6Fs0Ge3Ub9"
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        for branch in ("feature/x", "feature-x", f"fix-{token}"):
            _git(repo, "checkout", "-q", "-b", branch, "main")
            ws.index()
        _git(repo, "checkout", "-q", "feature/x")
        assert ws.index().changed == 0
        folders = [p.parent.name for p in (ws.state_dir / "overlays").glob("*/*/*")]
    assert len(folders) == len(set(folders)) == 4
    assert "main" in folders and not any(token in f for f in folders)


def test_a_file_edited_again_and_again_keeps_one_analysed_version(tmp_path: Path) -> None:
    """A server open all day while an agent edits one file: each segment's cache of
    analysed documents kept every version of it (memory grew with every edit)."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        for i in range(8):
            (repo / "mod1.py").write_text(f"def compute_1(value):\n    return value + {i}\n")
            ws.build_context(f"compute_1 value {i}", budget_tokens=1000, record=False)
        for segment in ws.layers._segments.values():
            kept = [k for k, doc in segment._docs.items() if doc.path == "mod1.py"]
            assert len([k for k in kept if k[0] == "pages"]) <= 1
            assert len([k for k in kept if k[0] == "sections"]) <= 2
