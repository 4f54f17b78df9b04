"""Embedders, the content-addressed vector cache, and embedding through it."""

from __future__ import annotations

import inspect
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.core import CacheError, CortexError, EmbeddingModelError
from engine.embed import (
    DEFAULT_MODEL,
    Embedder,
    EmbeddingCache,
    HashEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    embed_with_cache,
    load_static_model,
    read_manifest,
    save_static_model,
)
from indexers import sha256_text

ADD = "def add(a, b): return a + b"
SUM = "def sum_two(x, y): return x + y"
CLIENT = "class HttpClient: ..."


KEY = "ab" * 32  # a sha256-shaped key: the cache stores keys as 32 raw bytes


def _unit_rows(vectors: npt.NDArray[np.float32]) -> bool:
    return bool(np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5))


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[EmbeddingCache]:
    """A fresh cache file in a directory that does not exist yet."""
    with EmbeddingCache(tmp_path / "state" / "embeddings.sqlite") as opened:
        yield opened


# --- EmbeddingCache ---------------------------------------------------------------------


def test_cache_round_trip_is_exact(cache: EmbeddingCache) -> None:
    """Vectors come back exactly as stored (float16-rounded) as float32; missing keys absent."""
    rng = np.random.default_rng(0)
    vectors = {f"{i:064x}": rng.standard_normal(7).astype(np.float32) for i in range(3)}
    cache.put_many("m", vectors.items())
    got = cache.get_many("m", [*vectors, "f" * 64])
    assert set(got) == set(vectors)
    for sha, vector in vectors.items():
        assert got[sha].dtype == np.float32
        assert np.array_equal(got[sha], EmbeddingCache.round_trip(vector))
        assert np.allclose(got[sha], vector, rtol=1e-3, atol=1e-3)
    assert cache.count("m") == 3


def test_cache_keeps_first_vector_and_persists(tmp_path: Path) -> None:
    """INSERT OR IGNORE keeps the first vector of a key, and reopening sees it."""
    path = tmp_path / "e.sqlite"
    with EmbeddingCache(path) as first:
        first.put_many("m", [(KEY, np.array([1.0, 0.0], np.float32))])
        first.put_many("m", [(KEY, np.array([0.0, 1.0], np.float32))])
    with EmbeddingCache(path) as again:
        assert again.get_many("m", [KEY])[KEY].tolist() == [1.0, 0.0]
        assert again.count("m") == 1


def test_cache_lookups_past_the_parameter_limit(cache: EmbeddingCache) -> None:
    """More keys than one statement may bind are fetched in batches, none lost."""
    keys = [f"{i:064x}" for i in range(1234)]
    cache.put_many("m", ((k, np.full(2, i, np.float32)) for i, k in enumerate(keys)))
    got = cache.get_many("m", keys + keys[:10])
    assert len(got) == 1234
    assert got[keys[1000]].tolist() == [1000.0, 1000.0]


def test_cache_model_ids_do_not_collide(cache: EmbeddingCache) -> None:
    """The same text under two models holds two vectors."""
    cache.put_many("a", [(KEY, np.array([1.0], np.float32))])
    cache.put_many("b", [(KEY, np.array([2.0], np.float32))])
    assert cache.get_many("a", [KEY])[KEY].tolist() == [1.0]
    assert cache.get_many("b", [KEY])[KEY].tolist() == [2.0]
    assert (cache.count("a"), cache.count("b"), cache.count("c")) == (1, 1, 0)


def test_cache_corrupt_file_is_a_cache_error(tmp_path: Path) -> None:
    """A file that is not SQLite raises CacheError (a ValueError and a CortexError)."""
    path = tmp_path / "e.sqlite"
    path.write_bytes(b"this is not a database, just text " * 200)
    with pytest.raises(CacheError, match="not a cortex embedding cache") as info:
        EmbeddingCache(path)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, CortexError)


