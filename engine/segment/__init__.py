"""One segment on disk: SQLite metadata (the source of truth), tantivy BM25 over sections
and pages, and faiss over section vectors, in one directory. A ``Segment`` is what the
``overlays.View`` composes (it implements ``overlays.Part``)."""

from engine.segment._dense import EXACT_MAX, TARGET_RECALL, DenseIndex, DenseKind, int_id, nlist_for
from engine.segment._lexical import (
    MAX_QUERY_TERMS,
    MAX_TERM_CHARS,
    LexicalIndex,
    LexicalWriter,
    code_terms,
    page_fields,
    query_terms,
    section_fields,
)
from engine.segment._meta import FileRecord, MetaStore
from engine.segment._segment import LEXICAL_WEIGHTS, Segment, model_slug

__all__ = [
    "EXACT_MAX",
    "LEXICAL_WEIGHTS",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "TARGET_RECALL",
    "DenseIndex",
    "DenseKind",
    "FileRecord",
    "LexicalIndex",
    "LexicalWriter",
    "MetaStore",
    "Segment",
    "code_terms",
    "int_id",
    "model_slug",
    "nlist_for",
    "page_fields",
    "query_terms",
    "section_fields",
]
