"""Files ranked from their sections: the per-file aggregates, the learned model and its file,
and the summed ranking it replaces by default."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine import ConfigError, Contribution, FileRanking, RerankWeights
from engine.retrieval import (
    FileModel,
    Scored,
    default_file_model,
    file_columns,
    file_table,
    learned_file_scores,
    rank_files,
)
from tests.engine.records import chunk


def _scored(path: str, score: float, line: int = 1, **values: float) -> Scored:
    parts = tuple(Contribution(f, v, 1.0, v) for f, v in values.items())
    return Scored(chunk(path, f"def f{line}(): pass", start=line), score, "bm25", parts, None)


def test_the_table_holds_each_files_aggregates_scaled_per_request() -> None:
    """top (best three above the weakest), best and count, each over the request's largest;
    the file's place by top; per feature the file-wide max and the best section's value."""
    rows = [
        ("a.py", 5.0, {"defines": 0.0, "source": 1.0}),
        ("a.py", 3.0, {"defines": 1.0, "source": 1.0}),
        ("b.py", 4.0, {"defines": 0.0, "source": 0.5}),
        ("c.py", 1.0, {}),  # the weakest: the floor
    ]
    paths, table = file_table(rows, ("defines", "source"))
    cols = file_columns(("defines", "source"))
    assert paths == ["a.py", "b.py", "c.py"]
    assert cols == ["top", "best", "count", "rank",
                    "defines:max", "defines:best", "source:max", "source:best"]  # fmt: skip
    got = {p: dict(zip(cols, row, strict=True)) for p, row in zip(paths, table, strict=True)}
    assert got["a.py"]["top"] == 1.0 and got["b.py"]["top"] == pytest.approx(3 / 6)
    assert got["a.py"]["best"] == 1.0 and got["b.py"]["best"] == pytest.approx(3 / 4)
    assert got["a.py"]["count"] == 1.0 and got["b.py"]["count"] == 0.5
    assert [got[p]["rank"] for p in paths] == [1.0, 0.5, pytest.approx(1 / 3)]
    # a.py's best section does not define the name; another of its sections does.
    assert (got["a.py"]["defines:max"], got["a.py"]["defines:best"]) == (1.0, 0.0)
    assert got["b.py"]["source:best"] == 0.5 and got["c.py"]["source:max"] == 0.0
    assert file_table([], ("defines",))[1].shape == (0, len(file_columns(("defines",))))


def test_equal_files_keep_their_place_by_path() -> None:
    """Files with equal aggregates get places by path, so the order never depends on the
    candidates' order."""
    rows = [("b.py", 2.0, {}), ("a.py", 2.0, {}), ("z.py", 0.0, {})]
    paths, table = file_table(rows, ())
    places = dict(zip(paths, table[:, 3], strict=True))
    assert places["a.py"] == 1.0 and places["b.py"] == 0.5


def test_the_model_ranks_by_what_it_learned_and_sections_by_their_sum() -> None:
    """A model that values defining a requested name puts that file first although its
    sections score lower; the summed ranking keeps the higher sums first."""
    scored = [
        _scored("docs/guide.py", 3.0, 1, defines=0.0),
        _scored("docs/guide.py", 2.9, 2, defines=0.0),
        _scored("src/offset.py", 2.0, 1, defines=1.0),
        _scored("src/other.py", 0.5, 1, defines=0.0),
    ]
    cols = file_columns(("defines",))
    model = FileModel(("defines",), tuple(3.0 if c == "defines:max" else 0.0 for c in cols), -1.0)
    probs = learned_file_scores(scored, model)
    assert probs["src/offset.py"] == pytest.approx(1 / (1 + math.exp(-2.0)))
    assert probs["docs/guide.py"] == pytest.approx(1 / (1 + math.exp(1.0)))
    assert rank_files(scored, FileRanking.SECTIONS) == ["docs/guide.py", "src/offset.py",
                                                        "src/other.py"]  # fmt: skip
    assert sorted(probs, key=lambda p: (-probs[p], p))[0] == "src/offset.py"
    assert learned_file_scores([], model) == {}


def test_the_shipped_model_reads_every_feature_the_default_weights_use() -> None:
    """A model fitted on other features than the rerank computes would silently read
    zeros: the shipped one covers exactly the default weights' features, and its
    probabilities are probabilities."""
    model = default_file_model()
    assert model.features == tuple(n for n, w in RerankWeights().items() if w)
    assert len(model.coef) == len(file_columns(model.features))
    scored = [_scored("src/a.py", 4.0, 1, source=1.0, defines=1.0),
              _scored("tests/test_a.py", 3.0, 1, source=0.0), _scored("README.md", 1.0, 1)]
    probs = learned_file_scores(scored)
    assert set(probs) == {"src/a.py", "tests/test_a.py", "README.md"}
    assert all(0.0 < p < 1.0 for p in probs.values())
    assert rank_files(scored)[0] == "src/a.py" == rank_files(scored, FileRanking.LEARNED)[0]


def test_a_model_file_round_trips_and_bad_ones_are_named() -> None:
    """to_json / from_json keep every coefficient; a wrong count, a non-number, a missing
    key or other columns are a ConfigError naming the file."""
    cols = file_columns(("defines",))
    model = FileModel(("defines",), tuple(float(i) for i in range(len(cols))), 0.5, "a test")
    assert FileModel.from_json(model.to_json()) == model
    with pytest.raises(ConfigError, match="coefficients"):
        FileModel(("defines",), (1.0,), 0.0)
    with pytest.raises(ConfigError, match="finite"):
        FileModel(("defines",), tuple([math.nan] * len(cols)), 0.0)
    raw = json.loads(model.to_json())
    with pytest.raises(ConfigError, match=r"m\.json is not a valid file model"):
        FileModel.from_json(json.dumps({k: v for k, v in raw.items() if k != "coef"}), "m.json")
    with pytest.raises(ConfigError, match=r"m\.json"):
        FileModel.from_json("{not json", "m.json")
    with pytest.raises(ConfigError, match="other columns"):
        FileModel.from_json(json.dumps(raw | {"columns": ["top", "best"]}), "m.json")


def test_scores_are_finite_for_extreme_coefficients() -> None:
    """A steep model saturates at 0 or 1 instead of overflowing."""
    cols = file_columns(("defines",))
    model = FileModel(("defines",), tuple([1e4] * len(cols)), -1e4)
    probs = learned_file_scores([_scored("a.py", 1.0, 1, defines=1.0), _scored("b.py", 0.0)],
                                model)  # fmt: skip
    assert all(np.isfinite(list(probs.values())))
