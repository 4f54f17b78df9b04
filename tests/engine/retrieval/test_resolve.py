"""Resolve: text only for a caller that proves it holds it, metadata otherwise."""

from __future__ import annotations

import hashlib

import pytest

from engine.core import ConfigError
from engine.retrieval import resolve_in
from indexers import WordCounter, sha256_text
from tests.engine.records import DictView, chunk

SOURCE = "def a():\n    return 1\n\n\ndef b():\n    return 2"
VIEW = DictView(
    [chunk("m.py", "def a():\n    return 1"), chunk("m.py", "def b():\n    return 2", start=5)],
    files={"m.py": SOURCE.encode()},
)
COUNTER = WordCounter()


def _resolve(uri: str, proof: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return resolve_in(VIEW, uri, proof, COUNTER)  # type: ignore[arg-type]


def test_metadata_without_a_proof() -> None:
    """No proof: where, what hash, how big, and why there is no text."""
    got = _resolve("m.py#L5-L6")
    assert got.text is None and got.sha256 == sha256_text("def b():\n    return 2")
    assert (got.start_line, got.end_line, got.license) == (5, 6, "MIT")
    assert "no proof" in got.reason


def test_a_matching_proof_gets_the_text() -> None:
    """The lines' sha256 (what a citation carries) or the file's sha256 unlocks the text."""
    lines = sha256_text("def b():\n    return 2")
    assert (
        _resolve("m.py#L5-L6", {"path": "m.py", "sha256": lines}).text == "def b():\n    return 2"
    )
    whole = hashlib.sha256(SOURCE.encode()).hexdigest()
    assert _resolve("m.py", {"path": "m.py", "sha256": whole}).text == SOURCE


def test_a_wrong_proof_gets_metadata_only_and_one_for_another_path_is_refused() -> None:
    """A proof for other content is metadata with the reason; a proof for another path is
    the caller's mistake, refused as MCP and HTTP refuse it (even for an unindexed path)."""
    assert "does not match" in _resolve("m.py#L1", {"path": "m.py", "sha256": "0" * 64}).reason
    for uri in ("m.py#L1", "other.py"):
        with pytest.raises(ConfigError, match=r"the proof is for 'x\.py', not"):
            _resolve(uri, {"path": "x.py", "sha256": "0" * 64})


def test_unknown_paths_lines_past_the_end_and_bad_uris() -> None:
    """An unindexed path and lines the file lacks are metadata; a malformed uri raises."""
    assert "not in the index" in _resolve("other.py").reason
    assert "only 6 lines" in _resolve("m.py#L9-L12").reason
    with pytest.raises(ConfigError):
        _resolve("m.py#L3-L1")
    with pytest.raises(ConfigError):
        _resolve("#L3")


def test_a_dotfile_and_the_hash_the_prompt_shows_are_proofs() -> None:
    """A proof for ``.github/ci.yml`` is for that path (it was read as ``github/ci.yml``);
    the hash as the prompt shows it (``sha256:`` and its first 12 hex digits) proves the
    lines, a shorter or another prefix does not."""
    text = "on: push\njobs: {}"
    view = DictView([chunk(".github/ci.yml", text)], files={".github/ci.yml": text.encode()})
    sha = sha256_text(text)

    def resolve(proof: dict[str, str]):  # type: ignore[no-untyped-def]
        return resolve_in(view, ".github/ci.yml#L1-L2", proof, COUNTER)  # type: ignore[arg-type]

    for path in (".github/ci.yml", "./.github/ci.yml", "/.github/ci.yml"):
        assert resolve({"path": path, "sha256": sha}).text == text, path
    assert resolve({"path": ".github/ci.yml", "sha256": f"sha256:{sha[:12]}"}).text == text
    assert resolve({"path": ".github/ci.yml", "sha256": sha[:12].upper()}).text == text
    for weak in (sha[:11], "0" * 12, f"sha256:{sha[:8]}", ""):
        assert resolve({"path": ".github/ci.yml", "sha256": weak}).text is None, weak
