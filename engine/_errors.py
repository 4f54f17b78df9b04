"""The one exception tree. Every failure cortex reports is one of these::

    CortexError
    ├── ConfigError (ValueError)          bad configuration or arguments
    │   └── UnknownReplayKeyError (LookupError)  no turn was recorded under that key
    ├── WorkspaceError (OSError)          the workspace cannot be read
    │   └── WorkspaceNotFoundError (FileNotFoundError)
    ├── IndexStateError                   the on-disk index cannot be used as it is
    │   ├── IndexNotBuiltError            nothing indexed yet: run `cortex index`
    │   ├── IndexSchemaError              an old or foreign layout: the message says how to rebuild
    │   └── IndexBusyError                another process is writing (pid and since when)
    ├── CacheError (ValueError)           the embedding cache file is not ours (engine._embedcache)
    └── EmbeddingModelError (LookupError) a model cannot be loaded offline (engine._embed)

The last two live beside the code that raises them and are re-exported by ``engine``.

Errors from the layers below (git, the file system) are translated once, at the engine's
boundary, with ``raise ... from exc``; the CLI maps each class to a message and an exit
code in one place (``engine.cli``).
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CortexError",
    "IndexBusyError",
    "IndexNotBuiltError",
    "IndexSchemaError",
    "IndexStateError",
    "UnknownReplayKeyError",
    "WorkspaceError",
    "WorkspaceNotFoundError",
]


class CortexError(Exception):
    """Base of every error cortex raises on purpose."""


class ConfigError(CortexError, ValueError):
    """A configuration value or argument is invalid; the message names it."""


class WorkspaceError(CortexError, OSError):
    """The workspace cannot be read."""


class WorkspaceNotFoundError(WorkspaceError, FileNotFoundError):
    """The workspace path does not exist."""


class IndexStateError(CortexError):
    """The on-disk index cannot be used as it is; the message says what to run."""


class IndexNotBuiltError(IndexStateError):
    """The workspace has no index yet."""


class IndexSchemaError(IndexStateError):
    """The index was written by another schema version or is not a cortex index."""


class IndexBusyError(IndexStateError):
    """Another process holds the writer lock."""


class UnknownReplayKeyError(ConfigError, LookupError):
    """No turn was recorded under the replay key (servers answer 404)."""
