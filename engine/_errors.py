"""The one exception tree. Every failure cortex reports is one of these::

    CortexError
    ├── ConfigError (ValueError)          bad configuration or arguments
    └── WorkspaceError (OSError)          the workspace cannot be read
        └── WorkspaceNotFoundError (FileNotFoundError)

Errors from the layers below (git, the file system) are translated once, at the engine's
boundary, with ``raise ... from exc``; the CLI maps each class to a message and an exit
code in one place (``engine.cli``).
"""

from __future__ import annotations

__all__ = ["ConfigError", "CortexError", "WorkspaceError", "WorkspaceNotFoundError"]


class CortexError(Exception):
    """Base of every error cortex raises on purpose."""


class ConfigError(CortexError, ValueError):
    """A configuration value or argument is invalid; the message names it."""


class WorkspaceError(CortexError, OSError):
    """The workspace cannot be read."""


class WorkspaceNotFoundError(WorkspaceError, FileNotFoundError):
    """The workspace path does not exist."""
