"""Purging stored texts: the ranges cut, the replacements stored, one ``purge`` record.

``Ledger.purge`` documents what it does; this is its work, apart from the store so that
each module stays one concept.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from ledger._blobs import replace_text
from ledger._chain import link
from ledger._codec import canonical_json, check_json, decode_row, now_utc, text_sha256
from ledger._cuts import cut_text
from ledger._errors import BlobNotFoundError
from ledger._handle import Handle, snapshot
from ledger._records import JSON, JournalEntry, RecordKind
from ledger._sqlite import PURGED_TABLE
from ledger._verify import load_stored

__all__ = ["purge_texts"]


def purge_texts(
    handle: Handle, cuts: Mapping[str, Sequence[tuple[int, int]]], note: Mapping[str, JSON]
) -> JournalEntry:
    """``Ledger.purge``: cut the ranges, then in one write transaction check that each text
    is still the one cut, append the purge record and store the replacements."""
    if not cuts:
        raise ValueError("nothing to purge")
    check_json(dict(note))
    if {"texts", "cuts"} & set(note):
        raise ValueError("a purge's note cannot set 'texts' or 'cuts'")
    shas = sorted(cuts)
    current: dict[str, str] = {}  # the name of the text each purge cuts now
    replacements: dict[str, str] = {}
    marks: list[JSON] = []
    for sha in shas:
        with handle.reading("read a text from") as conn, snapshot(conn):
            try:
                text, purged = load_stored(conn, sha)
            except BlobNotFoundError:
                raise ValueError(f"no stored text to purge under {sha}") from None
        current[sha] = text_sha256(text) if purged else sha
        replacements[sha], cut = cut_text(text, list(cuts[sha]))
        marks.append([sha, current[sha], [list(m) for m in cut]])
    pairs: list[JSON] = [[sha, text_sha256(replacements[sha])] for sha in shas]
    payload: JSON = {**note, "texts": pairs, "cuts": marks}
    stamp = now_utc()
    data = canonical_json(payload)
    with handle.writing("append to") as conn:
        _check_unchanged(conn, shas, current)
        seq, prev, rec_hash = link(conn, handle.path, RecordKind.PURGE, None, stamp, data, None)
        for sha in shas:
            replace_text(conn, sha, replacements[sha], seq)
    entry = decode_row((seq, RecordKind.PURGE.value, None, stamp, data, prev, rec_hash))
    assert isinstance(entry, JournalEntry)
    return entry


def _check_unchanged(conn: sqlite3.Connection, shas: list[str], current: dict[str, str]) -> None:
    """What was cut is still what is stored (no purge in between)."""
    conn.execute(PURGED_TABLE)
    for sha in shas:
        now = conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (sha,)).fetchone()
        if now is None:
            row = conn.execute(
                "SELECT replacement_sha256 FROM purged WHERE sha256 = ?", (sha,)
            ).fetchone()
            now = None if row is None or str(row[0]) != current[sha] else row
        elif current[sha] != sha:
            now = None
        if now is None:
            raise ValueError(f"the text {sha} changed while it was purged; purge again")
