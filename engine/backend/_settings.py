"""Which backend a workspace uses, read from the environment in this one function.

    CORTEX_BACKEND            "embedded" (default: tantivy + faiss + SQLite files) or "qdrant"
    CORTEX_QDRANT_URL         http(s)://host:port (a server or cluster, >= 1.20),
                              edge:<folder> (the engine in process), local:<folder> or
                              :memory: (qdrant-client's local mode); empty: an edge shard
                              in the workspace's state folder
    CORTEX_QDRANT_COLLECTION  the collection (default "cortex"): one per workspace family
    CORTEX_QDRANT_API_KEY     the cluster's API key; kept out of ``Config`` (and so out of
                              every report and record) and out of this object's repr
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from engine.backend._qdrant import QdrantBackend
from engine.backend._store import open_store
from engine.core import ConfigError

__all__ = ["BackendSettings", "connect", "release"]

DEFAULT_COLLECTION = "cortex"  # one collection holds many repositories' layers
EDGE_FOLDER = "qdrant-edge"  # under the state folder when no URL is given


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """The backend choice: kind, where, which collection, and the secret to reach it."""

    kind: Literal["embedded", "qdrant"] = "embedded"
    url: str = ""
    collection: str = DEFAULT_COLLECTION
    api_key: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BackendSettings:
        """The settings ``CORTEX_BACKEND`` and ``CORTEX_QDRANT_*`` name (defaults otherwise)."""
        env = os.environ if environ is None else environ
        kind = env.get("CORTEX_BACKEND", "embedded").strip().lower() or "embedded"
        if kind not in ("embedded", "qdrant"):
            raise ConfigError(f"CORTEX_BACKEND={kind!r}: use 'embedded' (default) or 'qdrant'")
        collection = env.get("CORTEX_QDRANT_COLLECTION", "").strip() or DEFAULT_COLLECTION
        if not _COLLECTION.fullmatch(collection) or set(collection) == {"."}:
            # an edge shard is a folder of this name: "../../x" wrote into the working tree
            raise ConfigError(f"CORTEX_QDRANT_COLLECTION={collection!r}: use letters, digits, "
                              "'_', '-' and '.' (at most 128), no path")  # fmt: skip
        return cls(
            "qdrant" if kind == "qdrant" else "embedded",
            env.get("CORTEX_QDRANT_URL", "").strip(),
            collection,
            env.get("CORTEX_QDRANT_API_KEY", ""),
        )

    def address(self, state_dir: Path) -> str:
        """Where the Qdrant backend lives: ``CORTEX_QDRANT_URL``, else the edge shard's
        folder in the state folder ``state_dir`` (what ``connect`` opens)."""
        return self.url or f"edge:{state_dir / EDGE_FOLDER}"

    def describe(self, state_dir: Path) -> str:
        """The backend in words, for ``status`` (a URL's user and password left out)."""
        if self.kind != "qdrant":
            return "embedded (tantivy, faiss and SQLite in the state folder)"
        where = _USERINFO.sub(r"\1", self.address(state_dir))
        return f"qdrant {where} (collection {self.collection})"


_COLLECTION = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)

# Open backends by (address, collection), with how many users hold each: an edge shard's
# files must be opened once per process (an index rebuild opens a second Layers beside the
# first), and a server connection is worth sharing too.
_OPEN: dict[tuple[str, str], tuple[QdrantBackend, int]] = {}
_OPEN_LOCK = threading.Lock()


def connect(settings: BackendSettings, state_dir: Path) -> QdrantBackend | None:
    """The Qdrant backend ``settings`` name (None for the embedded one), shared within the
    process until each ``connect`` is matched by a ``release``. A server's version is
    checked here, with a ``ConfigError`` that says what to do."""
    if settings.kind != "qdrant":
        return None
    url = settings.address(state_dir)
    key = (url, settings.collection)
    with _OPEN_LOCK:
        backend, users = _OPEN.get(key, (None, 0))
        if backend is None:
            store = open_store(url, settings.collection, api_key=settings.api_key or None)
            # The shard in the state folder is that folder's alone; any other place may
            # hold other workspaces' layers.
            backend = QdrantBackend(store, owned=not settings.url)
        _OPEN[key] = (backend, users + 1)
        return backend


def release(backend: QdrantBackend) -> None:
    """Give back a backend ``connect`` returned; the last user closes it."""
    with _OPEN_LOCK:
        for key, (held, users) in list(_OPEN.items()):
            if held is backend:
                if users > 1:
                    _OPEN[key] = (held, users - 1)
                    return
                del _OPEN[key]
                break
    backend.close()
