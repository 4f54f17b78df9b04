"""A first index killed part-way goes on from the batches it committed, and ends with the
same index a run that was never interrupted builds; where it cannot, it starts over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import Config, Workspace
from engine.cli._text import render_index_report
from tests.engine.test_workspace import make_repo

CONFIG = Config(dense_model="hash", ledger=False)
QUERIES = ("compute_3 value", "offset", "register hook event", "demo project hooks")


def _state(ws: Workspace) -> dict[str, Any]:
    """What a finished base holds and answers: files, chunk ids, BM25 totals, rankings."""
    segment = ws.layers.base_segment()
    files = {p: (r.content_sha256, r.chunks, r.tokens) for p, r in segment.meta.files().items()}
    return {
        "files": files,
        "chunks": sorted(cid for cid, _ in segment.meta.all_chunk_ids()),
        "stats": json.loads(segment.meta.get_info("lexical_stats") or "null"),
        "pages": segment.fresh_lexical().num_pages,
        "generation": segment.meta.generation,
        "hits": {
            (q, m): [(h.chunk.id, round(h.score, 9)) for h in ws.search(q, mode=m, k=20)]
            for q in QUERIES
            for m in ("bm25", "hybrid")
        },
    }


def _built_once(repo: Path, state: Path) -> dict[str, Any]:
    with Workspace.open(repo, CONFIG.with_(state_dir=str(state))) as ws:
        report = ws.index()
        assert report.resumed == 0
        return _state(ws)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few hundred bytes a batch: the test repositories' files make many batches."""
    monkeypatch.setattr("engine.index._build.BATCH_BYTES", 300)


