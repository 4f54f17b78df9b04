"""BM25 over code with tantivy: code-aware terms, and one index each for pages and sections.

Text is analysed here, in Python, by ``code_terms``: every identifier is kept whole and also
split at ``snake_case``, ``camelCase`` and acronym boundaries, so ``register hook`` finds
``register_hook`` and ``registerHook``. Tantivy only splits the result at whitespace, so the
terms it indexes are byte for byte the terms a query asks for.

Pages (whole files) and sections (chunks) live in two tantivy indexes under one directory,
so the BM25 statistics of a file (document count, average length) never mix with those of
its sections::

    with LexicalIndex.open(root) as index:
        with index.writer() as w:
            w.delete_path("src/app.py")       # replace = delete, then add
            w.add_page(page, text)
            w.add_sections(chunks)
        hits = index.search_sections("register hook", k=20)

A ``writer()`` block commits both indexes when it ends cleanly and rolls back if it raises;
a process killed before the commit leaves the last committed state. The two commits are not
one transaction: a crash between them can leave sections committed and pages not, which a
re-run of the same delete-then-add batch repairs.

tantivy is imported on first use, not on import.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from engine.core import (
    ConfigError,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    IndexStateError,
)
from indexers import Chunk, Page
from overlays import Found

if TYPE_CHECKING:
    import tantivy

__all__ = [
    "BODY_BOOST",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "PAGE_FIELDS",
    "PATH_BOOST",
    "SECTION_FIELDS",
    "SYMBOL_BOOST",
    "LexicalIndex",
    "LexicalWriter",
    "code_terms",
    "page_fields",
    "query_terms",
    "section_fields",
]

SYMBOL_BOOST = 3.0  # a name match is the best evidence that a section is the one asked for
PATH_BOOST = 2.0  # file and directory names are short, curated summaries of what is inside
BODY_BOOST = 1.0  # the baseline the other weights are relative to
MAX_QUERY_TERMS = 64  # a pasted traceback must not become a huge query; first terms lead
MAX_TERM_CHARS = 64  # longer words are mostly data (base64, hex, minified code), not names
WRITER_HEAP_BYTES = 128_000_000  # per index writer; a full heap flushes a segment: bigger, fewer
WRITER_THREADS = 2  # this machine's cores; each extra thread also means extra, smaller segments
_TERM_CACHE_MAX = 1 << 20  # distinct words remembered; a repository has far fewer than this

_SECTIONS_DIR = "sections"
_PAGES_DIR = "pages"
_ANALYZER = "cortex_code_terms"  # whitespace only: code_terms has already lowercased and split
_SECTION_KEYS = ("kind", "doc_type", "language")  # raw, stored: for filters and display

# Identifier parts. Upper/lower case is ASCII (Python's re has no \p{Lu}); any other letter
# counts as lower case, so non-ASCII names stay whole instead of splitting at every letter.
_LO = r"[^\W\d_A-Z]"
_WORD = re.compile(r"\w+")
_PART = re.compile(rf"[A-Z]+\d*(?!{_LO})|[A-Z]?{_LO}+\d*|\d+")


def _expand(word: str) -> str:
    """One word's terms: the whole word, then its parts; 1-character terms dropped."""
    whole = word.strip("_").lower()
    terms: dict[str, None] = {}
    if len(whole) < 2:
        return ""
    if len(whole) <= MAX_TERM_CHARS:
        terms[whole] = None
    elif "_" not in whole:
        return ""  # a long run without separators is a blob (base64, hex, a CJK line)
    # else a long snake_case name (test_returns_404_when_...): its parts still describe it
    for part in _PART.findall(word):
        if 2 <= len(part) <= MAX_TERM_CHARS:
            terms[part.lower()] = None
    return " ".join(terms)


class _Expansions(dict[str, str]):
    """word → its terms, computed once: a corpus repeats a small vocabulary millions of times."""

    def __missing__(self, word: str) -> str:
        if len(self) >= _TERM_CACHE_MAX:
            self.clear()
        terms = self[word] = _expand(word)
        return terms


_EXPANSIONS = _Expansions()


