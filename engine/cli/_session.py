"""``cortex session …``: a planner's session from the shell, and from an agent's hooks.

Each command is a few lines over ``Workspace.session``: ``add`` journals a step (TEXT ``-``
reads standard input, any size, any bytes), ``decide`` a decision, ``show`` the steps (or
one in full, or the history lane a context of a budget would hold), ``compact`` and
``checkpoint`` write checkpoints, ``end`` saves the session's summary as a memory note.
``hook`` reads one Claude Code hook payload (``UserPromptSubmit``, ``PostToolUse``,
``PostToolUseFailure``) from standard input and adds it as a step of the session Claude
Code names, in the workspace it names: an agent's session is filled without changing the
agent.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from engine import Compaction, Config, ConfigError, Step, Workspace
from engine.cli._args import write_json
from engine.cli._text import terminal_safe
from engine.serve import to_json

__all__ = ["cmd_session", "hook_step"]

EXIT_OK = 0
_HOOK_ROLES = {"UserPromptSubmit": "user", "PostToolUse": "tool", "PostToolUseFailure": "tool"}


def _text(raw: str) -> str | bytes:
    """TEXT as given, or standard input's bytes for ``-`` (decoded, invalid bytes replaced,
    where the session stores it)."""
    return sys.stdin.buffer.read() if raw == "-" else raw


def _step_line(step: Step) -> str:
    tool = f" {step.tool}" if step.tool else ""
    return f"step {step.step} ({step.role.value}{tool}, {len(step.text):,} chars)"


def _compaction(done: Compaction, args: argparse.Namespace, out: TextIO) -> int:
    if args.json:
        write_json(to_json(done), out)
        return EXIT_OK
    out.write(f"checkpoint at step {done.step}: {len(done.kept)} steps whole, "
              f"{len(done.stubs)} stubs, {done.tokens:,}/{done.budget:,} tokens, "
              f"sha256 {done.checkpoint.sha256[:16]}\n")  # fmt: skip
    for stub in done.stubs:
        out.write(f"  {stub.ref}  {stub.short_form}\n")
    return EXIT_OK


def cmd_session(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    """Journal and read a planner's session: add, decide, show, compact, checkpoint, hook,
    end (its summary saved as a memory note)."""
    if args.action == "hook":
        return _hook(args, config, out)
    with Workspace.open(args.where, config) as ws:
        session = ws.session(args.session)
        if args.action in ("add", "decide"):
            if args.action == "add":
                step = session.add(args.role, _text(args.text), args.tool, args.error or None,
                                   args.exit_status)  # fmt: skip
            else:
                step = session.decide(args.text, args.rationale or "", args.evidence or ())
            if args.json:
                write_json(to_json(step), out)
            else:
                out.write(_step_line(step) + "\n")
            return EXIT_OK
        if args.action == "show":
            return _show(ws, session, args, out)
        if args.action == "end":
            saved = ws.end_session(args.session, args.scope)
            if args.json:
                write_json(to_json(saved), out)
            else:
                out.write(f"memory:{saved.id} {saved.action.value} (revision {saved.revision}): "
                          f"the summary of session {args.session}\n")  # fmt: skip
            return EXIT_OK
        if args.action == "compact":
            return _compaction(session.compact(args.load_bearing or (), args.budget, args.step,
                                               args.in_context), args, out)  # fmt: skip
        if args.load:
            return _compaction(session.load_checkpoint(args.step), args, out)
        if args.step is None:
            raise ConfigError("session checkpoint needs the STEP to checkpoint at (or --load)")
        return _compaction(session.checkpoint(args.step, args.budget), args, out)


def _show(ws: Workspace, session: Any, args: argparse.Namespace, out: TextIO) -> int:
    if args.lane is not None:
        lane = ws.session_lane(session.id, args.lane, args.goal, args.query)
        if args.json:
            write_json(to_json(lane), out)
        else:
            out.write(terminal_safe(lane.text) + "\n")
        return EXIT_OK
    if args.step is not None:
        step = session.step(args.step)
        end = "" if step.text.endswith("\n") else "\n"
        if args.json:
            write_json(to_json(step), out)
        else:
            out.write(terminal_safe(step.text) + end)
        return EXIT_OK
    steps = session.items()
    if not steps:
        session.step(1)  # raises NotFoundError naming the session
    if args.json:
        rows = []
        for step in steps:
            row = to_json(step)
            row["chars"] = len(step.text)
            del row["text"]
            rows.append(row)
        write_json({"session": session.id, "steps": rows}, out)
        return EXIT_OK
    for step in steps:
        first = step.text.strip().splitlines()[0][:100] if step.text.strip() else ""
        out.write(terminal_safe(f"{_step_line(step)}  {first}") + "\n")
    return EXIT_OK


def hook_step(payload: Mapping[str, Any]) -> tuple[str, str, str, str | None, bool | None]:
    """(session id, workspace folder, role, tool, is_error) of a Claude Code hook payload;
    ``ConfigError`` for a payload that is not a prompt or a tool's result."""
    event = payload.get("hook_event_name")
    if event not in _HOOK_ROLES:
        raise ConfigError(f"cortex session hook takes UserPromptSubmit, PostToolUse and "
                          f"PostToolUseFailure payloads, not {event!r}")  # fmt: skip
    session, cwd = payload.get("session_id"), payload.get("cwd")
    if not isinstance(session, str) or not isinstance(cwd, str):
        raise ConfigError("the hook payload has no session_id or cwd")
    tool = payload.get("tool_name") if event != "UserPromptSubmit" else None
    failed = True if event == "PostToolUseFailure" else None
    response = payload.get("tool_response")
    if isinstance(response, Mapping) and response.get("is_error") is True:
        failed = True
    return session, cwd, _HOOK_ROLES[str(event)], tool if isinstance(tool, str) else None, failed


def _hook_text(payload: Mapping[str, Any]) -> str:
    """The step's text: the prompt, or the tool's input (a command) and its output."""
    if payload.get("hook_event_name") == "UserPromptSubmit":
        prompt = payload.get("prompt")
        return prompt if isinstance(prompt, str) else ""
    parts: list[str] = []
    given = payload.get("tool_input")
    if isinstance(given, Mapping) and isinstance(given.get("command"), str):
        parts.append(f"$ {given['command']}")
    elif given:
        parts.append(json.dumps(given, ensure_ascii=False, sort_keys=True))
    response = payload.get("tool_response", payload.get("error"))
    if isinstance(response, Mapping):
        texts = [response[k] for k in ("stdout", "stderr", "output", "content", "error")
                 if isinstance(response.get(k), str) and response[k]]  # fmt: skip
        parts += texts or [json.dumps(response, ensure_ascii=False, sort_keys=True)]
    elif isinstance(response, str):
        parts.append(response)
    elif response is not None:
        parts.append(json.dumps(response, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def _hook(args: argparse.Namespace, config: Config, out: TextIO) -> int:
    raw = sys.stdin.buffer.read()
    try:
        payload = json.loads(raw.decode("utf-8", "replace"))
    except ValueError as exc:
        raise ConfigError(f"the hook payload on standard input is not JSON: {exc}") from exc
    if not isinstance(payload, Mapping):
        raise ConfigError("the hook payload must be a JSON object")
    session_id, cwd, role, tool, failed = hook_step(payload)
    where = args.where if args.path_option else Workspace.find(Path(cwd), config)
    with Workspace.open(where, config) as ws:
        step = ws.session(session_id).add(role, _hook_text(payload), tool, failed)
    if args.json:
        write_json(to_json(step), out)
    return EXIT_OK
