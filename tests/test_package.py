"""Package-level promises: a small sorted public surface, and imports that load nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
