"""cortex's engine: configuration, the public API and the command line.

Importing it is free: no model, index, tree-sitter or tiktoken is loaded until used.
"""

from engine._config import Config
from engine._errors import ConfigError, CortexError, WorkspaceError, WorkspaceNotFoundError
from engine._survey import Survey, survey

__all__ = [
    "Config",
    "ConfigError",
    "CortexError",
    "Survey",
    "WorkspaceError",
    "WorkspaceNotFoundError",
    "survey",
]
