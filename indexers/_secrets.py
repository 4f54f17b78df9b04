"""Credentials in text, found by detect-secrets' plugins and redacted in place.

Yelp's detect-secrets (1.5, Apache-2.0) is the maintained detector: one plugin per provider
(AWS, GitHub, GitLab, Slack, Stripe, Twilio, SendGrid, npm, PyPI, OpenAI, JWTs, Azure,
Discord, Telegram, Mailchimp, …), private key blocks, credentials in URLs, password and
secret assignments (its keyword plugin) and high-entropy strings, each with its own false-
positive filters. We chose it over hand-written patterns because the provider formats are
its maintainers' job, over gitleaks/trufflehog because it is a Python library (no binary
to ship, nothing fetched at run time), and it runs offline.

Its scan is line by line and costs ~0.5 ms a line with every plugin; a workspace has
millions. So a prefilter picks the lines worth it, from the plugins' own patterns: each
pattern's longest required literal (``AKIA``, ``xox``, ``/:_authToken=``) and the keyword
plugin's words, all found in one Aho-Corasick pass per file (pyahocorasick), then the
pattern itself on those lines; patterns with no literal of 3+ characters on lines holding
a long token; and any assignment of a long quoted token, for the entropy plugins.

On a line that passes, only the plugins whose own patterns match it run (the rest could
find nothing there), and a line repeated in a text is scanned once: the library's filters
around each plugin cost ~0.1 ms, and keyword-dense text (a log of ``password=…`` lines)
sends every line through.

A secret is replaced by ``[REDACTED:kind]`` wherever it occurs in the text (all values in
one pass), and a private key block is blanked to its END line, so line numbers and spans do
not move.
"""

from __future__ import annotations

import bisect
import importlib
import itertools
import os
import posixpath
import re
import string
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

try:  # the regular-expression parser: re._parser since 3.11, sre_parse before
    _sre_parse: Any = importlib.import_module("re._parser")
    _sre_constants: Any = importlib.import_module("re._constants")
except ImportError:  # pragma: no cover - Python 3.10
    _sre_parse = importlib.import_module("sre_parse")
    _sre_constants = importlib.import_module("sre_constants")

__all__ = ["Redacted", "Redaction", "redact", "redacted_path", "secret_kinds", "secret_paths"]

# Public IP addresses are not credentials (and docs are full of them).
_SKIPPED_PLUGINS = frozenset({"IPPublicDetector"})
_ENTROPY_PLUGINS = frozenset({"Base64HighEntropyString", "HexHighEntropyString"})
_ENTROPY_KINDS = frozenset({"base64-high-entropy-string", "hex-high-entropy-string"})
# An assignment (or a key: value) of a long quoted token: what the entropy plugins judge.
_QUOTED_TOKEN = re.compile(r"""(?:=>|[=:])\s*[rbufRBUF]{0,2}["'][A-Za-z0-9+/=_\-.~]{20,}["']""")
# Private key blocks: PEM and OpenSSH (five dashes), SSH2/RFC 4716 (four dashes and spaces),
# and PuTTY's .ppk (its header line through its Private-MAC line).
_BEGIN_KEY = re.compile(r"-{4,5} ?BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)? ?-{4,5}"
                        r"|PuTTY-User-Key-File-\d+:")
_END_KEY = re.compile(r"-{4,5} ?END[A-Z0-9 ]*PRIVATE KEY( BLOCK)? ?-{4,5}|Private-MAC:.*")
# detect-secrets drops every finding on a line shaped like ``name = call(...)``; that rule is
# meant for its keyword plugin (``secret = get_secret()`` holds no secret), not for a
# provider's token passed to a call (``Github("ghp_…")``), so it is applied to that one only.
_INDIRECT = "detect_secrets.filters.heuristic.is_indirect_reference"
_KEYWORD = "Secret Keyword"
_URL_CREDENTIALS = "basic-auth-credentials"
# A shorter literal ("AC", "gh", "cl") is in most lines of code: its patterns are tried
# only where a long token stands (their secrets are all long).
_MIN_ANCHOR = 3
_STEMS = ("key", "pass")  # shared by most of the keyword plugin's words
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-]{24,}")  # where an unanchored pattern may match
_LITERAL, _SUBPATTERN, _BRANCH = (_sre_constants.LITERAL, _sre_constants.SUBPATTERN,
                                  _sre_constants.BRANCH)  # fmt: skip
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-+/=.~")
_MIN_VALUE = 6  # shorter "secrets" are placeholders or noise; never replaced file-wide
# Free text (a note, a goal, a tool's output) and the files written like it: there a
# `PASSWORD=value` or `secret: value` needs no quotes, which the keyword plugin asks for
# outside configuration files. Such text is also read as an .ini file is, and a value
# found only that way is kept when it looks made, not written (see ``_credible``).
_FREE_FORM = (".md", ".markdown", ".rst", ".txt", ".adoc", ".sh", ".bash", ".zsh", ".fish",
              ".env", ".envrc", ".conf", ".cmd", ".bat", ".ps1", ".log")  # fmt: skip
