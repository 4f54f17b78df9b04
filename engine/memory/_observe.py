"""What a session item says that later steps need, extracted (never generated).

``observe`` reads one item's text once and keeps its facts: exit status, error lines and
exception names, failing and passing test ids, file paths with line numbers, defined
symbols, files a command writes, the last traceback whole, and the first and last lines.
A masked tool output is rendered from these facts (``stub_lines``); the digest of older
steps is built from them too. Pure functions of the text: the same text gives the same
facts on every machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.memory._terminal import terminal_text

__all__ = [
    "MAX_LINE_CHARS",
    "SCAN_CHARS",
    "Observation",
    "command_of",
    "drafts_of",
    "names_in",
    "observe",
    "one_line",
]

# A huge output (a 50 MB log) is scanned at its head and tail only: what later steps need
# from a log sits at its start (the command's echo, the first error) or its end (the
# summary, the final traceback). Half a megabyte each way keeps a scan under ~0.1 s.
SCAN_CHARS = 512 * 1024
# Between the two, only the words that mark an error line are looked for (str.find runs at
# memory speed; a regex over 45 MB takes seconds), and the lines they sit on kept when they
# read as errors: a compiler's one error in the middle of a build log.
_MIDDLE_MARKS = ("rror", "ERROR", "FAIL", "atal", "xception")
_MIDDLE_HITS = 64  # occurrences of one mark looked at, at most (a log may say it per line)
MAX_LINE_CHARS = 240  # a kept line longer than this (minified code, a base64 blob) is cut
_FIRST_LINES = 2  # first lines of a masked output: the command's echo, the header
_LAST_LINES = 2  # last lines: summaries ("3 failed, 10 passed"), the final answer
_MAX_ERRORS = 6  # error lines kept per output, first ones (later ones repeat them)
_MAX_TRACEBACK = 40  # a traceback longer than this keeps its head and its last lines
_MAX_NAMES = 40  # paths with line numbers, tests, symbols kept per output (first seen)
_MAX_FILES = 80  # distinct files named per output (a grep -rn or a listing names many)

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_TAGS = re.compile(r"</?(?:returncode|output|output_head|output_tail|elided_chars|warning)>")
_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|pyx|pyi|pxd|rst|txt|md|cfg|"
    r"toml|ini|json|ya?ml|c|h|cc|cpp|hpp|js|ts|tsx|go|rs|java|rb|php|html|css|sh|in|ipynb|"
    r"csv|ecsv|xml|fits|dat|npy|log|patch|diff|lock))(?::(\d+))?\b"
)
_TB_FILE = re.compile(r'File "([^"]+)", line (\d+)')
_TEST_ID = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py(?:::[^\s'\"),;]+)+)")
_EXCEPTION = re.compile(
    r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Warning|Exit|Interrupt|Failure))\b"
)
_ERROR_LINE = re.compile(
    r"(?i)(\berror\b|\bexception\b|\bfailed\b|\bfailure\b|\bfatal\b|^E\s{2,}|assert|"
    r"\bundefined\b|not found|no such file|cannot|can't|\bsegfault|\babort)"
)
_SYMBOL = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_FAILED = re.compile(r"(?:^FAILED\s+(\S+)|^(\S+::\S+)\s+FAILED\b|^ERROR\s+(\S+::\S+))", re.M)
_PASSED = re.compile(r"(?:^PASSED\s+(\S+)|^(\S+::\S+)\s+PASSED\b)", re.MULTILINE)
_WRITES = re.compile(
    r"(?:(?<![<>&|0-9])>>?\s*|\btee\s+(?:-a\s+)?|\bsed\s+-i\S*\s+(?:(?:'[^']*'|\"[^\"]*\"|-e\s+"
    r"(?:'[^']*'|\"[^\"]*\"))\s+)+|\bpatch\s+(?:-p\d\s+)?)"
    r"((?:[\w.-]+/)*[\w-][\w.-]*\.\w+)"
)
# A fenced block's opening line (CommonMark: up to 3 spaces, 3+ backticks or tildes, an
# info string whose first word is the language); it closes at a line of the same fence
# character, at least as long, with nothing after it.
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")
_SHELLS = frozenset({"bash", "sh", "shell", "console", "zsh"})
_TRACEBACK = "Traceback (most recent call last):"


@dataclass(frozen=True, slots=True)
class Observation:
    """The facts of one item's text that a stub or a digest keeps."""

    exit_status: int | None
    lines: int
    first: tuple[str, ...]
    last: tuple[str, ...]
    errors: tuple[str, ...]  # error lines, first ones, in order
    exceptions: tuple[str, ...]  # exception names, first seen order
    failed_tests: tuple[str, ...]
    passed_tests: tuple[str, ...]
    paths: tuple[str, ...]  # "path" or "path:line", first seen order
    files: tuple[str, ...]  # the distinct files among them (and beyond the paths' cap)
    symbols: tuple[str, ...]  # names a def or class line defines
    writes: tuple[str, ...]  # files a command writes (sed -i, >, tee, patch)
    traceback: tuple[str, ...]  # the last traceback, never masked
    scanned_all: bool  # False when a huge text was scanned at its head and tail only

    @property
    def failed(self) -> bool:
        """Whether the output reports a failure (a non-zero exit, or failing tests)."""
        return bool(self.exit_status) or bool(self.failed_tests) or bool(self.traceback)


