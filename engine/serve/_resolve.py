"""Reading a uri as every server surface does: ``resolve_checked`` over
``Workspace.resolve``, with the path checks and the size limit of a text returned at once."""

from __future__ import annotations

from pathlib import Path

from engine._workspace import Workspace, inside_workspace
from engine.core import SOURCE_URI, ConfigError
from engine.serve._encode import JSON, to_json
from engine.serve._requests import Proof

__all__ = ["MAX_RESOLVE_BYTES", "RECORD_SCHEMES", "resolve_checked"]

MAX_RESOLVE_BYTES = 256 << 10  # text resolve returns at once: a long file, not a data dump
RECORD_SCHEMES = ("memory:", "session:")  # the caller's own records, not indexed files


def resolve_checked(ws: Workspace, uri: str, proof: Proof | None) -> dict[str, JSON]:
    """``Workspace.resolve`` with the checks every surface applies: the indexed text of
    ``path#Lstart-Lend`` (or a whole file) for a caller whose proof matches the indexed
    content, metadata only otherwise; a path outside the workspace, or a proof for another
    path, raises ``ConfigError``. Adds ``exists`` (false for any path not indexed, there
    or not), ``indexed`` and ``verified``.

    ``memory:N`` and ``session:ID#N`` name the caller's own note or session step: its text
    in full, as ``Workspace.resolve`` gives it (no proof needed, none checked)."""
    if uri.strip().startswith(RECORD_SCHEMES):
        record = ws.resolve(uri.strip())
        out = to_json(record) | {"uri": uri, "indexed": False, "exists": True, "verified": None}
        if record.text is not None and len(record.text.encode()) > MAX_RESOLVE_BYTES:
            out["text"] = None
            out["reason"] = f"over {MAX_RESOLVE_BYTES} bytes; read the step with session show"
        return out
    match = SOURCE_URI.match(uri.strip())
    if match is None:
        raise ConfigError(
            f"bad uri {uri!r}; use path#L10-L20, path#L10, path, memory:N or session:ID#N"
        )
    rel, path = _inside(ws, match["path"])
    if proof is not None and _inside(ws, proof.path)[0] != rel:
        raise ConfigError(f"the proof is for {proof.path!r}, not {rel!r}")
    lines = uri.strip()[len(match["path"]) :]
    given = {"path": rel, "sha256": proof.sha256} if proof is not None else None
    got = ws.resolve(rel + lines, given)
    out = to_json(got)
    out["uri"] = uri
    out["indexed"] = got.sha256 is not None or got.start_line is not None
    # Only for indexed paths: an unindexed one answers exactly as an absent one, so a
    # caller cannot probe for files skipped as secret (.npmrc, .git/config, id_rsa).
    out["exists"] = bool(out["indexed"]) and path.is_file()
    out["verified"] = None if proof is None else got.text is not None
    if got.text is not None and len(got.text.encode()) > MAX_RESOLVE_BYTES:
        out["text"] = None
        out["reason"] = f"over {MAX_RESOLVE_BYTES} bytes; ask for fewer lines"
    return out


def _inside(ws: Workspace, rel: str) -> tuple[str, Path]:
    """``rel`` as the index names it and where it is, refused as the library refuses it."""
    return inside_workspace(ws.root, ws.state_dir, rel)