_FREE_NAMES = ("dockerfile", "containerfile", "makefile", "procfile", "jenkinsfile")
_AS_CONFIG = "text.ini"
# An HTTP Authorization header's credentials, in any file: detect-secrets finds a bearer
# JWT but not ``Basic <base64>`` or ``Token <hex>`` (what GitHub Actions writes into
# .git/config as ``extraheader = AUTHORIZATION: basic …``, and what clients send).
_AUTH_KIND = "authorization-header"
_AUTH_HEADER = re.compile(
    r"""authorization["']?\s*[:=]\s*["']?(?:(basic|bearer|token|digest|negotiate|ntlm|"""
    r"""apikey|key)\s+)?([A-Za-z0-9+/_\-.~]{8,}={0,2})""", re.IGNORECASE)
_MAX_PER_LINE = 4


@dataclass(frozen=True, slots=True)
class Redaction:
    """One secret taken out: its kind (``aws-access-key``) and 1-based line."""

    kind: str
    line: int


@dataclass(frozen=True, slots=True)
class Redacted:
    """A text with its secrets replaced, and what was replaced."""

    text: str
    redactions: tuple[Redaction, ...]

    def kinds(self) -> dict[str, int]:
        """How many secrets of each kind were taken out."""
        return dict(Counter(r.kind for r in self.redactions))


class _Gate:
    """Which lines are worth detect-secrets' time, decided from its plugins' own patterns:
    a pattern that starts with a literal (``AKIA``, ``ghp``, ``xox``, ``-----BEGIN``) is
    tried on the lines holding that literal; one that does not, on lines holding a long
    token; the keyword plugin's words (``password``, ``api_key``) and an assignment of a
    long quoted token send a line straight through."""

    def __init__(self, plugins: list[Any]) -> None:
        from detect_secrets.plugins.keyword import DENYLIST

        self.anchored: list[tuple[str, bool, re.Pattern[str]]] = []  # literal, folded, pattern
        self.loose: list[re.Pattern[str]] = []
        for cls in plugins:
            if cls.__name__ in _ENTROPY_PLUGINS:
                continue
            for pattern in getattr(cls(), "denylist", ()):
                if cls.__name__ == "PrivateKeyDetector" and "BEGIN" in pattern.pattern:
                    continue  # key blocks are found and blanked by ``redact`` itself
                folded = bool(pattern.flags & re.I)
                heads = _prefixes(pattern)
                inner = _required_run(pattern)
                if len(inner) > min((len(h) for h in heads or ()), default=0):
                    heads = [inner]  # rarer than the prefix ("_authToken=" over "//")
                if heads is None or min(len(h) for h in heads) < _MIN_ANCHOR:
                    self.loose.append(pattern)
                else:
                    self.anchored.extend((h.lower() if folded else h, folded, pattern)
                                         for h in heads)  # fmt: skip
        # "api_?key" -> "api_key", "apikey": the keyword plugin's words as plain text.
        spelled = ((k.replace("_?", "_"), k.replace("_?", "")) for k in DENYLIST)
        self.words = sorted({w for pair in spelled for w in pair})
        # One scan per stem the words share ("api_key", "db_key", ... all hold "key").
        self.stems: dict[str, list[str]] = {}
        for word in self.words:
            stem = next((c for c in _STEMS if c in word), word)
            self.stems.setdefault(stem, []).append(word)
        self.patterns: dict[tuple[str, bool], list[re.Pattern[str]]] = {}
        for head, fold, pattern in self.anchored:
            self.patterns.setdefault((head, fold), []).append(pattern)
        self.folded_literals = _automaton([*self.stems, *(h for h, f in self.patterns if f)])
        self.cased_literals = _automaton([h for h, f in self.patterns if not f])

    def lines(self, text: str) -> set[int]:
        """0-based numbers of the lines to scan."""
        lines = text.split("\n")
        starts = [0, *itertools.accumulate(len(line) + 1 for line in lines[:-1])]
        folded = text.lower()
        hit: set[int] = set()

        def line_of(offset: int) -> int:
            return bisect.bisect_right(starts, offset) - 1

        # Every literal of both kinds in one pass per text (Aho-Corasick), then per line
        # the exact check: the keyword plugin's words, or the anchored pattern itself.
        found: set[tuple[int, str, bool]] = set()
        for end, literal in self.folded_literals.iter(folded):
            found.add((line_of(end), literal, True))
        for end, literal in self.cased_literals.iter(text):
            found.add((line_of(end), literal, False))
        folded_lines = folded.split("\n")
        for n, literal, fold in sorted(found):
            if n in hit:
                continue
            words = self.stems.get(literal, ()) if fold else ()
            if any(w in folded_lines[n] for w in words) or any(
                p.search(lines[n]) for p in self.patterns.get((literal, fold), ())
            ):
                hit.add(n)
        hit.update(line_of(m.start()) for m in _QUOTED_TOKEN.finditer(text))
        if self.loose:
            for n in {line_of(m.start()) for m in _LONG_TOKEN.finditer(text)} - hit:
                if any(p.search(lines[n]) for p in self.loose):
                    hit.add(n)
        return hit