def _fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block in ``text``, in order; a block left open runs
    to the end. Fences are paired line by line, so the closing fence of one block is never
    read as the opening of the next (a python block before a bash block)."""
    blocks: list[tuple[str, str]] = []
    fence, lang = "", ""
    body: list[str] = []
    for line in text.splitlines():
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                blocks.append((lang, "\n".join(body)))
                fence = ""
            else:
                body.append(line)
            continue
        opened = _FENCE_OPEN.match(line)
        if opened:
            fence, lang, body = opened.group(1), opened.group(2).lower(), []
    if fence:
        blocks.append((lang, "\n".join(body)))
    return blocks


def _command_block(blocks: list[tuple[str, str]]) -> int | None:
    """Which of a turn's fenced blocks is its command (see ``command_of``), if any."""
    shell = [i for i, (lang, _) in enumerate(blocks) if lang in _SHELLS]
    untagged = [i for i, (lang, _) in enumerate(blocks) if not lang]
    found = shell or untagged
    return found[-1] if found else None


def command_of(text: str) -> str:
    """The shell command of an agent's turn, or "": its last fenced block tagged as a shell
    (bash, sh, shell, console, zsh), else its last untagged block. A block in another
    language (a python snippet the agent quotes) is never the command."""
    blocks = _fenced(text)
    at = _command_block(blocks)
    return "" if at is None else blocks[at][1].strip()


