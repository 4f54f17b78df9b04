"""The few calls the Qdrant backend makes, on either of Qdrant's two Python engines.

``Store`` is what ``QdrantBackend`` needs from a collection: upsert and delete points, BM25
over one text field with the statistics of a corpus filter, nearest neighbours, scroll,
count. Two implementations translate it, and the small filter tree ``Where`` it takes:

- ``ClientStore``: ``qdrant-client`` against a server or cluster (``http://…``), or its
  local mode (in memory or a folder, brute force: for tests of everything but BM25, as its
  text queries cannot take an IDF corpus);
- ``EdgeStore``: the real engine in process through ``qdrant-edge-py`` (one shard in a
  folder: the server's storage, text index and HNSW code).

Both libraries are imported on first use. Their errors are translated here, once.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from engine.core import ConfigError, IndexBusyError, IndexStateError

__all__ = [
    "MIN_SERVER_VERSION",
    "POINT_ID",
    "ClientStore",
    "Cond",
    "EdgeStore",
    "Hit",
    "Point",
    "Store",
    "TextAsk",
    "Where",
    "check_version",
    "open_store",
]

MIN_SERVER_VERSION = (1, 20)  # text indexes with BM25 scoring and IDF over a corpus filter
SCROLL_PAGE = 1024  # points per scroll call: few round trips, bounded response size
Value = str | int
Payload = Mapping[str, Any]
_EDGE_CONFIG = "edge_config.json"  # what qdrant-edge writes beside a shard's segments
_PLACEHOLDER = "_"  # the sparse vector an edge shard is created with (never written)
_COMPACT, _REPLACED = ".compact", ".replaced"  # an edge shard's copy being made / swapped out
POINT_ID = "$id"  # a ``Cond`` on this key matches point ids, not a payload field


@dataclass(frozen=True, slots=True)
class Cond:
    """One payload condition: ``key`` equals one of ``values`` (``any``), or the text field
    ``key`` holds every term of ``values[0]`` (``text``); ``POINT_ID`` as the key: the
    point's id is one of ``values``."""

    key: str
    values: tuple[Value, ...]
    op: Literal["any", "text"] = "any"


@dataclass(frozen=True, slots=True)
class Where:
    """A filter: all of ``must``, at least one of ``should`` (when any), none of ``must_not``."""

    must: tuple[Cond | Where, ...] = ()
    should: tuple[Cond | Where, ...] = ()
    must_not: tuple[Cond | Where, ...] = ()

    def and_(self, *more: Cond | Where) -> Where:
        """This filter with ``more`` conditions that must also hold."""
        return Where((*self.must, *more), self.should, self.must_not)


@dataclass(frozen=True, slots=True)
class Hit:
    """A scored point: its payload (the fields asked for), score and point id."""

    payload: Mapping[str, Any]
    score: float
    point: str = ""


@dataclass(frozen=True, slots=True)
class TextAsk:
    """One BM25 question of a batch: field, text, filter, how many, which payload fields
    (none: the hits carry their point ids only, which is much cheaper: reading a point's
    payload reads all of it)."""

    field: str
    text: str
    where: Where
    limit: int
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Point:
    """A point to write: id (a UUID string), named dense vectors, payload."""

    id: str
    vectors: Mapping[str, Sequence[float]]
    payload: Mapping[str, Any] = field(default_factory=dict)


