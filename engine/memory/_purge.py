"""Purging the ledger's stored texts: a file's snippets, or every occurrence of a string.

The chain holds hashes, ids and paths; the texts (prompts, call inputs, snippet texts) are
blobs named by sha256. A purge cuts ranges out of each affected blob (each becomes
``[PURGED]``) and appends one ``purge`` record naming the pairs and the cuts, so the chain
still verifies and a replay shows the marks instead of failing. Free text of journal
entries (a decision's rationale, a failure's reason) is stored as a text too, and cut the
same way. What a purge cannot reach is text inside a chained record itself (a tool's
name, a decision's evidence ids; failure reasons, rationales and tool-result summaries
written inline by records from before they were stored as texts): those records are
named by seq, so the caller can say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.core import uri_path
from ledger import JSON, PURGED_MARK, FeedbackRecord, JournalEntry, Ledger, RecordKind, TurnRecord

__all__ = ["LedgerPurge", "purge_ledger"]


@dataclass(frozen=True, slots=True)
class LedgerPurge:
    """What a purge found in (or, unless a dry run, removed from) the ledger."""

    texts: int  # stored texts cut
    turns: int  # turns whose prompt or snippets held what is forgotten
    chained: tuple[int, ...]  # seqs of chained records whose own payload holds the string
    cleared: bool = True  # the file keeps no freed page with the removed bytes


Cuts = dict[str, list[tuple[int, int]]]  # sha256 -> (start, end) ranges of its text


def purge_ledger(
    ledger: Ledger,
    *,
    in_paths: Callable[[str], bool] | None = None,
    text: str | None = None,
    note: dict[str, JSON] | None = None,
    dry_run: bool = False,
) -> LedgerPurge:
    """Cut out of every stored text (texts an earlier purge left included) each place
    that holds ``text`` (as written, or as JSON escapes it in the recorded inputs), and
    every snippet text of a file ``in_paths`` accepts, also where a prompt shows it and
    its hunks in a prompt's working-tree diff lane: each becomes ``[PURGED]``. ``note``
    goes into the purge record (it must not hold what is forgotten). Then the ledger is
    compacted (also when nothing was left to cut: that finishes a compaction a reader
    held up before); ``cleared`` says whether the removed bytes left the file.
    """
    cuts: Cuts = {}
    turns: set[str] = set()
    if in_paths is not None:
        for record in ledger.records(RecordKind.TURN):
            assert isinstance(record, TurnRecord)
            prompt, _ = ledger.get_stored(record.render_sha256)
            ranges = _hunk_ranges(prompt, in_paths)
            hit = [s for s in record.snippets if in_paths(uri_path(s.source_uri))]
            for s in hit:
                piece, _ = ledger.get_stored(s.sha256)
                if piece and piece != PURGED_MARK:
                    _add(cuts, s.sha256, [(0, len(piece))])
                    ranges += _found(prompt, [piece])
            if hit or ranges:
                turns.add(record.turn_id)
            if ranges:
                _add(cuts, record.render_sha256, ranges)
    chained: list[int] = []
    if text:
        forms = _forms(text)
        for sha, stored in ledger.texts(purged=True):
            if ranges := _found(stored, forms):
                _add(cuts, sha, ranges)
        for record in ledger.records():
            if isinstance(record, TurnRecord):
                if {record.render_sha256, record.inputs_sha256} & cuts.keys():
                    turns.add(record.turn_id)
            elif isinstance(record, FeedbackRecord | JournalEntry) and _holds(record, forms):
                chained.append(record.seq)
    cleared = True
    if not dry_run:
        if cuts:
            ledger.purge(cuts, note or {})
        cleared = ledger.compact()
    return LedgerPurge(len(cuts), len(turns), tuple(chained), cleared)


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


def _found(text: str, needles: Iterable[str]) -> list[tuple[int, int]]:
    """Every range of ``text`` that one of ``needles`` covers (overlaps included)."""
    ranges = []
    for needle in needles:
        at = text.find(needle) if needle else -1
        while at >= 0:
            ranges.append((at, at + len(needle)))
            at = text.find(needle, at + 1)
    return ranges


def _add(cuts: Cuts, sha: str, ranges: Iterable[tuple[int, int]]) -> None:
    """Add ``ranges`` to the cuts of ``sha``: sorted, overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted([*cuts.get(sha, []), *ranges]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    cuts[sha] = merged


# The diff lane as packing renders it: a heading, a fence, then per hunk ``--- path`` and
# the hunk from its ``@@`` line; hunk lines start with ' ', '+', '-' or '\\', never
# ``@@``, so ``--- `` followed by an ``@@`` line is always a hunk's header.
_DIFF_LANE = re.compile(r"^## Working-tree diff\n(`{3,})diff\n", re.MULTILINE)
_HUNK_HEAD = re.compile(r"^--- (.*)\n(?=@@ )", re.MULTILINE)


def _hunk_ranges(prompt: str, in_paths: Callable[[str], bool]) -> list[tuple[int, int]]:
    """The ranges of ``prompt``'s working-tree diff lane that show hunks of a file
    ``in_paths`` accepts (the hunk under its ``--- path`` line; the path stays)."""
    lane = _DIFF_LANE.search(prompt)
    if lane is None:
        return []
    # The fence is longer than any run of backticks inside, so its next line closes it.
    close = re.compile(f"^{lane.group(1)}$", re.MULTILINE).search(prompt, lane.end())
    end = close.start() - 1 if close else len(prompt)
    heads = list(_HUNK_HEAD.finditer(prompt, lane.end(), end))
    ranges = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        stop = after.start() - 1 if after is not None else end
        if in_paths(head.group(1)) and head.end() < stop:
            ranges.append((head.end(), stop))
    return ranges
