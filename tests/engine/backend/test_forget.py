"""``forget`` with the Qdrant backend: what is forgotten locally leaves the collection's
layers too, and the branch's files answer again at once from the purged segments."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from engine import Config, Workspace
from engine.backend import EdgeStore, QdrantBackend, Where
from tests.engine.test_forget import NEEDLE, _repo


@pytest.fixture
def qdrant_env(tmp_path: Path) -> Iterator[Path]:
    edge = tmp_path / "edge"
    env = {"CORTEX_BACKEND": "qdrant", "CORTEX_QDRANT_URL": f"edge:{edge}"}
    with mock.patch.dict(os.environ, env):
        yield edge


def _files_holding(edge: Path, needle: str) -> list[str]:
    """Files under ``edge`` whose bytes hold ``needle``: the engine keeps a deleted point's
    payload in its segments and write-ahead log until the shard is rewritten."""
    raw = needle.encode()
    return [str(p) for p in sorted(edge.rglob("*")) if p.is_file() and raw in p.read_bytes()]


def _points_holding(edge: Path, needle: str) -> int:
    """Points of the collection whose payload holds ``needle`` anywhere."""
    backend = QdrantBackend(EdgeStore(edge / "cortex"))
    try:
        return sum(needle in repr(p) for p in backend.store.scroll(Where(), None))
    finally:
        backend.close()


def test_a_forgotten_string_leaves_every_layer(tmp_path: Path, qdrant_env: Path) -> None:
    """The string is in a base file and an untracked (overlay) file: after forget no point
    of the collection holds it, searches never show it, and the rest of those files is
    found again without a new index."""
    root = _repo(tmp_path)
    config = Config(dense_model="hash", state_dir=str(tmp_path / "state"))
    with Workspace.open(root, config) as ws:
        ws.index()
        assert [h.chunk.path for h in ws.search(NEEDLE, mode="bm25", k=5)]
        dry = ws.forget(text=NEEDLE, dry_run=True)
        assert dry.remote_points > 0
        assert ws.search(NEEDLE, mode="bm25", k=5), "a dry run removed something"

        report = ws.forget(text=NEEDLE)

        assert report.remote_points == dry.remote_points
        assert not ws.search(NEEDLE, mode="bm25", k=5)
        hits = ws.search("compute shipping cost by region", k=10)
        assert "shipping.py" in {h.chunk.path for h in hits}
        assert all(NEEDLE not in h.chunk.text for h in hits)
        assert NEEDLE not in ws.build_context("delivery cost by region", "shipping").render()
    assert _points_holding(qdrant_env, NEEDLE) == 0
    assert _files_holding(qdrant_env, NEEDLE) == []


def test_a_forgotten_folder_leaves_every_layer(tmp_path: Path, qdrant_env: Path) -> None:
    """Files forgotten by folder: their points leave the collection; other files stay."""
    root = _repo(tmp_path)
    config = Config(dense_model="hash", state_dir=str(tmp_path / "state"))
    with Workspace.open(root, config) as ws:
        ws.index()
        report = ws.forget(["billing"])
        assert report.files == ["billing/invoice.py"] and report.remote_points >= 2
        paths = {h.chunk.path for h in ws.search("render invoice total", k=10)}
        assert not {p for p in paths if p.startswith("billing/")}
        assert ws.search("compute shipping cost", mode="bm25", k=1)
        # The shard was rewritten without the forgotten points: vectors came along.
        assert "shipping.py" in {h.chunk.path for h in ws.search("shipping cost", mode="dense",
                                                                 k=5)}  # fmt: skip
    assert _points_holding(qdrant_env, "render_invoice") == 0
    assert _files_holding(qdrant_env, "render_invoice") == []
