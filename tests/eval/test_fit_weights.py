"""The offline weight fitter: file ranking as search_files ranks, and an ascent that only climbs."""

from __future__ import annotations

import json
from pathlib import Path

from eval.fit_weights import Row, evaluate, fit, load, objective, ranked_files


def _row(i: int) -> Row:
    # The gold file's section holds the request's name; a doc section has the better recall.
    return Row({"instance_id": f"x-{i}", "gold_files": ["src/a.py"], "candidates": [
        {"path": "docs/a.md", "features": {"recall": 1.0, "defines": 0.0, "source": 0.3}},
        {"path": "src/a.py", "features": {"recall": 0.8, "defines": 1.0, "source": 1.0}},
        {"path": "src/b.py", "features": {"recall": 0.0, "defines": 0.0, "source": 1.0}},
    ]})  # fmt: skip


def test_files_rank_by_their_best_sections_above_the_weakest() -> None:
    """Scores are weight times value summed; files by their best three above the floor."""
    row = _row(0)
    assert ranked_files(row, {"recall": 1.0}) == ["docs/a.md", "src/a.py", "src/b.py"]
    assert ranked_files(row, {"recall": 1.0, "defines": 1.0})[0] == "src/a.py"


def test_the_ascent_never_loses_and_finds_the_feature_that_matters() -> None:
    """From weights that put the doc first, the fit raises the objective, never lowers it."""
    rows = [_row(i) for i in range(4)]
    start = {"recall": 1.0, "defines": 0.0, "source": 0.0}
    before = evaluate(rows, start)
    fitted = fit(rows, start, rounds=2)
    after = evaluate(rows, fitted)
    assert before["acc@1"] == 0.0 and after["acc@1"] == 100.0
    assert objective(after) > objective(before)
    assert fit(rows, fitted, rounds=2) == fitted  # at a local optimum it stays


def test_rows_without_candidates_are_skipped(tmp_path: Path) -> None:
    """A results file from a run without --dump gives no rows to fit on."""
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"instance_id": "y", "gold_files": ["a.py"]}) + "\n")
    assert load(path) == []