def _kill_at_chunk(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """A Ctrl-C while the ``n``-th file is chunked."""
    from indexers import Chunker

    real = Chunker.chunk
    calls = [0]

    def chunk(self: Chunker, src: Any) -> Any:
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt
        return real(self, src)

    monkeypatch.setattr(Chunker, "chunk", chunk)


@pytest.mark.usefixtures("small_batches")
def test_a_first_index_killed_part_way_goes_on_and_ends_as_one_run_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", files=12)
    whole = _built_once(repo, tmp_path / "once")
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    _kill_at_chunk(monkeypatch, 9)
    with Workspace.open(repo, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.undo()
    monkeypatch.setattr("engine.index._build.BATCH_BYTES", 300)
    with Workspace.open(repo, config) as ws:
        report = ws.index()
        assert 0 < report.resumed < 8  # whole batches before the 9th file, no more
        assert report.files == report.added == 14  # a first index: every file is new
        assert report.chunks_added == report.chunks  # kept chunks count as this index's
        text = render_index_report(str(repo), report)
        assert f"resumed:    {report.resumed} files kept from an interrupted run" in text
        assert _state(ws) == whole
    bases = [p.name for p in (tmp_path / "state" / "bases").iterdir()]
    assert len(bases) == 1 and "." not in bases[0]  # the building folder became the base


@pytest.mark.usefixtures("small_batches")
def test_a_batch_in_the_lexical_index_and_not_in_the_metadata_means_starting_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between the two commits of a batch: its files are in tantivy but not in the
    metadata, so going on would add them twice. The build starts over, exactly."""
    repo = make_repo(tmp_path / "repo", files=12)
    whole = _built_once(repo, tmp_path / "once")
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    from engine.index import _build

    real = _build._record
    calls = [0]

    def record(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(_build, "_record", record)
    with Workspace.open(repo, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.setattr(_build, "_record", real)
    with Workspace.open(repo, config) as ws:
        assert ws.index().resumed == 0
        assert _state(ws) == whole


@pytest.mark.usefixtures("small_batches")
def test_a_batch_killed_before_its_lexical_commit_is_simply_done_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed while a batch was written to tantivy: nothing of it was committed anywhere,
    so the run goes on from the batches before it."""
    from engine.segment._lexical import LexicalWriter

    repo = make_repo(tmp_path / "repo", files=12)
    whole = _built_once(repo, tmp_path / "once")
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    real = LexicalWriter.add_page
    calls = [0]

    def add_page(self: LexicalWriter, *args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 7:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(LexicalWriter, "add_page", add_page)
    with Workspace.open(repo, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.setattr(LexicalWriter, "add_page", real)
    with Workspace.open(repo, config) as ws:
        assert 0 < ws.index().resumed < 7
        assert _state(ws) == whole


@pytest.mark.usefixtures("small_batches")
def test_a_kept_file_edited_before_the_next_run_means_starting_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder outside git is its own base: a file the killed run indexed and the user
    then edited is indexed as it is now, from empty (deleting from tantivy would leave its
    BM25 statistics inexact)."""
    folder = tmp_path / "plain"
    folder.mkdir()
    for i in range(12):
        (folder / f"mod{i}.py").write_text(f"def compute_{i}(value):\n    return value * {i}\n")
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    _kill_at_chunk(monkeypatch, 10)
    with Workspace.open(folder, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.undo()
    monkeypatch.setattr("engine.index._build.BATCH_BYTES", 300)
    (folder / "mod0.py").write_text("def edited_after_the_kill(value):\n    return value\n")
    with Workspace.open(folder, config) as ws:
        assert ws.index().resumed == 0
        assert ws.search("edited_after_the_kill", mode="bm25")[0].chunk.path == "mod0.py"
        assert all("compute_0" not in h.chunk.text for h in ws.search("compute_0", mode="bm25"))
        resumed_state = _state(ws)
    with Workspace.open(folder, CONFIG.with_(state_dir=str(tmp_path / "once"))) as ws:
        ws.index()
        assert _state(ws) == resumed_state


@pytest.mark.usefixtures("small_batches")
def test_other_chunker_settings_start_the_interrupted_build_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", files=12)
    other = CONFIG.with_(max_section_tokens=64)
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    _kill_at_chunk(monkeypatch, 9)
    with Workspace.open(repo, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.undo()
    with Workspace.open(repo, other.with_(state_dir=str(tmp_path / "state"))) as ws:
        assert ws.index().resumed == 0
    with Workspace.open(repo, other.with_(state_dir=str(tmp_path / "other"))) as ws:
        ws.index()
        expected = _state(ws)
    with Workspace.open(repo, other.with_(state_dir=str(tmp_path / "state"))) as ws:
        assert _state(ws) == expected
        assert "max_section_tokens=64" in (ws.layers.base_segment().meta.get_info("chunker") or "")


def test_one_batch_or_many_give_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches change when things are committed, never what is indexed."""
    repo = make_repo(tmp_path / "repo", files=12)
    whole = _built_once(repo, tmp_path / "once")
    monkeypatch.setattr("engine.index._build.BATCH_BYTES", 1)  # one file a batch
    assert _built_once(repo, tmp_path / "many") == whole


def test_an_empty_tree_still_gets_a_committed_index(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))  # skipped: binary
    with Workspace.open(folder, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        report = ws.index()
        assert (report.files, report.resumed) == (0, 0)
        assert ws.search("anything", mode="bm25") == []



@pytest.mark.usefixtures("small_batches")
def test_the_report_of_a_finished_build_counts_what_the_killed_run_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a_settings.py").write_text('DB_PASSWORD = "hunter2-correct-horse-battery"\n')
    for i in range(12):
        (folder / f"mod{i}.py").write_text(f"def compute_{i}(value):\n    return value * {i}\n")
    with Workspace.open(folder, CONFIG.with_(state_dir=str(tmp_path / "once"))) as ws:
        whole = ws.index().redactions
    assert whole  # the planted credential is found
    config = CONFIG.with_(state_dir=str(tmp_path / "state"))
    _kill_at_chunk(monkeypatch, 10)
    with Workspace.open(folder, config) as ws, pytest.raises(KeyboardInterrupt):
        ws.index()
    monkeypatch.undo()
    monkeypatch.setattr("engine.index._build.BATCH_BYTES", 300)
    with Workspace.open(folder, config) as ws:
        report = ws.index()
        assert report.resumed and report.redactions == whole


def test_a_base_marked_complete_before_its_rename_is_not_listed(tmp_path: Path) -> None:
    """The ``complete`` marker is written in the build folder just before it is renamed
    into place: a reader listing bases in between opened a base that was not there yet
    (``IndexNotBuiltError`` with an absolute path, a 503 on the servers)."""
    repo = make_repo(tmp_path / "repo")
    with Workspace.open(repo, CONFIG.with_(state_dir=str(tmp_path / "state"))) as ws:
        ws.index()
        bases = ws.layers.complete_bases()
        building = tmp_path / "state" / "bases" / ("f" * 40 + ".building")
        building.mkdir()
        (building / "complete").write_text("f" * 40 + "\n")
        assert ws.layers.complete_bases() == bases