def drafts_of(text: str) -> str:
    """The code an agent's turn shows besides its command, or "": every other fenced
    block's body, in order (code it drafts, or quotes from what it read)."""
    blocks = _fenced(text)
    at = _command_block(blocks)
    return "\n".join(body for i, (_, body) in enumerate(blocks) if i != at)


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` on one line, whitespace collapsed, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _middle_errors(text: str, start: int, end: int) -> list[str]:
    """The error lines of ``text[start:end]`` found by ``_MIDDLE_MARKS``, in order."""
    found: dict[int, str] = {}
    for mark in _MIDDLE_MARKS:
        at = text.find(mark, start, end)
        for _ in range(_MIDDLE_HITS):
            if at < 0 or len(found) >= _MAX_ERRORS:
                break
            begin = text.rfind("\n", start, at) + 1 or start
            stop = text.find("\n", at, end)
            stop = end if stop < 0 else stop
            line = text[begin:stop]
            if _ERROR_LINE.search(line):
                found[begin] = line
            at = text.find(mark, stop, end)
    return [found[k] for k in sorted(found)][:_MAX_ERRORS]


def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


def _unique(items: list[str], limit: int = _MAX_NAMES) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
            if len(seen) >= limit:
                break
    return tuple(seen)


def _tail_traceback(lines: list[str]) -> tuple[str, ...]:
    """The last traceback: from its header to the exception line under it."""
    start = max((i for i, ln in enumerate(lines) if _TRACEBACK in ln), default=-1)
    if start < 0:
        return ()
    end = start + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
        end += 1
    block = [_cut(ln) for ln in lines[start : min(end + 1, len(lines))]]
    if len(block) > _MAX_TRACEBACK:  # recursion: the head says where, the tail what
        keep = _MAX_TRACEBACK // 4
        skipped = len(block) - _MAX_TRACEBACK
        block = [
            *block[:keep],
            f"  … {skipped} traceback lines …",
            *block[-(_MAX_TRACEBACK - keep) :],
        ]
    return tuple(block)


def names_in(
    text: str,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(paths, test ids, exception names, defined symbols) in ``text``, first seen order."""
    tests = [_strip_id(m) for m in _TEST_ID.findall(text)]
    paths = [p for p, _ in _PATH.findall(text)]
    return (
        _unique(paths, 10**6),
        _unique(tests, 10**6),
        _unique(_EXCEPTION.findall(text), 10**6),
        _unique(_SYMBOL.findall(text), 10**6),
    )


def _file_of(path: str) -> str:
    """``a.py:12`` -> ``a.py``; ``a.py`` as it is."""
    head, _, tail = path.rpartition(":")
    return head if head and tail.isdigit() else path


def _strip_id(test: str) -> str:
    return test.rstrip(".:")


def observe(text: str, exit_status: int | None = None) -> Observation:
    """The facts of ``text`` (a tool output, or any turn): see ``Observation``.

    ``exit_status`` is the tool's, when the caller knows it; otherwise a
    ``<returncode>N</returncode>`` tag in the text (as agent harnesses print) is read.
    The text is read as a terminal shows it (``terminal_text``: no colour codes, progress
    lines in their last state).
    """
    text = terminal_text(text)
    whole = len(text) <= 2 * SCAN_CHARS
    start = text if whole else text[:SCAN_CHARS]
    end = "" if whole else text[-SCAN_CHARS:]
    middle = [] if whole else _middle_errors(text, SCAN_CHARS, len(text) - SCAN_CHARS)
    tag = _RETURNCODE.search(start[:200])
    if exit_status is None:
        exit_status = int(tag.group(1)) if tag else None
    if tag:  # the status is in the stub's label: its digits are no first line
        start = start[: tag.start()] + start[tag.end() :]
    start, end = _TAGS.sub("", start), _TAGS.sub("", end)
    body = start if whole else start + "\n" + end
    head = [ln for ln in start.splitlines() if ln.strip()]
    lines = [*head, *(ln for ln in end.splitlines() if ln.strip())]
    read = [*head, *middle, *lines[len(head) :]]  # every line scanned, in the text's order
    paths: list[str] = []
    for ln in (*middle, *read):  # a huge log's error lines first: its paths pass the cap
        for file, line in _TB_FILE.findall(ln):
            paths.append(f"{file}:{line}")
        for path, line in _PATH.findall(ln):
            paths.append(f"{path}:{line}" if line else path)
    errors = [_cut(ln) for ln in read if _ERROR_LINE.search(ln)]
    failed = [_strip_id(next(g for g in m if g)) for m in _FAILED.findall(body)]
    passed = [_strip_id(next(g for g in m if g)) for m in _PASSED.findall(body)]
    return Observation(
        exit_status=exit_status,
        lines=text.count("\n") + 1 if text else 0,
        first=tuple(_cut(ln) for ln in lines[:_FIRST_LINES]),
        last=tuple(_cut(ln) for ln in lines[_FIRST_LINES:][-_LAST_LINES:]),
        errors=_unique(errors, _MAX_ERRORS),
        exceptions=_unique(_EXCEPTION.findall("\n".join(read))),
        failed_tests=_unique(failed),
        passed_tests=_unique(passed),
        paths=_unique(paths),
        files=_unique([_file_of(p) for p in paths], _MAX_FILES),
        symbols=_unique(_SYMBOL.findall(body)),
        writes=_unique(_WRITES.findall(body)),
        traceback=_tail_traceback(lines),
        scanned_all=whole,
    )
