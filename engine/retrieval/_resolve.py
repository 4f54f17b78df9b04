"""Resolve: the indexed text behind a uri, only for a caller that proves it holds it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath

from engine.core import SOURCE_URI, ConfigError, Resolved, page_text
from indexers import TokenCounter, sha256_text
from overlays import View

__all__ = ["URI", "inside_workspace", "relative_path", "resolve_in"]

URI = SOURCE_URI  # one pattern for every surface (engine.core)
_SHOWN_HASH = 12  # hex digits of a snippet's sha256 the prompt shows (``Hash: sha256:…``)


def relative_path(path: str) -> str:
    """``path`` as the index names it: forward slashes, no leading ``./``, ``../`` or
    ``/``; a leading dot of a name stays (``.github/ci.yml``, ``.eslintrc.js``)."""
    path = path.strip().replace("\\", "/").lstrip("/")
    while path.startswith(("./", "../")):
        path = path.split("/", 1)[1].lstrip("/")
    return path


def inside_workspace(root: Path, state_dir: Path, rel: str) -> tuple[str, Path]:
    """``rel`` (a path a caller asks to resolve) as the index names it, and where it is
    on disk; a ``ConfigError`` for a path that is no path, absolute, with ``..``, a link
    that leads out, or one outside ``root`` (the resolved workspace) or inside its
    ``state_dir``: the same refusal on every surface, where the library answered
    "not in the index" for ``/etc/passwd``."""
    if "\0" in rel or any(0xD800 <= ord(c) <= 0xDFFF for c in rel):
        raise ConfigError(f"{rel!r} is not a path (a NUL or a lone surrogate in it)")
    posix = PurePosixPath(rel.strip().replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts or re.match(r"^[A-Za-z]:", str(posix)):
        raise ConfigError(f"{rel!r} must be a path inside the workspace, without '..'")
    # The folders resolved, the name kept: a symlinked file is indexed under its own name
    # (resolving it named its target, which the index does not hold).
    whole = root / posix
    path = whole.resolve() if whole == root else whole.parent.resolve() / whole.name
    if path.is_symlink() and not path.resolve().is_relative_to(root):
        raise ConfigError(f"{rel!r} leads outside the workspace")
    if not path.is_relative_to(root) or path.is_relative_to(state_dir.resolve()):
        raise ConfigError(f"{rel!r} is outside the workspace")
    return path.relative_to(root).as_posix(), path


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
    if proof is not None and relative_path(str(proof.get("path", ""))) != path:
        # A caller's mistake, said as on every surface (not a metadata answer).
        raise ConfigError(f"the proof is for {proof.get('path')!r}, not {path!r}")
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
    if not _proves(proof.get("sha256", ""), sha, record.content_sha256):
        return replace(meta, reason="metadata only: the proof does not match the indexed "
                       "content (changed since, or another version)")  # fmt: skip
    return replace(meta, text=text, reason="proof matches the indexed content")