def code_terms(text: str) -> str:
    """``text`` as space-separated lowercase search terms, identifiers whole and split.

    Words are runs of letters, digits and ``_``; dots and other punctuation separate them,
    so ``os.path.join`` gives ``os path join``. Each word is kept whole (edge underscores
    stripped) and split at ``_``, lower→upper case changes and acronym ends; a digit run
    stays with the part before it. Terms of one character, or longer than
    ``MAX_TERM_CHARS``, are dropped; a longer word keeps its parts only if it has ``_``
    (a long test name, not a blob).

    >>> code_terms("getHTTPResponse2(register_hook)")
    'gethttpresponse2 get http response2 register_hook register hook'
    """
    # findall + a dict lookup per word keeps the per-character work inside the regex engine.
    return " ".join(filter(None, map(_EXPANSIONS.__getitem__, _WORD.findall(text))))


def query_terms(query: str) -> list[str]:
    """The distinct terms a query searches for, first-seen order, at most ``MAX_QUERY_TERMS``."""
    return list(dict.fromkeys(code_terms(query).split()))[:MAX_QUERY_TERMS]


SECTION_FIELDS = ("symbol_terms", "path_terms", "body")
PAGE_FIELDS = ("path_terms", "body")


def section_fields(chunk: Chunk, path_terms: str | None = None) -> dict[str, str]:
    """A section's analysed fields, as indexed (and as a View rescores them)."""
    names = " ".join((chunk.symbol, *chunk.defines))
    text = f"{chunk.context}\n{chunk.text}" if chunk.context else chunk.text
    return {
        # A set: a name in both symbol and defines is one name, not a stronger match.
        "symbol_terms": " ".join(dict.fromkeys(code_terms(names).split())),
        "path_terms": code_terms(chunk.path) if path_terms is None else path_terms,
        "body": code_terms(text),
    }


def page_fields(path: str, text: str) -> dict[str, str]:
    """A page's analysed fields, as indexed."""
    return {"path_terms": code_terms(path), "body": code_terms(text)}


@dataclass(frozen=True, slots=True)
class _Table:
    """One tantivy index and how to query it."""

    index: tantivy.Index
    id_field: str
    weights: tuple[tuple[str, float], ...]  # (field, boost) searched by every query


def _analyzer() -> tantivy.TextAnalyzer:
    import tantivy

    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def _schema(
    id_field: str, term_fields: Sequence[str], keyword_fields: Sequence[str]
) -> tantivy.Schema:
    import tantivy

    builder = tantivy.SchemaBuilder()
    for name in (id_field, "path", *keyword_fields):
        # raw + "basic" (no frequencies): exact-match keys for deletes and filters.
        builder.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in term_fields:
        # "freq", not "position": BM25 needs term frequencies, and no query uses phrases.
        builder.add_text_field(name, tokenizer_name=_ANALYZER, index_option="freq")
    return builder.build()


def _open_table(
    directory: Path, schema: tantivy.Schema, id_field: str, weights: tuple[tuple[str, float], ...]
) -> _Table:
    import tantivy

    try:
        index = tantivy.Index(schema, path=str(directory), reuse=True)
    except ValueError as exc:
        if "schema does not match" in str(exc):
            raise IndexSchemaError(
                f"the lexical index at {directory} has another layout; "
                "rebuild it with `cortex index --rebuild`"
            ) from exc
        raise IndexStateError(f"cannot open the lexical index at {directory}: {exc}") from exc
    # Tokenizers are not stored in the index: register ours on every open.
    index.register_tokenizer(_ANALYZER, _analyzer())
    # Manual reloads: a search sees exactly the commits this object has loaded (determinism).
    index.config_reader("manual")
    return _Table(index, id_field, weights)


def _check_boost(name: str, value: float) -> float:
    if not 0.0 <= value < float("inf"):
        raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


