"""The working-tree diff as a prompt may show it: the tracked changes and the new files git
does not ignore (those the index reads), without files secret by name, and with every
credential redacted, also the lines of a private key whose BEGIN line is outside the
hunk."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from indexers import SourceFile, WalkOptions, decode, redact, secret_paths, walk
from overlays import Hunk, diff_sides, untracked_files

__all__ = ["clean_diff", "new_file_hunks"]

# A new file is shown as hunks of this many lines that add them: the diff lane ranks hunks
# by the request's words and fits them whole, so a long new file still shows the part that
# matters (one hunk of all of it would fit no lane).
NEW_FILE_LINES = 40
NEW_FILES_BYTES = 1 << 20  # new files' hunks at most, as ``working_diff`` caps its own

_NUMBERS = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
# A line of a key's body (base64, no spaces): the hunk alone cannot tell whether it is one.
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")


def clean_diff(root: Path, hunks: Sequence[Hunk], options: WalkOptions) -> list[Hunk]:
    """``hunks`` without the files the index never reads as secret by name (a tracked
    ``.env``, a path holding a credential) or that the user's exclude and include globs
    leave out, each redacted as its whole file would be: a
    hunk that may hold a key's body takes its lines from both sides of the file, redacted
    whole."""
    sides: dict[str, tuple[list[str] | None, list[str] | None]] = {}
    out: list[Hunk] = []
    named = secret_paths(h.path for h in hunks)  # a credential in the name: never indexed
    for hunk in hunks:
        if options.is_secret_name(hunk.path) or hunk.path in named:
            continue
        if options.is_left_out(hunk.path):
            continue
        lines = redact(hunk.text, hunk.path).text.split("\n")
        numbers = _NUMBERS.match(lines[0])
        if numbers and any(_KEY_BODY.fullmatch(ln[1:].strip()) for ln in lines[1:]):
            if hunk.path not in sides:
                sides[hunk.path] = _redacted_sides(root, hunk.path)
            lines = _from_sides(lines, int(numbers[1]), int(numbers[2]), *sides[hunk.path])
        out.append(replace(hunk, text="\n".join(lines)))
    return out


def new_file_hunks(root: Path, options: WalkOptions) -> list[Hunk]:
    """The files under ``root`` that git neither tracks nor ignores and that the index reads
    (the same walk: no binaries, vendored trees or files over its size limit), each as
    hunks that add its lines (an empty file: one hunk with none), in path order, up to
    ``NEW_FILES_BYTES``; [] outside git."""
    paths = untracked_files(root)
    if not paths:
        return []
    out: list[Hunk] = []
    total = 0
    for found in walk(root, options, only=paths):
        if not isinstance(found, SourceFile):
            continue
        lines = decode(found.data).splitlines()
        parts = range(0, len(lines), NEW_FILE_LINES) if lines else range(1)
        for at in parts:
            part = lines[at : at + NEW_FILE_LINES]
            text = "\n".join([f"@@ -0,0 +{at + 1 if part else 0},{len(part)} @@",
                              *(f"+{line}" for line in part)])  # fmt: skip
            total += len(text)
            if total > NEW_FILES_BYTES:
                return out
            out.append(Hunk(found.path, text))
    return out


def _redacted_sides(root: Path, path: str) -> tuple[list[str] | None, list[str] | None]:
    old, new = diff_sides(root, path)
    return tuple(  # type: ignore[return-value]
        None if data is None else redact(decode(data), path).text.split("\n")
        for data in (old, new)
    )


def _from_sides(lines: list[str], old_at: int, new_at: int, old: list[str] | None,
                new: list[str] | None) -> list[str]:  # fmt: skip
    """The hunk's lines (after its ``@@`` line) as the redacted sides hold them; where a
    side cannot be read, a line shaped like a key's body is blanked."""
    out = [lines[0][: _NUMBERS.match(lines[0]).end()]]  # type: ignore[union-attr]
    # (git's heading after the numbers is the nearest line before the hunk that looks like
    # a definition: inside a key, one of its lines)
    for line in lines[1:]:
        tag, body = line[:1], line[1:]
        side, at = (old, old_at) if tag == "-" else (new, new_at)
        if tag not in (" ", "-", "+"):
            out.append(line)  # "\ No newline at end of file"
            continue
        if side is not None and 0 < at <= len(side):
            whole = side[at - 1]  # taken only where redaction changed it (the file may move)
            if whole != body and ("[REDACTED:" in whole or not whole.strip()):
                body = whole
        elif _KEY_BODY.fullmatch(body.strip()):
            body = "[REDACTED:private-key]"
        out.append(tag + body)
        old_at += tag in (" ", "-")
        new_at += tag in (" ", "+")
    return out
