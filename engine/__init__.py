"""cortex's engine: configuration, indexes, the public ``Workspace`` API and the CLI.

Importing it is free: no model, index, tree-sitter or tiktoken is loaded until used.
"""

from engine._config import Config
from engine._embed import EmbeddingModelError
from engine._embedcache import CacheError
from engine._errors import (
    ConfigError,
    CortexError,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    IndexStateError,
    WorkspaceError,
    WorkspaceNotFoundError,
)
from engine._indexer import IndexReport, NullProgress, Progress
from engine._survey import Survey, survey
from engine._workspace import SearchHit, SearchMode, Status, Workspace
from indexers import Chunk, Span, TiktokenCounter, TokenCounter

__all__ = [
    "CacheError",
    "Chunk",
    "Config",
    "ConfigError",
    "CortexError",
    "EmbeddingModelError",
    "IndexBusyError",
    "IndexNotBuiltError",
    "IndexReport",
    "IndexSchemaError",
    "IndexStateError",
    "NullProgress",
    "Progress",
    "SearchHit",
    "SearchMode",
    "Span",
    "Status",
    "Survey",
    "TiktokenCounter",
    "TokenCounter",
    "Workspace",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "survey",
]