class LexicalIndex:
    """BM25 over the sections and pages of a workspace, stored in one directory.

    Open with ``LexicalIndex.open``; change with ``writer()``; query with
    ``search_sections`` / ``search_pages``. Results are ranked by score, then id, so the
    same committed state and query always give the same list.
    """

    def __init__(self, path: Path, sections: _Table, pages: _Table) -> None:
        """Use ``LexicalIndex.open``."""
        self.path = path
        self._tables: tuple[_Table, _Table] | None = (sections, pages)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        create: bool = True,
        symbol_boost: float = SYMBOL_BOOST,
        path_boost: float = PATH_BOOST,
        body_boost: float = BODY_BOOST,
    ) -> LexicalIndex:
        """Open the index under ``path``, creating it when ``create`` (the default).

        Boosts weigh each field's BM25 score in a query; 0 leaves the field out.
        Raises ``IndexNotBuiltError`` when the index is missing and ``create`` is false,
        ``IndexSchemaError`` when it was written with another schema.
        """
        import tantivy

        symbol = ("symbol_terms", _check_boost("symbol_boost", symbol_boost))
        where = ("path_terms", _check_boost("path_boost", path_boost))
        body = ("body", _check_boost("body_boost", body_boost))
        path = Path(path)
        dirs = (path / _SECTIONS_DIR, path / _PAGES_DIR)
        if create:
            for d in dirs:
                d.mkdir(parents=True, exist_ok=True)
        elif not all(d.is_dir() and tantivy.Index.exists(str(d)) for d in dirs):
            raise IndexNotBuiltError(f"no lexical index at {path}; run `cortex index` first")
        sections = _open_table(
            dirs[0],
            _schema("chunk_id", ("path_terms", "symbol_terms", "body"), _SECTION_KEYS),
            "chunk_id",
            (symbol, where, body),
        )
        pages = _open_table(
            dirs[1], _schema("page_id", ("path_terms", "body"), ()), "page_id", (where, body)
        )
        return cls(path, sections, pages)

    def __enter__(self) -> LexicalIndex:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the index files; later calls raise ``IndexStateError``."""
        self._tables = None

    def refresh(self) -> None:
        """Load the latest commits, including those another process made."""
        for table in self._live():
            table.index.reload()

    @property
    def num_sections(self) -> int:
        """How many sections the loaded commit holds."""
        return int(self._live()[0].index.searcher().num_docs)

    @property
    def num_pages(self) -> int:
        """How many pages the loaded commit holds."""
        return int(self._live()[1].index.searcher().num_docs)

    def weights(self, table: str) -> dict[str, float]:
        """Field -> boost of queries on ``table`` ("sections" or "pages")."""
        return dict(self._table(table).weights)

    def doc_freqs(self, table: str, field: str, terms: Sequence[str]) -> dict[str, int]:
        """How many documents of ``table`` hold each term in ``field`` (deleted ones count
        until a merge drops them, as in tantivy's own BM25)."""
        searcher = self._table(table).index.searcher()
        return {t: int(searcher.doc_freq(field, t)) for t in terms}

    def _table(self, table: str) -> _Table:
        sections, pages = self._live()
        if table not in ("sections", "pages"):
            raise ConfigError(f"unknown lexical table {table!r}")
        return sections if table == "sections" else pages

    @contextmanager
    def writer(self) -> Iterator[LexicalWriter]:
        """Change the index: commit on a clean exit, roll back if the block raises.

        One writer at a time per directory, across processes; a second one raises
        ``IndexBusyError``. Searches, here or in another process, keep seeing the last
        commit while a writer is open.
        """
        tables = self._live()
        sections = _acquire(tables[0], self.path)
        try:
            pages = _acquire(tables[1], self.path)
        except BaseException:
            _release(sections)
            raise
        batch = LexicalWriter(sections, pages)
        try:
            yield batch
        except BaseException:
            batch._done = True
            for w in (sections, pages):
                # Nothing uncommitted survives the writer anyway; the block's own error is
                # the one to report, not a failure while discarding its work.
                with suppress(ValueError):
                    w.rollback()
                with suppress(ValueError):
                    _release(w)
            raise
        batch._done = True
        try:
            for w in (sections, pages):
                w.commit()
        except ValueError as exc:
            raise IndexStateError(f"cannot commit the lexical index at {self.path}: {exc}") from exc
        finally:
            _release(sections)
            _release(pages)
        self.refresh()

    def search_sections(
        self, query: str, k: int = 50, *, paths: Collection[str] | None = None
    ) -> list[Found]:
        """The ``k`` best sections for ``query``, best first; ``paths`` limits the files.

        Hit ids are chunk ids. An empty query (or one with no usable term) gives ``[]``.
        """
        return self._search(self._live()[0], query, k, paths)

    def search_pages(self, query: str, k: int = 50) -> list[Found]:
        """The ``k`` best pages (whole files) for ``query``, best first; ids are page ids."""
        return self._search(self._live()[1], query, k, None)

    def _live(self) -> tuple[_Table, _Table]:
        if self._tables is None:
            raise IndexStateError(f"the lexical index at {self.path} is closed")
        return self._tables

    def _search(
        self, table: _Table, query: str, k: int, paths: Collection[str] | None
    ) -> list[Found]:
        import tantivy

        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        if isinstance(paths, str):  # a str is a Collection[str] of its characters
            raise ConfigError(f"paths must be a collection of paths, got the string {paths!r}")
        terms = query_terms(query)
        if not terms or (paths is not None and not paths):
            return []
        schema = table.index.schema
        should = tantivy.Occur.Should
        fields: list[tuple[tantivy.Occur, tantivy.Query]] = []
        for field, boost in table.weights:
            if boost == 0.0:
                continue
            either = tantivy.Query.boolean_query(
                [(should, tantivy.Query.term_query(schema, field, t)) for t in terms]
            )
            fields.append((should, tantivy.Query.boost_query(either, boost)))
        if not fields:
            return []
        q = tantivy.Query.boolean_query(fields)
        if paths is not None:
            # Score 0 keeps the filter out of the ranking: it only decides who may match.
            only = tantivy.Query.term_set_query(schema, "path", sorted(paths))
            must = tantivy.Occur.Must
            q = tantivy.Query.boolean_query(
                [(must, q), (must, tantivy.Query.const_score_query(only, 0.0))]
            )
        searcher = table.index.searcher()
        # Fetch past k until the k-th score is strictly beaten, so the ids tied at the cut
        # are all seen and the order below (score, then id) does not depend on doc order.
        limit = k + 1
        while True:
            hits = searcher.search(q, limit, count=False).hits
            if len(hits) < limit or hits[-1][0] < hits[k - 1][0]:
                break
            limit *= 2
        found = []
        for score, address in hits:
            doc = searcher.doc(address)
            found.append(Found(str(doc[table.id_field][0]), str(doc["path"][0]), float(score)))
        found.sort(key=lambda h: (-h.score, h.id))
        return found[:k]


def _acquire(table: _Table, root: Path) -> tantivy.IndexWriter:
    try:
        return table.index.writer(WRITER_HEAP_BYTES, WRITER_THREADS)
    except ValueError as exc:
        if "LockBusy" in str(exc):
            raise IndexBusyError(
                f"another writer is updating the lexical index at {root}; wait for it to finish"
            ) from exc
        raise IndexStateError(f"cannot write the lexical index at {root}: {exc}") from exc


def _release(writer: tantivy.IndexWriter) -> None:
    """Finish merges and drop the writer, which frees the directory lock now, not at GC."""
    writer.wait_merging_threads()


class LexicalWriter:
    """The changes of one ``LexicalIndex.writer()`` block, applied in call order.

    Deletes only reach what was added before them: ``delete_path`` then ``add_*`` replaces a
    file, while ``add_*`` then ``delete_path`` removes what was just added.
    """

    def __init__(self, sections: tantivy.IndexWriter, pages: tantivy.IndexWriter) -> None:
        """Use ``LexicalIndex.writer()``."""
        self._sections = sections
        self._pages = pages
        self._done = False
        self.deleted = 0  # delete_path calls: a batch with none leaves exact statistics
        # Documents and tokens per field added, per table: a segment built in one batch
        # records them, so its statistics can be combined with another segment's.
        self.totals: dict[str, dict[str, int]] = {}

    def add_sections(self, chunks: Iterable[Chunk]) -> int:
        """Index ``chunks`` as sections; returns how many were added."""
        import tantivy

        writer = self._live()._sections
        n = 0
        path = path_terms = ""
        for c in chunks:
            if c.path != path:  # a file's chunks arrive together; analyse its path once
                path, path_terms = c.path, code_terms(c.path)
            fields = section_fields(c, path_terms)
            doc = tantivy.Document(
                chunk_id=c.id,
                path=c.path,
                kind=c.kind.value,
                doc_type=c.doc_type.value,
                language=c.language,
                **fields,
            )
            writer.add_document(doc)
            self._count("sections", fields)
            n += 1
        return n

    def add_page(self, page: Page, text: str) -> None:
        """Index one whole file; ``text`` is its decoded content."""
        import tantivy

        fields = page_fields(page.path, text)
        self._live()._pages.add_document(
            tantivy.Document(page_id=page.id, path=page.path, **fields)
        )
        self._count("pages", fields)

    def _count(self, table: str, fields: dict[str, str]) -> None:
        totals = self.totals.setdefault(table, {"docs": 0})
        totals["docs"] += 1
        for name, terms in fields.items():
            totals[name] = totals.get(name, 0) + (terms.count(" ") + 1 if terms else 0)

    def delete_path(self, path: str) -> None:
        """Remove the page at ``path`` and all its sections (those added before this call)."""
        self._live()
        self.deleted += 1
        self._sections.delete_documents_by_term("path", path)
        self._pages.delete_documents_by_term("path", path)

    def _live(self) -> LexicalWriter:
        if self._done:
            raise IndexStateError("this lexical writer's block has ended")
        return self
