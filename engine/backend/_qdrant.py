"""The Qdrant backend: a ``Backend`` answered by one Qdrant collection, and its writer.

Points are documents, one per section and one per page, each in a *layer*: a base (a
commit, shared by every branch and user built on it) or an overlay (one user's branch of
one workspace: the files that differ from its base). Payload::

    t        "sections" | "pages" | "layers"      which table (BM25 statistics never mix)
    layer    the layer's name                     keyword index
    path     the file                             keyword index
    id       chunk id or page id                  keyword index
    defines  names a section defines              keyword index (definitions by name)
    f_symbol_terms, f_path_terms, f_body          BM25-scored text indexes
    chunk | file                                  the section's Chunk / the page's FileRecord,
                                                  as one JSON string (a mapping in points
                                                  written before 2026-11-25: both are read)
    key                                           page: changes whenever the file's documents do
    lengths                                       page: its file's documents and tokens per
                                                  field (``Totals``); a layer's record: the
                                                  layer's, once a mirror has finished

A ``Scope`` becomes a filter: the base layer without the hidden paths, or the overlay layer
within its paths. BM25 runs on the Qdrant side, per field, with the IDF corpus set to that
same filter, so the document count, average lengths and document frequencies are the
scope's, as in one index of the branch; the per-field scores are combined with the
embedded index's boosts. Those are candidates: the ones that can reach the top k are scored
again with tantivy's BM25 and the scope's exact statistics (``engine.backend._rescore``),
reading deeper until no unread document could enter the top k.

Terms are analysed here, with the embedded index's ``code_terms``, and written so that
Qdrant's word tokenizer keeps each one whole: ``q`` becomes ``qq`` and ``_`` becomes ``qu``
(letters and digits only, one-to-one). A field with no term holds ``qz`` (no encoded term
can be ``qz``): Qdrant leaves a document without tokens out of a field's statistics, tantivy
counts it, and the marker keeps the document counts equal.

Qdrant's own scores differ from the embedded backend's in two ways, which the rescoring
undoes: tantivy stores a field's length in one byte, exact up to 40 tokens and rounded down
beyond (at most 1/8 less), where Qdrant keeps lengths exact; and the marker adds one token
to a field that had none, raising Qdrant's average length. The scores returned are the
embedded backend's within float rounding (f64 here, tantivy's own in f32).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from engine.backend._rescore import EMPTY_FIELD, MAX_ROUNDING, Totals, doc_terms
from engine.backend._statistics import ScopeStatistics
from engine.backend._store import POINT_ID, Cond, Point, Store, TextAsk, Where
from engine.core import IndexStateError, embedding_text, is_trivial, page_text
from engine.embed import Embedder, EmbeddingCache, embed_with_cache
from engine.segment import (
    LEXICAL_WEIGHTS,
    FileRecord,
    Segment,
    model_slug,
    page_fields,
    query_terms,
    section_fields,
)
from indexers import Chunk, ChunkKind, DocType, Span
from overlays import DocTerms, Found, Scope, Table, bm25

__all__ = ["KEYWORDS", "TEXTS", "QdrantBackend", "encode_terms", "scope_filter"]

_BOOSTS = LEXICAL_WEIGHTS  # the embedded index's per-field boosts, so scores compare
KEYWORDS = ("t", "layer", "path", "id", "defines")
TEXTS = tuple(dict.fromkeys(f"f_{name}" for table in _BOOSTS.values() for name in table))
_FIRST_DEPTH = 4  # hits per field read first, per hit asked: each pass recomputes the
# scope's statistics in Qdrant (linear in the scope), so one deep pass beats several shallow
_DEPTH_SLACK = 16  # and a few more, for small k
_EPSILON = 1e-5  # relative slack on bounds from Qdrant's scores: they are f32
_ID_PATH = ("id", "path")
_FILES = 256  # files whose chunks are remembered (the oldest goes first)
_IDENTS = 500_000  # points whose (id, path) are remembered (about 100 MB at most)
# Candidates' lengths and term frequencies remembered for the query terms they were read
# for (under 1 KB each): the same query is searched several times per request (sections,
# pages, sections within the best pages) and per turn (context, then search).
_TERMS = 50_000
_TIE_SLACK = 16  # extra dense hits read so ties at the cut are ordered by id
_BATCH = 256  # points per upsert call
_CHUNK_KEYS = ("id", "page_id", "path", "text", "sha256", "language", "kind", "doc_type",
               "symbol", "context", "defines", "references", "tokens", "license", "depth",
               "part", "parts")  # fmt: skip


def encode_terms(terms: str) -> str:
    """Space-separated analysed terms as Qdrant word tokens, one token per term.

    >>> encode_terms("register_hook register hook quux")
    'registerquhook register hook qquux'
    """
    return terms.replace("q", "qq").replace("_", "qu")


def _point_id(layer: str, table: str, ident: str) -> str:
    digest = hashlib.sha256(f"{layer}\n{table}\n{ident}".encode()).hexdigest()
    return str(uuid.UUID(hex=digest[:32]))


def _vector_name(model_id: str) -> str:
    return "d_" + model_slug(model_id)


def _fields(raw: Mapping[str, str]) -> dict[str, str]:
    return {f"f_{name}": encode_terms(terms) or EMPTY_FIELD for name, terms in raw.items()}


def _chunk_payload(chunk: Chunk) -> str:
    """The chunk as one JSON string: Qdrant's Python binding converts each payload key
    and list item on its own (about 20 µs each here) and a string of any length almost
    at once, so a nested record would cost most of a write."""
    out = {k: getattr(chunk, k) for k in _CHUNK_KEYS}
    out["defines"], out["references"] = list(chunk.defines), list(chunk.references)
    out["start"], out["end"] = chunk.span.start_line, chunk.span.end_line
    return json.dumps(out, separators=(",", ":"))


def _record(raw: str | Mapping[str, Any]) -> Mapping[str, Any]:
    """A stored record: a JSON string, or a mapping as points written before were."""
    return json.loads(raw) if isinstance(raw, str) else raw


def _chunk(stored: str | Mapping[str, Any]) -> Chunk:
    raw = _record(stored)
    return Chunk(
        id=raw["id"], page_id=raw["page_id"], path=raw["path"],
        span=Span(int(raw["start"]), int(raw["end"])), text=raw["text"], sha256=raw["sha256"],
        language=raw["language"], kind=ChunkKind(raw["kind"]), doc_type=DocType(raw["doc_type"]),
        symbol=raw["symbol"], context=raw["context"], defines=tuple(raw["defines"]),
        references=tuple(raw["references"]), tokens=int(raw["tokens"]), license=raw["license"],
        depth=int(raw["depth"]), part=int(raw["part"]), parts=int(raw["parts"]),
    )  # fmt: skip


def _keys_digest(keys: Mapping[str, str]) -> str:
    """One digest of a segment's (path, key) pairs: equal exactly when a layer written
    from them would hold the same documents."""
    h = hashlib.sha256()
    for path in sorted(keys):
        h.update(f"{path}\0{keys[path]}\n".encode())
    return h.hexdigest()


def _line_order(chunks: Iterable[Chunk]) -> list[Chunk]:
    return sorted(chunks, key=lambda c: (c.span.start_line, c.span.end_line, c.id))


def scope_filter(scope: Scope, table: str) -> Where:
    """The points of ``table`` that ``scope`` sees."""
    base = Where(must=(Cond("t", (table,)), Cond("layer", (scope.base,))),
                 must_not=(Cond("path", tuple(sorted(scope.hidden))),) if scope.hidden else ())
    if not scope.layered:
        return base
    overlay = Where(must=(Cond("t", (table,)), Cond("layer", (scope.overlay,)),
                          Cond("path", tuple(sorted(scope.overlay_paths)))))  # fmt: skip
    if not scope.overlay_paths:
        return base
    return Where(should=(base, overlay))


class QdrantBackend:
    """``overlays.Backend`` over one Qdrant collection (``Store``); ``mirror`` writes a
    segment into a layer, upserting and deleting only the files that changed."""

    def __init__(self, store: Store, *, owned: bool = False) -> None:
        self.store = store
        # Whether every layer in the collection is this state folder's (its own edge
        # shard), so ``gc`` may drop the layers of bases that folder no longer has.
        self.owned = owned
        store.ensure_indexes(KEYWORDS, TEXTS)
        # Document counts and token totals per scope, forgotten whenever this backend writes.
        self._stats = ScopeStatistics(store)
        # Dense vector names seen in the collection: names are only ever added, so one seen
        # is not asked for again (a server answers ``vectors`` with a round trip).
        self._names: set[str] = set()
        self._idents: dict[str, tuple[str, str]] = {}
        self._terms: dict[tuple[str, ...], dict[str, DocTerms]] = {}
        self._files: dict[tuple[str, str], list[Chunk]] = {}

    def _has_vector(self, name: str) -> bool:
        if name not in self._names:
            self._names.update(self.store.vectors())
        return name in self._names

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    def _forget(self) -> None:
        """Drop what is remembered of the collection's contents (this backend writes)."""
        self._stats.forget()
        self._terms.clear()
        self._files.clear()

    # -- BM25 -----------------------------------------------------------------------

    def search(
        self, scope: Scope, table: Table, query: str, k: int, paths: Collection[str] | None = None
    ) -> list[Found]:
        """Top ``k`` of ``table`` by BM25 with the scope's statistics, ties by id."""
        terms = query_terms(query)
        if not terms or k <= 0 or (paths is not None and not paths):
            return []
        if not self.store.scoped_idf:
            raise IndexStateError(
                "this Qdrant store cannot compute BM25 statistics over a branch's scope "
                "(qdrant-client's local mode); use a server (http://…) or the edge engine (edge:…)"
            )
        tokens = [encode_terms(t) for t in terms]
        text = " ".join(tokens)
        corpus = scope_filter(scope, table)
        where = corpus if paths is None else corpus.and_(Cond("path", tuple(sorted(paths))))
        boosts = _BOOSTS[table]
        names = list(boosts)
        depth = _FIRST_DEPTH * k + _DEPTH_SLACK
        # Hits are point ids and scores: a hit's payload costs a read of all of it (the
        # chunk's text and fields), so only the candidates that may make the cut are read.
        while True:
            asks = [TextAsk(f"f_{n}", text, where, depth, ()) for n in names]
            lists = self.store.text_searches(asks, corpus)
            per_field = {n: {h.point: h.score for h in hits}
                         for n, hits in zip(names, lists, strict=True)}  # fmt: skip
            seen = {h.point for hits in lists for h in hits}
            # Fields cut off at ``depth``: their last score bounds what was not read.
            full = {n: hits[-1].score for n, hits in zip(names, lists, strict=True)
                    if len(hits) >= depth}  # fmt: skip
            # A candidate missing from a field that was cut off may still score there: ask.
            missing = {n: tuple(sorted(seen - set(per_field[n]))) for n in full}
            follow = [n for n in full if missing[n]]
            if follow:
                asks = [TextAsk(f"f_{n}", text, where.and_(Cond(POINT_ID, missing[n])),
                                len(missing[n]), ()) for n in follow]  # fmt: skip
                for n, hits in zip(follow, self.store.text_searches(asks, corpus), strict=True):
                    per_field[n].update((h.point, h.score) for h in hits)
            scores = {pt: sum(boosts[n] * per_field[n].get(pt, 0.0) for n in names) for pt in seen}
            exact = self._rescore(scope, table, tokens, scores, k)
            ranked = sorted(exact.values(), reverse=True)
            unseen = sum(boosts[n] * s for n, s in full.items()) * MAX_ROUNDING * (1 + _EPSILON)
            if not full or (len(ranked) >= k and ranked[k - 1] > unseen):
                break
            depth *= 4
        return [Found(i, path, score) for i, path, score in self._top(exact, k)]

    def _rescore(
        self,
        scope: Scope,
        table: Table,
        tokens: Sequence[str],
        scores: Mapping[str, float],
        k: int,
    ) -> dict[str, float]:
        """Tantivy's BM25 of the candidates (Qdrant ``scores`` by point) that can reach the
        top k: the best k by Qdrant's score, then every one that ``MAX_ROUNDING`` could
        lift to the k-th rescored score. The others cannot make the cut, so are left out."""
        order = sorted(scores, key=lambda pt: (-scores[pt], pt))
        exact = self._exact(scope, table, tokens, order[:k])
        floor = sorted(exact.values(), reverse=True)[k - 1] if len(exact) >= k else 0.0
        lift = MAX_ROUNDING * (1 + _EPSILON)
        rest = [pt for pt in order[k:] if scores[pt] * lift >= floor]
        exact.update(self._exact(scope, table, tokens, rest))
        return exact

    def _exact(
        self,
        scope: Scope,
        table: Table,
        tokens: Sequence[str],
        points: Sequence[str],
    ) -> dict[str, float]:
        """Tantivy's BM25 of ``points`` with the scope's statistics: their analysed fields
        are read (once per query's terms: ``_TERMS``), the scope's token totals and the
        document frequencies of the (field, term) pairs they hold are looked up."""
        boosts, corpus = _BOOSTS[table], scope_filter(scope, table)
        docs = self._terms.setdefault(tuple(tokens), {})
        ask = [pt for pt in points if pt not in docs]
        if ask:
            if sum(map(len, self._terms.values())) + len(ask) > _TERMS:
                self._terms.clear()
                docs = self._terms[tuple(tokens)] = {}
            got = self.store.retrieve(ask, (*_ID_PATH, *(f"f_{n}" for n in boosts)))
            if len(self._idents) + len(got) > _IDENTS:
                self._idents.clear()
            for pt, payload in got.items():
                self._idents.setdefault(pt, (payload["id"], payload["path"]))
                docs[pt] = doc_terms(payload["id"], payload["path"], payload, list(boosts),
                                     tokens)  # fmt: skip
        held = {(name, t) for pt in points if pt in docs
                for name, (_, counts) in docs[pt].fields.items()
                for t in tokens if t in counts}  # fmt: skip
        df: dict[str, dict[str, int]] = {}
        for (name, t), n in self._stats.doc_counts(scope, table, corpus, held).items():
            df.setdefault(name, {})[t] = n
        stats = self._stats.totals(scope).stats(table, df)
        return {pt: bm25(docs[pt], tokens, stats, boosts) for pt in points if pt in docs}

    def _top(self, scores: Mapping[str, float], k: int) -> list[tuple[str, str, float]]:
        """(id, path, score) of the best ``k`` points, ties ordered by document id: every
        point that reaches the k-th score is named, and only those."""
        if not scores:
            return []
        floor = sorted(scores.values(), reverse=True)[min(k, len(scores)) - 1]
        named = self._name([pt for pt, v in scores.items() if v >= floor])
        top = sorted(((i, path, scores[pt]) for pt, (i, path) in named.items()),
                     key=lambda t: (-t[2], t[0]))  # fmt: skip
        return top[:k]

    def _name(self, points: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(chunk or page id, path) of each point: remembered, as a point's id is derived
        from its layer, table and document id, and a document id from its path."""
        ask = [pt for pt in points if pt not in self._idents]
        if ask:
            if len(self._idents) + len(ask) > _IDENTS:
                self._idents.clear()
            got = self.store.retrieve(ask, _ID_PATH)
            self._idents.update((pt, (p["id"], p["path"])) for pt, p in got.items())
        return {pt: self._idents[pt] for pt in points if pt in self._idents}

    def term_counts(self, scope: Scope, table: Table, terms: Sequence[str]) -> dict[str, int]:
        """Per term, the scope's documents of ``table`` holding it (most over the fields)."""
        corpus, names = scope_filter(scope, table), list(_BOOSTS[table])
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            token = encode_terms(term)
            out[term] = self._stats.most(scope, table, corpus, names, token) if token else 0
        return {t: out[t] for t in terms}

    # -- dense ----------------------------------------------------------------------

    def has_dense(self, scope: Scope, model_id: str) -> bool:
        """Whether the scope's layers were written with ``model_id``'s vectors."""
        layers = [scope.base] + ([scope.overlay] if scope.layered else [])
        where = Where(must=(Cond("t", ("layers",)), Cond("layer", tuple(layers))))
        records = list(self.store.scroll(where, ("layer", "models")))
        return len(records) == len(layers) and all(model_id in r["models"] for r in records)

    def search_dense(
        self, scope: Scope, vector: np.ndarray, model_id: str, k: int
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, cosine) of the scope's sections, ties by id."""
        name = _vector_name(model_id)
        if k <= 0 or not self._has_vector(name):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()
        where = scope_filter(scope, "sections")
        depth = k + _TIE_SLACK
        while True:  # deeper while a tie straddles the cut: ties are ordered by id
            hits = self.store.nearest(name, query, where, depth, ())
            ranked = sorted((h.score for h in hits), reverse=True)
            if len(hits) < depth or len(ranked) < k or hits[-1].score < ranked[k - 1]:
                break
            depth *= 4
        return [(i, score) for i, _, score in self._top({h.point: h.score for h in hits}, k)]

    # -- lookups --------------------------------------------------------------------

    def chunks(self, scope: Scope, ids: Sequence[str]) -> dict[str, Chunk]:
        """The scope's chunks by id."""
        if not ids:
            return {}
        where = scope_filter(scope, "sections").and_(Cond("id", tuple(dict.fromkeys(ids))))
        read = (_chunk(p["chunk"]) for p in self.store.scroll(where, ("chunk",)))
        found = {c.id: c for c in read}
        return {i: found[i] for i in ids if i in found}

    def chunks_of(self, scope: Scope, path: str) -> list[Chunk]:
        """A file's chunks in line order. A base file's are remembered (the last few by
        base layer and path: packing asks for the neighbours of every candidate); a base
        layer's points never change under its name, an overlay's do."""
        where = scope_filter(scope, "sections").and_(Cond("path", (path,)))
        key = (scope.base, path)
        in_base = path not in scope.overlay_paths and path not in scope.hidden
        got = self._files.get(key) if in_base else None
        if got is None:
            got = _line_order(_chunk(p["chunk"]) for p in self.store.scroll(where, ("chunk",)))
            if not in_base:
                return got
            if len(self._files) >= _FILES:
                self._files.pop(next(iter(self._files)))
            self._files[key] = got
        return list(got)

    def chunks_near(self, scope: Scope, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching ``first_line..last_line``, in line order."""
        return [c for c in self.chunks_of(scope, path)
                if c.span.end_line >= first_line and c.span.start_line <= last_line]  # fmt: skip

    def definitions(self, scope: Scope, names: Sequence[str], limit: int) -> dict[str, list[str]]:
        """Chunk ids defining each name, id order, at most ``limit`` per name."""
        wanted = tuple(dict.fromkeys(names))
        if not wanted:
            return {}
        where = scope_filter(scope, "sections").and_(Cond("defines", wanted))
        out: dict[str, set[str]] = {}
        for p in self.store.scroll(where, ("id", "defines")):
            for name in set(p["defines"]) & set(wanted):
                out.setdefault(name, set()).add(p["id"])
        return {n: sorted(out[n])[:limit] for n in wanted if n in out}

    def paths_like(self, scope: Scope, suffix: str, limit: int) -> list[str]:
        """The scope's paths equal to ``suffix`` or ending in ``/suffix``, shortest first."""
        where = scope_filter(scope, "pages")
        terms = page_fields(suffix, "")["path_terms"]
        if terms:  # every term of such a suffix is a term of the path: let Qdrant narrow
            where = where.and_(Cond("f_path_terms", (encode_terms(terms),), "text"))
        found = {p["path"] for p in self.store.scroll(where, ("path",))
                 if p["path"] == suffix or p["path"].endswith("/" + suffix)}  # fmt: skip
        return sorted(found, key=lambda p: (len(p), p))[:limit]

    def files(self, scope: Scope) -> dict[str, FileRecord]:
        """Every file record of the scope by path."""
        read = self.store.scroll(scope_filter(scope, "pages"), ("file",))
        records = (FileRecord(**_record(p["file"])) for p in read)
        return {r.path: r for r in sorted(records, key=lambda r: r.path)}

    def missing_layers(self, scope: Scope) -> list[str]:
        """The scope's layers this collection has never had written."""
        layers = [scope.base] + ([scope.overlay] if scope.overlay else [])
        where = Where(must=(Cond("t", ("layers",)), Cond("layer", tuple(layers))))
        written = {r["layer"] for r in self.store.scroll(where, ("layer",))}
        return [layer for layer in layers if layer not in written]

    # -- writing --------------------------------------------------------------------

    def drop_layer(self, layer: str) -> None:
        """Delete every point of ``layer`` (an overlay whose branch is gone)."""
        self._forget()
        self.store.delete(Where(must=(Cond("layer", (layer,)),)))

    def layers(self) -> dict[str, int]:
        """Every layer the collection holds, with its files: those with a record and
        those a mirror killed before its first record left points in."""
        found: dict[str, int] = {}
        for p in self.store.scroll(Where(must=(Cond("t", ("pages",)),)), ("layer",)):
            found[p["layer"]] = found.get(p["layer"], 0) + 1
        for r in self.store.scroll(Where(must=(Cond("t", ("layers",)),)), ("layer",)):
            found.setdefault(r["layer"], 0)
        return found

    def forget(
        self, in_paths: Callable[[str], bool] | None, text: str | None, *, dry_run: bool = False
    ) -> int:
        """Remove from every layer of the collection each file ``in_paths`` accepts and
        each file with a section holding ``text`` (its text, title or context: what
        ``cortex forget`` drops locally), all its points; returns how many points (would)
        go. A layer that lost points forgets that its last mirror finished, so its next
        mirror writes those files again from the (purged) segments. Every point is read:
        the text can start inside a token, where no text index can find it."""
        doomed: dict[str, set[str]] = {}  # layer -> paths
        if in_paths is not None:
            pages = Where(must=(Cond("t", ("pages",)),))
            for p in self.store.scroll(pages, ("layer", "path")):
                if in_paths(p["path"]):
                    doomed.setdefault(p["layer"], set()).add(p["path"])
        if text:
            sections = Where(must=(Cond("t", ("sections",)),))
            for p in self.store.scroll(sections, ("layer", "path", "chunk")):
                if text in embedding_text(_chunk(p["chunk"])):
                    doomed.setdefault(p["layer"], set()).add(p["path"])
        removed = 0
        for layer, paths in sorted(doomed.items()):
            where = Where(must=(Cond("layer", (layer,)), Cond("path", tuple(sorted(paths)))))
            removed += self.store.count(where)
            if dry_run:
                continue
            self._forget()
            self._withdraw(layer, self._record(layer))  # a purge killed half way is redone
            self.store.delete(where)
        if removed and not dry_run:
            self.compact()
        return removed

    def compact(self) -> None:
        """Leave no byte of deleted points in the store's files (``Store.compact``)."""
        self.store.compact(KEYWORDS, TEXTS)

    def layer_keys(self, layer: str) -> dict[str, str]:
        """Per path held in ``layer``: the key its documents were written with."""
        return {path: key for path, (key, _) in self._held(layer).items()}

    def _held(self, layer: str) -> dict[str, tuple[str, str]]:
        """Per path held in ``layer``: its key and its totals' JSON ("" in points written
        before totals were kept)."""
        where = Where(must=(Cond("t", ("pages",)), Cond("layer", (layer,))))
        return {p["path"]: (p["key"], p.get("lengths") or "")
                for p in self.store.scroll(where, ("path", "key", "lengths"))}  # fmt: skip

    def mirror(
        self,
        segment: Segment,
        layer: str,
        *,
        embedder: Embedder | None = None,
        cache: EmbeddingCache | None = None,
    ) -> tuple[int, int]:
        """Make ``layer`` hold exactly ``segment``'s documents (and ``embedder``'s vectors):
        files whose key changed are deleted and written again, files gone are deleted, the
        rest is left alone. Returns (files written, files deleted)."""
        records = segment.files()
        keys = segment.file_keys(sorted(records))
        model = embedder.model_id if embedder is not None and cache is not None else None
        digest = _keys_digest(keys)
        known = self._record(layer)
        models = sorted(known["models"]) if known is not None else []
        if (known is not None and known.get("digest") == digest and known.get("lengths")
                and model in (None, *models)):  # fmt: skip
            return 0, 0  # the last mirror of this layer finished with exactly these files
        self._withdraw(layer, known)
        held = self._held(layer)  # even without a record: a killed mirror left points
        rewrite_all = model is not None and model not in models
        # A file held without token totals (written before they were kept) is written again.
        kept = {p for p, (key, lengths) in held.items() if lengths and key == keys.get(p)}
        todo = sorted(p for p in records if rewrite_all or p not in kept)
        gone = sorted(set(held) - set(records))
        stale = tuple(sorted({*todo, *gone} & set(held)))
        if stale:
            self._forget()
            self.store.delete(Where(must=(Cond("layer", (layer,)), Cond("path", stale))))
        totals = Totals.sum(Totals.parse(held[p][1]) for p in kept.difference(todo))
        for start in range(0, len(todo), _BATCH // 8 or 1):
            batch = todo[start : start + _BATCH // 8 or 1]
            totals = totals.plus(self._write(segment, layer,
                                             [(records[p], keys.get(p, "")) for p in batch],
                                             embedder if model else None, cache))  # fmt: skip
        if model is not None:
            models = sorted({*models, model})
        self._put_record(layer, models, digest, totals)
        return len(todo), len(gone)

    def _record(self, layer: str) -> Mapping[str, Any] | None:
        """The layer's record (its models and digest), None before its first mirror."""
        where = Where(must=(Cond("t", ("layers",)), Cond("layer", (layer,))))
        return next(iter(self.store.scroll(where, ("models", "digest", "lengths"))), None)

    def _withdraw(self, layer: str, record: Mapping[str, Any] | None) -> None:
        """Clear the record's digest (and totals) before the layer changes: a change killed
        half way must not look like a finished mirror to the next one."""
        if record is not None and record.get("digest"):
            self._put_record(layer, record["models"], "", None)

    def _put_record(
        self, layer: str, models: Sequence[str], digest: str, totals: Totals | None
    ) -> None:
        """The layer's record: which models' vectors it holds and, once a mirror has
        finished, the digest of the file keys it was written from and the layer's token
        totals (else both empty)."""
        record = {"t": "layers", "layer": layer, "path": "", "id": layer,
                  "models": list(models), "digest": digest,
                  "lengths": totals.to_json() if totals is not None else ""}  # fmt: skip
        self.store.upsert([Point(_point_id(layer, "layers", layer), {}, record)])

    def _write(
        self,
        segment: Segment,
        layer: str,
        files: Sequence[tuple[FileRecord, str]],
        embedder: Embedder | None,
        cache: EmbeddingCache | None,
    ) -> Totals:
        batch = [(record, key, segment.chunks_of(record.path)) for record, key in files]
        vectors: dict[str, Sequence[float]] = {}
        model = None
        if embedder is not None and cache is not None:
            model = embedder.model_id
            targets = [c for _, _, chunks in batch for c in chunks if not is_trivial(c)]
            if targets:
                got = embed_with_cache(embedder, cache, [embedding_text(c) for c in targets])
                vectors = {c.id: row for c, row in zip(targets, got.vectors.tolist(), strict=True)}
        return self.write(layer, batch, model, vectors)

    def write(
        self,
        layer: str,
        files: Sequence[tuple[FileRecord, str, Sequence[Chunk]]],
        model_id: str | None = None,
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> Totals:
        """Upsert the page and section points of ``files`` ((record, key, chunks) each) into
        ``layer``, sections with their ``model_id`` vector where ``vectors`` has one (by
        chunk id); returns the files' token totals. ``mirror`` is the incremental path; this
        is its last step, public for tools that write synthetic layers
        (``eval.bench_backend``'s scale copies)."""
        self._forget()
        vectors = vectors or {}
        name = _vector_name(model_id) if model_id else ""
        if name and vectors and not self._has_vector(name):
            self.store.ensure_vector(name, len(next(iter(vectors.values()))))
            self._names.add(name)
        points: list[Point] = []
        totals = Totals()
        for record, key, chunks in files:
            page_raw = page_fields(record.path, page_text(chunks))
            sections = [section_fields(chunk) for chunk in chunks]
            mine = Totals.of_file(page_raw, sections)
            totals = totals.plus(mine)
            page = {"t": "pages", "layer": layer, "path": record.path, "id": record.page_id,
                    "key": key, "file": json.dumps(asdict(record), separators=(",", ":")),
                    "lengths": mine.to_json(), **_fields(page_raw)}  # fmt: skip
            points.append(Point(_point_id(layer, "pages", record.page_id), {}, page))
            for chunk, raw in zip(chunks, sections, strict=True):
                payload = {
                    "t": "sections", "layer": layer, "path": chunk.path, "id": chunk.id,
                    "defines": list(dict.fromkeys(chunk.defines)), "chunk": _chunk_payload(chunk),
                    **_fields(raw),
                }  # fmt: skip
                named = {name: vectors[chunk.id]} if name and chunk.id in vectors else {}
                points.append(Point(_point_id(layer, "sections", chunk.id), named, payload))
        for start in range(0, len(points), _BATCH):
            self.store.upsert(points[start : start + _BATCH])
        return totals
