"""A page's ``DocType`` from its path: tests, examples, tutorials, reference, code."""

from __future__ import annotations

import posixpath
import re

from indexers._chunk import DocType
from indexers._languages import Family, Language

__all__ = ["doc_type_for"]

_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "testdata"})
_TEST_FILE = re.compile(
    r"^(test_.*\.py|.*_test\.(py|go|rs|c|cc|cpp)|conftest\.py|.*\.(test|spec)\.[jt]sx?"
    r"|Test.*\.java|.*Tests?\.(java|cs|kt|swift|php)|.*_(spec|test)\.rb|tests\.rs)$"
)
_EXAMPLE_DIRS = frozenset({"example", "examples", "sample", "samples", "demo", "demos"})
# Project-history and meta files, whatever their extension (CHANGES.old, NEWS.txt, ...).
_META_NAME = re.compile(
    r"^(changes|changelog|history|news|authors|contributors|contributing|license|licence|"
    r"copying|notice|code_of_conduct|governance|security)([._-].*)?$",
    re.I,
)
# Data and configuration formats: evidence about settings, not about behaviour.
_DATA_LANGUAGES = frozenset({"json", "yaml", "toml", "ini", "xml", "plain"})
_TUTORIAL_DIRS = frozenset(
    {
        "tutorial",
        "tutorials",
        "guide",
        "guides",
        "howto",
        "how-to",
        "getting-started",
        "getting_started",
        "quickstart",
        "usage",
        "user-guide",
        "user_guide",
    }
)


def doc_type_for(path: str, language: Language) -> DocType | None:
    """The doc type every section of ``path`` shares, or None for source code whose sections
    decide for themselves (definition or implementation)."""
    parts = path.lower().split("/")
    dirs, name = parts[:-1], posixpath.basename(path)
    if any(d in _TEST_DIRS for d in dirs) or _TEST_FILE.match(name):
        return DocType.TEST
    if any(d in _EXAMPLE_DIRS for d in dirs) or name.lower().startswith("example"):
        return DocType.EXAMPLE
    if _META_NAME.match(name) or language.name in _DATA_LANGUAGES:
        return DocType.REFERENCE
    if language.family in (Family.DOC, Family.TEXT):
        if any(d in _TUTORIAL_DIRS for d in dirs) or any(
            t in name.lower() for t in ("tutorial", "quickstart", "getting-started", "howto")
        ):
            return DocType.TUTORIAL
        return DocType.REFERENCE
    return None
