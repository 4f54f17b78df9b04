"""Workspace indexing and search on real temporary git repositories (tantivy, faiss, SQLite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engine import (
    Config,
    ConfigError,
    FileRanking,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    Workspace,
    WorkspaceError,
    rank_files,
)
from engine.embed import HashEmbedder
from engine.index import WriterLock
from engine.retrieval import Scored, learned_file_scores

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
CONFIG = Config(dense_model="hash")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=GIT_ENV)


def make_repo(root: Path, files: int = 6) -> Path:
    """A committed repository with a few Python modules and a README."""
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    (root / "hooks.py").write_text(
        "class Session:\n"
        "    def register_hook(self, event, hook):\n"
        '        """Register a hook for an event."""\n'
        "        self.hooks.setdefault(event, []).append(hook)\n"
    )
    (root / "README.md").write_text("# Demo\n\nA demo project.\n\n## Hooks\n\nUse hooks.\n")
    for i in range(files):
        (root / f"mod{i}.py").write_text(
            f"def compute_{i}(value):\n    return value * {i} + offset_{i}(value)\n\n"
            f"def offset_{i}(value):\n    return value - {i}\n"
        )
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small committed repository."""
    return make_repo(tmp_path / "repo")


def _embedder(ws: Workspace) -> HashEmbedder:
    emb = ws.embedder
    assert isinstance(emb, HashEmbedder)
    return emb


def test_index_then_search_all_modes(repo: Path) -> None:
    """After indexing, each mode finds the section that defines the queried name."""
    with Workspace.open(repo, CONFIG) as ws:
        report = ws.index()
        assert report.files == 8 and report.added == 8 and report.embeddings_computed > 0
        for mode in ("bm25", "dense", "hybrid"):
            hits = ws.search("register_hook", mode=mode, k=3)
            assert hits, mode
            assert hits[0].chunk.symbol == "Session.register_hook", mode
        hybrid = ws.search("register hook", k=3)[0]
        assert hybrid.bm25_rank == 1 and hybrid.dense_rank is not None


def test_search_is_the_ranking_build_context_packs_from(repo: Path) -> None:
    """search and search_files give the order of build_context's reranked candidates, with
    the same goal steering both; an empty query is an error, not arbitrary results."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        explain: list[Scored] = []
        ws.build_context("compute the offset", "value minus offset", explain=explain, record=False)
        hits = ws.search("value minus offset", goal="compute the offset", k=len(explain))
        assert [h.chunk.id for h in hits] == [s.chunk.id for s in explain]
        assert [h.score for h in hits] == [s.score for s in explain]
        files = ws.search_files("value minus offset", goal="compute the offset", k=100)
        assert [f.path for f in files] == rank_files(explain)
        learned = learned_file_scores(explain)
        for f in files:
            assert f.sections and all(h.chunk.path == f.path for h in f.sections)
            assert f.score == pytest.approx(learned[f.path]) and 0.0 < f.score < 1.0
        # The summed ranking, when configured: each file's best three sections above the
        # weakest candidate.
        floor = min(s.score for s in explain)
    with Workspace.open(repo, replace(CONFIG, file_ranking="sections")) as ws:
        files = ws.search_files("value minus offset", goal="compute the offset", k=100)
        assert [f.path for f in files] == rank_files(explain, FileRanking.SECTIONS)
        for f in files:
            assert f.score == pytest.approx(sum(h.score - floor for h in f.sections))
        with pytest.raises(ConfigError, match="needs a query"):
            ws.search("   ")
        with pytest.raises(ConfigError):
            ws.search_files("offset", mode="dense")


def test_unchanged_reindex_embeds_nothing(repo: Path) -> None:
    """A second run over an unchanged tree re-chunks and embeds nothing."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        calls = _embedder(ws).calls
        again = ws.index()
        assert (again.added, again.changed, again.removed, again.chunks_added) == (0, 0, 0, 0)
        assert again.embeddings_computed == 0
        assert _embedder(ws).calls == calls


def test_edit_reindexes_only_that_file(repo: Path) -> None:
    """Editing one file re-chunks that file only and embeds only its new chunks."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        (repo / "mod1.py").write_text("def brand_new_name(x):\n    return x + 42\n")
        assert ws.status().changed == 1
        report = ws.index()
        assert (report.changed, report.unchanged) == (1, 7)
        assert report.embeddings_computed == 1
        assert ws.search("brand_new_name", mode="bm25")[0].chunk.path == "mod1.py"
        assert not any(h.chunk.symbol == "compute_1" for h in ws.search("compute_1", k=20))
        assert ws.status().stale_files == 0


def test_deleted_file_leaves_every_index(repo: Path) -> None:
    """A deleted file is gone from BM25 and dense results."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        (repo / "hooks.py").unlink()
        assert ws.status().removed == 1
        report = ws.index()
        assert report.removed == 1
        for mode in ("bm25", "dense", "hybrid"):
            assert all(h.chunk.path != "hooks.py" for h in ws.search("register hook", mode=mode))


def test_same_content_embedded_once_across_files(repo: Path) -> None:
    """A copy of a file reuses the cached vectors of the original."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        (repo / "copy.py").write_bytes((repo / "mod2.py").read_bytes())
        report = ws.index()
        # The title (path) is part of the embedded text, so only identical titles share.
        assert report.added == 1 and report.embeddings_computed == 2


def test_second_writer_is_told_who_holds_the_lock(repo: Path) -> None:
    """A second writer gets IndexBusyError naming the pid; readers keep working."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        with WriterLock(ws.state_dir / "lock"):
            with pytest.raises(IndexBusyError, match=f"pid {os.getpid()}"):
                Workspace.open(repo, CONFIG).index()
            assert ws.search("register_hook", mode="bm25")  # reader unaffected


def test_search_before_index_is_a_clear_error(repo: Path) -> None:
    """Searching an unindexed workspace says to run `cortex index`."""
    with Workspace.open(repo, CONFIG) as ws:
        with pytest.raises(IndexNotBuiltError, match="cortex index"):
            ws.search("anything")
        assert ws.status().indexed is False


