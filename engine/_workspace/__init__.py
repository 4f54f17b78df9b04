"""The composition root: ``Workspace``, the facade over one folder's index, ledger,
sessions, notes and learning, and the collaborators it wires (one concept a module)."""

from engine._workspace._workspace import Workspace
from engine.retrieval import inside_workspace  # the servers' check of a path, the library's

__all__ = ["Workspace", "inside_workspace"]
