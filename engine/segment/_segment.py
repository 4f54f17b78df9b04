"""A Segment: one searchable unit over a set of files, in one directory.

    <dir>/meta.sqlite        files, chunks, chunk text (the source of truth)
    <dir>/lexical/           tantivy BM25 over sections and pages
    <dir>/dense/<model>/     faiss over the section vectors of one embedding model

Lexical and dense indexes are derived from the metadata; every hit is resolved through it,
so a hit on something the metadata no longer holds (an interrupted write) is dropped.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.core import IndexNotBuiltError, IndexStateError, page_text
from engine.segment._lexical import page_fields, query_terms, section_fields
from engine.segment._meta import FileRecord, MetaStore
from indexers import Chunk
from overlays import DocTerms, FieldStats, Found, TableStats

if TYPE_CHECKING:
    from engine.segment._dense import DenseIndex
    from engine.segment._lexical import LexicalIndex

__all__ = ["LEXICAL_WEIGHTS", "Segment", "model_slug"]

_DOC_CACHE = 200_000  # analysed documents remembered per segment (rescoring in a View)
# The boosts ``LexicalIndex.open`` uses by default, for segments scored in memory.
_WEIGHTS = {
    "sections": {"symbol_terms": 3.0, "path_terms": 2.0, "body": 1.0},
    "pages": {"path_terms": 2.0, "body": 1.0},
}
LEXICAL_WEIGHTS: Mapping[str, Mapping[str, float]] = _WEIGHTS  # read-only: other backends


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def model_slug(model_id: str) -> str:
    """A directory name for a model id (``static:ab12`` → ``static-ab12``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip("-")[:80] or "model"


class Segment:
    """Metadata plus lazily opened lexical and dense indexes for one directory."""

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        if not create and not (directory / "meta.sqlite").exists():
            raise IndexNotBuiltError(f"no index in {directory}; run `cortex index` first")
        self.dir = directory
        self.meta = MetaStore(directory / "meta.sqlite")
        self._identity = _file_identity(directory / "meta.sqlite")
        self._lock = threading.Lock()
        self._lexical: LexicalIndex | None = None
        self._dense: dict[str, tuple[int, DenseIndex]] = {}
        self._lexical_generation = -1
        self._docs: dict[tuple[str, str], DocTerms] = {}
        self._doc_keys: dict[str, set[tuple[str, str]]] = {}  # per path, its keys in _docs
        self._docs_lock = threading.RLock()  # server threads share the cache
        self._hidden_ints: tuple[tuple[frozenset[str], int], frozenset[int]] | None = None

    def replaced(self) -> bool:
        """Whether ``dir`` no longer holds the files this Segment opened: another process
        removed the folder, or put a new one in its place (a rebuild's swap, an overlay
        built against another base). Open files keep their inode, so a new file at the path
        never has the old one's: the check is one ``stat``."""
        return _file_identity(self.dir / "meta.sqlite") != self._identity

    def close(self) -> None:
        """Release files and connections."""
        with self._lock:
            if self._lexical is not None:
                self._lexical.close()
                self._lexical = None
            self._dense.clear()
        self.meta.close()

    # -- lexical --------------------------------------------------------------------

    @property
    def lexical(self) -> LexicalIndex:
        """The BM25 index (opened on first use)."""
        with self._lock:
            if self._lexical is None:
                from engine.segment._lexical import LexicalIndex

                self._lexical = LexicalIndex.open(self.dir / "lexical", create=True)
            return self._lexical

    def close_lexical(self) -> None:
        """Close the lexical index (before its directory is replaced); reopened on use."""
        with self._lock:
            if self._lexical is not None:
                self._lexical.close()
                self._lexical = None
            self._lexical_generation = -1

    def fresh_lexical(self) -> LexicalIndex:
        """The lexical index, reloaded if another writer committed since we last looked."""
        lexical = self.lexical
        generation = self.meta.generation
        if generation != self._lexical_generation:
            lexical.refresh()
            self._lexical_generation = generation
        return lexical

    # -- as a part of a View (overlays.Part) ------------------------------------------

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms a query searches for."""
        return query_terms(query)

    def lexical_weights(self, table: str) -> dict[str, float]:
        """Field -> boost of the BM25 query on ``table``."""
        return dict(_WEIGHTS[table])

    def lexical_search(
        self, table: str, query: str, k: int, paths: Collection[str] | None
    ) -> list[Found]:
        """Top ``k`` of ``table`` by this segment's own BM25, ties by id."""
        lexical = self.fresh_lexical()
        if table == "pages":
            return lexical.search_pages(query, k)
        return lexical.search_sections(query, k, paths=paths)

    def lexical_stats(self, table: str, terms: Sequence[str]) -> TableStats:
        """Exact BM25 statistics of ``table`` for ``terms`` (recorded when the segment was
        written in one batch from empty; a patched one has none and raises)."""
        raw = self.meta.get_info("lexical_stats")
        if not raw:
            raise IndexStateError(
                f"the index at {self.dir} has no exact BM25 statistics (it was patched); "
                "rebuild it with `cortex index --rebuild`"
            )
        totals = json.loads(raw).get(table, {"docs": 0})
        lexical = self.fresh_lexical()
        fields = {
            name: FieldStats(int(totals.get(name, 0)), lexical.doc_freqs(table, name, terms))
            for name in _WEIGHTS[table]
        }
        return TableStats(int(totals["docs"]), fields)

    def doc_terms(self, table: str, found: Sequence[Found]) -> dict[str, DocTerms]:
        """The analysed documents behind ``found``, by id (cached: ids name content)."""
        out = {f.id: self._docs[(table, f.id)] for f in found if (table, f.id) in self._docs}
        missing = [f for f in found if f.id not in out]
        if table == "sections":
            chunks = self.meta.chunks([f.id for f in missing])
            docs = [_section_doc(c) for c in chunks.values()]
        else:
            docs = [d for f in missing if (d := self._page_doc(f.path)) is not None]
        with self._docs_lock:
            if len(self._docs) > _DOC_CACHE:
                self._forget_docs()
            for doc in docs:
                self._remember_doc((table, doc.id), doc)
                out[doc.id] = doc
        return out

    def docs_of(self, table: str, paths: Iterable[str]) -> list[DocTerms]:
        """Every document of ``table`` under ``paths``, in path order."""
        wanted = sorted(set(paths))
        if table == "pages":
            return [d for path in wanted if (d := self._page_doc(path)) is not None]
        # Analysed sections are remembered by chunk id (ids name content): an overlay
        # refreshed after an edit reads and analyses only the sections that changed.
        pairs = self.meta.ids_of(wanted)
        ids = [cid for _, cid in pairs]
        # A path's earlier versions go: a long-running process re-reading a file an agent
        # edits all day kept every version it had analysed.
        current = {("sections", cid) for cid in ids}
        with self._docs_lock:
            for path in wanted:
                for key in [k for k in self._doc_keys.get(path, ()) if k[0] == "sections"]:
                    if key not in current:
                        self._drop_doc(key, path)
            missing = [cid for cid in ids if ("sections", cid) not in self._docs]
            if len(self._docs) + len(missing) > _DOC_CACHE:
                self._forget_docs()
                missing = ids
            for chunk in self.meta.chunks(missing).values():
                self._remember_doc(("sections", chunk.id), _section_doc(chunk))
            return [self._docs[k] for cid in ids if (k := ("sections", cid)) in self._docs]

    def _remember_doc(self, key: tuple[str, str], doc: DocTerms) -> None:
        self._docs[key] = doc
        self._doc_keys.setdefault(doc.path, set()).add(key)

    def _drop_doc(self, key: tuple[str, str], path: str) -> None:
        self._docs.pop(key, None)
        keys = self._doc_keys.get(path)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._doc_keys[path]

    def _forget_docs(self) -> None:
        self._docs.clear()
        self._doc_keys.clear()

    def file_keys(self, paths: Sequence[str]) -> dict[str, str]:
        """Per indexed path: its page id (path and content) and how it was chunked, which
        change whenever the path's documents do."""
        chunker = self.meta.get_info("chunker") or ""
        return {p: f"{page}:{chunker}" for p, page in self.meta.page_ids(paths).items()}

    def _page_doc(self, path: str) -> DocTerms | None:
        record = self.meta.file(path)
        if record is None:
            return None
        key = ("pages", record.page_id)
        with self._docs_lock:
            doc = self._docs.get(key)
            if doc is None:
                for old in [k for k in self._doc_keys.get(path, ()) if k[0] == "pages"]:
                    self._drop_doc(old, path)  # the path's earlier version
                doc = _doc(record.page_id, path, page_fields(path, page_text(
                    self.meta.chunks_of(path))))  # fmt: skip
                self._remember_doc(key, doc)
            return doc

    def dense_ids(
        self, vector: np.ndarray, model_id: str, k: int, exclude: Collection[str] = ()
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, cosine) outside the paths ``exclude``, ties by id.

        Excluded sections are dropped by their faiss ids, and no chunk is read: a View
        hiding thousands of base sections pays for k ids, and recall reads only the
        candidates it keeps."""
        index = self.dense(model_id)
        if index is None or index.ntotal == 0:
            return []
        hidden = self._int_ids_of(frozenset(exclude)) if exclude else frozenset()
        most = min(index.ntotal, k + len(hidden))  # deep enough whatever is hidden
        depth = min(most, k + min(len(hidden), 2 * k + 16))
        while True:  # read deeper only while hidden ones leave fewer than k (or a tie) behind
            ids, scores = index.search(vector, depth)
            pairs = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True)
                     if i >= 0 and int(i) not in hidden]  # fmt: skip
            if depth >= most or (len(pairs) >= k and float(scores[0][-1]) < pairs[k - 1][1]):
                break
            depth = min(most, depth * 4)
        if len(pairs) > k:  # keep the ties at the cut: the order below is by chunk id
            pairs = [p for p in pairs if p[1] >= pairs[k - 1][1]]
        names = self.meta.ids_by_int_id([i for i, _ in pairs])
        hits = [(names[i], s) for i, s in pairs if i in names]
        return sorted(hits, key=lambda p: (-p[1], p[0]))[:k]

    def _int_ids_of(self, paths: frozenset[str]) -> frozenset[int]:
        cached = self._hidden_ints
        if cached is None or cached[0] != (paths, self.meta.generation):
            ints = frozenset(self.meta.int_ids_of(sorted(paths)))
            cached = self._hidden_ints = ((paths, self.meta.generation), ints)
        return cached[1]

    def has_dense(self, model_id: str) -> bool:
        """Whether this segment has vectors of ``model_id``."""
        return self.dense(model_id) is not None or self.meta.counts()[1] == 0

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id."""
        return self.meta.chunks(ids)

    def chunks_of(self, path: str) -> list[Chunk]:
        """A file's chunks in line order."""
        return self.meta.chunks_of(path)

    def chunks_near(self, path: str, first_line: int, last_line: int) -> list[Chunk]:
        """A file's chunks touching lines ``first_line..last_line``, in line order."""
        return self.meta.chunks_near(path, first_line, last_line)

    def definitions(self, names: Sequence[str], limit: int) -> dict[str, list[tuple[str, str]]]:
        """(chunk id, path) of sections defining each name."""
        return self.meta.definitions(names, limit)

    def paths_like(self, suffix: str, limit: int) -> list[str]:
        """Paths equal to or ending in ``/suffix``."""
        return self.meta.paths_like(suffix, limit)

    def files(self) -> dict[str, FileRecord]:
        """Every file's record by path."""
        return self.meta.files()

    # -- dense ----------------------------------------------------------------------

    def dense_dir(self, model_id: str) -> Path:
        """Where the dense index of ``model_id`` lives."""
        return self.dir / "dense" / model_slug(model_id)

    def dense_generation(self, model_id: str) -> int:
        """The metadata generation the dense index of ``model_id`` was last brought up to."""
        return int(self.meta.get_info(f"dense:{model_id}:generation") or -1)

    def dense(self, model_id: str) -> DenseIndex | None:
        """The dense index for ``model_id``, or None if there is none on disk."""
        directory = self.dense_dir(model_id)
        if not (directory / "dense.json").exists():
            return None
        generation = self.dense_generation(model_id)
        with self._lock:
            cached = self._dense.get(model_id)
            if cached is not None and cached[0] == generation:
                return cached[1]
            from engine.segment._dense import DenseIndex

            index = DenseIndex.load(directory, model_id=model_id)
            self._dense[model_id] = (generation, index)
            return index

    def forget_dense(self, model_id: str) -> None:
        """Drop a cached in-memory dense index (after it was rewritten)."""
        with self._lock:
            self._dense.pop(model_id, None)


def _doc(ident: str, path: str, fields: dict[str, str]) -> DocTerms:
    analysed = {}
    for name, terms in fields.items():
        words = terms.split()
        analysed[name] = (len(words), Counter(words))
    return DocTerms(ident, path, analysed)


def _section_doc(chunk: Chunk) -> DocTerms:
    return _doc(chunk.id, chunk.path, section_fields(chunk))