def test_a_call_during_a_first_index_says_it_is_being_built(repo: Path) -> None:
    """While another writer builds the first index, a read says so and names it (it said
    to run `cortex index`, which was then refused as busy); once no one holds the lock,
    the plain advice comes back."""
    with Workspace.open(repo, CONFIG) as ws:
        with WriterLock(ws.state_dir / "lock"):
            with pytest.raises(IndexNotBuiltError, match=f"being built by pid {os.getpid()}"):
                ws.search("anything")
            with pytest.raises(IndexNotBuiltError, match="being built by pid"):
                ws.build_context("anything")
        with pytest.raises(IndexNotBuiltError, match="run `cortex index` first"):
            ws.search("anything")


def test_bad_library_input_is_a_clear_error(repo: Path) -> None:
    """What HTTP and MCP refuse, the library refuses too: an empty query in every search
    mode (dense answered it, every score 0), one string as the citations ("12" read as 1
    and 2), a budget that is no whole number of tokens."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        for mode in ("hybrid", "bm25", "dense"):
            with pytest.raises(ConfigError, match="needs a query"):
                ws.search("  ", mode=mode)
        pack = ws.build_context("register_hook", budget_tokens=2000)
        with pytest.raises(ConfigError, match="not str"):
            ws.feedback(pack.replay_key, "12")
        for budget in (1000.5, True):
            with pytest.raises(ConfigError, match="whole number"):
                ws.build_context("register_hook", budget_tokens=budget)  # type: ignore[arg-type]


def test_foreign_layout_is_refused(repo: Path) -> None:
    """An index written with another layout version names the rebuild command."""
    (repo / ".cortex").mkdir()
    (repo / ".cortex" / "manifest.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(IndexSchemaError, match="--rebuild"):
        Workspace.open(repo, CONFIG)


def test_rebuild_replaces_an_old_layout(repo: Path) -> None:
    """What the error advises works: a rebuild over a layout-1 index leaves a usable one."""
    old = repo / ".cortex"
    (old / "segments" / "main").mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps({"schema": 1}))
    with Workspace.open(repo, CONFIG, check=False) as ws:
        ws.index(rebuild=True)
    assert not (old / "segments").exists()
    with Workspace.open(repo, CONFIG) as ws:
        assert ws.search("register_hook", mode="bm25")[0].chunk.symbol == "Session.register_hook"


def test_status_reports_commit_and_vectors(repo: Path) -> None:
    """Status names the indexed commit, counts, the dense model and freshness."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        st = ws.status()
        assert st.indexed and st.indexed_commit == st.commit and st.commit
        assert st.files == 8 and st.chunks > 8
        assert st.dense_model == "hash:64" and st.dense_current and st.dense_vectors > 0
        assert st.stale_files == 0


_CRASH = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from engine import Config, Workspace
    import engine.segment._dense, engine.segment._lexical, engine.segment._meta
    where = sys.argv[2]
    if where == "lexical":  # killed while the lexical writer is open, before its commit
        real = engine.segment._lexical.LexicalIndex.writer
        def writer(self):
            ctx = real(self)
            w = ctx.__enter__()
            w.delete_path("mod0.py")
            os._exit(9)
        engine.segment._lexical.LexicalIndex.writer = writer
    elif where == "metadata":  # killed after the lexical commit, inside the metadata write
        def put_file(self, record, chunks):
            os._exit(9)
        engine.segment._meta.MetaStore.put_file = put_file
    elif where == "dense":  # killed while saving the dense index
        def save(self, directory):
            os._exit(9)
        engine.segment._dense.DenseIndex.save = save
    Workspace.open(Path(sys.argv[1]), Config(dense_model="hash")).index()
    """
)


@pytest.mark.parametrize("where", ["lexical", "metadata", "dense"])
def test_killed_index_run_leaves_usable_index(repo: Path, where: str) -> None:
    """A run killed at any stage leaves an index that answers (or, for a first base build,
    none); the next run completes."""
    if where != "lexical":  # tantivy is written only while a base is built (overlays are not)
        with Workspace.open(repo, CONFIG) as ws:
            ws.index()
    (repo / "mod0.py").write_text("def replacement_function(y):\n    return y\n")
    (repo / "hooks.py").unlink()
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH, str(repo), where], capture_output=True, text=True
    )
    assert proc.returncode == 9, proc.stderr
    with Workspace.open(repo, CONFIG) as ws:
        if where == "lexical":  # the half-built base is not used; the next run starts over
            with pytest.raises(IndexNotBuiltError):
                ws.search("compute_3", mode="bm25")
        else:  # answers (refreshing the overlay the crash left half-done)
            assert ws.search("compute_3", mode="bm25")[0].chunk.symbol == "compute_3"
            assert ws.search("compute_3", mode="dense")
        report = ws.index()
        assert report.files == 7
        assert ws.search("replacement_function", mode="bm25")[0].chunk.path == "mod0.py"
        assert all(h.chunk.path != "hooks.py" for h in ws.search("register hook", k=20))
        assert ws.search("replacement_function", mode="dense")[0].chunk.path == "mod0.py"
        st = ws.status()
        assert st.stale_files == 0 and st.dense_current


def test_sigkill_mid_index_then_recover(tmp_path: Path) -> None:
    """A real SIGKILL during a larger index run leaves an index that opens and answers."""
    repo = make_repo(tmp_path / "big", files=400)
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
    for i in range(0, 400, 2):
        (repo / f"mod{i}.py").write_text(f"def changed_{i}(v):\n    return v\n")
    script = (
        "import sys; from engine import Config, Workspace; "
        "Workspace.open(sys.argv[1], Config(dense_model='hash')).index()"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(repo)])
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Workspace.open(repo, CONFIG) as ws:
        assert ws.search("compute_3", mode="bm25")  # old or new, it answers
        ws.index()
        assert ws.search("changed_10", mode="bm25")[0].chunk.symbol == "changed_10"
        assert ws.status().stale_files == 0


def test_chunker_settings_change_rechunks_everything(repo: Path) -> None:
    """An index made with other chunk settings re-chunks every file; vectors are reused.
    Every chunk of the old base counts as removed (the new base replaces it whole): the
    report's chunks are the old count plus those added less those removed."""
    with Workspace.open(repo, CONFIG) as ws:
        first = ws.index()
    with Workspace.open(repo, CONFIG.with_(max_section_tokens=32)) as ws:
        report = ws.index()
        assert report.changed == 8 and report.unchanged == 0
        assert report.chunks_removed == first.chunks
        assert report.chunks == first.chunks + report.chunks_added - report.chunks_removed
        again = ws.index()
        assert again.changed == 0