def _automaton(literals: list[str]) -> Any:
    """An Aho-Corasick automaton yielding each literal found (one pass over a text)."""
    import ahocorasick

    automaton = ahocorasick.Automaton()
    for literal in dict.fromkeys(literals):
        automaton.add_word(literal, literal)
    if not literals:
        return _NoLiterals()
    automaton.make_automaton()
    return automaton


class _NoLiterals:
    """What an automaton with no literals finds: nothing."""

    def iter(self, text: str) -> Iterator[tuple[int, str]]:
        return iter(())


def _prefixes(pattern: re.Pattern[str]) -> list[str] | None:
    """Literal texts one of which every match of ``pattern`` starts with; None if unknown."""
    try:
        ops = list(_sre_parse.parse(pattern.pattern, pattern.flags))
    except Exception:  # an unparsable pattern is simply not anchored
        return None
    return _op_prefixes(ops)


def _required_run(pattern: re.Pattern[str]) -> str:
    """The longest run of literal text every match of ``pattern`` holds (its top-level
    literals, in a row); "" when it has none."""
    try:
        ops = list(_sre_parse.parse(pattern.pattern, pattern.flags))
    except Exception:  # an unparsable pattern has no known run
        return ""
    best, run = "", ""
    for op, arg in ops:
        run = run + chr(arg) if op is _LITERAL else ""
        best = max(best, run, key=len)
    return best


def _op_prefixes(ops: list[Any]) -> list[str] | None:
    out = [""]
    for op, arg in ops:
        if op is _LITERAL:
            out = [p + chr(arg) for p in out]
            continue
        if op is _SUBPATTERN:
            sub = _op_prefixes(list(arg[-1]))
            if sub is not None:
                out = [p + s for p in out for s in sub]
        elif op is _BRANCH:
            subs = [_op_prefixes(list(b)) for b in arg[1]]
            if all(s for s in subs):
                out = [p + s for p in out for sub in subs for s in sub or ()]
        break
    out = [p for p in out if p]
    return out or None


