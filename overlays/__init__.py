"""Per-branch copy-on-write overlays over a shared base index.

``overlays`` knows git and how to compose segments; it never builds one (``engine`` does):

- ``changed_paths`` and friends: which files of a working tree may differ from a base
  commit (committed on the branch, staged, unstaged, untracked), read with GitPython;
- ``Scope`` and ``Backend``: what one branch sees (base + overlay + tombstones) and the
  narrow protocol an index engine answers within a scope (BM25, dense, chunks, definitions,
  files); ``Embedded`` answers it over local segments (BM25 rescored with the scope's
  statistics), ``engine.backend`` from Qdrant;
- ``View``: a scope over a backend, what recall and packing ask;
- ``read_history``: which files changed together in the commits up to a commit (HEAD);
- ``check_proof``: proof of possession before text leaves the index.
"""

from overlays._bm25 import DocTerms, FieldStats, TableStats, TermTable, bm25, stored_length
from overlays._diff import (
    GitState,
    base_commit,
    changed_paths,
    checkout,
    commit_time_ns,
    git_state,
    live_refs,
    rev_parse,
    tree_token,
)
from overlays._embedded import Embedded
from overlays._git import (
    Hunk,
    diff_sides,
    git_tracks,
    head_commit,
    untracked_files,
    working_diff,
)
from overlays._history import HISTORY_COMMITS, HISTORY_MAX_FILES, ChangeHistory, read_history
from overlays._memory import OverlayMemory
from overlays._part import Found, Part
from overlays._scope import Backend, Scope, Table
from overlays._view import View

__all__ = [
    "HISTORY_COMMITS",
    "HISTORY_MAX_FILES",
    "Backend",
    "ChangeHistory",
    "DocTerms",
    "Embedded",
    "FieldStats",
    "Found",
    "GitState",
    "Hunk",
    "OverlayMemory",
    "Part",
    "Scope",
    "Table",
    "TableStats",
    "TermTable",
    "View",
    "base_commit",
    "bm25",
    "changed_paths",
    "checkout",
    "commit_time_ns",
    "diff_sides",
    "git_state",
    "git_tracks",
    "head_commit",
    "live_refs",
    "read_history",
    "rev_parse",
    "stored_length",
    "tree_token",
    "untracked_files",
    "working_diff",
]
