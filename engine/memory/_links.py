"""Links from a note to the code, made when it is saved and checked whenever it is read.

The store knows nothing of the index: the workspace hands it a ``CodeAccess`` (resolve an
entity to indexed lines, read a file as the caller sees it now). A link stores the path,
the span and the sha256 of the lines, and the short hash of its first line. On a read the
lines are hashed again: the same text is ``current``; the same lines elsewhere in the file
(code moved by an edit above it) are ``moved``, never stale; otherwise ``stale``, or
``missing`` when the file is gone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from engine.core import MAX_ENTITIES, MAX_LINKS, CodeLink, LinkCheck, LinkState
from engine.memory._entities import Candidate, extract
from indexers import sha256_text

__all__ = [
    "CodeAccess", "Linked", "check_link", "checked_links", "file_lines", "link_entities",
    "link_head",
]  # fmt: skip


_CODE_KINDS = ("path", "place", "symbol")  # entities that may name indexed code


@dataclass(frozen=True, slots=True)
class CodeAccess:
    """What the store needs of the index, as plain callables from the workspace.

    ``resolve``: path, ``path:line`` place or symbol candidates → for each, the indexed
    lines it names (path, span, sha256 of the lines as the caller sees them), or None; all
    of one note at once, so they are resolved against one View.
    ``read``: a file's text as the caller sees it now (None when it is gone)."""

    resolve: Callable[[Sequence[Candidate]], list[CodeLink | None]]
    read: Callable[[str], str | None]


class Linked(NamedTuple):
    """A note's entities (code ones only when they resolve) and its code links, each with
    the short hash of its first line, and how many of each the caps left out (counted
    among the first ``2 * MAX_ENTITIES`` entity candidates)."""

    entities: tuple[str, ...]
    links: list[tuple[CodeLink, str]]
    entities_left_out: int
    links_left_out: int


def link_entities(text: str, code: CodeAccess | None) -> Linked:
    """``Linked`` for a note's text: its first ``MAX_ENTITIES`` entities and ``MAX_LINKS``
    code links; links to the same lines are kept once."""
    kept: list[str] = []
    links: list[tuple[CodeLink, str]] = []
    left = [0, 0]  # entities, links
    found = extract(text, MAX_ENTITIES * 2)
    coded = [c for c in found if c.kind in _CODE_KINDS]
    resolved = iter(code.resolve(coded) if code is not None and coded else [])
    for c in found:
        if c.kind in _CODE_KINDS and code is not None:
            link = next(resolved)
            if link is None:
                continue
            span = (link.path, link.start_line, link.end_line)
            if all((lk.path, lk.start_line, lk.end_line) != span for lk, _ in links):
                if len(links) < MAX_LINKS:
                    lines = file_lines(code.read(link.path) or "")
                    first = lines[link.start_line - 1] if link.start_line <= len(lines) else ""
                    links.append((link, link_head(first)))
                else:
                    left[1] += 1
        elif c.kind == "symbol":
            continue  # without an index nothing says a word names a symbol
        if len(kept) < MAX_ENTITIES:
            kept.append(c.key)
        else:
            left[0] += 1
    return Linked(tuple(kept), links, *left)


def checked_links(
    raw: str, code: CodeAccess | None, files: dict[str, str | None]
) -> tuple[LinkCheck, ...]:
    """A stored row's links, each checked against the file as the caller sees it now
    (``files`` caches the reads of one call); none without code access."""
    if code is None:
        return ()
    out = []
    for entity, path, start, end, sha, head in json.loads(raw):
        if path not in files:
            files[path] = code.read(path)
        out.append(check_link(CodeLink(entity, path, start, end, sha), head, files[path]))
    return tuple(out)


def file_lines(text: str) -> list[str]:
    """1-based lines as the indexers count them (a final newline ends the last line)."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def link_head(text: str) -> str:
    """The short hash of a link's first line (finds the lines again after they moved)."""
    return sha256_text(text.split("\n", 1)[0])[:16]


def check_link(link: CodeLink, head: str, text: str | None) -> LinkCheck:
    """``link`` against the file's text as the caller sees it now (None: the file is gone)."""
    if text is None:
        return LinkCheck(link, LinkState.MISSING)
    lines = file_lines(text)
    size = link.end_line - link.start_line + 1
    here = "\n".join(lines[link.start_line - 1 : link.end_line])
    if link.end_line <= len(lines) and sha256_text(here) == link.sha256:
        return LinkCheck(link, LinkState.CURRENT)
    for i, line in enumerate(lines):
        if (
            i + size <= len(lines)
            and sha256_text(line)[:16] == head
            and sha256_text("\n".join(lines[i : i + size])) == link.sha256
        ):
            return LinkCheck(link, LinkState.MOVED, f"{link.path}#L{i + 1}-L{i + size}")
    return LinkCheck(link, LinkState.STALE)
