"""Random branch scripts: a workspace on Qdrant's engine answers as the embedded one does.

Hypothesis writes scripts of branch creation, checkouts, edits, adds, deletes, renames,
staging and commits on a real git repository (``tests.overlays.test_differential``'s
steps). Two workspaces index the same tree, one embedded, one with ``CORTEX_BACKEND=qdrant``
on the edge engine (the same segments, mirrored into Qdrant layers; the View a scope over
Qdrant). After every step both are asked BM25, dense and hybrid searches and build_context:
the same chunk ids in the same order, scores within ``REL`` (ids may differ only among
scores that tie within that tolerance: f32 noise orders those). The modules' fields are
short; fields past 40 terms, where tantivy rounds lengths and the Qdrant backend rescores
with its rounding, are compared in ``test_conformance.py`` and ``test_real_code.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Workspace
from engine.retrieval import Scored
from tests.engine.backend.corpus import assert_same_ranking
from tests.overlays.test_differential import (
    CONFIG,
    QUERIES,
    SETTINGS,
    Step,
    _apply,
    _git,
    _module,
    _pin_mtimes,
    start_repo,
)

REL = 5e-6  # tantivy sums BM25 in f32, the Qdrant backend and the embedded View in f64
DENSE_REL = 1e-3  # Qdrant renormalises stored vectors for cosine, in f32
# Fused scores: f32 noise can swap two dense hits whose cosines tie, which moves their
# reciprocal-rank terms (1/(60+r) vs 1/(61+r): under 1% of a fused score).
FUSED_REL = 1e-2

OPS = ["edit", "add", "delete", "rename", "branch", "checkout", "commit", "stage", "drop_function"]
steps = st.lists(
    st.tuples(
        st.sampled_from(OPS),
        st.integers(0, 50),
        st.integers(0, 50),
    ),
    min_size=2,
    max_size=4,
)


@contextmanager
def _qdrant_env(edge: Path) -> Iterator[None]:
    env = {"CORTEX_BACKEND": "qdrant", "CORTEX_QDRANT_URL": f"edge:{edge}"}
    with mock.patch.dict(os.environ, env):
        yield


def _same(a: Workspace, b: Workspace, edge: Path, context: str) -> None:
    with _qdrant_env(edge):
        b.index()
    a.index()
    for query in QUERIES:
        for mode in ("bm25", "dense", "hybrid"):
            want = a.search(query, mode=mode, k=8)
            with _qdrant_env(edge):
                got = b.search(query, mode=mode, k=8)
            rel = {"bm25": REL, "dense": DENSE_REL, "hybrid": FUSED_REL}[mode]
            pairs = [(h.chunk.id, h.score) for h in got], [(h.chunk.id, h.score) for h in want]
            assert_same_ranking(*pairs, rel, (context, query, mode))
    for query in QUERIES[:2]:
        ranked_a: list[Scored] = []
        ranked_b: list[Scored] = []
        pa = a.build_context(query, budget_tokens=1200, record=False, explain=ranked_a,
                             settings=SETTINGS)  # fmt: skip
        with _qdrant_env(edge):
            pb = b.build_context(query, budget_tokens=1200, record=False, explain=ranked_b,
                                 settings=SETTINGS)  # fmt: skip
        # The whole reranked candidate list, every feature contributing (dense cosine too).
        ranks = [(c.chunk.id, c.score) for c in ranked_b], [(c.chunk.id, c.score) for c in ranked_a]
        assert_same_ranking(*ranks, FUSED_REL, context)
        if [c.chunk.id for c in ranked_b] == [c.chunk.id for c in ranked_a]:
            assert [s.chunk_id for s in pb.citations] == [s.chunk_id for s in pa.citations]


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    derandomize=not os.environ.get("CORTEX_EXPLORE"),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(script=steps)
def test_qdrant_workspace_equals_embedded_after_every_step(
    tmp_path_factory: pytest.TempPathFactory, script: list[Step]
) -> None:
    """Random branch scripts: after each step the Qdrant-backed workspace answers as the
    embedded one (ids and order equal, scores within f32 precision)."""
    _run(tmp_path_factory.mktemp("qdiff"), script)


def test_one_branch_script(tmp_path: Path) -> None:
    """One fixed script (edit, add, delete, rename on a branch, then commit): the Qdrant
    workspace answers as the embedded one after every step."""
    _run(tmp_path, [("branch", 1, 0), ("edit", 2, 3), ("add", 7, 1), ("delete", 0, 0),
                    ("rename", 3, 9), ("commit", 4, 0)])  # fmt: skip


def _run(top: Path, script: list[Step]) -> None:
    root = start_repo(top / "repo")
    branches = ["main"]
    edge = top / "edge"
    embedded = Workspace.open(root, CONFIG.with_(state_dir=str(top / "state-embedded")))
    with _qdrant_env(edge):
        on_qdrant = Workspace.open(root, CONFIG.with_(state_dir=str(top / "state-qdrant")))
    try:
        _same(embedded, on_qdrant, edge, "initial")
        for i, step in enumerate(script):
            _apply(root, step, branches)
            _pin_mtimes(root)
            _same(embedded, on_qdrant, edge, f"after step {i}: {step} of {script}")
    finally:
        embedded.close()
        with _qdrant_env(edge):
            on_qdrant.close()


def test_a_rebuild_writes_the_workspace_shard_and_gc_drops_dead_overlays(tmp_path: Path) -> None:
    """``index(rebuild=True)`` stages segments elsewhere but mirrors into the workspace's
    own edge shard (searches keep answering after the swap); ``gc`` drops the Qdrant layer
    of an overlay whose branch is gone."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "T")
    for n in range(3):
        (root / f"m{n}.py").write_text(_module(n, 0))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    with _qdrant_env(tmp_path / "edge"):
        ws = Workspace.open(root, CONFIG.with_(state_dir=str(tmp_path / "state")))
        try:
            ws.index()
            before = [h.chunk.id for h in ws.search("parse value", mode="bm25", k=5)]
            _git(root, "checkout", "-q", "-b", "topic")
            (root / "m0.py").write_text(_module(9, 4))
            ws.index(rebuild=True)
            qdrant = ws.layers.qdrant()
            assert qdrant is not None
            topic = ws.layers.overlay_layer("topic")
            assert set(qdrant.layer_keys(topic)) == {"m0.py"}  # the overlay: what differs
            assert ws.search("parse value", mode="bm25", k=5)
            _git(root, "checkout", "-q", "-f", "main")
            _git(root, "branch", "-D", "topic")
            ws.index()
            assert before == [h.chunk.id for h in ws.search("parse value", mode="bm25", k=5)]
            ws.gc()
            assert qdrant.layer_keys(topic) == {}
        finally:
            ws.close()


