"""cortex's engine: configuration, indexes, the public ``Workspace`` API and the CLI.

Importing it is free: no model, index, tree-sitter or tiktoken is loaded until used.
"""

from engine._build import ContextSettings, rank_files
from engine._config import Config
from engine._context import (
    Block,
    ContextPack,
    Contribution,
    FeedbackResult,
    Lane,
    Pointer,
    SessionState,
    Snippet,
    Turn,
)
from engine._embed import EmbeddingModelError
from engine._embedcache import CacheError
from engine._errors import (
    ConfigError,
    CortexError,
    IndexBusyError,
    IndexNotBuiltError,
    IndexSchemaError,
    IndexStateError,
    UnknownReplayKeyError,
    WorkspaceError,
    WorkspaceNotFoundError,
)
from engine._indexer import IndexReport, NullProgress, Progress
from engine._layers import GcReport
from engine._pack import PackSettings
from engine._query import SignalKind, ToolSignal
from engine._recall import Fusion, RecallSettings
from engine._rerank import RerankWeights
from engine._search import SearchHit, SearchMode
from engine._status import Resolved, Status
from engine._survey import Survey, survey
from engine._workspace import Replay, Workspace
from indexers import Chunk, Span, TiktokenCounter, TokenCounter
from ledger import ToolResult

__all__ = [
    "Block",
    "CacheError",
    "Chunk",
    "Config",
    "ConfigError",
    "ContextPack",
    "ContextSettings",
    "Contribution",
    "CortexError",
    "EmbeddingModelError",
    "FeedbackResult",
    "Fusion",
    "GcReport",
    "IndexBusyError",
    "IndexNotBuiltError",
    "IndexReport",
    "IndexSchemaError",
    "IndexStateError",
    "Lane",
    "NullProgress",
    "PackSettings",
    "Pointer",
    "Progress",
    "RecallSettings",
    "Replay",
    "RerankWeights",
    "Resolved",
    "SearchHit",
    "SearchMode",
    "SessionState",
    "SignalKind",
    "Snippet",
    "Span",
    "Status",
    "Survey",
    "TiktokenCounter",
    "TokenCounter",
    "ToolResult",
    "ToolSignal",
    "Turn",
    "UnknownReplayKeyError",
    "Workspace",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "rank_files",
    "survey",
]
