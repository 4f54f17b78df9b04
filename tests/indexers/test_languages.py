"""Which language and doc type a path gets: source in a language with no grammar is code
(line windows, implementation prior), never lumped with data as ``plain``."""

from __future__ import annotations

import pytest

from indexers import Family, language_for_path
from indexers._doctype import doc_type_for


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("src/builtin.jq", "jq"),
        ("lua/init.lua", "lua"),
        ("core/src/Main.scala", "scala"),
        ("astropy/io/fits/_utils.pyx", "cython"),
        ("lib/app/router.ex", "elixir"),
        ("CMakeLists.txt", "cmake"),
        ("analysis/model.R", "r"),
    ],
)
def test_source_without_a_grammar_is_named_code(path: str, name: str) -> None:
    """A known source extension gets its language's name and no page doc type (so its
    sections count as implementation), not ``plain`` (which ranks as reference data)."""
    lang = language_for_path(path)
    assert (lang.name, lang.family) == (name, Family.OTHER)
    assert doc_type_for(path, lang) is None


@pytest.mark.parametrize("path", ["data/table.csv", "notes.txt", "config/app.yaml"])
def test_data_and_text_stay_reference(path: str) -> None:
    """Data, configuration and plain text are still documents, not code."""
    lang = language_for_path(path)
    assert doc_type_for(path, lang) is not None


def test_test_folders_still_win_for_any_language() -> None:
    """A file under tests/ is a test whatever its language."""
    lang = language_for_path("tests/test_parse.lua")
    assert doc_type_for("tests/test_parse.lua", lang) is not None