def test_gc_drops_the_layers_of_gone_bases_from_the_state_folders_shard(
    tmp_path: Path,
) -> None:
    """The edge shard in the state folder kept every old base's layer: ``gc`` left them
    (stop 44's review). It now drops the layers no kept base is and compacts the shard
    (a dry run says which, and about how much); ``status`` names the backend."""
    root = start_repo(tmp_path / "repo")
    env = {"CORTEX_BACKEND": "qdrant", "CORTEX_QDRANT_URL": ""}
    with mock.patch.dict(os.environ, env):
        ws = Workspace.open(root, CONFIG.with_(state_dir=str(tmp_path / "state")))
        try:
            ws.index()
            qdrant = ws.layers.qdrant()
            assert qdrant is not None and qdrant.owned
            first = {n for n in qdrant.layers() if n.startswith("base:")}
            (root / "m_new.py").write_text(_module(7, 3))
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "-m", "next")
            ws.index(rebuild=True)
            qdrant = ws.layers.qdrant()  # the rebuild's Layers and connection
            assert qdrant is not None
            assert first < {n for n in qdrant.layers() if n.startswith("base:")}
            planned = ws.gc(dry_run=True)
            assert planned.layers == sorted(first) and planned.freed_bytes > 0
            assert first <= set(qdrant.layers())
            done = ws.gc()
            assert done.layers == sorted(first)  # the rebuild removed the old base, not its layer
            assert not first & set(qdrant.layers())
            assert ws.search("parse value", mode="bm25", k=3)
            assert ws.gc().layers == []
            assert ws.status().backend == (
                f"qdrant edge:{tmp_path / 'state' / 'qdrant-edge'} (collection cortex)")
        finally:
            ws.close()
