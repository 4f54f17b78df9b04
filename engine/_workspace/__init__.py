"""The composition root: ``Workspace``, the facade over one folder's index, ledger,
sessions, notes and learning, and the collaborators it wires (one concept a module)."""

from engine._workspace._workspace import Workspace

__all__ = ["Workspace"]
