"""``cortex session`` and ``cortex context --session``, and the Claude Code hook command of
the README run on recorded hook payloads."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Config, StepRole, Workspace
from engine.cli import EXIT_ERROR, EXIT_OK, main
from tests.engine.cli.test_cli import _repo

HOOKS = Path(__file__).with_name("hooks")
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # built here: no secret in the fixtures
REPO_ROOT = Path(__file__).resolve().parents[3]
# The hook command as the README's .claude/settings.json runs it.
HOOK_COMMAND = [sys.executable, "-m", "engine.cli", "session", "hook"]


def _run(*argv: str, stdin: bytes | None = None) -> tuple[int, str]:
    out = io.StringIO()
    if stdin is None:
        return main(list(argv), out=out), out.getvalue()
    real = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        return main(list(argv), out=out), out.getvalue()
    finally:
        sys.stdin = real


def test_add_show_decide_compact_checkpoint(tmp_path: Path) -> None:
    """Each session action from the shell; TEXT - reads any bytes from standard input."""
    repo = _repo(tmp_path)
    p = ("--path", str(repo))
    assert _run("session", "add", "--session", "s", "--role", "user", "fix handler", *p)[0] == 0
    log = b"Traceback (most recent call last):\n  File \"app.py\", line 2\nKeyError: 'type'\n\xff"
    code, out = _run("session", "add", "--session", "s", "--role", "tool", "--tool", "bash",
                     "--exit-status", "1", "-", "--json", *p, stdin=log)  # fmt: skip
    step = json.loads(out)
    assert code == EXIT_OK and step["step"] == 2 and step["exit_status"] == 1
    assert "KeyError" in step["text"] and "\ufffd" in step["text"]
    assert _run("session", "decide", "--session", "s", "raise on no type", "--rationale",
                "callers expect it", "--evidence", "2", *p)[0] == 0  # fmt: skip
    code, out = _run("session", "show", "--session", "s", *p)
    assert code == EXIT_OK and out.count("\n") == 3 and "decision" in out
    code, out = _run("session", "show", "--session", "s", "--lane", "1000", *p)
    assert "raise on no type" in out and "KeyError" in out
    code, out = _run("session", "compact", "--session", "s", "--budget", "500", "--json", *p)
    done = json.loads(out)
    code, out = _run("session", "checkpoint", "--session", "s", "3", "--load", "--json", *p)
    assert json.loads(out)["checkpoint"] == done["checkpoint"]
    assert _run("session", "checkpoint", "--session", "s", "9", *p)[0] == EXIT_ERROR
    assert _run("session", "show", "--session", "nobody", *p)[0] == EXIT_ERROR


def test_show_lane_is_the_lane_a_context_of_that_budget_holds(tmp_path: Path) -> None:
    """``show --lane BUDGET --goal G --query Q`` prints the history lane build_context
    gives that session at that budget, byte for byte (it used the whole budget as the
    lane's room, with no request to recall lines for)."""
    from engine import Lane, SessionState

    repo = _repo(tmp_path)
    p = ("--path", str(repo))
    _run("session", "add", "--session", "s", "--role", "user", "fix handler", *p)
    for i in range(12):
        _run("session", "add", "--session", "s", "--role", "assistant",
             f"THOUGHT: try {i}\n```bash\npython app.py --case {i}\n```", *p)  # fmt: skip
        body = "\n".join(f"case {i} line {j}: handler value {j * i}" for j in range(40))
        _run("session", "add", "--session", "s", "--role", "tool", body, *p)
    goal, query = "fix the handler", "which case gave handler value 77"
    code, out = _run("session", "show", "--session", "s", "--lane", "2000", "--goal", goal,
                     "--query", query, "--json", *p)  # fmt: skip
    shown = json.loads(out)
    with Workspace.open(repo, Config()) as ws:
        ws.index()
        pack = ws.build_context(goal, query, state=SessionState(session="s"), budget_tokens=2000,
                                record=False)  # fmt: skip
    history = next(b for b in pack.prompt_blocks if b.lane is Lane.HISTORY)
    assert code == EXIT_OK and shown["text"] == history.text
    assert shown["tokens"] <= 800 and "~#" in shown["text"]


def test_compact_in_context(tmp_path: Path) -> None:
    """``compact --in-context N`` compacts only the steps held (the goal stays pinned), as
    the library does; a step the session lacks is an error."""
    repo = _repo(tmp_path)
    p = ("--path", str(repo))
    _run("session", "add", "--session", "s", "--role", "user", "fix handler", *p)
    for i in range(3):
        _run("session", "add", "--session", "s", "--role", "tool", f"output {i}", *p)
    code, out = _run("session", "compact", "--session", "s", "--in-context", "3",
                     "--in-context", "4", "--json", *p)  # fmt: skip
    done = json.loads(out)
    held = set(done["kept"]) | {int(s["ref"].rsplit("#", 1)[1]) for s in done["stubs"]}
    assert code == EXIT_OK and held == {1, 3, 4}
    with Workspace.open(repo, Config.from_env()) as ws:
        assert ws.session("s").load_checkpoint(4).checkpoint.sha256 == done["checkpoint"]["sha256"]
    assert _run("session", "compact", "--session", "s", "--in-context", "9", *p)[0] == EXIT_ERROR


def test_context_with_a_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cortex context --session`` packs the history lane and journals the request."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    repo = _repo(tmp_path)
    p = ("--path", str(repo))
    assert _run("index", "-q", str(repo))[0] == EXIT_OK
    _run("session", "add", "--session", "s", "--role", "user", "make handler strict", *p)
    code, out = _run("context", "handler", "--session", "s", "--budget", "1000", "--json", *p)
    pack = json.loads(out)
    assert code == EXIT_OK and "## Session history" in pack["render"]
    assert "history" in [b["lane"] for b in pack["blocks"]]
    with Workspace.open(repo, Config.from_env()) as ws:
        assert ws.session("s").items()[-1].role is StepRole.REQUEST


def test_claude_code_hook_on_recorded_payloads(tmp_path: Path) -> None:
    """The README's hook command, run as Claude Code runs it (payload on stdin, in the
    project), turns a prompt, two tool results and a failure into the session's steps:
    the command and its output kept, the failure an error, the secret redacted."""
    repo = _repo(tmp_path)
    env = {**os.environ, "CORTEX_DENSE_MODEL": "hash", "PYTHONPATH": str(REPO_ROOT)}
    names = ["user_prompt_submit", "post_tool_use_bash", "post_tool_use_edit",
             "post_tool_use_failure"]  # fmt: skip
    for name in names:
        raw = (HOOKS / f"{name}.json").read_text("utf-8")
        payload = raw.replace("CWD", str(repo)).replace("SECRET", TOKEN)
        done = subprocess.run(HOOK_COMMAND, input=payload.encode(), cwd=repo, env=env,
                              capture_output=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    with Workspace.open(repo, Config(dense_model="hash")) as ws:
        steps = ws.session("9b1c2f0e-5d2a-4c55-8a63-1f2e3d4c5b6a").items()
    assert [s.role for s in steps] == [StepRole.USER, StepRole.TOOL, StepRole.TOOL,
                                       StepRole.TOOL]  # fmt: skip
    assert steps[0].text.startswith("handler() drops events")
    assert steps[1].tool == "Bash" and steps[1].text.startswith("$ python -m pytest")
    assert "FAILED tests/test_app.py::test_no_type" in steps[1].text
    assert steps[2].tool == "Edit" and "event has no type" in steps[2].text
    assert steps[3].is_error and "exit code 127" in steps[3].text
    assert TOKEN not in steps[3].text and "[REDACTED:" in steps[3].text


def test_hook_refuses_other_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload of another event, not JSON, a bad setting or a bad option is a clear error,
    never a crash, and never exit 2: Claude Code reads a hook's 2 as "block this prompt"."""
    repo = _repo(tmp_path)
    stop = json.dumps({"session_id": "x", "cwd": str(repo), "hook_event_name": "Stop"})
    assert _run("session", "hook", "--path", str(repo), stdin=stop.encode())[0] == 1
    assert _run("session", "hook", "--path", str(repo), stdin=b"{nope")[0] == 1
    assert _run("session", "hook", "--bogus", stdin=b"{}")[0] == 1
    monkeypatch.setenv("CORTEX_REFRESH", "bogus")
    assert _run("session", "hook", "--path", str(repo), stdin=stop.encode())[0] == 1
