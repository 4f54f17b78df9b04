"""Cuts: what a purge may do to a stored text, and nothing more.

A purge names ranges of a stored text; each range becomes ``[PURGED]`` and every other
character stays as it was. The purge record keeps, for each range, where it was (UTF-8
byte offset and length in the text cut) and the sha256 of the bytes cut, so:

- nobody can use a purge to write other text into a recorded prompt: ``Ledger.purge``
  takes ranges, never a replacement text;
- whoever still holds a cut string can put it back (``restore``) and check that the text
  hashes to the name the chain committed to, which proves the replacement is the original
  with only those ranges marked;
- anyone can check the replacement's shape against its record (``cuts_problem``): the
  marker stands at every place the record says.

What no one can check without the cut strings is that the text between the marks is the
original's: the chain commits to the whole text's sha256 only, which cannot be recomputed
without the bytes that were cut.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ledger._blobs import PURGED_MARK

__all__ = ["Mark", "cut_text", "cuts_problem", "restore"]

Mark = tuple[int, int, str]  # (UTF-8 byte offset in the text cut, byte length, sha256 of the bytes)
_MARK = PURGED_MARK.encode("utf-8")


def cut_text(text: str, cuts: Sequence[tuple[int, int]]) -> tuple[str, list[Mark]]:
    """(``text`` with each (start, end) character range replaced by ``[PURGED]``, the
    marks the purge record keeps). Ranges must be non-empty, in order, not overlapping and
    inside the text; anything else is a ``ValueError``."""
    if not cuts:
        raise ValueError("a purge of a text names at least one range to cut")
    out: list[str] = []
    marks: list[Mark] = []
    done = 0
    for cut in cuts:
        if (
            not isinstance(cut, tuple | list)
            or len(cut) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in cut)
        ):
            raise ValueError(f"a cut is a (start, end) pair of character offsets, not {cut!r}")
        start, end = cut
        if not done <= start < end <= len(text):
            raise ValueError(
                f"cut ({start}, {end}) is empty, out of order, overlaps the one before or "
                f"lies outside the text ({len(text)} characters)"
            )
        out += [text[done:start], PURGED_MARK]
        piece = text[start:end].encode("utf-8")
        at = len(text[:start].encode("utf-8"))
        marks.append((at, len(piece), hashlib.sha256(piece).hexdigest()))
        done = end
    out.append(text[done:])
    return "".join(out), marks


def _places(marks: Sequence[Mark]) -> list[int]:
    """Where each mark's ``[PURGED]`` starts in the replacement (bytes)."""
    places, shift = [], 0
    for at, length, _ in marks:
        places.append(at + shift)
        shift += len(_MARK) - length
    return places


def cuts_problem(replacement: str, marks: Sequence[Mark]) -> str | None:
    """What is wrong with ``replacement`` as the text its purge record's ``marks`` describe
    (a marker missing where one was cut, marks out of order), or None."""
    data = replacement.encode("utf-8")
    done = 0
    for (at, length, _), place in zip(marks, _places(marks), strict=True):
        if at < done or length <= 0:
            return "its purge record's cuts are out of order or empty"
        if data[place : place + len(_MARK)] != _MARK:
            return f"no {PURGED_MARK} where its purge record says a cut was made (byte {place})"
        done = at + length
    return None


def restore(replacement: str, marks: Sequence[Mark], pieces: Sequence[str]) -> str:
    """The text before the purge, from its replacement and the strings cut (one a mark,
    in order); ``ValueError`` when a piece is not the one cut. Hash the result and compare
    it with the name the chain holds to check the purge."""
    if len(pieces) != len(marks) or cuts_problem(replacement, marks) is not None:
        raise ValueError("the replacement does not have the marks its purge record names")
    data = replacement.encode("utf-8")
    out, done = [], 0
    for (_, length, sha), place, piece in zip(marks, _places(marks), pieces, strict=True):
        raw = piece.encode("utf-8")
        if len(raw) != length or hashlib.sha256(raw).hexdigest() != sha:
            raise ValueError("a piece is not the string its mark says was cut")
        out += [data[done:place], raw]
        done = place + len(_MARK)
    out.append(data[done:])
    return b"".join(out).decode("utf-8")
