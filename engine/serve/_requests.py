"""Request fields as every surface reads them: the same names, types and checks for MCP
arguments, HTTP bodies and query strings, so the same request means the same thing.

Each reader raises ``ConfigError`` naming the field (HTTP 400, an MCP tool error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core import (
    ConfigError,
    SessionState,
    Turn,
    check_budget,
    check_items,
    check_k,
    check_model_citations,
)
from ledger import ToolResult

__all__ = [
    "Proof",
    "evidence_of",
    "field",
    "only",
    "proof_of",
    "refusal",
    "state_of",
    "steps_of",
    "strings",
    "tool_results_of",
    "wrong_type",
]

_STATE_FIELDS = ("recent_turns", "constraints", "subgoals", "session")


@dataclass(frozen=True, slots=True)
class Proof:
    """What a citation said a span held: its path and the sha256 of its text."""

    path: str
    sha256: str


def field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    """``body[name]``, checked to be a ``kind`` (a bool is never an int here)."""
    value = body.get(name, default)
    if value is default:
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise wrong_type(name, value, kinds)
    return value


# What each JSON kind is called in the library's own messages (``engine.core.check_*``).
_KIND_WORDS: dict[type, str] = {
    str: "text", int: "a whole number", float: "a number", bool: "true or false",
    list: "a list", dict: "an object",
}  # fmt: skip
# Fields whose library check says their range with the type (``budget_tokens must be a whole
# number within 64..200000, got '2000'``): the same words for a wrong type.
_RANGED: dict[str, Callable[[object], object]] = {"budget_tokens": check_budget, "k": check_k}


def wrong_type(name: str, value: object, kinds: Sequence[type]) -> ConfigError:
    """The library's message for a field of the wrong type (``query must be text, not
    int``; ``constraints must be a list, not str (for one item pass [item])``)."""
    wanted = [k for k in kinds if k is not type(None)]
    if wanted == [int] and name in _RANGED:
        try:
            _RANGED[name](value)
        except ConfigError as exc:
            return exc
    if wanted == [list]:
        try:
            check_items(name, value)  # type: ignore[arg-type]  # it refuses what is no list
        except ConfigError as exc:
            return exc
    words = [_KIND_WORDS.get(k, f"a {k.__name__}") for k in wanted]
    if len(kinds) > len(wanted):
        words.append("null")
    said = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
    return ConfigError(f"{name} must be {said}, not {_json_kind(value)}")


def _json_kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def only(body: Mapping[str, Any], *names: str) -> None:
    """Refuse a body with fields the route does not take (a misspelt ``budget_token``
    silently ignored would be worse than an error)."""
    unknown = sorted(set(body) - set(names))
    if unknown:
        raise ConfigError(f"unknown field(s): {', '.join(map(str, unknown))}; "
                          f"this route takes {', '.join(names)}")  # fmt: skip


def strings(body: Mapping[str, Any], name: str) -> list[str]:
    """``body[name]`` as a list of strings ([] when absent)."""
    items = field(body, name, list, [])
    if not all(isinstance(item, str) for item in items):
        raise ConfigError(f"{name} must be a list of strings")
    return list(items)


def state_of(raw: object) -> SessionState | None:
    """Session state from ``{recent_turns: [{role, text}], constraints: [str],
    subgoals: [str], session: str}`` (every key optional; None when ``raw`` is None)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError("state must be an object {recent_turns, constraints, subgoals}")
    unknown = sorted(set(raw) - set(_STATE_FIELDS))
    if unknown:
        raise ConfigError(f"state has unknown fields: {', '.join(map(str, unknown))}")
    turns: list[Turn] = []
    for item in field(raw, "recent_turns", list, []):
        role = item.get("role") if isinstance(item, Mapping) else None
        text = item.get("text") if isinstance(item, Mapping) else None
        if not (isinstance(role, str) and role and isinstance(text, str)) or set(item) - {
            "role",
            "text",
        }:
            raise ConfigError("a recent turn is {role: str, text: str}")
        turns.append(Turn(role, text))
    return SessionState(
        recent_turns=tuple(turns),
        constraints=tuple(strings(raw, "constraints")),
        subgoals=tuple(strings(raw, "subgoals")),
        session=field(raw, "session", str, ""),
    )


