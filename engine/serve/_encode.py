"""The one JSON encoding of the contract records, used by ``--json``, MCP and HTTP alike.

``to_json(record)`` gives the same fields for the same record on every surface::

    ContextPack    replay_key, tokens_used, budget_tokens, omitted_tokens, advisory,
                   blocks [{lane, tokens}], citations [Snippet], reachable [Pointer],
                   compacted [Pointer] (session steps not shown whole), render
    Snippet        id, chunk_id, title, symbol, source_uri, path, start_line, end_line,
                   sha256, license, approx_tokens, fused_score, reason_tag, contributions
    SearchHit      rank, score, bm25_rank, bm25_score, dense_rank, dense_score, reason,
                   contributions and the section: chunk_id, path, title, symbol, kind,
                   language, doc_type, source_uri, start_line, end_line, sha256, license,
                   text
    FileHit        rank, path, score, sections [SearchHit]
    FeedbackResult replay_key, valid, dropped, stale, repeated
    Bundle         goal, budget, items [{tier, uri, title, text, salience, tokens}], overflow
                   [uri], tokens_used, text, latency_ms
    Replay         replay_key, turn_id, time, tokens_used, text, diff, purged
    Step           step, role, text, tool, is_error, exit_status, rationale, evidence
    Compaction     session, step, budget, kept, stubs [{ref, short_form, salience}], tokens,
                   checkpoint {session, step, encoded, sha256}
    HistoryLane    session, text, tokens, upto, compacted [Pointer] (a session's history
                   lane at a budget, ``Workspace.session_lane``)
    Note           id, uri, title, type, scope, what, why, where, learned, topic_key,
                   revision, entities, links [{link {entity, path, start_line, end_line,
                   sha256}, state, now}], stale [uri], created, updated, accessed,
                   access_count, importance {score, parts}, deleted, superseded_by,
                   contradicts [[id, title]], edges [Edge]
    NoteHit        id, uri, title, type, scope, preview, score, importance, updated, stale,
                   contradicts (a list of them: {"notes": [...]}, ``notes_json``)
    StageProgress  stage, number, unit, done, total, elapsed_s, eta_s (a running index's
                   latest stage, in status's refresh.progress)
    Status, IndexReport, GcReport, ForgetReport, Resolved, SaveResult, Edge, NoteGraph,
    MemoryStats, and the ledger's TurnRecord and FeedbackRecord: their fields (paths as
    strings, enums as their values)

Snippet text is not repeated beside ``render`` (which holds it, as the model saw it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path

from engine.core import (
    Bundle,
    Compaction,
    ContextPack,
    Edge,
    FeedbackResult,
    FileHit,
    ForgetReport,
    GcReport,
    HistoryLane,
    IndexReport,
    MemoryStats,
    Note,
    NoteGraph,
    NoteHit,
    Pointer,
    Replay,
    Resolved,
    SaveResult,
    SearchHit,
    Snippet,
    Status,
    Step,
    uri_path,
)
from engine.serve._progress import StageProgress
from indexers import Chunk
from ledger import JSON, FeedbackRecord, TurnRecord

__all__ = [
    "JSON",
    "chunk_json",
    "files_json",
    "hits_json",
    "note_json",
    "notes_json",
    "pack_json",
    "to_json",
]

Record = (
    ContextPack | Snippet | Pointer | FeedbackResult | Replay | Status | IndexReport | GcReport
    | ForgetReport | Resolved | TurnRecord | FeedbackRecord | Step | Compaction | Note
    | NoteHit | SaveResult | Edge | NoteGraph | MemoryStats | Bundle | StageProgress
    | HistoryLane
)  # fmt: skip


def _plain(value: object) -> JSON:
    """A value of a record's field as JSON (nested records, paths, enums, tuples)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"no JSON form for {type(value).__name__}")


def snippet_json(s: Snippet) -> dict[str, JSON]:
    """A citation: where, what hash, how big, why, and each rerank feature's points."""
    return {
        "id": s.id,
        "chunk_id": s.chunk_id,
        "title": s.title,
        "symbol": s.symbol,
        "source_uri": s.source_uri,
        "path": uri_path(s.source_uri),
        "start_line": s.span.start_line,
        "end_line": s.span.end_line,
        "sha256": s.sha256,
        "license": s.license,
        "approx_tokens": s.approx_tokens,
        "fused_score": s.fused_score,
        "reason_tag": s.reason_tag,
        "contributions": {c.feature: round(c.points, 4) for c in s.contributions},
    }


