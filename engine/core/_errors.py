"""The one exception tree. Every failure cortex reports on purpose is one of these::

    CortexError
    ├── ConfigError (ValueError)              bad configuration or arguments: the caller's to fix
    │   └── PayloadTooLargeError              a request over one of the servers' size limits
    ├── NotFoundError (LookupError)           the thing asked for does not exist
    │   └── UnknownReplayKeyError             no turn was recorded under that replay key
    ├── WorkspaceError (OSError)              the workspace cannot be read
    │   ├── WorkspaceNotFoundError (FileNotFoundError)
    │   └── WorkspaceClosedError              a call on a Workspace after its close()
    ├── IndexStateError                       the on-disk index cannot be used as it is
    │   ├── IndexNotBuiltError                nothing indexed yet: run `cortex index`
    │   ├── IndexSchemaError                  an old or foreign layout: the message says how
    │   │                                     to rebuild
    │   ├── IndexBusyError                    another process is writing (pid and since when)
    │   └── DenseIndexError (ValueError)      a dense index's files are missing, foreign or corrupt
    ├── BudgetUnreachableError (ValueError)   what must be kept does not fit the budget, even
    │                                         compacted: cortex refuses rather than truncates
    ├── CacheError (ValueError)               the embedding cache file is not ours or is damaged
    ├── EmbeddingModelError (LookupError)     a model cannot be loaded offline
    ├── LedgerStateError                      the evidence ledger cannot be read or written
    ├── RateLimitedError                      over the attest rate for one (actor, intent)
    └── MemoryStateError                      the memory store cannot be read or written

Errors from the layers below (git, the file system, the ``ledger`` package) are translated
once, where engine calls them, with ``raise ... from exc``. Each surface maps this tree in
exactly one place: the CLI to a one-line message and an exit code (``engine.cli``), HTTP to
a status and a JSON error body, MCP to a tool error with the same message (``engine.serve``).
"""

from __future__ import annotations

__all__ = [
    "BudgetUnreachableError",
    "CacheError",
    "ConfigError",
    "CortexError",
    "DenseIndexError",
    "EmbeddingModelError",
    "IndexBusyError",
    "IndexNotBuiltError",
    "IndexSchemaError",
    "IndexStateError",
    "LedgerStateError",
    "MemoryStateError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "UnknownReplayKeyError",
    "WorkspaceClosedError",
    "WorkspaceError",
    "WorkspaceNotFoundError",
]


class CortexError(Exception):
    """Base of every error cortex raises on purpose."""


class ConfigError(CortexError, ValueError):
    """A configuration value or argument is invalid; the message names it."""


class PayloadTooLargeError(ConfigError):
    """A request is over one of the servers' size limits (HTTP 413)."""


class NotFoundError(CortexError, LookupError):
    """What was asked for does not exist (HTTP 404)."""


class UnknownReplayKeyError(NotFoundError):
    """No turn was recorded under the replay key."""


class WorkspaceError(CortexError, OSError):
    """The workspace cannot be read."""


class WorkspaceNotFoundError(WorkspaceError, FileNotFoundError):
    """The workspace path does not exist."""


class WorkspaceClosedError(WorkspaceError):
    """The ``Workspace`` was closed: its calls would reopen what ``close`` released. Open
    the folder again (``Workspace.open``) to go on."""


class IndexStateError(CortexError):
    """The on-disk index cannot be used as it is; the message says what to run."""


class IndexNotBuiltError(IndexStateError):
    """The workspace has no index yet."""


class IndexSchemaError(IndexStateError):
    """The index was written by another schema version or is not a cortex index."""


class IndexBusyError(IndexStateError):
    """Another process holds the writer lock."""


class DenseIndexError(IndexStateError, ValueError):
    """A saved dense index cannot be used (missing, corrupt, other schema or model); the
    message names what differs and says to run ``cortex index --rebuild``."""


class BudgetUnreachableError(CortexError, ValueError):
    """What must be kept (pinned items, load-bearing turns, the stubs of the rest) does not
    fit the budget even at its most compact; nothing was truncated (HTTP 413)."""

    def __init__(self, message: str, needed: int = 0, budget: int = 0) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget


class CacheError(CortexError, ValueError):
    """A cache file is corrupt, foreign, from another schema, or closed; the message says
    which file, and deleting it is always safe (it is rebuilt on the next index)."""


class EmbeddingModelError(CortexError, LookupError):
    """An embedding model is not available offline (cortex never downloads one)."""


class LedgerStateError(CortexError):
    """The evidence ledger cannot be read or written (the message says why and where)."""


class RateLimitedError(CortexError):
    """Feedback with an outcome came faster than one (actor, intent) may attest; nothing
    was recorded or learned (HTTP 429). ``retry_after`` is in seconds."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MemoryStateError(CortexError):
    """The memory store (saved notes) cannot be read or written; the message names the file."""
