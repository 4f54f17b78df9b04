"""Input limits every surface shares. The library enforces them, so the CLI, HTTP and MCP
refuse the same request with the same message (the servers check first, before any work).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TypeVar

from engine.core._errors import ConfigError, UnknownReplayKeyError

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MAX_ITEMS",
    "MAX_K",
    "MAX_SIGNAL_BYTES",
    "MAX_TEXT_BYTES",
    "MIN_BUDGET_TOKENS",
    "check_budget",
    "check_items",
    "check_k",
    "check_model_citations",
    "check_step",
    "check_steps",
    "check_text",
    "check_total",
    "check_type",
    "parse_enum",
    "unknown_replay_key",
    "whole_number",
    "yes_no",
]

MIN_BUDGET_TOKENS = 64  # below this not even the instruction and a goal fit
MAX_BUDGET_TOKENS = 200_000  # a whole model context window; more is a mistake
MAX_TEXT_BYTES = 128 << 10  # a goal or query is an issue at most (71 KB, logs and all, is
# the longest of the SWE-bench sets here), not a file; more logs go in signals
MAX_ITEMS = 256  # signals, citations, tool results or state items in one call: far past any
# real turn; more is a caller dumping a log line by line
MAX_SIGNAL_BYTES = 256 << 10  # all tool signals (or tool results) of a call: a long
# traceback or test log, not a build's whole output
MAX_K = 100  # search results; past this a caller wants build_context's packing instead
# A number as a caller writes one: ASCII digits. str.isdigit() is true for "²", which int()
# refuses, and int() reads "٣" (Arabic-Indic) as 3; 30 digits is past any count or id, and
# int() refuses past 4,300 (with a ValueError, not a ConfigError).
_WHOLE = re.compile(r"[0-9]{1,30}")
_SIGNED = re.compile(r"-?[0-9]{1,30}")

_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")


def check_type(
    name: str, value: object, kind: type[object] | tuple[type[object], ...], what: str = ""
) -> None:
    """Refuse an argument that is not a ``kind`` (``what`` says what it must be, for a
    tuple of kinds): a ``ConfigError`` naming ``name``, where a wrong type failed deep
    inside with an ``AttributeError`` or a ``TypeError``."""
    if not isinstance(value, kind):
        raise _wrong_type(name, value, what or f"a {getattr(kind, '__name__', kind)}")


def _wrong_type(name: str, value: object, what: str) -> ConfigError:
    return ConfigError(f"{name} must be {what}, not {type(value).__name__}")


def check_text(name: str, value: object, most: int | None = MAX_TEXT_BYTES) -> str:
    """Refuse a goal, query or other text that is no ``str`` (None, bytes, a number), that
    holds a lone surrogate (no UTF-8 holds one: it failed later, in a tokenizer or SQLite),
    or that is over ``most`` bytes of UTF-8 (None: any size)."""
    if not isinstance(value, str):
        raise _wrong_type(name, value, "text")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError(f"{name} holds a lone surrogate (character {exc.start}): "
                          "not text") from None  # fmt: skip
    if most is not None and size > most:
        raise ConfigError(f"{name} is over {most} bytes; send a shorter one")
    return value


def check_items(name: str, items: Iterable[_T] | None, most: int | None = None) -> tuple[_T, ...]:
    """``items`` (a list, a tuple, any iterable; None is none) as a tuple of at most
    ``most`` items (None: any number). One string is refused, not read as one item per
    character (``constraints="keep the API"`` pinned one constraint per letter), as are
    bytes and a mapping (its keys)."""
    if items is None:
        return ()
    if isinstance(items, str | bytes | bytearray | Mapping) or not isinstance(items, Iterable):
        one = " (for one item pass [item])" if isinstance(items, str | bytes) else ""
        raise ConfigError(f"{name} must be a list, not {type(items).__name__}{one}")
    out = tuple(items)
    if most is not None and len(out) > most:
        raise ConfigError(f"{name} has over {most} items")
    return out


def check_total(name: str, texts: Iterable[str], most: int = MAX_SIGNAL_BYTES) -> None:
    """Refuse texts (a call's tool signals, its tool results) that are over ``most``
    bytes of UTF-8 together."""
    if sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) > most:
        raise ConfigError(f"{name} are over {most} bytes; send less")


def check_step(name: str, value: object) -> int | None:
    """A step number that selects steps up to it (``upto``, ``history_upto``): None for
    all, else a whole number, 0 or more (a negative one counted from the end, as a Python
    slice does, and silently dropped the newest steps)."""
    if value is not None and (type(value) is not int or value < 0):
        raise ConfigError(f"{name} must be a step number, 0 or more, not {value!r}")
    return value


def check_steps(name: str, values: object) -> tuple[int, ...]:
    """Step numbers (``load_bearing``, ``in_context``): a list of whole numbers."""
    steps: tuple[object, ...] = check_items(name, values)  # type: ignore[arg-type]
    out: list[int] = []
    for v in steps:
        if type(v) is not int:
            raise ConfigError(f"{name} must be a list of step numbers, not one holding {v!r}")
        out.append(v)
    return tuple(out)


def check_k(k: object, most: int | None = MAX_K) -> int:
    """``k`` search results: a whole number within 1..``most`` (the CLI's and the servers'
    answers are bounded; the library, in the caller's process, takes any number: the eval
    harness ranks every candidate)."""
    if type(k) is not int or not 1 <= k <= (k if most is None else most):
        within = "of at least 1" if most is None else f"within 1..{most}"
        raise ConfigError(f"k must be a whole number {within}, got {k!r}")
    return k


def check_budget(budget: object, name: str = "budget_tokens") -> int:
    """A context's token budget: a whole number within the budget range."""
    low, high = MIN_BUDGET_TOKENS, MAX_BUDGET_TOKENS
    if type(budget) is not int or not low <= budget <= high:
        raise ConfigError(f"{name} must be a whole number within {low}..{high}, got {budget!r}")
    return budget


def check_model_citations(cited: object) -> None:
    """Model citations: a list of numbers (``3``) or markers (``"[3]"``, ``"memory:12"``);
    ``True`` or ``1.0`` is no citation number (JSON keeps them apart, so do we)."""
    if isinstance(cited, str | bytes) or not isinstance(cited, Sequence):
        # "12" would read as citations 1 and 2
        raise ConfigError(f"model_citations must be a list of numbers or \"[n]\" markers, "
                          f"not {type(cited).__name__}")  # fmt: skip
    for c in cited:
        if isinstance(c, bool) or not isinstance(c, int | str):
            raise ConfigError(f"model_citations must be a list of numbers or \"[n]\" markers, "
                              f"not {type(c).__name__} {c!r}")  # fmt: skip


def parse_enum(kind: type[_E], value: object, what: str) -> _E:
    """``value`` as a member of ``kind`` (a member, or its string value); a ``ConfigError``
    listing the choices otherwise."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in {m.value for m in kind}:
        return kind(value)
    choices = ", ".join(m.value for m in kind)
    raise ConfigError(f"unknown {what} {value!r}; use one of: {choices}")


def whole_number(name: str, raw: str, *, signed: bool = False) -> int:
    """``raw`` read as a whole number written in ASCII digits (a leading ``-`` too when
    ``signed``): a query parameter, a path segment, a note id, an argument, a setting.
    Anything else is a ``ConfigError`` naming ``name``; ranges are checked where the number
    is used.

    >>> whole_number("k", "12")
    12
    """
    if (_SIGNED if signed else _WHOLE).fullmatch(raw) is None:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise ConfigError(f"{name} must be a whole number (digits 0-9), got {shown!r}")
    return int(raw)


def yes_no(name: str, raw: str) -> bool:
    """A yes or a no as a setting or a query flag is written (1/0, true/false, yes/no,
    on/off; empty is no); other words are refused: ``CORTEX_LEDGER=maybe`` turned the ledger
    off, ``hard=True`` left a note's text in the file."""
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("", "0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be one of 1/0, true/false, yes/no, on/off, got {raw!r}")


def unknown_replay_key(replay_key: str, why: str = "", *, recorded_by: str = ""
                       ) -> UnknownReplayKeyError:  # fmt: skip
    """The one error for a replay key no turn was recorded under (``why``: what this
    process knows of the key, where it knows more), or, ``recorded_by`` another user, none
    of the caller's (turns are read back per user; an auditor names whose)."""
    if recorded_by:
        return UnknownReplayKeyError(
            f"unknown replay key {replay_key!r}: no turn of this user's recorded under it; "
            f"user {recorded_by!r} recorded one (turns are read back per user; an auditor's "
            "replay, ledger show and ledger log take --user NAME or --all-users)"
        )
    said = f"unknown replay key {replay_key!r}: no turn recorded under it"
    return UnknownReplayKeyError(f"{said} ({why})" if why else said)
