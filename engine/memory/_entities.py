"""Entities in a note, extracted by patterns (no model): URLs, file paths and ``path:line``
places, package names, and identifiers that may name a symbol.

Each entity is ``kind:value`` (``url:https://…``, ``path:engine/cli/_main.py``,
``place:engine/cli/_main.py:40``, ``package:tantivy``, ``symbol:Workspace``). Paths, places
and symbols are candidates: the store keeps a path or symbol only when the caller's resolver
finds it in the index, and then links it to the code (``CodeLink``). Pure functions of the
text: the same note gives the same entities on every machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Candidate", "extract"]

_URL = re.compile(r"\bhttps?://[^\s<>()\"'`\]]+[^\s<>()\"'`\].,;:!?]")
_PATH = re.compile(
    r"(?<![\w/.:-])((?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9})"
    r"(?::(\d{1,7})(?:-(\d{1,7}))?|#L(\d{1,7})(?:-L?(\d{1,7}))?)?(?![\w/])"
)
_PACKAGE = re.compile(
    r"(?:\b(?:pip3?|uv pip|poetry|pipx) (?:install|add) |\bnpm (?:install|i|add) |"
    r"\byarn add |\bpnpm add |\bcargo add |\bgo get |\bgem install |"
    r"^\s*(?:from|import) )(?:-[-\w]+ )*([A-Za-z@][\w./@-]*)",
    re.MULTILINE,
)
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
# A word that looks like a code name: CamelCase with a second capital, snake_case, a
# dotted path, or a name followed by "(".
_SYMBOL = re.compile(
    r"\b([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Z][a-z0-9]+[A-Z]\w*|[a-z0-9]+_\w+|"
    r"[A-Za-z_]\w*(?=\())"
)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_COMMON_EXT = frozenset({"e.g", "i.e", "etc", "vs"})
_MAX_SYMBOL_CHARS = 120


@dataclass(frozen=True, slots=True)
class Candidate:
    """An entity as found: its kind, value, and for a place its lines."""

    kind: str  # url, path, place, package, symbol
    value: str
    start_line: int = 0
    end_line: int = 0

    @property
    def key(self) -> str:
        """``kind:value`` as stored."""
        if self.kind == "place":
            end = f"-{self.end_line}" if self.end_line > self.start_line else ""
            return f"place:{self.value}:{self.start_line}{end}"
        return f"{self.kind}:{self.value}"


def extract(text: str, limit: int) -> list[Candidate]:
    """Entity candidates of ``text`` in first-seen order, each once, at most ``limit``."""
    found: dict[str, Candidate] = {}

    def add(c: Candidate) -> None:
        if len(found) < limit:
            found.setdefault(c.key, c)

    rest = text
    for m in _URL.finditer(text):
        add(Candidate("url", m.group(0)))
    rest = _URL.sub(" ", text)
    for m in _PATH.finditer(rest):
        path = m.group(1).removeprefix("./")
        if path.lower() in _COMMON_EXT or (path[0].isdigit() and "/" not in path):
            continue
        start = m.group(2) or m.group(4)
        end = m.group(3) or m.group(5)
        if start:
            a = int(start)
            b = max(a, int(end)) if end else a
            if a >= 1:
                add(Candidate("place", path, a, b))
        add(Candidate("path", path))
    for m in _PACKAGE.finditer(rest):
        name = m.group(1).rstrip(".,;:")
        if name and not name.startswith("."):
            add(Candidate("package", name.split("/")[0] if not name.startswith("@") else name))
    names = [n for m in _BACKTICK.finditer(rest) for n in _NAME.findall(m.group(1))]
    names += [m.group(1) for m in _SYMBOL.finditer(_PATH.sub(" ", rest))]
    for name in names:
        if 2 <= len(name) <= _MAX_SYMBOL_CHARS:
            add(Candidate("symbol", name))
    return list(found.values())
