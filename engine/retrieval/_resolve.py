"""Resolve: the indexed text behind a uri, only for a caller that proves it holds it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from engine.core import ConfigError, Resolved, page_text
from indexers import TokenCounter, sha256_text
from overlays import View

__all__ = ["URI", "resolve_in"]

URI = re.compile(r"^(?P<path>[^#]+?)(?:#L(?P<start>\d+)(?:-L?(?P<end>\d+))?)?$")


def resolve_in(
    view: View, uri: str, proof: Mapping[str, str] | None, counter: TokenCounter
) -> Resolved:
    """``Workspace.resolve`` over ``view`` (see there)."""
    match = URI.match(uri.strip())
    if match is None:
        raise ConfigError(f"bad uri {uri!r}; use path#L10-L20, path#L10 or path")
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
    if proof.get("path", "").strip().lstrip("./") != path:
        return replace(meta, reason=f"metadata only: the proof is for {proof.get('path')!r}")
    if str(proof.get("sha256", "")).lower() not in (sha, record.content_sha256):
        return replace(meta, reason="metadata only: the proof does not match the indexed "
                       "content (changed since, or another version)")  # fmt: skip
    return replace(meta, text=text, reason="proof matches the indexed content")
