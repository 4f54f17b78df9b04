"""Package-level promises: a small sorted public surface, imports that load nothing, and a
wheel that tells type checkers it is typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("engine", "indexers", "overlays", "ledger")
HEAVY = ("tree_sitter", "tiktoken", "git", "torch", "tantivy", "faiss", "sentence_transformers")


@pytest.mark.parametrize("package", ["engine", "indexers", "overlays", "ledger"])
def test_import_loads_no_heavy_module(package: str) -> None:
    """Importing a cortex package loads none of the heavy backends (they load on use)."""
    code = f"import sys, {package}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


@pytest.mark.parametrize("package", ["engine", "indexers", "overlays", "ledger"])
def test_all_names_exist(package: str) -> None:
    """Every name in __all__ is importable and listed once."""
    module = __import__(package)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


# The public names of ``engine`` before it was split into sub-packages: all must stay.
ENGINE_NAMES_BEFORE_RESTRUCTURE = (
    "Block", "CacheError", "Chunk", "Config", "ConfigError", "ContextPack", "ContextSettings",
    "Contribution", "CortexError", "EmbeddingModelError", "FeedbackResult", "Fusion",
    "GcReport", "IndexBusyError", "IndexNotBuiltError", "IndexReport", "IndexSchemaError",
    "IndexStateError", "Lane", "NullProgress", "PackSettings", "Pointer", "Progress",
    "RecallSettings", "Replay", "RerankWeights", "Resolved", "SearchHit", "SearchMode",
    "SessionState", "SignalKind", "Snippet", "Span", "Status", "Survey", "TiktokenCounter",
    "TokenCounter", "ToolResult", "ToolSignal", "Turn", "UnknownReplayKeyError", "Workspace",
    "WorkspaceError", "WorkspaceNotFoundError", "rank_files", "survey",
)  # fmt: skip
SURFACES = (
    "engine", "engine.core", "engine.embed", "engine.segment", "engine.index",
    "engine.retrieval", "engine.packing", "engine.memory", "engine.serve", "engine.cli",
    "indexers", "overlays", "ledger",
)  # fmt: skip


def test_engine_names_come_from_where_type_checkers_read_them() -> None:
    """``engine`` imports each public name on first use (so ``import engine`` and the
    ``cortex`` command's start load nothing): each must be the very object its
    ``TYPE_CHECKING`` import names, and ``import engine`` alone loads none of the parts."""
    import ast
    import importlib
    from pathlib import Path

    import engine

    tree = ast.parse(Path(engine.__file__).read_text("utf-8"))
    declared = {alias.name: node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module
                for alias in node.names}  # fmt: skip
    assert set(declared) == set(engine.__all__)
    for name, home in declared.items():
        assert getattr(engine, name) is getattr(importlib.import_module(home), name), name
    code = ("import sys, engine; "
            "print([m for m in sys.modules if m[:7] == 'engine.' or m == 'numpy'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_engine_keeps_every_public_name() -> None:
    """``from engine import X`` works for every name it exported before the restructure."""
    import engine

    missing = [n for n in ENGINE_NAMES_BEFORE_RESTRUCTURE if n not in engine.__all__]
    assert not missing


@pytest.mark.parametrize("name", SURFACES)
def test_all_is_sorted_and_complete(name: str) -> None:
    """Each package's ``__all__`` is sorted (constants, classes, then functions, as ruff
    sorts it) and names exactly what its ``__init__`` binds, submodules aside."""
    import importlib
    import types

    module = importlib.import_module(name)
    names = list(module.__all__)
    for n in names:  # bound on first use where a package imports lazily (engine)
        getattr(module, n)
    key = sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n))
    assert names == key, f"{name}.__all__ is not sorted"
    bound = {
        n
        for n, value in vars(module).items()
        if not n.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(names) == bound, f"{name}: bound but not exported {sorted(bound - set(names))}, " \
        f"exported but not bound {sorted(set(names) - bound)}"  # fmt: skip


def test_the_wheel_marks_every_package_typed(tmp_path: Path) -> None:
    """The built wheel holds a PEP 561 ``py.typed`` in each top-level package, so a user's
    mypy reads cortex's types (without it: "missing library stubs or py.typed marker").
    Built from a copy of the tree (setuptools writes build folders beside the sources)."""
    import shutil
    import zipfile

    top = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(top / name, src / name)
    for package in PACKAGES:
        shutil.copytree(top / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    out = tmp_path / "dist"
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True,
                          text=True, check=True)  # fmt: skip
    wheel = out / proc.stdout.strip().splitlines()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"{p}/py.typed" for p in PACKAGES} <= names
