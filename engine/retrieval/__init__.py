"""Request to ranked candidates: query parsing, recall from every retriever, fusion, rerank,
``search``, files ranked from sections, and ``resolve``. Pure functions of a ``View`` and
their inputs (query vectors are computed by the caller); imports only ``engine.core``."""

from engine.retrieval._files import rank_files
from engine.retrieval._fusion import Candidate, file_scores, fuse_lists
from engine.retrieval._query import Location, clean_query, locations, query_identifiers
from engine.retrieval._recall import recall, weights_of
from engine.retrieval._rerank import Scored, rerank
from engine.retrieval._resolve import URI, resolve_in
from engine.retrieval._search import FUSION_DEPTH, RRF_K, fuse, search

__all__ = [
    "FUSION_DEPTH",
    "RRF_K",
    "URI",
    "Candidate",
    "Location",
    "Scored",
    "clean_query",
    "file_scores",
    "fuse",
    "fuse_lists",
    "locations",
    "query_identifiers",
    "rank_files",
    "recall",
    "rerank",
    "resolve_in",
    "search",
    "weights_of",
]