class _Detector:
    """detect-secrets configured once per process (its settings are process-global)."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.settings import configure_settings_from_baseline

        mapping: dict[str, Any] = get_mapping_from_secret_type_to_class()
        plugins = [cls for cls in mapping.values() if cls.__name__ not in _SKIPPED_PLUGINS]
        configure_settings_from_baseline({"plugins_used": [{"name": c.__name__} for c in plugins]})
        from detect_secrets.filters.heuristic import is_indirect_reference
        from detect_secrets.settings import get_plugins, get_settings

        get_settings().disable_filters(_INDIRECT)
        self.indirect = is_indirect_reference
        self.gate = _Gate(plugins)
        self.plugins = [(plugin, _cue(plugin)) for plugin in get_plugins()]
        self.kinds = sorted(_slug(t) for t, c in mapping.items()
                            if c.__name__ not in _SKIPPED_PLUGINS)  # fmt: skip
        self.lock = threading.Lock()

    def scan(self, path: str, line: str, *, keyword_only: bool = False) -> list[tuple[str, str]]:
        """(kind, secret value) pairs detect-secrets finds on one line, after its filters
        (``keyword_only``: its keyword plugin's alone)."""
        filename = path or "text"
        stripped = line.rstrip()
        plugins = [plugin for plugin, cue in self.plugins
                   if (not keyword_only or plugin.secret_type == _KEYWORD)
                   and cue(stripped, filename)]  # fmt: skip
        if not plugins:
            return []
        with self.lock:  # its plugins and filters cache state between calls
            found = _scan_line(plugins, filename, line)
        indirect = any(s.type == _KEYWORD for s in found) and self.indirect(line)
        return [(_slug(s.type), s.secret_value or "") for s in found
                if not (indirect and s.type == _KEYWORD)]  # fmt: skip


def _cue(plugin: Any) -> Callable[[str, str], bool]:
    """Whether ``plugin`` can find anything on a line of a file: a regex plugin reports
    only its own patterns' matches, the entropy plugins only quoted strings, the keyword
    plugin only its file type's patterns' matches (the ones it would run). Checking that is
    ~10x cheaper than running the plugin and detect-secrets' filters around it."""
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import (
        QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
        REGEX_BY_FILETYPE,
        KeywordDetector,
    )
    from detect_secrets.util.filetype import determine_file_type

    if isinstance(plugin, KeywordDetector):  # as its analyze_line picks its patterns

        def keyword(line: str, filename: str) -> bool:
            patterns = REGEX_BY_FILETYPE.get(
                determine_file_type(filename), QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
            )
            return any(p.search(line) for p in patterns)

        return keyword
    if isinstance(plugin, RegexBasedDetector):
        patterns = list(plugin.denylist)
    elif isinstance(plugin, HighEntropyStringsPlugin):
        patterns = [plugin.regex]
    else:  # a plugin of another shape: always run
        return lambda line, filename: True
    return lambda line, filename: any(p.search(line) for p in patterns)


def _scan_line(plugins: list[Any], filename: str, line: str) -> list[Any]:
    """detect-secrets' line scan (``core.scan._process_line_based_plugins``, pinned 1.5.0)
    with the plugins chosen per line: its line filters, each plugin, then its secret
    filters. The line is scanned alone, as line 1: it has no previous line (as line 2 it
    would be its own previous line, for the allowlist's ``nextline`` comment)."""
    from detect_secrets.core.scan import _is_filtered_out
    from detect_secrets.core.scan import _scan_line as scan_plugin
    from detect_secrets.util.code_snippet import get_code_snippet

    context = get_code_snippet(lines=[line], line_number=1)
    line = line.rstrip()
    if _is_filtered_out(["line"], filename=filename, line=line, context=context):
        return []
    found = []
    for plugin in plugins:
        for secret in scan_plugin(plugin=plugin, filename=filename, line=line, line_number=1,
                                  context=context):  # fmt: skip
            if not _is_filtered_out(["context"], filename=secret.filename, line=line,
                                    secret=secret.secret_value, plugin=plugin,
                                    context=context):  # fmt: skip
                found.append(secret)
    return found


_detector: _Detector | None = None
_init = threading.Lock()


def _get() -> _Detector:
    global _detector
    found = _detector  # once built, no lock: a lock taken on every call (every redact) was
    if found is not None:  # often held by some thread when another forked, and the child
        return found  # inherited it held forever
    with _init:
        if _detector is None:
            _detector = _Detector()
        return _detector


def _after_fork() -> None:
    """In a forked child: a fresh lock (the parent's may have been held by a thread that
    does not exist here); a detector half-built at the fork was never published."""
    global _init
    _init = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork)


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


_KEYWORD_KIND = _slug(_KEYWORD)  # "secret-keyword", as scan names the keyword plugin's finds


def _is_alphabet(value: str) -> bool:
    """Mostly runs of consecutive characters (``ABCDEFGH…234567``, ``abc…xyz0123…``): a
    charset written out, which entropy alone mistakes for a key."""
    steps = [ord(b) - ord(a) for a, b in itertools.pairwise(value)]
    return bool(steps) and sum(1 for d in steps if d == 1) >= 0.7 * len(steps)


