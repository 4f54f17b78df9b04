"""The language registry: which chunker reads a file, and which grammar it parses with.

Grammars come from the official per-language wheels (``tree-sitter-python`` …), imported on
first use, never downloaded.
"""

from __future__ import annotations

import importlib
import os
import posixpath
import re
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

__all__ = [
    "Family",
    "GrammarNotInstalledError",
    "Language",
    "language_for_file",
    "language_for_path",
    "languages",
]


class Family(StrEnum):
    """Which chunker a language goes to."""

    CODE = "code"  # tree-sitter sections
    DOC = "doc"  # heading sections
    TEXT = "text"  # paragraphs
    OTHER = "other"  # line windows


class GrammarNotInstalledError(LookupError):
    """The grammar wheel for a language is not installed (the file falls back to windows)."""


@dataclass(frozen=True, slots=True)
class Language:
    """A language the indexers know by file name."""

    name: str
    family: Family
    extensions: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    grammar: str = ""  # "module:function" returning the tree-sitter language pointer


_LANGUAGES: tuple[Language, ...] = (
    Language("python", Family.CODE, (".py", ".pyi", ".pyw"), grammar="tree_sitter_python:language"),
    Language(
        "javascript",
        Family.CODE,
        (".js", ".mjs", ".cjs", ".jsx"),
        grammar="tree_sitter_javascript:language",
    ),
    Language(
        "typescript",
        Family.CODE,
        (".ts", ".mts", ".cts"),
        grammar="tree_sitter_typescript:language_typescript",
    ),
    Language("tsx", Family.CODE, (".tsx",), grammar="tree_sitter_typescript:language_tsx"),
    Language("go", Family.CODE, (".go",), grammar="tree_sitter_go:language"),
    Language("rust", Family.CODE, (".rs",), grammar="tree_sitter_rust:language"),
    Language("java", Family.CODE, (".java",), grammar="tree_sitter_java:language"),
    Language("c", Family.CODE, (".c", ".h"), grammar="tree_sitter_c:language"),
    Language(
        "cpp",
        Family.CODE,
        (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp", ".inl", ".tpp"),
        grammar="tree_sitter_cpp:language",
    ),
    Language("php", Family.CODE, (".php",), grammar="tree_sitter_php:language_php"),
    Language(
        "ruby",
        Family.CODE,
        (".rb", ".rake", ".gemspec"),
        filenames=("Rakefile", "Gemfile"),
        grammar="tree_sitter_ruby:language",
    ),
    Language("csharp", Family.CODE, (".cs", ".csx"), grammar="tree_sitter_c_sharp:language"),
    Language("kotlin", Family.CODE, (".kt", ".kts"), grammar="tree_sitter_kotlin:language"),
    Language("swift", Family.CODE, (".swift",), grammar="tree_sitter_swift:language"),
    Language("markdown", Family.DOC, (".md", ".markdown", ".mdx", ".mkd")),
    Language("rst", Family.DOC, (".rst", ".rest")),
    Language(
        "text",
        Family.TEXT,
        (".txt", ".text"),
        filenames=("README", "CHANGES", "CHANGELOG", "NEWS", "AUTHORS", "CONTRIBUTING", "HISTORY"),
    ),
    Language("shell", Family.OTHER, (".sh", ".bash", ".zsh")),
    Language("json", Family.OTHER, (".json", ".jsonl")),
    Language("yaml", Family.OTHER, (".yml", ".yaml")),
    Language("toml", Family.OTHER, (".toml",)),
    Language("ini", Family.OTHER, (".ini", ".cfg", ".conf")),
    Language("html", Family.OTHER, (".html", ".htm", ".xhtml")),
    Language("css", Family.OTHER, (".css", ".scss", ".less")),
    Language("xml", Family.OTHER, (".xml", ".xsd", ".xsl", ".svg")),
    Language("sql", Family.OTHER, (".sql",)),
    Language("make", Family.OTHER, (".mk",), filenames=("Makefile", "GNUmakefile")),
    Language("docker", Family.OTHER, filenames=("Dockerfile",)),
    # Source code with no grammar wheel here: line windows, but code, not "plain" (which
    # the rerank treats as data and reference). Named, so the prompt's fences say which.
    *(
        Language(name, Family.OTHER, exts, filenames=names)
        for name, exts, names in (
            ("lua", (".lua",), ()),
            ("scala", (".scala", ".sc"), ()),
            ("elixir", (".ex", ".exs"), ()),
            ("erlang", (".erl", ".hrl"), ()),
            ("perl", (".pl", ".pm", ".t"), ()),
            ("zig", (".zig",), ()),
            ("haskell", (".hs", ".lhs"), ()),
            ("r", (".r",), ()),
            ("dart", (".dart",), ()),
            ("jq", (".jq",), ()),
            ("ocaml", (".ml", ".mli"), ()),
            ("fsharp", (".fs", ".fsi", ".fsx"), ()),
            ("clojure", (".clj", ".cljs", ".cljc"), ()),
            ("julia", (".jl",), ()),
            ("nim", (".nim",), ()),
            ("groovy", (".groovy", ".gradle"), ()),
            ("powershell", (".ps1", ".psm1"), ()),
            ("lisp", (".el", ".lisp", ".lsp", ".scm", ".ss", ".rkt"), ()),
            ("tcl", (".tcl",), ()),
            ("fortran", (".f", ".f90", ".f95", ".f03", ".for"), ()),
            ("objc", (".m", ".mm"), ()),
            ("asm", (".s", ".asm"), ()),
            ("cython", (".pyx", ".pxd", ".pxi"), ()),
            ("protobuf", (".proto",), ()),
            ("graphql", (".graphql", ".gql"), ()),
            ("solidity", (".sol",), ()),
            ("nix", (".nix",), ()),
            ("hcl", (".tf", ".hcl"), ()),
            ("vim", (".vim",), ()),
            ("cmake", (".cmake",), ("CMakeLists.txt",)),
            ("vue", (".vue", ".svelte"), ()),
        )
    ),
)

_PLAIN = Language("plain", Family.OTHER)
_BY_EXT = {ext: lang for lang in _LANGUAGES for ext in lang.extensions}
_BY_NAME = {name: lang for lang in _LANGUAGES for name in lang.filenames}
_CPP = next(lang for lang in _LANGUAGES if lang.name == "cpp")
# `.h` is C's header extension, and C++ projects use it as well (fmt, LLVM, Qt): the C
# grammar reads their namespaces and classes as errors. The file's head decides.
_HEADER_SNIFF_BYTES = 8192
# Lines only C++ writes (outside comments: a line starting `//`, `/*` or `*` never matches).
_CPP_LINE = re.compile(
    rb"^[ \t]*(?!//|/?\*)(?:namespace(?:\s+[\w:]+)?\s*\{"  # `namespace fmt {`, `namespace {`
    rb"|using\s+namespace\b"
    rb"|template\s*<"
    rb"|class\s+\w+(?:\s+final)?\s*[:{]"  # `class Foo {`, `class Foo : public Base`
    rb"|struct\s+\w+(?:\s+final)?\s*:\s*(?:public|protected|private|virtual)\b"
    rb"|(?:public|protected|private)\s*:"
    rb"|#\s*include\s*<[\w/]+>"  # <vector>, <memory>: C++'s library headers have no `.h`
    rb"|(?:[\w<>,*&]+\s+)+[*&]?\w+::~?\w+\s*\("  # `void Foo::bar(`: a member defined
    rb"|.*\bstd::\w)",
)
# A C header's `#ifdef __cplusplus` block (`extern "C" {`, `#include <atomic>`) is for C++
# readers of a C file: it says nothing about what the file is.
_CPLUSPLUS_IF = re.compile(rb"^[ \t]*#[ \t]*if.*__cplusplus")
_PREPROC_IF = re.compile(rb"^[ \t]*#[ \t]*if")
_PREPROC_ENDIF = re.compile(rb"^[ \t]*#[ \t]*endif")
_grammar_lock = threading.Lock()
_grammars: dict[str, tree_sitter.Language] = {}


def _after_fork() -> None:
    """In a forked child: a fresh loader lock (a thread of the parent may have held it);
    a grammar half-loaded at the fork was never published."""
    global _grammar_lock
    _grammar_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork)