def test_cache_foreign_database_is_refused(tmp_path: Path) -> None:
    """Another application's SQLite file is refused, not written into."""
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.commit()
    db.close()
    with pytest.raises(CacheError, match="not a cortex embedding cache"):
        EmbeddingCache(path)


def test_cache_closed_raises(tmp_path: Path) -> None:
    """Using a closed cache raises CacheError; closing twice is harmless."""
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    cache.close()
    cache.close()
    with pytest.raises(CacheError, match="closed"):
        cache.count("m")


def test_cache_shared_between_threads(cache: EmbeddingCache) -> None:
    """Threads writing and reading one cache at once lose nothing."""

    def work(worker: int) -> None:
        for i in range(20):
            key = f"{worker:032x}{i:032x}"
            cache.put_many("m", [(key, np.full(3, worker, np.float32))])
            assert key in cache.get_many("m", [key])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.count("m") == 80


# --- HashEmbedder -------------------------------------------------------------------------


def test_hash_embedder_rows_are_unit_and_deterministic() -> None:
    """Rows are L2-normalised, identical texts get identical vectors, empty text too."""
    embedder = HashEmbedder()
    vectors = embedder.embed([ADD, SUM, ADD, "", "   "])
    assert vectors.shape == (5, 64) and vectors.dtype == np.float32
    assert _unit_rows(vectors)
    assert np.array_equal(vectors[0], vectors[2])
    assert np.array_equal(HashEmbedder().embed_query(ADD), vectors[0])
    assert embedder.model_id == "hash:64"


def test_hash_embedder_splits_identifiers() -> None:
    """snake_case and camelCase spellings of a name embed close; other names do not."""
    embedder = HashEmbedder(256)
    snake, camel, other = embedder.embed(["parse_http_header", "parseHTTPHeader", "load_json"])
    assert snake @ camel > 0.5
    assert snake @ camel > snake @ other


def test_hash_embedder_counts_work() -> None:
    """calls and texts_embedded count every request, queries included."""
    embedder = HashEmbedder(8)
    embedder.embed(["a", "b"])
    embedder.embed_query("c")
    assert (embedder.calls, embedder.texts_embedded) == (2, 3)


def test_embedders_have_the_protocol_members(tmp_path: Path) -> None:
    """Every embedder has the Embedder members; building one loads and writes nothing."""
    embedders: list[Embedder] = [
        HashEmbedder(),
        SentenceTransformerEmbedder(),
        StaticEmbedder(tmp_path),
    ]
    for embedder in embedders:
        for name in ("model_id", "dim", "embed", "embed_query"):
            inspect.getattr_static(embedder, name)  # static: reading model_id may distil
    assert not list(tmp_path.iterdir())
    assert embedders[1].dim == 384  # the bundled model's width is known without loading it


# --- embed_with_cache ---------------------------------------------------------------------


def test_embed_with_cache_computes_each_text_once(cache: EmbeddingCache) -> None:
    """A second run over the same texts calls the embedder zero times and reuses all."""
    embedder = HashEmbedder()
    texts = [f"def f{i}(): return {i}" for i in range(10)]
    first = embed_with_cache(embedder, cache, texts, batch_size=4)
    assert (first.computed, first.reused) == (10, 0)
    assert (embedder.calls, embedder.texts_embedded) == (3, 10)
    second = embed_with_cache(embedder, cache, texts, batch_size=4)
    assert (second.computed, second.reused) == (0, 10)
    assert (embedder.calls, embedder.texts_embedded) == (3, 10)
    assert np.array_equal(first.vectors, second.vectors)
    assert cache.count(embedder.model_id) == 10