def pack_json(pack: ContextPack) -> dict[str, JSON]:
    """A context pack: its key, budget, advisory, lanes, citations, pointers and prompt."""
    return {
        "replay_key": pack.replay_key,
        "tokens_used": pack.tokens_used,
        "budget_tokens": pack.budget_tokens,
        "omitted_tokens": pack.omitted_tokens,
        "advisory": list(pack.advisory),
        "blocks": [{"lane": b.lane.value, "tokens": b.tokens} for b in pack.prompt_blocks],
        "citations": [snippet_json(s) for s in pack.citations],
        "reachable": [_plain(p) for p in pack.reachable],
        "compacted": [_plain(p) for p in pack.compacted],
        "render": pack.render(),
    }


def chunk_json(c: Chunk, *, text: bool = True) -> dict[str, JSON]:
    """A section as the index holds it (``text``: with its text)."""
    row: dict[str, JSON] = {
        "chunk_id": c.id,
        "page_id": c.page_id,
        "path": c.path,
        "title": c.title,
        "symbol": c.symbol,
        "kind": c.kind.value,
        "language": c.language,
        "doc_type": c.doc_type.value,
        "source_uri": c.source_uri,
        "start_line": c.span.start_line,
        "end_line": c.span.end_line,
        "tokens": c.tokens,
        "sha256": c.sha256,
        "license": c.license,
        "depth": c.depth,
        "part": c.part,
        "parts": c.parts,
        "context": c.context,
        "defines": list(c.defines),
        "references": list(c.references),
    }
    if text:
        row["text"] = c.text
    return row


def hit_json(rank: int, hit: SearchHit) -> dict[str, JSON]:
    """A search hit: its rank and each retriever's part, then its section with text."""
    head: dict[str, JSON] = {
        "rank": rank,
        "score": hit.score,
        "bm25_rank": hit.bm25_rank,
        "bm25_score": hit.bm25_score,
        "dense_rank": hit.dense_rank,
        "dense_score": hit.dense_score,
        "reason": hit.reason,
        "contributions": {c.feature: round(c.points, 4) for c in hit.contributions},
    }
    body = chunk_json(hit.chunk)
    for name in ("page_id", "depth", "part", "parts", "context", "defines", "references"):
        body.pop(name)
    return head | body


def hits_json(hits: Sequence[SearchHit]) -> dict[str, JSON]:
    """Search hits, best first."""
    return {"hits": [hit_json(rank, h) for rank, h in enumerate(hits, start=1)]}


def files_json(files: Sequence[FileHit]) -> dict[str, JSON]:
    """Files in the search ranking, best first, each with its best sections."""
    return {
        "files": [
            {
                "rank": rank,
                "path": f.path,
                "score": f.score,
                "sections": [hit_json(n, h) for n, h in enumerate(f.sections, start=1)],
            }
            for rank, f in enumerate(files, start=1)
        ]
    }


def note_json(note: Note | NoteHit) -> dict[str, JSON]:
    """A note in full, or a search hit's title and preview: its fields, its ``memory:ID``
    uri and, for a note, the uris of the links that went stale."""
    body = _plain(note)
    assert isinstance(body, dict)
    extra: dict[str, JSON] = {"uri": note.uri}
    if isinstance(note, Note):
        extra["stale"] = list(note.stale)
    return {"id": note.id, **extra} | body


def notes_json(hits: Sequence[NoteHit]) -> dict[str, JSON]:
    """Notes from a search or a timeline, in order."""
    return {"notes": [note_json(h) for h in hits]}


def to_json(record: Record) -> dict[str, JSON]:
    """The JSON object of a contract record (see the module docstring for each shape)."""
    if isinstance(record, Note | NoteHit):
        return note_json(record)
    if isinstance(record, ContextPack):
        return pack_json(record)
    if isinstance(record, Snippet):
        return snippet_json(record)
    if isinstance(record, IndexReport):
        body = _plain(record)
        assert isinstance(body, dict)
        return body | {"total_seconds": record.total_seconds}
    if isinstance(record, Status):
        body = _plain(record)
        assert isinstance(body, dict)
        return body | {"stale_files": record.stale_files}
    body = _plain(record)
    assert isinstance(body, dict)
    return body
