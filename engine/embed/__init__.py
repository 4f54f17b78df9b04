"""Text to vectors: the ``Embedder`` protocol and its models (MiniLM, the static model
distilled from it, a hashed one for tests), model names to embedders, and the
content-addressed vector cache that makes re-indexing pay only for new text."""

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
from engine.embed._models import make_embedder, model_cache_dir
from engine.embed._static import (
    DEFAULT_STATIC_MAX_TOKENS,
    StaticManifest,
    StaticModel,
    distill,
    load_static_model,
    read_manifest,
    save_static_model,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_STATIC_MAX_TOKENS",
    "EmbedResult",
    "Embedder",
    "EmbeddingCache",
    "HashEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "StaticManifest",
    "StaticModel",
    "distill",
    "embed_with_cache",
    "load_static_model",
    "make_embedder",
    "model_cache_dir",
    "read_manifest",
    "save_static_model",
]