def test_embed_with_cache_duplicates_and_order(cache: EmbeddingCache) -> None:
    """Duplicates are embedded once; rows come back in input order, equal to direct embeds."""
    embedder = HashEmbedder()
    texts = [ADD, SUM, ADD, CLIENT, SUM, ADD]
    result = embed_with_cache(embedder, cache, texts)
    assert embedder.texts_embedded == 3
    assert (result.computed, result.reused) == (3, 0)
    assert result.vectors.shape == (6, 64) and result.vectors.dtype == np.float32
    direct = EmbeddingCache.round_trip(HashEmbedder().embed(texts))
    assert np.array_equal(result.vectors, direct)
    partly = embed_with_cache(embedder, cache, ["new text", ADD])
    assert (partly.computed, partly.reused) == (1, 1)


def test_embed_with_cache_keys_by_text_sha(cache: EmbeddingCache) -> None:
    """Cache keys are the sha256 of each text's UTF-8 bytes."""
    embedder = HashEmbedder()
    embed_with_cache(embedder, cache, ["héllo"])
    assert set(cache.get_many(embedder.model_id, [sha256_text("héllo")])) == {sha256_text("héllo")}


def test_embed_with_cache_reports_progress(cache: EmbeddingCache) -> None:
    """on_progress gets (done, total missing) after each batch; nothing missing, no call."""
    seen: list[tuple[int, int]] = []
    texts = [f"text {i}" for i in range(5)]

    def record(done: int, total: int) -> None:
        seen.append((done, total))

    embed_with_cache(HashEmbedder(), cache, texts, batch_size=2, on_progress=record)
    assert seen == [(2, 5), (4, 5), (5, 5)]
    seen.clear()
    embed_with_cache(HashEmbedder(), cache, texts, batch_size=2, on_progress=record)
    assert seen == []


