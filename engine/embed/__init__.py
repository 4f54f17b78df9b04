"""Text to vectors: the ``Embedder`` protocol and its models (MiniLM, the static model
tuned from it and shipped in ``data/``, the one distilled from it on first use, a hashed
one for tests), model names to embedders, and the content-addressed vector cache that
makes re-indexing pay only for new text."""

from engine.embed._cache import EmbeddingCache
from engine.embed._embedders import (
    DEFAULT_MODEL,
    Embedder,
    EmbedResult,
    HashEmbedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    embed_with_cache,
)
from engine.embed._models import TUNED_MODEL, make_embedder, model_cache_dir
from engine.embed._static import (
    DEFAULT_STATIC_MAX_TOKENS,
    StaticManifest,
    StaticModel,
    TokenOutputs,
    distill,
    load_static_model,
    read_manifest,
    save_static_model,
    sif_weights,
    token_outputs,
)
from engine.embed._tune import FitReport, TunedModel, fit, load_tuned, project, save_tuned

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_STATIC_MAX_TOKENS",
    "TUNED_MODEL",
    "EmbedResult",
    "Embedder",
    "EmbeddingCache",
    "FitReport",
    "HashEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "StaticManifest",
    "StaticModel",
    "TokenOutputs",
    "TunedModel",
    "distill",
    "embed_with_cache",
    "fit",
    "load_static_model",
    "load_tuned",
    "make_embedder",
    "model_cache_dir",
    "project",
    "read_manifest",
    "save_static_model",
    "save_tuned",
    "sif_weights",
    "token_outputs",
]