class Store(Protocol):
    """One Qdrant collection, as the backend uses it."""

    # Whether ``text_search`` honours ``corpus`` (qdrant-client 1.20's local mode does not:
    # it raises NotImplementedError for an IDF corpus on a text query).
    scoped_idf: bool

    def ensure_indexes(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        """Keyword indexes on ``keywords``; BM25-scored word text indexes on ``texts``."""
        ...

    def ensure_vector(self, name: str, size: int) -> None:
        """A named cosine dense vector of ``size`` dimensions (kept if it exists)."""
        ...

    def vectors(self) -> dict[str, int]:
        """The collection's named dense vectors and their sizes."""
        ...

    def upsert(self, points: Sequence[Point]) -> None:
        """Write ``points`` (replacing points with the same ids)."""
        ...

    def delete(self, where: Where) -> None:
        """Delete every point matching ``where``."""
        ...

    def text_search(
        self, field: str, text: str, where: Where, corpus: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        """Top ``limit`` points matching ``where`` by BM25 of ``text`` over the text index of
        ``field``, with the statistics of the points matching ``corpus``."""
        ...

    def text_searches(self, asks: Sequence[TextAsk], corpus: Where) -> list[list[Hit]]:
        """Several ``text_search`` calls with one corpus, as one request (the engine plans
        them together)."""
        ...

    def nearest(
        self, name: str, vector: Sequence[float], where: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        """Top ``limit`` points matching ``where`` by cosine to ``vector`` (vector ``name``)."""
        ...

    def scroll(self, where: Where, fields: Sequence[str] | None) -> Iterator[Mapping[str, Any]]:
        """The payload (``fields``, or all when None) of every point matching ``where``."""
        ...

    def retrieve(self, points: Sequence[str], fields: Sequence[str]) -> dict[str, Payload]:
        """The payload (``fields``) of the points with these ids that exist, by point id."""
        ...

    def count(self, where: Where) -> int:
        """How many points match ``where`` (exactly)."""
        ...

    def optimize(self) -> None:
        """Bring the collection's segments to their indexed form (HNSW graphs, immutable
        text indexes, merged segments), blocking: a server's optimiser does it in the
        background; the in-process engine only when asked. Not part of a mirror: on the
        edge engine a merge rebuilds every segment it touches (115 s for 37k points on this
        machine, loaded), while reads of an unoptimised shard are only slower."""
        ...

    def compact(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        """Leave no byte of deleted points in the store's files (``forget``): the engine
        keeps a deleted point's payload in its segments and write-ahead log until it
        rewrites them. The edge engine's shard is copied, live points only, into a new one
        that replaces it (with ``keywords`` and ``texts`` indexed as ``ensure_indexes``
        does); a server's storage is its operator's (see deploy/qdrant/README.md)."""
        ...

    def close(self) -> None:
        """Release the engine (flushing what was written)."""
        ...


def open_store(url: str, collection: str, *, api_key: str | None = None) -> Store:
    """The store ``url`` names: ``edge:<folder>`` (the in-process engine), ``local:<folder>``
    or ``:memory:`` (qdrant-client's local mode), ``http(s)://host:port`` (a server or
    cluster, whose version must be at least ``MIN_SERVER_VERSION``)."""
    if url.startswith("edge:"):
        return EdgeStore(Path(url[len("edge:") :]) / collection)
    if url == ":memory:" or url.startswith("local:"):
        return ClientStore(url, collection, api_key=None)
    if url.startswith(("http://", "https://")):
        return ClientStore(url, collection, api_key=api_key)
    raise ConfigError(
        f"CORTEX_QDRANT_URL={url!r} is not a Qdrant address: use http(s)://host:port for a "
        "server or cluster, edge:<folder> for the in-process engine, or local:<folder> / "
        ":memory: for qdrant-client's local mode"
    )


FILTER_CACHE = 256  # translated filters kept: a View's scope is asked dozens of times a query


def _cached(cache: dict[Where, Any], where: Where, make: Callable[[Where], Any]) -> Any:
    """``make(where)``, remembered: a scope's filter (hundreds of paths for a large branch)
    is translated once, not on every call that nests it."""
    got = cache.get(where)
    if got is None:
        if len(cache) >= FILTER_CACHE:
            cache.clear()
        got = cache[where] = make(where)
    return got


def _payload(fields: Sequence[str]) -> list[str] | bool:
    """What to read of a hit's payload: those fields, or nothing."""
    return list(fields) if fields else False


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.lstrip("v").split(".")[:3]:
        digits = "".join(c for c in piece if "0" <= c <= "9")  # isdigit() takes "²"
        parts.append(int(digits or 0))
    return tuple(parts)


def check_version(version: str, url: str) -> None:
    """Raise ``ConfigError`` unless ``version`` is at least ``MIN_SERVER_VERSION``."""
    if _version(version)[:2] < MIN_SERVER_VERSION:
        need = ".".join(map(str, MIN_SERVER_VERSION))
        raise ConfigError(
            f"the Qdrant server at {url} runs {version}; cortex needs {need} or newer "
            "(BM25 text indexes whose IDF is computed over a filter): upgrade the cluster"
        )


class ClientStore:
    """``Store`` through ``qdrant-client``: a server, a cluster, or the client's local mode."""

    def __init__(self, url: str, collection: str, *, api_key: str | None) -> None:
        from qdrant_client import QdrantClient, models

        self._m = models
        self.collection = collection
        self._filters: dict[Where, Any] = {}
        self.scoped_idf = url.startswith(("http://", "https://"))
        try:
            if url == ":memory:":
                self._client = QdrantClient(location=":memory:")
            elif url.startswith("local:"):
                self._client = QdrantClient(path=url[len("local:") :])
            else:
                self._client = QdrantClient(url=url, api_key=api_key, check_compatibility=False)
                check_version(self._client.info().version, url)
            if not self._client.collection_exists(collection):
                self._client.create_collection(collection, vectors_config={})
        except ConfigError:
            raise
        except Exception as exc:  # the client raises transport and API errors of many types
            raise IndexStateError(f"cannot use the Qdrant collection {collection!r} at {url}: "
                                  f"{exc}") from exc  # fmt: skip

    def _cond(self, c: Cond | Where) -> Any:
        m = self._m
        if isinstance(c, Where):
            return _cached(self._filters, c, self._filter)
        if c.key == POINT_ID:
            return m.HasIdCondition(has_id=list(c.values))
        if c.op == "text":
            return m.FieldCondition(key=c.key, match=m.MatchText(text=str(c.values[0])))
        return m.FieldCondition(key=c.key, match=m.MatchAny(any=list(c.values)))

    def _filter(self, w: Where) -> Any:
        return self._m.Filter(
            must=[self._cond(c) for c in w.must] or None,
            should=[self._cond(c) for c in w.should] or None,
            must_not=[self._cond(c) for c in w.must_not] or None,
        )

    def ensure_indexes(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        m = self._m
        have = self._client.get_collection(self.collection).payload_schema or {}
        for key in keywords if self.scoped_idf else ():  # local mode has no keyword indexes
            if key not in have:
                self._client.create_payload_index(self.collection, key, m.PayloadSchemaType.KEYWORD)
        for key in texts:
            if key not in have:
                # The default word tokenizer: local mode reproduces only that one, and the
                # backend's term encoding makes each analysed term one word token.
                params = m.TextIndexParams(type=m.TextIndexType.TEXT, scoring=True)
                self._client.create_payload_index(self.collection, key, params)

    def vectors(self) -> dict[str, int]:
        got = self._client.get_collection(self.collection).config.params.vectors
        if not isinstance(got, dict):
            return {}
        return {name: int(p.size) for name, p in got.items()}

    def ensure_vector(self, name: str, size: int) -> None:
        if name not in self.vectors():
            m = self._m
            params = m.DenseVectorConfig(size=size, distance=m.Distance.COSINE)
            self._client.create_vector_name(
                self.collection, name, m.DenseVectorNameConfig(dense=params)
            )

    def upsert(self, points: Sequence[Point]) -> None:
        m = self._m
        structs = [
            m.PointStruct(
                id=p.id, vector={k: list(v) for k, v in p.vectors.items()}, payload=dict(p.payload)
            )
            for p in points
        ]
        if structs:
            self._client.upsert(self.collection, structs, wait=True)

    def delete(self, where: Where) -> None:
        self._client.delete(
            self.collection, self._m.FilterSelector(filter=self._filter(where)), wait=True
        )

    def text_search(
        self, field: str, text: str, where: Where, corpus: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        m = self._m
        got = self._client.query_points(
            self.collection,
            query=m.TextQuery(text=text),
            using=field,
            query_filter=self._filter(where),
            search_params=m.SearchParams(idf=m.IdfCorpusParams(corpus=self._filter(corpus))),
            limit=limit,
            with_payload=_payload(fields),
        )
        return [Hit(p.payload or {}, float(p.score), str(p.id)) for p in got.points]

    def text_searches(self, asks: Sequence[TextAsk], corpus: Where) -> list[list[Hit]]:
        if not self.scoped_idf:  # local mode: refuses an IDF corpus, one call at a time
            return [self.text_search(a.field, a.text, a.where, corpus, a.limit, a.fields)
                    for a in asks]  # fmt: skip
        m = self._m
        params = m.SearchParams(idf=m.IdfCorpusParams(corpus=self._filter(corpus)))
        requests = [
            m.QueryRequest(query=m.TextQuery(text=a.text), using=a.field, limit=a.limit,
                           filter=self._filter(a.where), params=params,
                           with_payload=_payload(a.fields))
            for a in asks
        ]
        got = self._client.query_batch_points(self.collection, requests)
        return [[Hit(p.payload or {}, float(p.score), str(p.id)) for p in r.points] for r in got]

    def nearest(
        self, name: str, vector: Sequence[float], where: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        got = self._client.query_points(
            self.collection, query=list(vector), using=name, query_filter=self._filter(where),
            limit=limit, with_payload=_payload(fields))  # fmt: skip
        return [Hit(p.payload or {}, float(p.score), str(p.id)) for p in got.points]

    def scroll(self, where: Where, fields: Sequence[str] | None) -> Iterator[Mapping[str, Any]]:
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, scroll_filter=self._filter(where), limit=SCROLL_PAGE,
                offset=offset, with_payload=True if fields is None else list(fields))  # fmt: skip
            yield from (r.payload or {} for r in records)
            if offset is None:
                return

    def count(self, where: Where) -> int:
        return int(self._client.count(self.collection, count_filter=self._filter(where),
                                      exact=True).count)  # fmt: skip

    def retrieve(self, points: Sequence[str], fields: Sequence[str]) -> dict[str, Payload]:
        if not points:
            return {}
        got = self._client.retrieve(self.collection, list(points), with_payload=list(fields))
        return {str(r.id): r.payload or {} for r in got}

    def optimize(self) -> None:
        pass  # the server's own optimiser runs in the background

    def compact(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        pass  # the server vacuums segments itself; its disks and snapshots are its operator's

    def close(self) -> None:
        self._client.close()


class EdgeStore:
    """``Store`` through ``qdrant-edge-py``: Qdrant's engine in this process, one shard on
    disk (created on first use, reopened after)."""

    def __init__(self, directory: Path) -> None:
        import qdrant_edge as q

        self._q = q
        self.directory = directory
        self._filters: dict[Where, Any] = {}
        self.scoped_idf = True
        self._sizes: dict[str, int] = {}  # vectors made by this process (the file may lag)
        try:
            if (directory / _EDGE_CONFIG).exists():
                self._shard = q.EdgeShard.load(str(directory))
            else:
                directory.mkdir(parents=True, exist_ok=True)
                # A shard needs one vector to exist; dense ones are added per model later.
                none = {_PLACEHOLDER: q.EdgeSparseVectorParams()}
                self._shard = q.EdgeShard.create(str(directory), q.EdgeConfig(sparse_vectors=none))
        except Exception as exc:  # the engine raises plain exceptions with its message
            if "WouldBlock" in str(exc):  # its write-ahead log is locked by another process
                raise IndexBusyError(
                    f"the Qdrant edge shard at {directory} is held by another cortex process "
                    "(a `cortex serve` or `cortex mcp` on this workspace?): an edge shard "
                    "opens in one process at a time; stop that one, ask it over HTTP or MCP, "
                    "or use a Qdrant server (CORTEX_QDRANT_URL)"
                ) from exc
            raise IndexStateError(f"cannot open the Qdrant edge shard at {directory}: {exc}") \
                from exc  # fmt: skip

    def _cond(self, c: Cond | Where) -> Any:
        q = self._q
        if isinstance(c, Where):
            return _cached(self._filters, c, self._filter)
        if c.key == POINT_ID:
            return q.HasIdCondition(set(c.values))
        if c.op == "text":
            return q.FieldCondition(c.key, match=q.MatchText(str(c.values[0])))
        return q.FieldCondition(c.key, match=q.MatchAny(list(c.values)))

    def _filter(self, w: Where) -> Any:
        return self._q.Filter(
            must=[self._cond(c) for c in w.must] or None,
            should=[self._cond(c) for c in w.should] or None,
            must_not=[self._cond(c) for c in w.must_not] or None,
        )

    def ensure_indexes(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        q = self._q
        have = self._shard.info().payload_schema
        for key in keywords:
            if key not in have:
                self._shard.update(
                    q.UpdateOperation.create_field_index(key, q.PayloadSchemaType.Keyword)
                )
        for key in texts:
            if key not in have:
                params = q.TextIndexParams(tokenizer=q.TokenizerType.Word, scoring=True)
                self._shard.update(q.UpdateOperation.create_field_index(key, params))

    def vectors(self) -> dict[str, int]:
        import json

        try:
            raw = json.loads((self.directory / _EDGE_CONFIG).read_text("utf-8"))
        except (OSError, ValueError):
            raw = {}
        found = raw.get("vectors") or {}
        sizes = {k: int(v.get("size", 0)) for k, v in found.items() if isinstance(v, dict)}
        return {**sizes, **self._sizes}

    def ensure_vector(self, name: str, size: int) -> None:
        if name in self.vectors():
            return
        q = self._q
        self._shard.update(q.UpdateOperation.create_dense_vector(name, size, q.Distance.Cosine))
        self._sizes = {**self._sizes, name: size}

    def upsert(self, points: Sequence[Point]) -> None:
        q = self._q
        made = [q.Point(p.id, {k: list(v) for k, v in p.vectors.items()}, dict(p.payload))
                for p in points]  # fmt: skip
        if made:
            self._shard.update(q.UpdateOperation.upsert_points(made))

    def delete(self, where: Where) -> None:
        self._shard.update(self._q.UpdateOperation.delete_points_by_filter(self._filter(where)))

    def text_search(
        self, field: str, text: str, where: Where, corpus: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        q = self._q
        got = self._shard.query(q.QueryRequest(
            limit=limit, query=q.TextQuery(field, text), filter=self._filter(where),
            params=q.SearchParams(idf=q.IdfParams(corpus=self._filter(corpus))),
            with_payload=_payload(fields)))  # fmt: skip
        return [Hit(p.payload or {}, float(p.score), str(p.id)) for p in got]

    def text_searches(self, asks: Sequence[TextAsk], corpus: Where) -> list[list[Hit]]:
        q = self._q
        params = q.SearchParams(idf=q.IdfParams(corpus=self._filter(corpus)))
        requests = [
            q.QueryRequest(limit=a.limit, query=q.TextQuery(a.field, a.text),
                           filter=self._filter(a.where), params=params,
                           with_payload=_payload(a.fields))
            for a in asks
        ]
        got = self._shard.query_batch(q.QueryBatchRequest(requests))
        return [[Hit(p.payload or {}, float(p.score), str(p.id)) for p in r] for r in got]

    def nearest(
        self, name: str, vector: Sequence[float], where: Where, limit: int, fields: Sequence[str]
    ) -> list[Hit]:
        q = self._q
        got = self._shard.query(q.QueryRequest(
            limit=limit, query=q.Query.Nearest(list(vector), using=name),
            filter=self._filter(where), with_payload=_payload(fields)))  # fmt: skip
        return [Hit(p.payload or {}, float(p.score), str(p.id)) for p in got]

    def scroll(self, where: Where, fields: Sequence[str] | None) -> Iterator[Mapping[str, Any]]:
        q = self._q
        offset = None
        while True:
            records, offset = self._shard.scroll(q.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=self._filter(where),
                with_payload=True if fields is None else list(fields)))  # fmt: skip
            yield from (r.payload or {} for r in records)
            if offset is None:
                return

    def count(self, where: Where) -> int:
        return int(self._shard.count(self._q.CountRequest(exact=True, filter=self._filter(where))))

    def retrieve(self, points: Sequence[str], fields: Sequence[str]) -> dict[str, Payload]:
        if not points:
            return {}
        got = self._shard.retrieve(list(points), with_payload=list(fields), with_vector=False)
        return {str(r.id): r.payload or {} for r in got}

    def optimize(self) -> None:
        self._shard.optimize()  # blocks until done; at once when nothing is due

    def compact(self, keywords: Sequence[str], texts: Sequence[str]) -> None:
        q = self._q
        fresh_dir = self.directory.with_name(self.directory.name + _COMPACT)
        old_dir = self.directory.with_name(self.directory.name + _REPLACED)
        for leftover in (fresh_dir, old_dir):
            shutil.rmtree(leftover, ignore_errors=True)
        fresh = EdgeStore(fresh_dir)
        try:
            fresh.ensure_indexes(keywords, texts)
            for name, size in sorted(self.vectors().items()):
                fresh.ensure_vector(name, size)
            offset = None
            while True:
                ask = q.ScrollRequest(offset=offset, limit=SCROLL_PAGE, with_payload=True,
                                      with_vector=True)  # fmt: skip
                records, offset = self._shard.scroll(ask)
                made = [q.Point(r.id, r.vector if isinstance(r.vector, dict) else {},
                                r.payload or {}) for r in records]  # fmt: skip
                if made:
                    fresh._shard.update(q.UpdateOperation.upsert_points(made))
                if offset is None:
                    break
        finally:
            fresh.close()
        # Swapped in two renames: a kill between them leaves no shard, and the next
        # open creates an empty one that the next index fills from the segments.
        self.close()
        self.directory.rename(old_dir)
        fresh_dir.rename(self.directory)
        shutil.rmtree(old_dir, ignore_errors=True)
        self._shard = q.EdgeShard.load(str(self.directory))
        self._filters.clear()

    def close(self) -> None:
        self._shard.flush()
        self._shard.close()
