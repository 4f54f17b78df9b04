"""Which language and doc type a path gets: source in a language with no grammar is code
(line windows, implementation prior), never lumped with data as ``plain``."""

from __future__ import annotations

import os
import signal

import pytest

from indexers import Family, language_for_file, language_for_path
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


@pytest.mark.parametrize(
    "head",
    [
        b"#pragma once\n#include <vector>\n",
        b"namespace fmt {\nint f();\n}\n",
        b"template <typename T>\nT max(T a, T b);\n",
        b"class Point {\n public:\n  int x;\n};\n",
        b"struct Derived : public Base {};\n",
        b"int Point::x() const;\n",
        b"using Names = std::vector<int>;\n",
    ],
)
def test_h_header_holding_cpp_is_cpp(head: bytes) -> None:
    """A ``.h`` whose head shows C++ is parsed, and named, as C++; the path alone says C."""
    assert language_for_file("include/fmt/core.h", head).name == "cpp"
    assert language_for_path("include/fmt/core.h").name == "c"


@pytest.mark.parametrize(
    "head",
    [
        b"#include <stdio.h>\ntypedef struct point { int x; } point;\n",
        b"/* This class of bugs: see std::vector docs.\n * namespace {\n */\nint f(void);\n",
        b"// template <typename T> in a comment\nint g(void);\n",
        b'#ifdef __cplusplus\n#include <atomic>\nextern "C" {\n#endif\nint h(void);\n'
        b"#ifdef __cplusplus\n}\n#endif\n",
    ],
)
def test_plain_c_header_stays_c(head: bytes) -> None:
    """A C header stays C: C++ words in comments or in its `#ifdef __cplusplus` blocks
    (written for C++ readers of a C file) do not make it C++."""
    assert language_for_file("src/sds.h", head).name == "c"
    assert language_for_file("src/sds.c", b"namespace x {\n}\n").name == "c"  # only `.h`


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_fork_during_a_grammar_load_leaves_the_child_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process forked while another of its threads loads a grammar inherits the loader's
    lock held: the child gets a fresh one and loads the grammar itself."""
    from indexers import _languages

    python = language_for_path("x.py")
    monkeypatch.setattr(_languages, "_grammars", {})
    with _languages._grammar_lock:  # as a thread mid-load holds it when another forks
        pid = os.fork()
        if pid == 0:  # the child: exits 0 once the grammar loads; SIGALRM kills it if it hangs
            signal.alarm(20)
            try:
                os._exit(0 if _languages.grammar(python) is not None else 2)
            finally:
                os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