def test_an_unknown_dense_model_is_an_error_and_status_says_so(repo: Path) -> None:
    """A misspelt model name is refused with a clear error on every dense use (nothing is
    downloaded, no silent lexical-only answer); status shows the problem."""
    from engine import EmbeddingModelError

    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
    with Workspace.open(repo, Config(dense_model="minlm")) as ws:
        with pytest.raises(EmbeddingModelError, match="unknown dense model 'minlm'"):
            ws.search("compute", mode="dense")
        with pytest.raises(EmbeddingModelError, match="unknown dense model"):
            ws.build_context("what does compute return", record=False)
        assert "unknown dense model" in ws.status(check_files=False).dense_problem
    with Workspace.open(repo, Config(dense_model="hash:32")) as ws:
        assert "no vectors in this index" in ws.status(check_files=False).dense_problem


def test_a_missing_or_damaged_static_model_file_is_named(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An install without the shipped static model (or with a damaged one) says so, with
    the way out, on dense use and in status; it never answers lexical-only in silence."""
    import engine.embed._models as models
    from engine import EmbeddingModelError

    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
    cache = str(tmp_path / "models")
    monkeypatch.setattr(models, "TUNED_MODEL", tmp_path / "gone.npz")
    with Workspace.open(repo, Config(dense_model="static", model_cache_dir=cache)) as ws:
        with pytest.raises(EmbeddingModelError, match="static-distilled"):
            ws.search("compute", mode="dense")
        assert "gone.npz is missing" in ws.status(check_files=False).dense_problem
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    monkeypatch.setattr(models, "TUNED_MODEL", tmp_path / "bad.npz")
    with Workspace.open(repo, Config(dense_model="static", model_cache_dir=cache)) as ws:
        assert "bad.npz cannot be read" in ws.status(check_files=False).dense_problem


def test_a_rebuild_is_made_beside_the_index_in_use(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild killed before its swap leaves the old index answering (and its leftovers
    are cleared by the next run); one that completes replaces it whole."""
    from engine.index import Layers

    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        want = [h.chunk.id for h in ws.search("register_hook", mode="bm25")]
    real = Layers.refresh

    def killed(self: Layers, **kwargs: object) -> object:
        if self.state_dir.name == "rebuild":
            raise KeyboardInterrupt  # the process dies mid-build
        return real(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Layers, "refresh", killed)
    with Workspace.open(repo, CONFIG) as ws, pytest.raises(KeyboardInterrupt):
        ws.index(rebuild=True)
    with Workspace.open(repo, CONFIG) as ws:  # the old index still answers
        assert [h.chunk.id for h in ws.search("register_hook", mode="bm25")] == want
    monkeypatch.setattr(Layers, "refresh", real)
    (repo / "hooks.py").write_text("def register_hook(event):\n    return event\n")
    with Workspace.open(repo, CONFIG) as ws:
        report = ws.index(rebuild=True)
        assert report.files >= 1 and not (repo / ".cortex" / "rebuild").exists()
        hits = ws.search("register_hook", mode="bm25")
        assert hits[0].chunk.text.startswith("def register_hook(event)")


def test_a_rebuild_killed_inside_its_swap_still_answers(repo: Path) -> None:
    """Killed between the swap's renames (the old index moved out to ``replaced/``, the
    new one not yet in), every call said there was no index until the next `cortex
    index`: a reader now puts the old index back itself."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        want = [h.chunk.id for h in ws.search("register_hook", mode="bm25")]
    state = repo / ".cortex"
    (state / "replaced").mkdir()
    (state / "bases").replace(state / "replaced" / "bases")
    with Workspace.open(repo, CONFIG) as ws:
        assert [h.chunk.id for h in ws.search("register_hook", mode="bm25")] == want
    assert not (state / "replaced").exists()


def test_short_requests_also_search_other_forms_of_their_words(tmp_path: Path) -> None:
    """A request saying "minifying" finds ``minify_text`` through their shared stem, in the
    base and in an uncommitted file; with ``word_forms=0``, or in a long report, it is not."""
    repo = make_repo(tmp_path / "repo", files=2)
    (repo / "tools.py").write_text("def minify_text(text):\n    return ''.join(text.split())\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "minify")
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        hits = ws.search("what happens to whitespace when minifying", mode="bm25", k=3)
        assert hits and hits[0].chunk.symbol == "minify_text"
        long = "what happens to whitespace when minifying " + "please " * 40
        assert not ws.search(long, mode="bm25", k=3)
        titled = ws.search(long, goal="whitespace when minifying", mode="bm25", k=3)
        assert "minify_text" not in {h.chunk.symbol for h in titled}  # a report's title
        fresh = "def unminify_tokens(tokens):\n    return tokens\n\n"
        (repo / "fresh.py").write_text(fresh + "def minify_tokens(tokens):\n    return tokens\n")
        found = {h.chunk.symbol for h in ws.search("minifying tokens", mode="bm25", k=5)}
        assert {"minify_text", "minify_tokens"} <= found
    with Workspace.open(repo, CONFIG.with_(word_forms=0)) as ws:
        assert not ws.search("what happens to whitespace when minifying", mode="bm25", k=3)


def test_a_citation_across_a_line_of_only_whitespace_is_not_stale(tmp_path: Path) -> None:
    """A snippet shown across a line between sections that holds only a tab (the index
    keeps it empty) still matches the file; an edit to its lines makes it stale."""
    from engine.memory import CitedRef, still_matches
    from indexers import sha256_text

    (tmp_path / "m.py").write_text("def a():\n    return 1\n\t\ndef b():\n    return 2\n")
    shown = "def a():\n    return 1\n\ndef b():\n    return 2"
    ref = CitedRef(1, "m.py#L1-L5", 1, 5, sha256_text(shown))
    assert not still_matches(tmp_path, ref)  # the hash alone differs: the tab
    assert still_matches(tmp_path, ref, shown)
    assert not still_matches(tmp_path, ref, "something else")  # not the cited text
    (tmp_path / "m.py").write_text("def a():\n    return 7\n\t\ndef b():\n    return 2\n")
    assert not still_matches(tmp_path, ref, shown)


def test_feedback_does_not_flag_an_unchanged_snippet_stale(tmp_path: Path) -> None:
    """Through the workspace: tiny functions shown with their neighbours across lines that
    hold only a tab; feedback on the untouched file flags nothing stale (it flagged it)."""
    root = tmp_path / "repo"
    root.mkdir()
    helpers = "\n".join(f'def helper_{i}(x):\n    """Helper {i} doubles then adds."""\n'
                        f"    y = x * 2\n    return y + {i}\n\t" for i in range(20))  # fmt: skip
    (root / "lib.py").write_text("import os\n\t\ndef tiny_a():\n    return 1\n\t\n"
                                 f"def tiny_b():\n    return 2\n\t\n{helpers}\n")  # fmt: skip
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, env=GIT_ENV)  # fmt: skip
    with Workspace.open(root, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        pack = ws.build_context("tiny_a returns one", budget_tokens=2000)
        assert any("\n\n" in c.text for c in pack.citations)  # across an emptied line
        result = ws.feedback(pack.replay_key, [c.id for c in pack.citations])
        assert result.valid and result.stale == ()


def test_a_state_folder_of_another_name_inside_a_plain_folder_is_never_indexed(
    tmp_path: Path,
) -> None:
    """Outside git, a relative state folder other than .cortex was walked like any folder:
    each run indexed cortex's own lock, manifest and tantivy files, one more each time."""
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    with Workspace.open(tmp_path, Config(dense_model="hash", state_dir="st")) as ws:
        ws.index()
        again = ws.index()
        assert again.files == 1 and again.added == 0
        assert {h.chunk.path for h in ws.search("pid since", mode="bm25", k=5)} <= {"a.py"}
    assert Config(state_dir="st").walk_options().exclude == ("st/",)
    assert Config().walk_options().exclude == ()
    assert Config(state_dir="/abs/st").walk_options().exclude == ()


def test_skipped_counts_follow_the_working_tree(repo: Path) -> None:
    """Files added since the base and skipped (a .env, an empty file) are counted by the
    index report and status, and leave the count when they go (both read only the base's
    skips: "skipped: 0" beside a .env that `cortex chunks` listed)."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        before = ws.status(check_files=False).skipped
        (repo / ".env").write_text("TOKEN=x\n")
        (repo / "empty.py").write_text("")
        report = ws.index()
        want = {**before, "secret": before.get("secret", 0) + 1,
                "empty": before.get("empty", 0) + 1}  # fmt: skip
        assert report.skipped == want == ws.status(check_files=False).skipped
        (repo / ".env").unlink()
        after = ws.index().skipped
        assert after.get("secret", 0) == want["secret"] - 1 and after["empty"] == want["empty"]


def test_a_changed_licence_reaches_the_files_it_covers(tmp_path: Path) -> None:
    """A package.json whose licence changes, then a LICENSE file added: the files they
    cover carry the new licence after the next index, though their bytes did not change
    (they kept the old one); files the change does not cover keep theirs."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "pkg" / "package.json").write_text('{"name": "p", "license": "MIT"}\n')
    (root / "pkg" / "index.js").write_text("export function add(a, b) { return a + b }\n")
    (root / "tool.py").write_text("def run():\n    return 1\n")
    (root / "other" / "m.py").write_text("def m():\n    return 2\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-c", "user.email=t@e", "-c", "user.name=T", *args], cwd=root,
                       check=True, env=GIT_ENV)  # fmt: skip
    with Workspace.open(root, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        assert ws.resolve("pkg/index.js").license == "MIT"
        (root / "pkg" / "package.json").write_text('{"name": "p", "license": "Apache-2.0"}\n')
        ws.index()
        assert ws.resolve("pkg/index.js").license == "Apache-2.0"
        pack = ws.build_context("add function", budget_tokens=2000)
        assert {c.license for c in pack.citations if c.source_uri.startswith("pkg/index.js")} \
            == {"Apache-2.0"}  # fmt: skip
        from tests.indexers.test_license import MIT

        (root / "other" / "LICENSE").write_text(MIT)
        ws.index()
        assert ws.resolve("other/m.py").license == "MIT"
        assert ws.resolve("tool.py").license == "NOASSERTION"
        assert ws.resolve("pkg/index.js").license == "Apache-2.0"
        hits = [h.chunk.path for h in ws.search("add", mode="bm25", k=50)]
        assert hits.count("pkg/index.js") == 1  # the overlay's copy only, not the base's too


def test_leftovers_of_a_killed_run_are_cleared_and_status_says_what_is_behind(
    repo: Path,
) -> None:
    """What a killed ``--rebuild`` left beside the index goes at the next index (it stayed
    until the next --rebuild); overlay vectors behind its metadata (a run killed between
    the two writes) are not "current" (status read only the base's)."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        leftover = ws.state_dir / "rebuild" / "bases" / "x"
        leftover.mkdir(parents=True)
        hooks = repo / "hooks.py"
        hooks.write_text(hooks.read_text() + "\n\ndef more():\n    pass\n")
        ws.index()
        assert not (ws.state_dir / "rebuild").exists()
        status = ws.status(check_files=False)
        assert status.dense_current and status.overlay_files == 1
        info, _ = ws.layers.current()
        overlay = ws.layers.segment(ws.layers.overlay_dir(info.branch))
        overlay.meta.set_info(f"dense:{status.dense_model}:generation", "0")
        assert not ws.status(check_files=False).dense_current


def test_a_one_word_search_finds_the_definition_first(tmp_path: Path) -> None:
    """Sections that said "configure" five times ranked above `Server.configure` itself."""
    (tmp_path / "app.py").write_text(textwrap.dedent('''\
        """The app: configure it first, then configure the plugins, then configure logging."""


        def start(settings):
            """Start after you configure: configure must run first; configure reads them."""
            configure(settings)
            return run(settings)


        def run(settings):
            """Run. Call configure before run; configure sets the options run reads."""
            return settings


        class Server:
            def configure(self, options):
                self.options = dict(options)
                return self
        '''))
    with Workspace.open(tmp_path, CONFIG) as ws:
        ws.index()
        for mode in ("hybrid", "bm25"):
            assert ws.search("configure", mode=mode, k=3)[0].chunk.symbol == "Server.configure"


def test_working_trees_of_one_repository_share_their_notes(tmp_path: Path) -> None:
    """The README says every working tree of a repository shares its project notes; each
    linked working tree had its own `.cortex/memory.sqlite`, so a note saved in one was
    not found in another."""
    root = make_repo(tmp_path / "repo")
    _git(root, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    with Workspace.open(tmp_path / "wt", CONFIG) as ws:
        saved = ws.memory.save("Retries live in the transport", "decision", what="retries")
        assert ws.memory.stats().notes == 1
    with Workspace.open(root, CONFIG) as ws:
        assert [h.id for h in ws.memory.search("retries transport")] == [saved.id]
    assert (root / ".cortex" / "memory.sqlite").exists()
    assert not (tmp_path / "wt" / ".cortex" / "memory.sqlite").exists()
    elsewhere = Config(dense_model="hash", state_dir=str(tmp_path / "shared"))
    with Workspace.open(tmp_path / "wt", elsewhere) as ws:  # an absolute state folder: its own
        assert ws.memory.stats().notes == 0


def test_status_reports_the_configured_models_vectors_after_another_was_indexed(
    repo: Path,
) -> None:
    """After `index --dense hash:32`, status said the configured model had no vectors (it
    read only the last model written) though dense search answered, and running the
    `cortex index` it advised changed nothing; that index also said "0 computed"."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        first = ws.status(check_files=False)
    with Workspace.open(repo, Config(dense_model="hash:32")) as ws:
        report = ws.index()
        assert report.embeddings_computed + report.embeddings_reused == first.dense_vectors
        assert ws.status(check_files=False).dense_model == "hash:32"
    with Workspace.open(repo, CONFIG) as ws:
        st = ws.status(check_files=False)
        assert not st.dense_problem and st.dense_model == first.dense_model
        assert st.dense_vectors == first.dense_vectors


def test_status_says_when_the_base_was_chunked_under_other_settings(repo: Path) -> None:
    """After an upgrade changed the chunker, status said "up to date" while every answer
    came from the old base; it now says the next index builds it again."""
    from engine.cli._text import render_status

    with Workspace.open(repo, replace(CONFIG, max_section_tokens=256)) as ws:
        ws.index()
        assert ws.status().rechunk is False
    with Workspace.open(repo, CONFIG) as ws:
        st = ws.status()
        assert st.rechunk is True and st.stale_files == 0
        text = render_status(st, walked=True)
        assert "chunked under other settings" in text and "up to date" not in text
        ws.index()
        assert ws.status().rechunk is False


def test_disk_use_counts_the_blocks_a_sparse_file_holds(tmp_path: Path) -> None:
    """Qdrant's edge shard preallocates sparse 32 MiB files: status said 320 MB for a
    3.8 MB shard. A file counts the blocks it holds when fewer than its size."""
    from engine.index import tree_size

    (tmp_path / "plain").write_bytes(b"x" * 10_000)
    with (tmp_path / "sparse").open("wb") as fh:
        fh.truncate(32 << 20)
    assert tree_size(tmp_path) < 1 << 20


def test_a_base_ref_that_names_no_commit_is_refused_on_every_call(repo: Path) -> None:
    """CORTEX_BASE_REF=nosuchref was refused by index only: search, status and context
    answered as if it were unset."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
    with Workspace.open(repo, replace(CONFIG, base_ref="nosuchref")) as ws:
        with pytest.raises(ConfigError, match="CORTEX_BASE_REF"):
            ws.search("compute")
        with pytest.raises(ConfigError, match="CORTEX_BASE_REF"):
            ws.status(check_files=False)
        with pytest.raises(ConfigError, match="CORTEX_BASE_REF"):
            ws.build_context("what does compute return", record=False)


def test_a_far_move_is_deferred_to_the_background_where_a_server_asks(tmp_path: Path) -> None:
    """A server's request after a pull waited for a whole base (53 s on Django; a 504 at
    60 s on the standard library). With ``defer_far_refresh`` a call that finds more than
    QUICK_FILES unseen files, or a base to build, answers from the index as it was, says
    so, and hands the refresh over; the library and the CLI still build first."""
    from engine.index import QUICK_FILES

    root = tmp_path / "repo"
    root.mkdir()
    for i in range(QUICK_FILES + 20):
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.email=t@e", "-c", "user.name=T", "commit", "-qm", "init")
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
    for i in range(QUICK_FILES + 10):  # a pull's worth of changed files
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x * {i}\n")
    asked: list[int] = []
    with Workspace.open(root, CONFIG) as ws:
        ws.defer_far_refresh(lambda: asked.append(1))
        pack = ws.build_context("what does f3 return", record=False)
        assert asked == [1] and any(a.startswith("stale: ") for a in pack.advisory)
        assert "x + 3" in pack.render()  # the index as it was
        assert ws.status(check_files=False).overlay_files == 0
    with Workspace.open(root, CONFIG) as ws:  # no one to hand it to: built first
        pack = ws.build_context("what does f3 return", record=False)
        assert "x * 3" in pack.render() and not any(a.startswith("stale") for a in pack.advisory)
    with Workspace.open(root, replace(CONFIG, max_section_tokens=256)) as ws:
        ws.defer_far_refresh(lambda: asked.append(2))  # another chunker: a base to build
        (root / "m1.py").write_text("def f1(x):\n    return x - 1\n")
        pack = ws.build_context("what does f1 return", record=False)
        assert asked == [1, 2] and any("new base" in a for a in pack.advisory)


def test_the_working_tree_diff_is_read_again_only_when_the_tree_moved(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call ran `git diff HEAD` (~200 ms with 500 changed files) though nothing had
    moved since the last one; the diff is kept by the working tree's token."""
    from engine._workspace import _context

    calls: list[Path] = []
    real = _context.working_diff

    def counted(root: Path) -> list:  # type: ignore[type-arg]
        calls.append(root)
        return real(root)

    monkeypatch.setattr(_context, "working_diff", counted)
    target = next(p for p in sorted(repo.glob("*.py")))
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        target.write_text(target.read_text() + "\n# the first edit\n")
        first = ws.build_context("what changed", record=False)
        second = ws.build_context("what changed again", record=False)
        assert len(calls) == 1 and "the first edit" in first.render() + second.render()
        target.write_text(target.read_text() + "\n# a second edit\n")
        third = ws.build_context("what changed", record=False)
        assert len(calls) == 2 and "a second edit" in third.render()