def proof_of(raw: object) -> Proof | None:
    """A proof of possession from ``{path, sha256}`` (None when ``raw`` is None)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"path", "sha256"}:
        raise ConfigError("proof is {path: str, sha256: str}")
    path, sha = raw.get("path"), raw.get("sha256")
    if not (isinstance(path, str) and path and isinstance(sha, str) and sha):
        raise ConfigError("proof is {path: str, sha256: str}")
    return Proof(path, sha)


def tool_results_of(items: object) -> list[ToolResult | str]:
    """Tool results: each a string or ``{name: str, ok: bool, summary: str}``."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError("tool_results must be a list")
    out: list[ToolResult | str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
            continue
        name = item.get("name") if isinstance(item, Mapping) else None
        ok = item.get("ok") if isinstance(item, Mapping) else None
        summary = item.get("summary", "") if isinstance(item, Mapping) else None
        if not (isinstance(name, str) and name and isinstance(ok, bool)) or not isinstance(
            summary, str
        ):
            raise ConfigError("a tool result is a string or {name: str, ok: bool, summary: str}")
        out.append(ToolResult(name, ok, summary))
    return out


def steps_of(raw: object, name: str = "load_bearing") -> list[int]:
    """Session step numbers: a list of whole numbers ([] when absent)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or any(type(n) is not int for n in raw):
        raise ConfigError(f"{name} must be a list of step numbers")
    return list(raw)


def evidence_of(raw: object) -> list[str | int]:
    """A decision's evidence: citation numbers or refs, each an int or a string."""
    if raw is None:
        return []
    if not isinstance(raw, list) or any(
        isinstance(e, bool) or not isinstance(e, int | str) for e in raw
    ):
        raise ConfigError("evidence must be a list of citation numbers or refs")
    return list(raw)


def _citations(raw: object, name: str) -> None:
    field({name: raw}, name, list, None)
    check_model_citations(raw)


def _strings(raw: object, name: str) -> None:
    strings({name: raw}, name)


# The readers HTTP applies to the fields whose items or keys a type alone does not check.
_READERS: dict[str, Callable[[Any, str], object]] = {
    "model_citations": _citations,
    "tool_signals": _strings,
    "objects": _strings,
    "types": _strings,
    "kinds": _strings,
    "tool_results": lambda raw, _: tool_results_of(raw),
    "proof": lambda raw, _: proof_of(raw),
    "state": lambda raw, _: state_of(raw),
    "evidence": lambda raw, _: evidence_of(raw),
    "load_bearing": steps_of,
    "in_context": lambda raw, name: None if raw is None else steps_of(raw, name),
}


def refusal(arguments: Mapping[str, Any], errors: Sequence[Mapping[str, Any]]) -> str:
    """One line, in HTTP's words, for arguments an MCP tool's schema refused (``errors``:
    the validator's, first first): HTTP's readers of the fields they concern are asked
    first, then the first error names its field in the library's words (``budget_tokens
    must be a whole number within 64..200000, got '2000'``, ``replay_key is required``)."""
    for name, read in _READERS.items():
        if name in arguments:
            try:
                read(arguments[name], name)
            except ConfigError as exc:
                return str(exc)
    first = errors[0] if errors else {}
    where = str((first.get("loc") or ("arguments",))[0])
    if first.get("type") == "missing":
        return f"{where} is required"
    kind = _PYDANTIC_KINDS.get(str(first.get("type", "")).split("_")[0])
    value = arguments.get(where)
    if kind is None:
        return f"{where} must not be {_json_kind(value)}"
    return str(wrong_type(where, value, (kind,)))


# The JSON kind a schema error wanted, by the first word of pydantic's error type
# (``string_type``, ``int_parsing``, ``list_type``, ``bool_parsing``, ``dict_type``).
_PYDANTIC_KINDS: dict[str, type] = {"string": str, "int": int, "float": float, "bool": bool,
                                    "list": list, "dict": dict}  # fmt: skip
