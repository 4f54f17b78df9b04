"""Purging the ledger's stored texts: a file's snippets, or every occurrence of a string.

The chain holds hashes, ids and paths; the texts (prompts, call inputs, snippet texts) are
blobs named by sha256. A purge replaces each affected blob by its text with the removed
parts marked ``[PURGED]`` and appends one ``purge`` record naming the pairs, so the chain
still verifies and a replay shows the marks instead of failing. What a purge cannot reach
is text inside a chained record itself (tool-result summaries of feedback written before
they were stored as texts, a tool's name, a decision's rationale): those records are
counted, so the caller can say so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.core import uri_path
from ledger import JSON, PURGED_MARK, FeedbackRecord, JournalEntry, Ledger, RecordKind, TurnRecord

__all__ = ["LedgerPurge", "purge_ledger"]


@dataclass(frozen=True, slots=True)
class LedgerPurge:
    """What a purge found in (or, unless a dry run, removed from) the ledger."""

    texts: int  # stored texts replaced
    turns: int  # turns whose prompt or snippets held what is forgotten
    chained: int  # chained records whose own payload holds the string (cannot be rewritten)


def purge_ledger(
    ledger: Ledger,
    *,
    in_paths: Callable[[str], bool] | None = None,
    text: str | None = None,
    note: dict[str, JSON] | None = None,
    dry_run: bool = False,
) -> LedgerPurge:
    """Replace every stored text that holds ``text`` (as written, or as JSON escapes it in
    the recorded inputs), and every snippet text of a file ``in_paths`` accepts (also where
    a prompt shows it), by the text with those parts marked ``[PURGED]``; ``note`` goes
    into the purge record (it must not hold what is forgotten).
    """
    replacements: dict[str, str] = {}
    turns: set[str] = set()
    if in_paths is not None:
        for record in ledger.records(RecordKind.TURN):
            assert isinstance(record, TurnRecord)
            hit = [s for s in record.snippets if in_paths(uri_path(s.source_uri))]
            if not hit:
                continue
            turns.add(record.turn_id)
            texts = [ledger.get_stored(s.sha256)[0] for s in hit]
            for s in hit:
                replacements[s.sha256] = PURGED_MARK
            prompt, _ = ledger.get_stored(record.render_sha256)
            marked = _mark(replacements.get(record.render_sha256, prompt), texts)
            if marked != prompt:
                replacements[record.render_sha256] = marked
    chained = 0
    if text:
        forms = _forms(text)
        for sha, stored in ledger.texts():
            if any(f in stored for f in forms):
                replacements[sha] = _mark(replacements.get(sha, stored), forms)
        for record in ledger.records():
            if isinstance(record, TurnRecord):
                if {record.render_sha256, record.inputs_sha256} & replacements.keys():
                    turns.add(record.turn_id)
            elif isinstance(record, FeedbackRecord | JournalEntry) and _holds(record, forms):
                chained += 1
    if replacements and not dry_run:
        ledger.purge(replacements, note or {})
    return LedgerPurge(len(replacements), len(turns), chained)


def _holds(record: FeedbackRecord | JournalEntry, forms: list[str]) -> bool:
    if isinstance(record, FeedbackRecord):  # summaries stored as texts are purged as texts
        words = [f"{t.name}\n{'' if t.summary_sha256 else t.summary}" for t in record.tool_results]
    else:
        words = [json.dumps(record.payload, ensure_ascii=False)]
    return any(f in w for f in forms for w in words)


def _forms(text: str) -> list[str]:
    """The string as stored: raw in prompts and snippets, JSON-escaped in recorded inputs."""
    forms = {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}
    return sorted(forms, key=lambda f: (-len(f), f))


def _mark(text: str, needles: Iterable[str]) -> str:
    for needle in sorted(needles, key=len, reverse=True):
        if needle:
            text = text.replace(needle, PURGED_MARK)
    return text
