"""Embedders by name: the one place a configured model name becomes an ``Embedder``."""

from __future__ import annotations

import os
from pathlib import Path

from engine.core import Config, ConfigError, EmbeddingModelError, whole_number
from engine.embed._embedders import (
    DEFAULT_MODEL,
    Embedder,
    HashEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
)

__all__ = ["TUNED_MODEL", "make_embedder", "model_cache_dir"]

# The default static model: MiniLM's vocabulary rows tuned on MiniLM's vectors for code and
# docstrings of the Python standard library (``python -m eval.train_static`` rebuilds it).
TUNED_MODEL = Path(__file__).parent / "data" / "static-code-v1.npz"

_MINILM_ALIASES = frozenset(
    {"minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
)


def model_cache_dir(config: Config) -> Path:
    """Where static models are unpacked or distilled: shared by every workspace of this user."""
    if config.model_cache_dir:
        return Path(config.model_cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cortex" / "models"


def make_embedder(name: str, config: Config) -> Embedder | None:
    """The embedder ``name`` stands for; None for ``"none"`` (no dense index)."""
    key = name.strip().lower()
    if key in ("", "none", "off"):
        return None
    if key == "static":
        return StaticEmbedder(model_cache_dir(config), source=DEFAULT_MODEL, tuned=TUNED_MODEL)
    if key == "static-distilled":  # the vocabulary-only distillation, built on first use
        return StaticEmbedder(model_cache_dir(config), source=DEFAULT_MODEL)
    if key.startswith("hash"):
        _, _, dim = key.partition(":")
        try:
            return HashEmbedder(whole_number("dim", dim) if dim else 64)
        except ValueError as exc:  # a ConfigError is one too
            raise ConfigError(f"bad hash embedder {name!r}; use 'hash' or 'hash:DIM'") from exc
    if key in _MINILM_ALIASES:
        return SentenceTransformerEmbedder(DEFAULT_MODEL)
    if not _loadable(name):
        raise EmbeddingModelError(
            f"unknown dense model {name!r} (CORTEX_DENSE_MODEL or --dense): use minilm, "
            "static, static-distilled, hash[:DIM] "
            "or none, or the folder of a local sentence-transformers model (nothing is "
            "downloaded)"
        )
    return SentenceTransformerEmbedder(name)


def _loadable(name: str) -> bool:
    """Whether sentence-transformers can load ``name`` offline: a local folder, or a model
    id already in the Hugging Face cache."""
    if Path(name).expanduser().is_dir():
        return True
    if name.count("/") != 1:
        return False
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    return (hub / ("models--" + name.replace("/", "--"))).is_dir()
