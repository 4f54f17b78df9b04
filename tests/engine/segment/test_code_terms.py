"""The code-aware analyser: identifiers whole and split (snake, camel, acronyms, dots)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.segment import MAX_QUERY_TERMS, MAX_TERM_CHARS, code_terms, query_terms

# --- code_terms ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("register_hook", "register_hook register hook"),
        ("registerHook", "registerhook register hook"),
        ("RegisterHook", "registerhook register hook"),
        ("HTTPServerError", "httpservererror http server error"),
        ("getHTTPResponse2", "gethttpresponse2 get http response2"),
        ("IOError", "ioerror io error"),
        ("MD5Hash", "md5hash md5 hash"),
        ("x86_64", "x86_64 x86 64"),
        ("int32_t", "int32_t int32"),
        ("os.path.join", "os path join"),
        ("__init__", "init"),
        ("_private_helper", "private_helper private helper"),
        ("SCREAMING_CASE", "screaming_case screaming case"),
        ("x = y + 1", ""),
        ("getX", "getx get"),
        ("port 8080", "port 8080"),
        ("", ""),
        ("(){}[]:;'\"", ""),
    ],
)
def test_code_terms_cases(text: str, expected: str) -> None:
    """Identifiers are kept whole and split at snake, camel and acronym boundaries."""
    assert code_terms(text) == expected


def test_code_terms_long_words() -> None:
    """Past MAX_TERM_CHARS a blob gives nothing; a long snake_case name keeps its parts."""
    assert code_terms("aB3" * 30) == ""
    assert code_terms("b" * MAX_TERM_CHARS) == "b" * MAX_TERM_CHARS
    long_name = "test_server_returns_not_found_when_the_resource_was_deleted_long_ago"
    assert len(long_name) > MAX_TERM_CHARS
    assert code_terms(long_name) == long_name.replace("_", " ")


def test_code_terms_unicode_names() -> None:
    """Non-ASCII letters stay inside their word instead of splitting it."""
    assert code_terms("naïve_café Straße 变量名") == "naïve_café naïve café straße 变量名"


@given(st.text())
def test_code_terms_any_text(text: str) -> None:
    """Any text gives space-separated terms of 2..MAX_TERM_CHARS characters, no whitespace."""
    out = code_terms(text)
    terms = out.split()
    assert " ".join(terms) == out
    assert all(2 <= len(t) <= MAX_TERM_CHARS for t in terms)


def test_query_terms_dedupe_and_cap() -> None:
    """Query terms are distinct, in first-seen order, and capped at MAX_QUERY_TERMS."""
    assert query_terms("hook register_hook hook") == ["hook", "register_hook", "register"]
    many = " ".join(f"name{i}" for i in range(MAX_QUERY_TERMS + 10))
    assert query_terms(many) == [f"name{i}" for i in range(MAX_QUERY_TERMS)]
