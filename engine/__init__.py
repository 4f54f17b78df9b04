"""cortex's engine: configuration, indexes, the public ``Workspace`` API and the CLI.

Importing it is free: each name below is imported on first use (PEP 562), so ``import
engine`` (and the ``cortex`` command's start) loads no model, index, tree-sitter, tiktoken
or numpy until a name is used.
The names below are the public API; the sub-packages (``engine.core``, ``engine.embed``,
``engine.segment``, ``engine.index``, ``engine.retrieval``, ``engine.packing``,
``engine.memory``, ``engine.serve``, ``engine.cli``) are its parts, by role.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from engine._workspace import Workspace
    from engine.core import (
        DEFAULT_BUNDLE_BUDGET,
        MAX_BUNDLE_BUDGET,
        Block,
        BudgetUnreachableError,
        Bundle,
        BundleItem,
        CacheError,
        Checkpoint,
        CodeLink,
        Compaction,
        Config,
        ConfigError,
        ConfigWarning,
        ContextPack,
        ContextSettings,
        Contribution,
        CortexError,
        DenseIndexError,
        Edge,
        EdgeKind,
        EmbeddingModelError,
        FailureReason,
        FeedbackResult,
        FileHit,
        FileRanking,
        ForgetReport,
        Fusion,
        GcReport,
        GraphNode,
        HistoryLane,
        Importance,
        IndexBusyError,
        IndexNotBuiltError,
        IndexReport,
        IndexSchemaError,
        IndexStateError,
        Lane,
        Learned,
        LearnSettings,
        LedgerStateError,
        LinkCheck,
        LinkState,
        MemoryStateError,
        MemoryStats,
        Note,
        NoteGraph,
        NoteHit,
        NoteType,
        NotFoundError,
        NullProgress,
        Outcome,
        PackSettings,
        PastOutcome,
        PayloadTooLargeError,
        Pointer,
        Progress,
        RateLimitedError,
        Recalled,
        RecallSettings,
        Replay,
        RerankWeights,
        Resolved,
        SaveAction,
        SaveResult,
        Scope,
        SearchHit,
        SearchMode,
        SessionState,
        SignalKind,
        Snippet,
        Status,
        Step,
        StepRole,
        Stub,
        Tier,
        ToolSignal,
        Turn,
        UnknownReplayKeyError,
        WorkspaceClosedError,
        WorkspaceError,
        WorkspaceNotFoundError,
        uri_path,
    )
    from engine.index import MANIFEST_SCHEMA, Survey, survey
    from engine.memory import Memory, Session
    from engine.retrieval import rank_files
    from indexers import Chunk, Span, TiktokenCounter, TokenCounter
    from ledger import ToolResult

# The modules the names above come from, lightest first: a name is taken from the first
# that has it (``test_imports`` checks each public name resolves to its own object).
_HOMES = ("engine.core", "ledger", "indexers", "engine.retrieval", "engine.memory",
          "engine.index", "engine._workspace")  # fmt: skip


def __getattr__(name: str) -> _typing.Any:
    """A public name, imported from its module on first use and kept."""
    if name in __all__:
        for home in _HOMES:
            module = _importlib.import_module(home)
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "DEFAULT_BUNDLE_BUDGET",
    "MANIFEST_SCHEMA",
    "MAX_BUNDLE_BUDGET",
    "Block",
    "BudgetUnreachableError",
    "Bundle",
    "BundleItem",
    "CacheError",
    "Checkpoint",
    "Chunk",
    "CodeLink",
    "Compaction",
    "Config",
    "ConfigError",
    "ConfigWarning",
    "ContextPack",
    "ContextSettings",
    "Contribution",
    "CortexError",
    "DenseIndexError",
    "Edge",
    "EdgeKind",
    "EmbeddingModelError",
    "FailureReason",
    "FeedbackResult",
    "FileHit",
    "FileRanking",
    "ForgetReport",
    "Fusion",
    "GcReport",
    "GraphNode",
    "HistoryLane",
    "Importance",
    "IndexBusyError",
    "IndexNotBuiltError",
    "IndexReport",
    "IndexSchemaError",
    "IndexStateError",
    "Lane",
    "LearnSettings",
    "Learned",
    "LedgerStateError",
    "LinkCheck",
    "LinkState",
    "Memory",
    "MemoryStateError",
    "MemoryStats",
    "NotFoundError",
    "Note",
    "NoteGraph",
    "NoteHit",
    "NoteType",
    "NullProgress",
    "Outcome",
    "PackSettings",
    "PastOutcome",
    "PayloadTooLargeError",
    "Pointer",
    "Progress",
    "RateLimitedError",
    "RecallSettings",
    "Recalled",
    "Replay",
    "RerankWeights",
    "Resolved",
    "SaveAction",
    "SaveResult",
    "Scope",
    "SearchHit",
    "SearchMode",
    "Session",
    "SessionState",
    "SignalKind",
    "Snippet",
    "Span",
    "Status",
    "Step",
    "StepRole",
    "Stub",
    "Survey",
    "Tier",
    "TiktokenCounter",
    "TokenCounter",
    "ToolResult",
    "ToolSignal",
    "Turn",
    "UnknownReplayKeyError",
    "Workspace",
    "WorkspaceClosedError",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "rank_files",
    "survey",
    "uri_path",
]