def languages() -> tuple[Language, ...]:
    """Every registered language (for docs and ``--help``)."""
    return _LANGUAGES


def language_for_path(path: str) -> Language:
    """The language of a workspace-relative path; ``plain`` when nothing matches."""
    base = posixpath.basename(path)
    if base in _BY_NAME:
        return _BY_NAME[base]
    stem, ext = posixpath.splitext(base)
    if ext.lower() in _BY_EXT:
        return _BY_EXT[ext.lower()]
    if stem.upper() in _BY_NAME and not ext:
        return _BY_NAME[stem.upper()]
    return _PLAIN


def language_for_file(path: str, data: bytes) -> Language:
    """The language of a file from its path and, where the path leaves it open, its bytes:
    a ``.h`` whose head is C++ (``namespace``, ``class X {``, ``template <``, ``std::``,
    ``#include <vector>``) is C++; any other ``.h`` is C.

    >>> language_for_file("fmt/core.h", b"namespace fmt {\\n}\\n").name
    'cpp'
    >>> language_for_file("sds.h", b"typedef char *sds;\\n").name
    'c'
    """
    lang = language_for_path(path)
    if lang.name == "c" and posixpath.splitext(path)[1].lower() == ".h" and _is_cpp(data):
        return _CPP
    return lang


def _is_cpp(data: bytes) -> bool:
    """Whether a header's first bytes hold a line only C++ writes, outside the blocks a C
    header keeps for C++ readers."""
    guarded = 0  # depth inside an `#if … __cplusplus` block
    for line in data[:_HEADER_SNIFF_BYTES].splitlines():
        if guarded:
            if _PREPROC_IF.match(line):
                guarded += 1
            elif _PREPROC_ENDIF.match(line):
                guarded -= 1
        elif _CPLUSPLUS_IF.match(line):
            guarded = 1
        elif _CPP_LINE.match(line):
            return True
    return False


def grammar(lang: Language) -> tree_sitter.Language:
    """The tree-sitter grammar of ``lang``, loaded once per process.

    Raises ``GrammarNotInstalledError`` when the language has no grammar or its wheel is missing.
    """
    cached = _grammars.get(lang.name)
    if cached is not None:
        return cached
    if not lang.grammar:
        raise GrammarNotInstalledError(f"no tree-sitter grammar registered for {lang.name}")
    module_name, _, func = lang.grammar.partition(":")
    with _grammar_lock:
        if lang.name not in _grammars:
            import tree_sitter

            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise GrammarNotInstalledError(
                    f"grammar for {lang.name} is not installed "
                    f"(pip install {module_name.replace('_', '-')})"
                ) from exc
            _grammars[lang.name] = tree_sitter.Language(getattr(module, func)())
    return _grammars[lang.name]
