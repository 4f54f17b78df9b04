"""A note's neighbours' words in its lexical index: each note is found, at a lower weight,
by the words of the notes it ``follows`` or that follow it (``notes_fts.near``).

The question before an answer, or the reply after a remark, often holds the words a later
search uses. Only live neighbours of the same project, scope and owner count, so a
personal note's words never help find a shared one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["NEAR_MAX", "NEAR_WEIGHT", "follows_neighbours", "index_near"]

# A note's ``follows`` neighbours (the note before it and the one after) are indexed with
# it at this weight: the question before an answer, or the reply after a remark, often
# holds the words a later search uses, and the pair matches together what neither holds.
NEAR_WEIGHT = 0.3
NEAR_MAX = 4  # neighbours indexed with a note: bounds a hub's row


def follows_neighbours(db: sqlite3.Connection, note_id: int) -> list[int]:
    """The notes a ``follows`` edge joins to ``note_id``, either way round."""
    return [
        r[0]
        for r in db.execute(
            "SELECT CASE WHEN src = ? THEN dst ELSE src END FROM edges WHERE "
            "kind = 'follows' AND (src = ? OR dst = ?)",
            (note_id, note_id, note_id),
        )
    ]


def index_near(db: sqlite3.Connection, around: Sequence[int]) -> None:
    """Index again the neighbours' words (``near``) of ``around`` and of every note a
    ``follows`` edge joins to one of them (inside a transaction): a live note gets the
    title and body words of at most ``NEAR_MAX`` live neighbours of its own project,
    scope and owner (a personal note's words never help find a shared one), a deleted one
    none."""
    if not around:
        return
    todo = set(around)
    for chunk in range(0, len(around), 500):
        part = list(around[chunk : chunk + 500])
        marks = ",".join("?" * len(part))
        for src, dst in db.execute(
            f"SELECT src, dst FROM edges WHERE kind = 'follows' AND (src IN ({marks}) OR "
            f"dst IN ({marks}))",
            (*part, *part),
        ):
            todo |= {src, dst}
    for note in sorted(todo):
        found = db.execute(
            "SELECT project, scope, owner FROM notes WHERE id = ? AND deleted IS NULL", (note,)
        ).fetchone()
        words = []
        if found is not None:
            words = [
                r[0]
                for r in db.execute(
                    "SELECT f.title || char(10) || f.body FROM edges e JOIN notes n ON n.id = "
                    "CASE WHEN e.src = ? THEN e.dst ELSE e.src END JOIN notes_fts f ON "
                    "f.rowid = n.id WHERE "
                    "(e.src = ? OR e.dst = ?) AND e.kind = 'follows' AND n.deleted IS NULL "
                    "AND n.project = ? AND n.scope = ? AND n.owner = ? ORDER BY n.id LIMIT ?",
                    (note, note, note, *found, NEAR_MAX),
                )
            ]
        db.execute("UPDATE notes_fts SET near = ? WHERE rowid = ?", ("\n".join(words), note))
