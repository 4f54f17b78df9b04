"""Fusion of recall lists, and files ranked from their sections."""

from __future__ import annotations

import pytest

from engine.core import Fusion, RecallSettings
from engine.retrieval import file_scores, fuse_lists, rank_files
from tests.engine.records import DictView, chunk

A, B, C, D = (chunk(f"pkg/{n}.py", f"def {n}():\n    return {i}", symbol=n)
              for i, n in enumerate("abcd"))  # fmt: skip
SETTINGS = RecallSettings(weights=(("bm25", 1.0), ("dense", 0.5), ("signal", 2.0)))


def test_rrf_sums_weight_over_k_plus_rank() -> None:
    """A section's fused score is the sum over the lists it is in of weight / (k + rank)."""
    view = DictView([A, B, C])
    lists = {"bm25": [(A.id, 9.0), (B.id, 5.0)], "dense": [(B.id, 0.9), (C.id, 0.8)]}
    fused = {c.chunk.id: c for c in fuse_lists(view, lists, SETTINGS)}  # type: ignore[arg-type]
    assert fused[A.id].fused == pytest.approx(1.0 / 61)
    assert fused[B.id].fused == pytest.approx(1.0 / 62 + 0.5 / 61)
    assert fused[B.id].ranks == {"bm25": 2, "dense": 1}
    assert fused[B.id].sources == "dense+bm25"


def test_ties_fall_to_chunk_ids_and_weights_order_lists() -> None:
    """Equal fused scores order by chunk id; a weighted list outranks an unweighted one."""
    view = DictView([A, B, C])
    tied = fuse_lists(view, {"bm25": [(A.id, 1.0)], "other": [(B.id, 1.0)]}, SETTINGS)  # type: ignore[arg-type]
    assert [c.chunk.id for c in tied] == sorted([A.id, B.id])
    strong = fuse_lists(view, {"bm25": [(A.id, 1.0)], "signal": [(C.id, 1.0)]}, SETTINGS)  # type: ignore[arg-type]
    assert strong[0].chunk.id == C.id


def test_only_kept_candidates_are_read_and_missing_ones_are_skipped() -> None:
    """With ``keep``, only that many chunks are read; an id the metadata lacks is skipped
    and the next one takes its place."""
    view = DictView([A, B, C, D])
    ranked = [("gone" * 8, 9.0), (A.id, 8.0), (B.id, 7.0), (C.id, 6.0), (D.id, 5.0)]
    got = fuse_lists(view, {"bm25": ranked}, SETTINGS, keep=2)  # type: ignore[arg-type]
    assert [c.chunk.id for c in got] == [A.id, B.id]
    assert len(view.reads) == 3  # the two kept plus the missing one


def test_score_fusion_normalises_each_list_by_its_top() -> None:
    """``Fusion.SCORE`` adds weight * score / top score of each list."""
    view = DictView([A, B])
    settings = RecallSettings(fusion=Fusion.SCORE, weights=(("bm25", 1.0), ("dense", 0.5)))
    fused = {c.chunk.id: c.fused for c in fuse_lists(  # type: ignore[arg-type]
        view, {"bm25": [(A.id, 10.0), (B.id, 5.0)], "dense": [(B.id, 0.8)]}, settings)}  # fmt: skip
    assert fused[A.id] == pytest.approx(1.0)
    assert fused[B.id] == pytest.approx(0.5 + 0.5)


def test_files_rank_by_their_three_best_sections() -> None:
    """A file's score is the sum of its three best sections: one lucky section does not
    carry a file, and a file does not win by its number of sections."""
    many = [chunk("big.py", f"def f{i}(): pass", start=i + 1) for i in range(6)]
    one = chunk("one.py", "def g(): pass")
    view = DictView([*many, one])
    lists = {"bm25": [(one.id, 1.0)] + [(c.id, 1.0) for c in many]}
    cands = fuse_lists(view, lists, SETTINGS)  # type: ignore[arg-type]
    scores = file_scores(cands)
    big = sorted((c.fused for c in cands if c.chunk.path == "big.py"), reverse=True)
    assert scores["big.py"] == pytest.approx(sum(big[:3]))
    assert rank_files(cands) == sorted(scores, key=lambda p: (-scores[p], p))
