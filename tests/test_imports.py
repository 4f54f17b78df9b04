"""The import contract: which package may import which, read from the source of every module.

The allowed edges are DESIGN.md's tables, written here; a new arrow is a design change and
is made here on purpose. Imports inside ``TYPE_CHECKING`` blocks and functions count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eval.imports import cycles, part_of, read_graph

ROOT = Path(__file__).resolve().parents[1]

# engine's sub-packages (and its two top-level modules), leaves first.
ENGINE_ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "embed": {"core"},
    "segment": {"core"},
    "backend": {"core", "embed", "segment"},  # engines behind overlays.Backend (Qdrant)
    "index": {"core", "embed", "segment", "backend"},  # keeps a backend's layers fresh too
    "retrieval": {"core"},
    "packing": {"core", "retrieval", "embed"},  # never memory: its outputs arrive as data
    "memory": {"core"},
    "_workspace": {"core", "embed", "segment", "index", "retrieval", "packing", "memory"},
    "serve": {"core", "_workspace"},
    # The facade re-exports the public API from any part but the two shells.
    "engine": {"_workspace", "core", "embed", "segment", "index", "retrieval", "packing", "memory"},
    "cli": {"engine", "serve"},
}
# The top-level packages of the distribution, and which others each may import.
TOP_ALLOWED: dict[str, set[str]] = {
    "indexers": set(),
    "ledger": set(),
    "overlays": {"indexers"},
    "engine": {"indexers", "ledger", "overlays"},
    "eval": {"engine", "indexers", "ledger", "overlays"},
}


def test_every_engine_module_belongs_to_a_known_part() -> None:
    """Each module of engine is in a sub-package the contract names (no stray module)."""
    graph = read_graph(ROOT, "engine")
    unknown = sorted({part_of(m, "engine") for m in graph.edges} - set(ENGINE_ALLOWED))
    assert not unknown, f"parts missing from the contract: {unknown}"


def test_engine_parts_import_only_what_they_may() -> None:
    """No sub-package imports one the contract does not allow (e.g. retrieval -> serve)."""
    graph = read_graph(ROOT, "engine")
    bad = []
    for src, targets in sorted(graph.edges.items()):
        a = part_of(src, "engine")
        for dst in sorted(targets):
            b = part_of(dst, "engine")
            if a != b and b not in ENGINE_ALLOWED[a]:
                bad.append(f"{src} -> {dst}")
    assert not bad, "imports the contract forbids:\n" + "\n".join(bad)


def test_other_parts_are_reached_through_their_package() -> None:
    """A module imports another part's package (``engine.core``), never its private modules
    (``engine.core._errors``), so each package's ``__init__`` is its whole surface."""
    graph = read_graph(ROOT, "engine")
    bad = []
    for src, targets in sorted(graph.edges.items()):
        for dst in sorted(targets):
            a, b = part_of(src, "engine"), part_of(dst, "engine")
            private = dst.count(".") >= 2 and dst.split(".")[2].startswith("_")
            if a != b and private and b != "_workspace":
                bad.append(f"{src} -> {dst}")
    assert not bad, "reach past a package's __init__:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    """engine's modules form no cycle, counting imports under TYPE_CHECKING."""
    assert cycles(read_graph(ROOT, "engine").edges) == []


def _top_level_imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found & set(TOP_ALLOWED)


@pytest.mark.parametrize("package", sorted(TOP_ALLOWED))
def test_top_level_packages_import_only_what_they_may(package: str) -> None:
    """indexers and ledger import nothing of cortex, overlays only indexers, and so on."""
    assert _top_level_imports(package) - {package} <= TOP_ALLOWED[package]