def test_a_name_that_lives_only_in_docs_brings_the_docs(tmp_path: Path) -> None:
    """`ZEBRA_RETRY_LIMIT`, set in two docs and in no code, gave forty unrelated helpers
    and left both docs out as weak: the code prior buried the only sections naming it."""
    for i in range(40):
        (tmp_path / f"h{i}.py").write_text(f"def helper_{i}(x):\n    return x * {i}\n")
    (tmp_path / "notes.txt").write_text("Retry notes\n\nSet ZEBRA_RETRY_LIMIT to bound retries.\n")
    (tmp_path / "guide.md").write_text("# Guide\n\nThe ZEBRA_RETRY_LIMIT setting caps retries.\n")
    with Workspace.open(tmp_path, CONFIG) as ws:
        ws.index()
        top = [h.chunk.path for h in ws.search("ZEBRA_RETRY_LIMIT", k=2)]
        assert sorted(top) == ["guide.md", "notes.txt"]
        pack = ws.build_context("where is ZEBRA_RETRY_LIMIT set", record=False)
        assert {s.source_uri.split("#")[0] for s in pack.citations} >= {"guide.md", "notes.txt"}


def test_a_linked_working_tree_with_a_store_of_its_own_keeps_it(tmp_path: Path) -> None:
    """Notes saved in a linked working tree's own store before it shared the main one's
    are not left unread."""
    from engine.memory import Memory, NoteStore
    from engine.segment import code_terms

    root = make_repo(tmp_path / "repo")
    _git(root, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    with Workspace.open(tmp_path / "wt", CONFIG) as ws:
        project = ws._notes.project  # as the earlier release stamped its rows
        user = ws.layers.user
    from engine.index import Manifest

    old = tmp_path / "wt" / ".cortex" / "memory.sqlite"
    (tmp_path / "wt" / ".cortex").mkdir()
    Manifest(old.parent).write()  # a state folder an earlier release made
    store = NoteStore(old, project=project, user=user, terms=code_terms)
    Memory(store).save("Saved before the upgrade", "note", what="kept")
    store.close()
    with Workspace.open(tmp_path / "wt", CONFIG) as ws:
        assert [h.title for h in ws.memory.search("saved before the upgrade")] == [
            "Saved before the upgrade"
        ]


def test_every_long_step_of_a_first_index_has_a_progress_stage(repo: Path) -> None:
    """Reading every chunk back and looking it up in the vector cache took 4-8 s of the
    standard library's first index with no bar at all; each is a stage now, ended."""
    events: list[tuple[str, str]] = []

    class Recorder:
        def stage(self, name: str, total: int | None, unit: str) -> None:
            events.append(("stage", name))

        def advance(self, n: int = 1) -> None:
            pass

        def end(self) -> None:
            events.append(("end", ""))

    with Workspace.open(repo, CONFIG) as ws:
        ws.index(progress=Recorder())
    names = [n for kind, n in events if kind == "stage"]
    assert any(n.endswith("reading chunks") for n in names), names
    assert any(n.endswith("looking up the cache") for n in names), names
    assert names.index(next(n for n in names if n.startswith("embedding"))) > names.index(
        next(n for n in names if n.endswith("looking up the cache"))
    )
    assert events[-1] == ("end", "")  # the last stage is closed


def test_a_workspaces_git_config_runs_no_command(tmp_path: Path) -> None:
    """``core.fsmonitor`` in an untrusted repository's ``.git/config`` ran on every ``git
    status`` cortex made: index, status, context and search (stop 45's review). Every git
    process cortex starts now has it off, and hooks too."""
    root = make_repo(tmp_path / "repo")
    pwned = tmp_path / "pwned"
    _git(root, "config", "core.fsmonitor", f"touch {pwned}; false")
    _git(root, "config", "core.hooksPath", str(tmp_path / "hooks"))
    (tmp_path / "hooks").mkdir()
    hook = tmp_path / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch {pwned}\n")
    hook.chmod(0o755)
    (root / "mod0.py").write_text("def edited():\n    return 1\n")
    with Workspace.open(root, Config(dense_model="hash")) as ws:
        ws.index()
        ws.status()
        ws.build_context("edited", "edited")
        ws.search("edited")
    assert not pwned.exists()


def test_a_linked_state_folder_in_the_workspace_is_refused(tmp_path: Path) -> None:
    """A committed ``.cortex -> ../elsewhere`` kept this workspace's turns in another
    repository's ledger, and a rebuild overwrote files in a folder cortex never made (stop
    45's review). It is refused before anything is written; an absolute CORTEX_STATE_DIR
    still puts the state anywhere on purpose."""
    root = make_repo(tmp_path / "repo")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("mine\n")
    (root / ".cortex").symlink_to(victim)
    with pytest.raises(WorkspaceError, match=r"\.cortex is a symlink .*CORTEX_STATE_DIR"):
        Workspace.open(root, Config(dense_model="hash"))
    assert sorted(p.name for p in victim.iterdir()) == ["notes.txt"]
    elsewhere = tmp_path / "elsewhere"
    with Workspace.open(root, Config(dense_model="hash", state_dir=str(elsewhere))) as ws:
        ws.index()
    assert (elsewhere / "manifest.json").exists()


def test_a_symlinked_file_is_resolved_and_forgotten_by_its_own_name(tmp_path: Path) -> None:
    """A followed symlink is indexed under its own name, but resolve and forget looked its
    target's name up: "not in the index", and nothing to purge (stop 45's review)."""
    from engine.serve import resolve_checked

    root = make_repo(tmp_path / "repo")
    (root / "alias.py").symlink_to("mod0.py")
    _git(root, "add", "alias.py")
    _git(root, "commit", "-qm", "alias")
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
        assert ws.search_files("alias")  # indexed under its name
        found = resolve_checked(ws, "alias.py#L1-L2", None)
        assert found["indexed"] is True and found["path"] == "alias.py"
        report = ws.forget(["alias.py"], dry_run=True)
        # The link's bytes are its target's: forgetting one forgets both (stop 46's review).
        assert report.files == ["alias.py", "mod0.py"] and report.chunks > 0


def test_a_hash_in_a_path_is_part_of_the_path(tmp_path: Path) -> None:
    """Uris were cut at their first ``#``: a cited section of ``notes#2/use#it.py`` read
    as stale and was never matched (stop 45's review). ``uri_path`` cuts the line
    fragment only, everywhere."""
    from engine import uri_path

    assert uri_path("a#b/c#d.py#L3-L9") == "a#b/c#d.py" and uri_path("a#b.py#L4") == "a#b.py"
    assert uri_path("plain.py") == "plain.py" and uri_path("x#Lfoo.py") == "x#Lfoo.py"
    root = make_repo(tmp_path / "repo")
    (root / "notes#2").mkdir()
    (root / "notes#2" / "use#it.py").write_text("def hashed_helper():\n    return 7\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "hash")
    with Workspace.open(root, CONFIG) as ws:
        ws.index()
        pack = ws.build_context("hashed_helper", "hashed_helper")
        cited = next(s for s in pack.citations if s.source_uri.startswith("notes#2/use#it.py#L"))
        result = ws.feedback(pack.replay_key, [cited.id], outcome="success")
        assert result.valid == (cited.id,) and not result.stale


def test_one_string_where_a_list_goes_is_refused_before_anything_is_recorded(
    repo: Path,
) -> None:
    """A bare string for tool_signals, tool_results, a bundle's objects or the paths to
    forget was read one character per item (into the prompt and the ledger, or as one-letter
    paths to forget): each is a ConfigError naming the argument, and nothing is recorded."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        pack = ws.build_context("register_hook", budget_tokens=2000)
        records = ws.journal.head()[0]
        with pytest.raises(ConfigError, match="tool_signals must be a list, not str"):
            ws.build_context("register_hook", tool_signals="ValueError")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="tool_signals must be a list, not str"):
            ws.search("register_hook", tool_signals="ValueError")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="tool_results must be a list, not str"):
            ws.feedback(pack.replay_key, [1], tool_results="pytest passed")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="objects must be a list, not str"):
            ws.bundle("fix the hook", "hooks.py")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="paths must be a list, not str"):
            ws.forget("hooks.py", dry_run=True)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="types must be a list, not str"):
            ws.memory.search("hooks", types="note")  # type: ignore[arg-type]
        assert ws.journal.head()[0] == records
        assert ws.feedback(pack.replay_key, [1], tool_results=["pytest passed"]).valid == (1,)


def test_the_request_limits_are_the_librarys(repo: Path) -> None:
    """The limits the servers applied alone (256 signals, citations, tool results or state
    items; 256 KiB of signals or tool results; a bundle goal of 128 KiB) are the library's,
    with the messages the servers give; 300 bundle objects get one message (at most 64);
    nothing is recorded."""
    from engine import SessionState

    many = ["x"] * 257
    big = ["y" * (200 << 10), "z" * (100 << 10)]
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        pack = ws.build_context("register_hook", budget_tokens=2000)
        records = ws.journal.head()[0]
        calls = [
            ("tool_signals has over 256 items", lambda: ws.build_context("x", tool_signals=many)),
            ("tool_signals has over 256 items", lambda: ws.search("x", tool_signals=many)),
            ("tool_signals are over 262144 bytes", lambda: ws.build_context(
                "x", tool_signals=big)),
            ("tool_signals are over 262144 bytes", lambda: ws.search_files(
                "x", tool_signals=big)),
            ("constraints has over 256 items", lambda: ws.build_context(
                "x", state=SessionState(constraints=tuple(many)))),
            ("state is over 131072 bytes", lambda: ws.build_context(
                "x", state=SessionState(subgoals=("s" * (129 << 10),)))),
            ("model_citations has over 256 items", lambda: ws.feedback(
                pack.replay_key, list(range(1, 258)))),
            ("tool_results has over 256 items", lambda: ws.feedback(
                pack.replay_key, [1], tool_results=many)),
            ("tool_results are over 262144 bytes", lambda: ws.feedback(
                pack.replay_key, [1], tool_results=big)),
            ("goal is over 131072 bytes", lambda: ws.bundle("g" * 140_000)),
            ("objects has over 64 items", lambda: ws.bundle("fix", ["hooks.py"] * 300)),
            ("objects must be text, not int", lambda: ws.bundle("fix", [1])),
            ("state must be a SessionState, not dict", lambda: ws.bundle(
                "fix", state={"constraints": []})),
        ]  # fmt: skip
        for message, call in calls:
            with pytest.raises(ConfigError, match=message):
                call()
        assert ws.journal.head()[0] == records


def test_feedback_without_citations_records_that_nothing_was_cited(repo: Path) -> None:
    """model_citations may be left out, as on HTTP and the CLI: the model cited nothing,
    recorded as such; an outcome still needs a citation of the turn's evidence."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        pack = ws.build_context("register_hook", budget_tokens=2000)
        records = ws.journal.head()[0]
        result = ws.feedback(pack.replay_key)
        assert (result.valid, result.dropped) == ((), ())
        assert ws.journal.head()[0] == records + 1
        with pytest.raises(ConfigError, match="an outcome needs at least one citation"):
            ws.feedback(pack.replay_key, outcome="success")


def test_resolve_refuses_a_path_outside_the_workspace(repo: Path) -> None:
    """ws.resolve refuses an absolute path, '..' and the state folder as every other surface
    does (it answered "not in the index" for /etc/passwd); './hooks.py' is hooks.py."""
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        for uri, says in (("/etc/passwd", "without '..'"), ("../etc/passwd#L1", "without '..'"),
                          (".cortex/manifest.json", "outside the workspace")):  # fmt: skip
            with pytest.raises(ConfigError, match=says):
                ws.resolve(uri)
        got = ws.resolve("./hooks.py#L1-L2")
        assert (got.uri, got.path, got.start_line) == ("./hooks.py#L1-L2", "hooks.py", 1)


def test_a_note_resolves_with_its_title(repo: Path) -> None:
    """resolve('memory:N') gives the note's title, then its fields (a title-only note
    resolved to the empty text)."""
    with Workspace.open(repo, CONFIG) as ws:
        full = ws.memory.save("Hooks run per event", "discovery", what="a list per event")
        bare = ws.memory.save("Title only words here", "discovery")
        got = ws.resolve(f"memory:{full.id}")
        assert got.text == "Hooks run per event\nwhat: a list per event"
        assert ws.resolve(f"memory:{bare.id}").text == "Title only words here"


def test_arguments_of_the_wrong_type_are_config_errors_naming_them(repo: Path) -> None:
    """None, a number, bytes or a dict where text or a record goes, and text with a lone
    surrogate, are ConfigErrors naming the argument (they were AttributeError, TypeError
    or UnicodeEncodeError from deep inside), raised before anything is recorded."""
    from engine import SessionState, ToolSignal

    with pytest.raises(ConfigError, match="path must be"):
        Workspace.open(None, CONFIG)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="config must be a Config, not dict"):
        Workspace.open(repo, {"ledger": False})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool signal must be text, not NoneType"):
        ToolSignal(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tool signal must be text, not bytes"):
        ToolSignal(b"x")  # type: ignore[arg-type]
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        ws.build_context("register_hook", state=SessionState(session="s"))
        records = ws.journal.head()[0]
        calls = [
            ("goal must be text, not NoneType", lambda: ws.build_context(None)),
            ("goal must be text, not int", lambda: ws.build_context(123)),
            ("goal must be text, not bytes", lambda: ws.build_context(b"register_hook")),
            ("query must be text, not int", lambda: ws.build_context("x", 5)),
            ("goal holds a lone surrogate", lambda: ws.build_context("Header\ud800Parser")),
            ("query holds a lone surrogate", lambda: ws.build_context(
                "x", "a\ud800b", state=SessionState(session="s"))),
            ("tool_signals items must be", lambda: ws.build_context("x", tool_signals=[None])),
            ("state must be a SessionState, not dict", lambda: ws.build_context(
                "x", state={"session": "s"})),
            ("settings must be a ContextSettings, not str", lambda: ws.build_context(
                "x", settings="x")),
            ("query must be text, not NoneType", lambda: ws.search(None)),
            ("goal must be text, not int", lambda: ws.search("x", goal=1)),
            ("uri must be text, not NoneType", lambda: ws.resolve(None)),
            ("proof must be a Mapping, not str", lambda: ws.resolve("hooks.py", "abc")),
        ]  # fmt: skip
        for message, call in calls:
            with pytest.raises(ConfigError, match=message):
                call()
        assert ws.journal.head()[0] == records


def test_a_damaged_ledger_or_memory_store_still_gives_the_pack_with_an_advisory(
    repo: Path,
) -> None:
    """The memory lane and the learned offsets are extras: a memory store or a ledger that
    cannot be read leaves them out, and the pack comes back with an advisory naming the
    file and what to do (recorded or not: an unrecordable turn is said so, as the docstring
    promises). A session's history is no extra: naming a session with the ledger damaged
    raises, rather than pack without the history the caller asked for."""
    from engine import LedgerStateError, SessionState

    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        ws.memory.save("hooks live in hooks.py", "note")
        ws.build_context("register_hook")
    for name, said in (("memory.sqlite", "memory: "), ("ledger.sqlite", "ledger: ")):
        damaged = repo / ".cortex" / name
        saved = damaged.read_bytes()
        damaged.write_bytes(b"garbage" * 100)
        with Workspace.open(repo, CONFIG) as ws:
            for record in (False, True):
                pack = ws.build_context("register_hook", record=record)
                assert any(c.source_uri.startswith("hooks.py") for c in pack.citations)
                notes = [a for a in pack.advisory if a.startswith(said)]
                assert notes and all(str(damaged) in a for a in notes), pack.advisory
            if name == "ledger.sqlite":
                assert any("not recorded" in a for a in pack.advisory)
                with pytest.raises(LedgerStateError):
                    ws.build_context("register_hook", state=SessionState(session="s"))
        damaged.write_bytes(saved)


def test_a_closed_workspace_refuses_every_call_and_reopens_nothing(repo: Path) -> None:
    """After close() every call that reads or writes the workspace's state raises
    WorkspaceClosedError (they silently reopened some fifteen SQLite handles); its names
    (root, config, paths) stay readable; a second close is a no-op, and a new Workspace
    of the same folder works."""
    import inspect

    from engine import CortexError, WorkspaceClosedError

    names = {"root", "config", "state_dir", "ledger_path", "project", "defer_far_refresh"}
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        ws.build_context("register_hook", record=False)
    ws.close()
    fds = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else None
    checked = []
    for name, member in inspect.getmembers(Workspace):
        if name.startswith("_") or name in names | {"open", "find", "close"}:
            continue
        with pytest.raises(WorkspaceClosedError, match="closed"):
            if isinstance(member, property):
                getattr(ws, name)
            else:
                params = inspect.signature(member).parameters.values()
                needed = [None for p in params if p.name != "self" and p.default is p.empty
                          and p.kind is p.POSITIONAL_OR_KEYWORD]  # fmt: skip
                getattr(ws, name)(*needed)
        checked.append(name)
    assert {"build_context", "search", "feedback", "memory", "journal", "bundle"} <= set(checked)
    assert issubclass(WorkspaceClosedError, CortexError)
    with pytest.raises(WorkspaceClosedError):
        ws.__enter__()  # `with ws:` again
    assert ws.root == repo.resolve() and ws.config == CONFIG
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds
    with Workspace.open(repo, CONFIG) as again:
        assert again.build_context("register_hook", record=False).citations


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_workspace_used_across_a_fork_is_refused_in_the_child(repo: Path) -> None:
    """A forked child's calls on its parent's Workspace raise WorkspaceError at once (its
    SQLite handles and any lock a parent thread held must not be used there: children hung),
    closing it there leaves the parent's handles alone, and a Workspace opened in the child
    works."""
    from engine import WorkspaceError

    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        ws.build_context("register_hook")
        pid = os.fork()
        if pid == 0:  # the child: the exit code says what happened; SIGALRM if it hangs
            signal.alarm(30)
            try:
                try:
                    ws.build_context("register_hook")
                    os._exit(2)
                except WorkspaceError as exc:
                    if "fork" not in str(exc):
                        os._exit(3)
                ws.close()
                with Workspace.open(repo, CONFIG) as own:
                    own.build_context("register_hook")
                os._exit(0)
            finally:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert ws.build_context("register_hook").citations  # the parent's handles still work


def test_an_empty_path_and_an_unrecorded_key_are_named(repo: Path) -> None:
    """Workspace.open("") is a ConfigError (it opened the current folder); feedback on or
    replay of a key this process built with record=False says so, where it said only "no
    turn recorded under it"."""
    from engine import UnknownReplayKeyError

    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="path is empty"):
            Workspace.open(empty, CONFIG)
    with Workspace.open(repo, CONFIG) as ws:
        ws.index()
        ws.build_context("register_hook")  # a ledger exists
        key = ws.build_context("compute the offset", record=False).replay_key
        for call in (lambda: ws.feedback(key, [1]), lambda: ws.replay(key),
                     lambda: ws.feedback(key, [1], outcome="success")):  # fmt: skip
            with pytest.raises(UnknownReplayKeyError, match="built with record=False"):
                call()
        with pytest.raises(UnknownReplayKeyError, match=r"no turn recorded under it$"):
            ws.replay("0" * 32)