class _FailsOnSecondBatch(HashEmbedder):
    """A HashEmbedder that dies on its second call, like a run killed mid-way."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.calls == 1:
            self.calls += 1
            raise KeyboardInterrupt
        return super().embed(texts)


def test_interrupted_run_keeps_finished_batches(cache: EmbeddingCache) -> None:
    """Batches embedded before an interruption stay cached and are not paid for again."""
    texts = [f"chunk {i}" for i in range(6)]
    with pytest.raises(KeyboardInterrupt):
        embed_with_cache(_FailsOnSecondBatch(), cache, texts, batch_size=3)
    assert cache.count("hash:64") == 3
    resumed = HashEmbedder()
    result = embed_with_cache(resumed, cache, texts, batch_size=3)
    assert (result.computed, result.reused) == (3, 3)
    assert resumed.texts_embedded == 3


def test_embed_with_cache_empty_input(cache: EmbeddingCache) -> None:
    """No texts: a (0, dim) array and no embedder call."""
    embedder = HashEmbedder(16)
    result = embed_with_cache(embedder, cache, [])
    assert result.vectors.shape == (0, 16)
    assert embedder.calls == 0


# --- StaticEmbedder -----------------------------------------------------------------------

TINY_VOCAB = ["[UNK]", "http", "client", "parse", "header", "add", "numbers", "sum"]


def _tiny_model(directory: Path, dims: int = 4) -> None:
    """Save a hand-made word-level static model where the distiller would put it."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(TINY_VOCAB)}, "[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((len(TINY_VOCAB), dims)).astype(np.float32)
    vectors[TINY_VOCAB.index("sum")] = vectors[TINY_VOCAB.index("add")]
    save_static_model(directory, vectors, tokenizer.to_str(), source="tiny")


def test_static_embedder_loads_a_saved_model(tmp_path: Path) -> None:
    """A saved model is loaded, not re-distilled; vectors are sums of token rows, normalised."""
    embedder = StaticEmbedder(tmp_path, source="tiny", dims=4)
    _tiny_model(embedder.directory)
    manifest = read_manifest(embedder.directory)
    assert embedder.model_id == f"static:{manifest.fingerprint}"
    vectors = embedder.embed(["add numbers", "SUM numbers", "http client", "unknown words", ""])
    assert vectors.shape == (5, 4) and vectors.dtype == np.float32
    assert _unit_rows(vectors[:3])
    assert np.allclose(vectors[0], vectors[1])  # "add" and "sum" share a row; case folded
    assert not vectors[3].any() and not vectors[4].any()  # no known token: the zero row
    assert np.allclose(embedder.embed_query("add numbers"), vectors[0])
    assert embedder.embed([]).shape == (0, 4)


def test_static_model_is_written_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that dies mid-way leaves neither the model directory nor a temp directory."""
    calls = 0
    real_fsync = os.fsync

    def dying_fsync(fd: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk gone")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", dying_fsync)
    with pytest.raises(OSError, match="disk gone"):
        _tiny_model(tmp_path / "static-x")
    assert list(tmp_path.iterdir()) == []


def test_static_model_tampering_is_detected(tmp_path: Path) -> None:
    """A vectors file that no longer matches the manifest is a CacheError, not bad vectors."""
    _tiny_model(tmp_path / "m")
    with (tmp_path / "m" / "vectors.npy").open("r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        fh.write(b"\0\0\0\0")
    with pytest.raises(CacheError, match="does not match"):
        load_static_model(tmp_path / "m")


@pytest.mark.slow
def test_static_embedder_distills_from_bundled_minilm(tmp_path: Path) -> None:
    """Distilling MiniLM offline (~20 s) gives a model that ranks like it, reloaded at once."""
    embedder = StaticEmbedder(tmp_path, dims=64)
    vectors = embedder.embed([ADD, SUM, CLIENT])
    assert _unit_rows(vectors)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    again = StaticEmbedder(tmp_path, dims=64)
    assert again.model_id == embedder.model_id
    assert np.array_equal(again.embed([ADD]), vectors[:1])
    assert [p.name for p in tmp_path.iterdir()] == [embedder.directory.name]


# --- SentenceTransformerEmbedder (the bundled MiniLM) ---------------------------------------


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    """The bundled MiniLM, loaded once for this module (~4 s)."""
    return SentenceTransformerEmbedder(batch_size=2)


def test_minilm_model_id_and_aliases() -> None:
    """The model id names the model and its max length; both spellings are the bundled copy."""
    assert SentenceTransformerEmbedder().model_id == "st:all-MiniLM-L6-v2:max256"
    assert SentenceTransformerEmbedder(f"sentence-transformers/{DEFAULT_MODEL}").model_id == (
        "st:all-MiniLM-L6-v2:max256"
    )
    assert SentenceTransformerEmbedder(max_seq_length=128).model_id.endswith(":max128")


def test_minilm_ranks_similar_code_together(minilm: SentenceTransformerEmbedder) -> None:
    """The two add functions are closer to each other than to the class."""
    vectors = minilm.embed([ADD, SUM, CLIENT])
    assert vectors.shape == (3, minilm.dim) == (3, 384)
    assert _unit_rows(vectors)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert vectors[0] @ vectors[1] > vectors[1] @ vectors[2]


def test_minilm_length_batching_restores_order(minilm: SentenceTransformerEmbedder) -> None:
    """Texts of mixed lengths get the same vector whatever order they are given in."""
    texts = [ADD, CLIENT * 8, "x", SUM, "def long():\n" + "    pass\n" * 30]
    forward = minilm.embed(texts)
    backward = minilm.embed(texts[::-1])[::-1]
    assert np.allclose(forward, backward, atol=1e-5)
    assert np.allclose(minilm.embed_query(ADD), forward[0], atol=1e-5)


def test_missing_model_is_a_lookup_error(tmp_path: Path) -> None:
    """A model that is not on disk raises LookupError saying cortex never downloads."""
    embedder = SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))
    with pytest.raises(EmbeddingModelError, match="never downloads") as info:
        embedder.embed(["x"])
    assert isinstance(info.value, LookupError)


def test_import_loads_no_model_backend() -> None:
    """Importing the embedding modules loads neither torch nor sentence-transformers."""
    heavy = ("torch", "sentence_transformers", "transformers", "tokenizers")
    code = f"import sys, engine.embed; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
