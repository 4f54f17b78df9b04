"""eval.learning's scoring helpers: creation order, BM25 over issue texts, tier scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.learning import bm25_rank, creation_order, main, outcome_scores, outcomes_ceiling
from eval.swebench_data import Instance


def _inst(iid: str, text: str = "") -> Instance:
    return Instance(iid, "o/r", "c" * 40, text, ("a.py",), (), None)


def test_creation_order_is_by_pull_request_number() -> None:
    """pytest-10081 comes after pytest-5103, not before it as text would sort."""
    ids = [i.instance_id for i in creation_order([_inst("p-10081"), _inst("p-5103")])]
    assert ids == ["p-5103", "p-10081"]


def test_bm25_rank_and_outcome_scores() -> None:
    """The issue sharing rare words ranks first; the first shared gold file sets the rank."""
    assert bm25_rank("fixture teardown order", ["docs build", "fixture teardown"])[0] == 1
    assert outcome_scores([{"x.py"}, {"a.py"}], {"a.py"}) == {
        "hit@1": 0.0, "hit@3": 1.0, "hit@5": 1.0, "mrr": 0.5}  # fmt: skip
    assert outcome_scores([], {"a.py"})["mrr"] == 0.0


def test_summarise_reads_earlier_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--summarise averages the second halves of saved rows per arm."""
    arm = {"acc@1": True, "acc@5": True, "hit@4000": False}
    row = {"repo": "o/r", "second_half": True, "none": arm, "learn": arm, "flip": arm}
    (tmp_path / "r.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["--summarise", str(tmp_path / "r.jsonl")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["learn"] == {"acc@1": 100.0, "acc@5": 100.0, "hit@4000": 0.0}


def test_outcomes_ceiling_counts_earlier_instances_sharing_a_gold_file() -> None:
    """An instance counts when an earlier one edited a gold file of its own (for the tier:
    only earlier ones whose feedback cited something); rows without citations say None."""
    def row(pos: int, gold: list[str], cited: list[str], scored: bool = True) -> dict:
        r = {"repo": "o/r", "pos": pos, "gold_files": gold, "learn": {"cited_files": cited}}
        return r | ({"outcomes_ours": {}} if scored else {})

    rows = [row(0, ["a.py"], [], scored=False), row(1, ["b.py"], ["b.py"]),
            row(2, ["a.py"], ["a.py"]), row(3, ["b.py", "c.py"], [])]  # fmt: skip
    # pos 1: nothing earlier shares; pos 2: pos 0 shares a.py but cited nothing;
    # pos 3: pos 1 shares b.py and cited it.
    assert outcomes_ceiling(rows) == {"bm25": round(2 / 3, 3), "ours": round(1 / 3, 3)}
    assert outcomes_ceiling([{"repo": "o/r", "pos": 0, "gold_files": [], "learn": {}}]) is None