def _whole_token(line: str, value: str) -> str:
    """The whole token around ``value`` on ``line``: some plugins report only part of it
    (GitLab's its prefix, the JWT one its first two segments)."""
    at = line.find(value)
    if at < 0 or not value:
        return value
    start, end = at, at + len(value)
    while start > 0 and line[start - 1] in _TOKEN_CHARS and line[start - 1] != "=":
        start -= 1  # base64's '=' pads the end: one on the left is an assignment's
    while end < len(line) and line[end] in _TOKEN_CHARS:
        end += 1
    return line[start:end]


def _replace_short(line: str, value: str, marker: str) -> str:
    """``line`` with ``value`` replaced where it stands as a whole token (a short value is
    often part of a word elsewhere on the line)."""
    pattern = rf"(?<![{re.escape(''.join(sorted(_TOKEN_CHARS)))}]){re.escape(value)}" \
              rf"(?![{re.escape(''.join(sorted(_TOKEN_CHARS - {'.', '='})))}])"
    return re.sub(pattern, marker, line)


def _free_form(path: str) -> bool:
    """Whether ``path`` is free text (no path: a note, a goal, a tool's output) or a file
    written like it: docs, shell scripts, environment files, Dockerfiles."""
    if not path:
        return True
    name = posixpath.basename(path.replace("\\", "/")).lower()
    return (name.endswith(_FREE_FORM) or name.startswith((".env", *_FREE_NAMES))
            or name in _FREE_NAMES)  # fmt: skip


def _credible(value: str) -> bool:
    """Whether an unquoted value looks made, not written: 8+ characters of two or more of
    lowercase, uppercase, digits and symbols, and no call or subscript (``hunter2hunter2``
    and ``Xk29fjQ8zLp3Qa`` are; ``expected:``, ``changeme`` and ``get()`` are not)."""
    v = value.rstrip(":;,.")
    kinds = (any(c.islower() for c in v), any(c.isupper() for c in v),
             any(c.isdigit() for c in v), any(not c.isalnum() for c in v))  # fmt: skip
    return len(v) >= 8 and sum(kinds) >= 2 and not any(c in v for c in "()[]{}$<>")


def _findings(detector: _Detector, path: str, line: str) -> list[tuple[str, str]]:
    """What detect-secrets finds on the line as the file ``path`` is read, and in free
    text also what its keyword plugin finds reading the line as configuration
    (``_FREE_FORM``)."""
    found = detector.scan(path, line)
    if not _free_form(path):
        return found
    seen = {value for _, value in found}
    rest = line
    for _ in range(_MAX_PER_LINE):  # a configuration value runs to the line's end: cut it
        hits = [v for _, v in detector.scan(_AS_CONFIG, rest, keyword_only=True)]
        words = hits[0].split() if hits else []
        if not words:
            break
        value = words[0].rstrip(",;.")  # prose's punctuation after the value
        if value not in seen and _credible(value):
            seen.add(value)
            found.append((_KEYWORD_KIND, value))
        rest = rest[rest.find(value) + len(value):]  # then the next assignment on the line
    return found


def _auth_headers(line: str) -> list[tuple[str, str]]:
    """The credentials of the Authorization headers on ``line`` (``_AUTH_HEADER``): after a
    scheme (``Basic``, ``Token``, …), or without one a long token with a digit and no dot
    (``authorization = request.headers.get`` is code, not a credential)."""
    return [(_AUTH_KIND, m.group(2)) for m in _AUTH_HEADER.finditer(line)
            if m.group(1) or (len(m.group(2)) >= 20 and "." not in m.group(2)
                              and any(c.isdigit() for c in m.group(2)))]  # fmt: skip


def secret_kinds() -> list[str]:
    """Every kind of secret that is looked for, as ``[REDACTED:kind]`` names it."""
    return [*_get().kinds, "private-key-block", _AUTH_KIND]


