"""Tuning a static model on a teacher's vectors, the shipped file, and loading it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine import Config
from engine.core import CacheError, ConfigError
from engine.embed import (
    TUNED_MODEL,
    StaticEmbedder,
    fit,
    load_tuned,
    make_embedder,
    project,
    read_manifest,
    save_tuned,
)
from engine.embed._tune import dequantize, quantize

WORDS = [f"w{i}" for i in range(40)]


def _tokenizer_json() -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, "w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return str(tokenizer.to_str())


def _unit(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return out


def _task(texts: int = 600, seed: int = 0) -> tuple[
    npt.NDArray[np.float32], list[list[int]], npt.NDArray[np.float32]
]:
    """A teacher whose text vector is the normalised sum of hidden true rows, and a
    student that starts from those rows plus heavy noise."""
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal((len(WORDS), 8)).astype(np.float32)
    ids = [list(rng.integers(1, len(WORDS), size=rng.integers(2, 9))) for _ in range(texts)]
    targets = np.stack([_unit(truth[i].sum(axis=0)) for i in ids]).astype(np.float32)
    init = (truth + 1.5 * rng.standard_normal(truth.shape)).astype(np.float32)
    return init, [[int(t) for t in row] for row in ids], targets


def test_fit_moves_rows_toward_the_teacher() -> None:
    """Held-out texts (never trained on) end up much closer to the teacher's vectors."""
    init, ids, targets = _task()
    seen: list[tuple[int, float]] = []
    rows, report = fit(init, ids, targets, epochs=8, lr=0.05, batch=32, held_out=0.1,
                       on_epoch=lambda e, loss: seen.append((e, loss)))  # fmt: skip
    assert rows.shape == init.shape and rows.dtype == np.float32
    assert report.held_out == 60 and report.texts == 540 and report.epochs == 8
    assert report.loss_after < report.loss_before / 3
    assert [e for e, _ in seen] == list(range(1, 9))
    assert report.losses == tuple(loss for _, loss in seen)
    assert np.array_equal(rows[0], init[0])  # no text uses token 0: its row is untouched
    again, _ = fit(init, ids, targets, epochs=8, lr=0.05, batch=32, held_out=0.1)
    assert np.allclose(again, rows, atol=1e-5)  # seeded: a rebuild gives the same rows


def test_fit_rejects_bad_input() -> None:
    init, ids, targets = _task(texts=20)
    with pytest.raises(ConfigError, match="equally wide"):
        fit(init, ids, targets[:, :4])
    with pytest.raises(ConfigError, match="token lists"):
        fit(init, ids[:5], targets)
    with pytest.raises(ConfigError, match="token ids"):
        fit(init, [[len(WORDS)], *ids[1:]], targets)
    with pytest.raises(ConfigError, match="at least two"):
        fit(init, [[]] * 20, targets)
    with pytest.raises(ConfigError, match="epochs"):
        fit(init, ids, targets, epochs=0)


