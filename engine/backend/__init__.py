"""Index engines behind the ``overlays.Backend`` seam, past the embedded default.

``QdrantBackend`` answers a View's questions from one Qdrant collection (a server or
cluster, the in-process edge engine, or qdrant-client's local mode: ``open_store``), and
``mirror`` writes a segment into one of its layers incrementally. ``BackendSettings``
reads the choice from the environment; ``connect`` opens it (once per process), ``release``
gives it back.
"""

from engine.backend._qdrant import KEYWORDS, TEXTS, QdrantBackend, encode_terms, scope_filter
from engine.backend._settings import BackendSettings, connect, release
from engine.backend._store import (
    MIN_SERVER_VERSION,
    ClientStore,
    Cond,
    EdgeStore,
    Hit,
    Point,
    Store,
    TextAsk,
    Where,
    check_version,
    open_store,
)

__all__ = [
    "KEYWORDS",
    "MIN_SERVER_VERSION",
    "TEXTS",
    "BackendSettings",
    "ClientStore",
    "Cond",
    "EdgeStore",
    "Hit",
    "Point",
    "QdrantBackend",
    "Store",
    "TextAsk",
    "Where",
    "check_version",
    "connect",
    "encode_terms",
    "open_store",
    "release",
    "scope_filter",
]
