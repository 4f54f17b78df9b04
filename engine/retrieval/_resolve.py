"""Resolve: the indexed text behind a uri, only for a caller that proves it holds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from engine.core import SOURCE_URI, ConfigError, Resolved, page_text
from indexers import TokenCounter, sha256_text
from overlays import View

__all__ = ["URI", "relative_path", "resolve_in"]

URI = SOURCE_URI  # one pattern for every surface (engine.core)
_SHOWN_HASH = 12  # hex digits of a snippet's sha256 the prompt shows (``Hash: sha256:…``)


def relative_path(path: str) -> str:
    """``path`` as the index names it: forward slashes, no leading ``./``, ``../`` or
    ``/``; a leading dot of a name stays (``.github/ci.yml``, ``.eslintrc.js``)."""
    path = path.strip().replace("\\", "/").lstrip("/")
    while path.startswith(("./", "../")):
        path = path.split("/", 1)[1].lstrip("/")
    return path


def _proves(given: object, *shas: str) -> bool:
    """Whether ``given`` is one of ``shas``: whole, or as the prompt shows it (at least
    the first 12 hex digits, with or without ``sha256:``)."""
    value = str(given).strip().lower().removeprefix("sha256:")
    if len(value) < _SHOWN_HASH or not all(c in "0123456789abcdef" for c in value):
        return False
    return any(sha.startswith(value) for sha in shas)


def resolve_in(
    view: View, uri: str, proof: Mapping[str, str] | None, counter: TokenCounter
) -> Resolved:
    """``Workspace.resolve`` over ``view`` (see there)."""
    match = URI.match(uri.strip())
    if match is None:
        raise ConfigError(
            f"bad uri {uri!r}; use path#L10-L20, path#L10, path, memory:N or session:ID#N"
        )
    path = match["path"]
    record = view.files().get(path)
    if record is None:
        why = "not in the index (skipped, ignored, or never indexed)"
        return Resolved(uri, path, None, None, None, None, None, reason=why)
    lines = page_text(view.chunks_of(path)).split("\n")
    start = int(match["start"]) if match["start"] else 1
    end = int(match["end"]) if match["end"] else (start if match["start"] else record.line_count)
    if start < 1 or end < start:
        raise ConfigError(f"bad line range in {uri!r}; lines count from 1, start <= end")
    if start > record.line_count:
        why = f"the indexed file has only {record.line_count} lines"
        return Resolved(uri, path, start, end, None, None, record.license, reason=why)
    end = min(end, record.line_count)
    text = "\n".join(lines[start - 1 : end])
    sha = sha256_text(text)
    meta = Resolved(uri, path, start, end, sha, counter.count(text), record.license)
    if proof is None:
        return replace(meta, reason="metadata only: no proof of possession given")
    if relative_path(str(proof.get("path", ""))) != path:
        return replace(meta, reason=f"metadata only: the proof is for {proof.get('path')!r}")
    if not _proves(proof.get("sha256", ""), sha, record.content_sha256):
        return replace(meta, reason="metadata only: the proof does not match the indexed "
                       "content (changed since, or another version)")  # fmt: skip
    return replace(meta, text=text, reason="proof matches the indexed content")
