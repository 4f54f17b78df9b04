"""The pinned tier's rules files: what a repository tells every agent that works in it.

``AGENTS.md``, ``CLAUDE.md``, ``.cursorrules``, ``.cursor/rules/*``,
``.github/copilot-instructions.md`` are read whole; a ``CONTRIBUTING`` guide only for its
sections that share a word with the goal (a guide is long, and most of it is about
something else).
"""

from __future__ import annotations

import re
from pathlib import Path

from indexers import decode, redact

__all__ = ["MAX_RULES_CHARS", "RULES_FILES", "rules_sections"]

RULES_FILES = ("AGENTS.md", "CLAUDE.md", ".cursorrules", ".github/copilot-instructions.md")
_RULES_DIRS = (".cursor/rules",)
_CONTRIBUTING = ("CONTRIBUTING.md", "CONTRIBUTING.rst", "CONTRIBUTING", "docs/CONTRIBUTING.md")
MAX_RULES_CHARS = 20_000  # a rules file past this is a manual, not rules: read its head
_HEADING = re.compile(r"^(#{1,6}\s+\S.*|\S.*\n[=\-~^]{3,})$", re.MULTILINE)
_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()[: MAX_RULES_CHARS * 4]
    except OSError:
        return None
    return redact(decode(data), path.name).text[:MAX_RULES_CHARS].strip() or None


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, text) of each heading section (one untitled section when none)."""
    marks = [m.start() for m in _HEADING.finditer(text)]
    if not marks or marks[0] != 0:
        marks.insert(0, 0)
    out = []
    for a, b in zip(marks, [*marks[1:], len(text)], strict=True):
        part = text[a:b].strip()
        if part:
            out.append((part.split("\n", 1)[0].lstrip("# ").strip(), part))
    return out


def rules_sections(root: Path, goal: str) -> list[tuple[str, str, str]]:
    """(uri, title, text) of the repository's rules, in a fixed order (files as listed,
    ``.cursor/rules`` by name, then the goal's ``CONTRIBUTING`` sections)."""
    found: list[tuple[str, str, str]] = []
    paths = [root / p for p in RULES_FILES]
    for folder in _RULES_DIRS:
        if (root / folder).is_dir():
            paths += sorted(p for p in (root / folder).iterdir() if p.is_file())
    for path in paths:
        if path.is_file() and (text := _read(path)) is not None:
            rel = path.relative_to(root).as_posix()
            found.append((rel, f"rules: {rel}", text))
    words = set(_WORD.findall(goal.lower()))
    for name in _CONTRIBUTING:
        path = root / name
        if not path.is_file() or (text := _read(path)) is None:
            continue
        for n, (title, part) in enumerate(_sections(text), start=1):
            if words & set(_WORD.findall(part.lower())):
                found.append((f"{name}#section-{n}", f"contributing: {title}", part))
        break
    return found
