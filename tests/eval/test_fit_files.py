"""The file model's fitter: a real logistic regression on dumped rows, a model the engine
loads, and a clear refusal of a run without candidates."""

from __future__ import annotations

import json
from pathlib import Path

from engine.retrieval import FileModel
from eval.fit_files import evaluate, features, fit, main
from eval.fit_weights import Row


def _row(i: int) -> Row:
    # The gold file defines the requested name; a test file has the better recall, and a
    # third file is there to be ranked last.
    return Row({"instance_id": f"x-{i}", "gold_files": [f"src/a{i}.py"], "candidates": [
        {"path": f"tests/test_a{i}.py", "features": {"recall": 1.0, "source": 0.0}},
        {"path": f"tests/test_a{i}.py", "features": {"recall": 0.9, "source": 0.0}},
        {"path": f"src/a{i}.py", "features": {"recall": 0.7, "defines": 1.0, "source": 1.0}},
        {"path": f"src/b{i}.py", "features": {"recall": 0.0, "source": 1.0}},
    ]})  # fmt: skip


def test_the_fit_learns_what_marks_the_gold_file() -> None:
    """Fitted on rows where the defining file is gold, the model puts it first on rows it
    never saw, and reads exactly the default weights' features."""
    model = fit([_row(i) for i in range(8)], c=1.0, note="synthetic")
    assert model.features == features() and "synthetic" in model.fitted
    held = [_row(i) for i in range(8, 12)]
    assert evaluate(held, model)["acc@1"] == 100.0
    assert evaluate(held, model)["mrr"] >= evaluate(held, None)["mrr"]


def test_main_writes_a_model_the_engine_loads(tmp_path: Path, capsys: object) -> None:
    """--write saves the fit on all rows of the training dumps (two here, read as one set)
    as the engine's model file; --check scores another dump with it."""
    dumps = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for dump, ids in zip(dumps, (range(3), range(3, 6)), strict=True):
        dump.write_text("".join(json.dumps({"instance_id": r.id, "gold_files": r.gold,
                                            "candidates": [{"path": p, "features": f}
                                                           for p, f in r.cands]}) + "\n"
                                for r in (_row(i) for i in ids)), encoding="utf-8")  # fmt: skip
    out = tmp_path / "model" / "file_model.json"
    assert main([*map(str, dumps), "--check", str(dumps[0]), "--write", str(out)]) == 0
    model = FileModel.from_json(out.read_text(encoding="utf-8"), str(out))
    assert model.features == features()
    printed = capsys.readouterr().out  # type: ignore[attr-defined]
    assert printed.startswith("6 instances with candidates")
    assert "fold 2: fitted here, other half" in printed and f"wrote {out}" in printed


def test_a_run_without_candidates_is_refused(tmp_path: Path) -> None:
    """A results file from a run without --dump gives nothing to fit on: exit 2."""
    dump = tmp_path / "results.jsonl"
    dump.write_text(json.dumps({"instance_id": "x", "gold_files": ["a.py"]}) + "\n")
    assert main([str(dump)]) == 2
