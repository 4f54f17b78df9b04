"""Request to ranked candidates: query parsing, recall from every retriever, fusion, rerank,
``search``, files ranked from sections, and ``resolve``. Pure functions of a ``View`` and
their inputs (query vectors are computed by the caller); imports only ``engine.core``."""

from engine.retrieval._files import (
    FileModel,
    default_file_model,
    file_columns,
    file_table,
    learned_file_scores,
    rank_files,
    section_totals,
)
from engine.retrieval._fusion import FILE_TOP, Candidate, file_scores, fuse_lists
from engine.retrieval._learned import (
    LEARNED_FEATURES,
    SALIENCE_WEIGHT,
    candidate_salience,
    with_learned,
)
from engine.retrieval._query import (
    MAX_INTENT_WORDS,
    MIN_PHRASE_WORDS,
    Intent,
    Location,
    clean_query,
    is_question,
    locations,
    lone_name,
    phrase_match,
    query_identifiers,
    request_intents,
    request_phrases,
    word_forms,
)
from engine.retrieval._recall import (
    FORM_MIN_SHARE,
    cochange_candidates,
    recall,
    weights_of,
    with_word_forms,
)
from engine.retrieval._rerank import DECLARATION_PRIOR, Scored, rerank
from engine.retrieval._resolve import URI, inside_workspace, resolve_in
from engine.retrieval._search import dense_hits, file_hits, ranked_hits

__all__ = [
    "DECLARATION_PRIOR",
    "FILE_TOP",
    "FORM_MIN_SHARE",
    "LEARNED_FEATURES",
    "MAX_INTENT_WORDS",
    "MIN_PHRASE_WORDS",
    "SALIENCE_WEIGHT",
    "URI",
    "Candidate",
    "FileModel",
    "Intent",
    "Location",
    "Scored",
    "candidate_salience",
    "clean_query",
    "cochange_candidates",
    "default_file_model",
    "dense_hits",
    "file_columns",
    "file_hits",
    "file_scores",
    "file_table",
    "fuse_lists",
    "inside_workspace",
    "is_question",
    "learned_file_scores",
    "locations",
    "lone_name",
    "phrase_match",
    "query_identifiers",
    "rank_files",
    "ranked_hits",
    "recall",
    "request_intents",
    "request_phrases",
    "rerank",
    "resolve_in",
    "section_totals",
    "weights_of",
    "with_learned",
    "with_word_forms",
    "word_forms",
]