def redact(text: str, path: str = "") -> Redacted:
    """``text`` with every secret detect-secrets finds replaced by ``[REDACTED:kind]``
    (each occurrence of the value, anywhere in the text) and private key blocks blanked to
    their END line; the line count never changes. ``path`` lets the plugins judge by file
    type (a ``.py`` assignment, a ``.yaml`` key)."""
    detector = _get()
    if not text:
        return Redacted(text, ())
    wanted = detector.gate.lines(text)
    keyed = "PRIVATE KEY" in text or "PuTTY-User-Key-File" in text
    authed = "uthorization" in text or "UTHORIZATION" in text
    if not wanted and not keyed and not authed:
        return Redacted(text, ())
    lines = text.split("\n")
    redactions: list[Redaction] = []
    values: dict[str, str] = {}  # replaced wherever they occur
    short: list[tuple[int, str, str]] = []  # (line, value, kind): replaced on their line only
    in_key = False
    memo: dict[str, list[tuple[str, str]]] = {}  # a line's findings hang on its text alone
    for i, line in enumerate(lines):
        if in_key:  # inside a private key block: blank it through its END line
            in_key = not _END_KEY.search(line)
            lines[i] = ""
            continue
        begin = _BEGIN_KEY.search(line) if keyed else None
        if begin:
            end = _END_KEY.search(line, begin.end())
            if end:  # one line: a key in JSON ("-----BEGIN …\nMII…\n-----END …-----")
                lines[i] = line[: begin.start()] + "[REDACTED:private-key]" + line[end.end() :]
            else:
                lines[i] = line[: begin.start()] + "[REDACTED:private-key]"
                in_key = True
            redactions.append(Redaction("private-key", i + 1))
            continue
        headers = _auth_headers(line) if authed else []
        if i not in wanted and not headers:
            continue
        if i in wanted and line not in memo:
            memo[line] = _findings(detector, path, line)
        for kind, found in [*memo.get(line, ()), *headers]:
            value = _whole_token(line, found)
            if kind == "private-key" or not found.strip():
                continue
            if kind in _ENTROPY_KINDS and _is_alphabet(value):
                continue  # an alphabet table (base32's, a charset), not a secret
            if len(value) < _MIN_VALUE:  # placeholders ("xxx"), but a URL's password is one
                if kind != _URL_CREDENTIALS:
                    continue
                short.append((i, value, kind))  # on its line only, not file-wide
            else:
                values.setdefault(value, kind)
                if len(found) >= _MIN_VALUE:  # as found too: another line may hold it alone
                    values.setdefault(found, kind)
            redactions.append(Redaction(kind, i + 1))
    for i, value, kind in short:
        lines[i] = _replace_short(lines[i], value, f"[REDACTED:{kind}]")
    return Redacted(_replace_values("\n".join(lines), values), tuple(redactions))


def _replace_values(text: str, values: dict[str, str]) -> str:
    """``text`` with every occurrence of each value covered by ``[REDACTED:kind]``, in one
    pass however many values there are (Aho-Corasick finds all occurrences at once).
    Occurrences that overlap are covered by one marker, named for the longest of them: no
    character of any occurrence stays, and a marker is never written inside another."""
    if not values:
        return text
    spans = sorted((end + 1 - len(value), end + 1, value)
                   for end, value in _automaton(list(values)).iter(text))  # fmt: skip
    out: list[str] = []
    at = 0  # end of the text already written
    run: list[Any] = []  # the merged run being built: [start, end, longest value]
    for start, end, value in [*spans, (len(text) + 1, 0, "")]:
        if run and start < run[1]:  # overlaps the run
            run[1] = max(run[1], end)
            run[2] = value if len(value) > len(run[2]) else run[2]
            continue
        if run:
            out += [text[at : run[0]], f"[REDACTED:{values[run[2]]}]"]
            at = run[1]
        run = [start, end, value]
    return "".join([*out, text[at:]])


# A credential in a path is a token of 16 or more characters (provider keys are 20-40+);
# only paths holding one are scanned, all at once (a walk lists tens of thousands).
_PATH_TOKEN = re.compile(r"[A-Za-z0-9_\-+=]{16,}")


def secret_paths(paths: Iterable[str]) -> set[str]:
    """The paths among ``paths`` whose names hold a credential (a folder or file named
    after a token): no store or answer may carry them."""
    scanned = [p for p in dict.fromkeys(paths) if "\n" not in p and _PATH_TOKEN.search(p)]
    if not scanned:
        return set()
    found = redact("\n".join(scanned))
    return {scanned[r.line - 1] for r in found.redactions}


def redacted_path(path: str) -> str:
    """``path`` with the credentials in it replaced (how a skipped one is named)."""
    return redact(path).text