def test_project_is_one_linear_map_of_every_text() -> None:
    """At full width the projection is a rotation: cosines between texts are unchanged;
    narrower it keeps most of them; unused rows stay zero and signs are fixed."""
    init, ids, _ = _task(texts=50)
    init[5] = 0.0
    full = project(init, 8)
    narrow = project(init, 6)
    assert not full[5].any() and not narrow[5].any()

    def texts(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return np.stack([_unit(rows[i].sum(axis=0)) for i in ids])

    before = texts(init) @ texts(init).T
    assert np.allclose(texts(full) @ texts(full).T, before, atol=1e-4)
    assert np.corrcoef((texts(narrow) @ texts(narrow).T).ravel(), before.ravel())[0, 1] > 0.9
    assert np.array_equal(project(init, 6), narrow)
    with pytest.raises(ConfigError, match="dims"):
        project(init, 9)


def test_quantize_round_trip_error_is_half_a_step() -> None:
    rows = np.random.default_rng(2).standard_normal((30, 16)).astype(np.float32)
    rows[3] = 0.0
    q, scale = quantize(rows)
    assert q.dtype == np.int8 and scale.shape == (30,) and scale[3] == 0.0
    back = dequantize(q, scale)
    assert np.all(np.abs(back - rows) <= scale[:, None] / 2 + 1e-7)
    assert not back[3].any()


def test_save_and_load_tuned(tmp_path: Path) -> None:
    rows = np.random.default_rng(3).standard_normal((len(WORDS), 8)).astype(np.float32)
    path = tmp_path / "m.npz"
    save_tuned(path, rows, _tokenizer_json(), {"corpus": "test"})
    model = load_tuned(path)
    assert model.vectors.shape == rows.shape
    assert np.allclose(model.vectors, rows, atol=np.abs(rows).max() / 127)
    assert model.tokenizer_json == _tokenizer_json()
    assert model.manifest["recipe"] == {"corpus": "test"} and model.manifest["dims"] == 8
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind


@pytest.mark.parametrize("damage", ["truncate", "not-npz", "other-npz"])
def test_a_damaged_tuned_file_is_a_cache_error_naming_it(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "m.npz"
    save_tuned(path, np.ones((len(WORDS), 4), np.float32), _tokenizer_json(), {})
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "not-npz":
        path.write_text("hello")
    else:
        np.savez(path, rows=np.zeros((2, 2), np.int8))
    with pytest.raises(CacheError, match=str(path)):
        load_tuned(path)
    with pytest.raises(CacheError, match=str(path)):
        StaticEmbedder(tmp_path / "cache", dims=4, tuned=path).embed(["w1"])


def test_static_embedder_builds_from_a_tuned_file(tmp_path: Path) -> None:
    """The model directory is named by the file's content and holds its rows: a text's
    vector is the normalised sum of the file's (dequantised) rows."""
    rows = np.random.default_rng(4).standard_normal((len(WORDS), 8)).astype(np.float32)
    path = tmp_path / "m.npz"
    save_tuned(path, rows, _tokenizer_json(), {})
    embedder = StaticEmbedder(tmp_path / "cache", dims=8, tuned=path)
    got = embedder.embed(["w3 w7", "w9"])
    expected = load_tuned(path).vectors
    assert np.allclose(got[0], _unit(expected[3] + expected[7]), atol=1e-6)
    assert np.allclose(got[1], _unit(expected[9]), atol=1e-6)
    manifest = read_manifest(embedder.directory)
    assert embedder.model_id == f"static:{manifest.fingerprint}"
    assert "tuned" in manifest.source
    again = StaticEmbedder(tmp_path / "cache", dims=8, tuned=path)
    assert again.directory == embedder.directory and again.model_id == embedder.model_id

    save_tuned(path, rows * 2 + 1, _tokenizer_json(), {})  # new content, same path
    other = StaticEmbedder(tmp_path / "cache", dims=8, tuned=path)
    assert other.directory != embedder.directory
    with pytest.raises(ConfigError, match="8 wide, not 4"):
        StaticEmbedder(tmp_path / "cache", dims=4, tuned=path).embed(["w1"])


def test_the_shipped_model_loads_without_a_teacher_and_ranks_code(tmp_path: Path) -> None:
    """`static` is the tuned model shipped in the package: MiniLM's vocabulary, 256 wide,
    built into the cache without loading torch or MiniLM, and it ranks like MiniLM."""
    shipped = load_tuned(TUNED_MODEL)
    assert shipped.vectors.shape == (30522, 256)
    assert shipped.manifest["recipe"]["loss_after"] < shipped.manifest["recipe"]["loss_before"]
    config = Config(model_cache_dir=str(tmp_path))
    static = make_embedder("static", config)
    assert isinstance(static, StaticEmbedder) and static.tuned == TUNED_MODEL
    add, total, client, cost, ship = static.embed([
        "def add(a, b): return a + b",
        "def sum_two(x, y): return x + y",
        "class HttpClient: ...",
        "how much does delivery cost for europe",
        "function computeShippingCost(order, region) { return rates[region] * order.weight }",
    ])  # fmt: skip
    assert add @ total > add @ client
    assert cost @ ship > cost @ client
    distilled = make_embedder("static-distilled", config)
    assert isinstance(distilled, StaticEmbedder) and distilled.tuned is None
    assert distilled.directory != static.directory
