"""Sessions over HTTP and MCP: the same steps, lane and checkpoints as the library, and the
bad input answered with the usual JSON errors."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Config, Workspace
from engine.cli import main
from engine.serve import Service, build_app
from tests.engine.serve.test_http import TOKEN, Server, server  # noqa: F401  (the fixture)

LOG = "<returncode>1</returncode>\nTraceback (most recent call last):\n  File \"hooks.py\", " \
    "line 4, in register_hook\nKeyError: 'event'\n"  # fmt: skip


def test_session_routes(server: Server) -> None:  # noqa: F811
    """Steps, a decision, show, compact and checkpoints over /v1/session; the history lane
    in /v1/context; 404 for an unknown session or step, 413 when even stubs do not fit."""
    sid = "/v1/session/http-1"
    assert server.request("POST", f"{sid}/steps", {"role": "user", "text": "fix hooks"})[0] == 200
    for _ in range(3):
        server.request("POST", f"{sid}/steps", {"role": "tool", "text": LOG, "tool": "bash"})
    decision = {"text": "guard the event key", "evidence": [1, "session:http-1#2"]}
    status, step = server.request("POST", f"{sid}/decisions", decision)
    assert status == 200 and step["step"] == 5 and step["role"] == "decision"
    status, shown = server.request("GET", sid)
    assert status == 200 and [s["step"] for s in shown["steps"]] == [1, 2, 3, 4, 5]
    assert server.request("GET", f"{sid}?step=2")[1]["text"] == LOG
    assert server.request("GET", "/v1/session/nobody")[0] == 404
    assert server.request("GET", f"{sid}?step=99")[0] == 404
    status, done = server.request("POST", f"{sid}/compact", {"load_bearing": [2],
                                                             "budget_tokens": 2000})  # fmt: skip
    assert status == 200 and 2 in done["kept"]
    status, again = server.request("GET", f"{sid}/checkpoint/5")
    assert status == 200 and again["checkpoint"]["sha256"] == done["checkpoint"]["sha256"]
    status, err = server.request("POST", f"{sid}/compact", {"load_bearing": [2, 3, 4],
                                                            "budget_tokens": 64})  # fmt: skip
    assert status == 413 and err["error"]["type"] == "budget_unreachable"
    assert server.request("POST", f"{sid}/steps", {"role": "wizard", "text": "x"})[0] == 400
    ask = {"goal": "register a hook", "budget_tokens": 1500, "state": {"session": "http-1"}}
    status, pack = server.request("POST", "/v1/context", ask)
    assert status == 200 and "guard the event key" in pack["render"]
    assert any(p["source_uri"] == "session:http-1#2" for p in pack["compacted"]) or \
        "KeyError" in pack["render"]  # fmt: skip


def test_session_tools_over_mcp(server: Server) -> None:  # noqa: F811
    """session_add and session_show over MCP answer the same JSON as HTTP."""

    async def mcp() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            added = await c.call_tool("session_add", {"session": "mcp-1", "role": "tool",
                                                      "text": LOG, "tool": "bash"})  # fmt: skip
            shown = await c.call_tool("session_show", {"session": "mcp-1", "step": 1})
            bad = await c.call_tool("session_show", {"session": "mcp-1", "step": 7})
            return added.structured_content, shown.structured_content, bad.is_error

    added, shown, bad = anyio.run(mcp)
    assert added["step"] == 1 and shown == server.request("GET", "/v1/session/mcp-1?step=1")[1]
    assert bad


def _held(done: dict[str, Any]) -> set[int]:
    return set(done["kept"]) | {int(s["ref"].rsplit("#", 1)[1]) for s in done["stubs"]}


def test_compact_in_context_on_http_and_mcp(server: Server) -> None:  # noqa: F811
    """compact's in_context means the same over HTTP and MCP as in the library: only the
    steps held (and the goal) are compacted; a step the session lacks is a 404 / tool
    error, a list that is not of step numbers a 400 / tool error."""
    sid = "/v1/session/held-1"
    server.request("POST", f"{sid}/steps", {"role": "user", "text": "fix hooks"})
    for _ in range(4):
        server.request("POST", f"{sid}/steps", {"role": "tool", "text": LOG, "tool": "bash"})
    ask = {"budget_tokens": 2000, "in_context": [3, 4]}
    status, done = server.request("POST", f"{sid}/compact", ask)
    assert status == 200 and _held(done) == {1, 3, 4}
    assert server.request("POST", f"{sid}/compact", {"in_context": [9]})[0] == 404
    assert server.request("POST", f"{sid}/compact", {"in_context": ["3"]})[0] == 400
    assert server.request("POST", f"{sid}/compact", {"in_context": 3})[0] == 400

    async def mcp() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            same = await c.call_tool("session_compact", {"session": "held-1", **ask})
            bad = await c.call_tool("session_compact", {"session": "held-1", "in_context": [9]})
            return same.structured_content, bad.is_error

    same, bad = anyio.run(mcp)
    assert same == done and bad


def _mcp_calls(server: Server, *calls: tuple[str, dict[str, Any]]) -> list[Any]:  # noqa: F811
    """The results of MCP tool calls against ``server``, in order."""

    async def mcp() -> list[Any]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            return [await c.call_tool(name, args) for name, args in calls]

    return anyio.run(mcp)


def _cli_at(server: Server, *argv: str) -> tuple[int, str]:  # noqa: F811
    """``cortex ARGV --path REPO`` in-process, over the server's state; (exit code, output)."""
    out = io.StringIO()
    env = {"CORTEX_STATE_DIR": str(server.state), "CORTEX_DENSE_MODEL": "hash"}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        return main([*argv, "--path", str(server.repo)], out=out), out.getvalue()


def test_session_and_memory_uris_resolve_on_every_surface(server: Server) -> None:  # noqa: F811
    """``session:ID#N`` (what the history lane points at) and ``memory:N`` resolve to the
    step's or note's text on HTTP, MCP and the CLI alike, as in the library; a malformed
    ``session:`` uri is one bad-argument message everywhere."""
    server.request("POST", "/v1/session/uri-1/steps", {"role": "user", "text": "fix hooks"})
    note = server.request("POST", "/v1/memory", {"title": "Hooks note", "what": "per event"})[1]
    for uri, text in (("session:uri-1#1", "fix hooks"), (f"memory:{note['id']}", "per event")):
        status, body = server.request("GET", "/v1/resolve?uri=" + quote(uri))
        assert status == 200 and text in body["text"] and body["exists"] is True, body
        assert server.request("POST", "/v1/resolve", {"uri": uri}) == (200, body)
        (over_mcp,) = _mcp_calls(server, ("resolve", {"uri": uri}))
        assert over_mcp.structured_content == body
        code, out = _cli_at(server, "resolve", uri, "--json")
        assert code == 0 and json.loads(out) == body
    status, err = server.request("GET", "/v1/resolve?uri=" + quote("session:uri-1"))
    assert status == 400 and "use session:ID#N" in err["error"]["message"]
    (bad,) = _mcp_calls(server, ("resolve", {"uri": "session:uri-1"}))
    assert bad.is_error and err["error"]["message"] in bad.content[0].text
    assert server.request("GET", "/v1/resolve?uri=" + quote("session:uri-1#9"))[0] == 404
    assert server.request("GET", "/v1/resolve?uri=memory:424242")[0] == 404


def _slow_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Workspace, Service, threading.Event]:
    """A service whose ``session_add`` waits for the event (as redacting a keyword-dense
    step took over a minute) under a one-second request limit."""
    monkeypatch.setattr("engine.serve._service.REQUEST_TIMEOUT_S", 1.0)
    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    service = Service(ws)
    release = threading.Event()
    real = service.session_add

    def slow(*args: Any) -> Any:
        release.wait(10)
        return real(*args)

    monkeypatch.setattr(service, "session_add", slow)
    return ws, service, release


def test_a_step_retried_with_its_idempotency_key_is_journaled_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step over the time limit answers 504 yet lands later; a retry with the same
    Idempotency-Key waits for that step and answers it, once or many times, instead of
    journaling it again. A key reused for another body is refused; no key, a new step."""
    from starlette.testclient import TestClient

    ws, service, release = _slow_steps(tmp_path, monkeypatch)
    key = {"Idempotency-Key": "0b5e6c1e-retry-me"}
    body = {"role": "tool", "text": "password=x\n" * 3}
    with TestClient(build_app(service), base_url="http://127.0.0.1:8765") as client:
        first = client.post("/v1/session/s/steps", json=body, headers=key)
        assert first.status_code == 504 and "Idempotency-Key" in first.text
        threading.Timer(0.2, release.set).start()  # the first call ends while the retry waits
        again = client.post("/v1/session/s/steps", json=body, headers=key)
        assert again.status_code == 200 and again.json()["step"] == 1
        assert client.post("/v1/session/s/steps", json=body, headers=key).json() == again.json()
        other = client.post("/v1/session/s/steps", json={**body, "text": "x"}, headers=key)
        assert other.status_code == 400 and "another request" in other.text
        assert [s["step"] for s in client.get("/v1/session/s").json()["steps"]] == [1]
        bad = client.post("/v1/session/s/steps", json=body, headers={"Idempotency-Key": "x" * 300})
        assert bad.status_code == 400
        assert client.post("/v1/session/s/steps", json=body).json()["step"] == 2
    ws.close()


def test_idempotency_keys_keep_few_answers_and_every_running_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ONCE_KEPT finished answers the oldest go, and past the window all do; a call
    still running is never dropped (its retries wait on it); a failure is forgotten."""
    from engine.serve import _once

    once = _once.Once()
    running, first = once.claim("run", "f")
    assert first
    for i in range(_once.ONCE_KEPT + 5):
        future, _ = once.claim(f"k{i}", "f")
        once.settle(f"k{i}", future, i, None)
    assert once.claim("k0", "f")[1] and not once.claim(f"k{_once.ONCE_KEPT + 4}", "f")[1]
    assert once.claim("run", "f") == (running, False)
    failed, _ = once.claim("bad", "f")
    once.settle("bad", failed, None, ValueError("nothing written"))
    assert once.claim("bad", "f")[1]
    monkeypatch.setattr(_once, "ONCE_WINDOW_S", -1.0)
    assert once.claim(f"k{_once.ONCE_KEPT + 4}", "f")[1] and not once.claim("run", "f")[1]


def test_an_mcp_step_retried_with_its_idempotency_key_is_journaled_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP's session tools could not name a write, so a retry after a timeout journaled a
    step twice (stop 45's review): ``idempotency_key`` does for them what the HTTP header
    does, and the timeout says to retry with it."""
    from engine.serve import build_mcp_server

    ws, service, release = _slow_steps(tmp_path, monkeypatch)
    mcp = build_mcp_server(service, "agent")
    args = {"session": "m", "role": "tool", "text": "make\n", "idempotency_key": "k-1"}

    async def calls() -> tuple[str, Any, Any, Any]:
        try:
            await mcp.call_tool("session_add", args)
            timed_out = ""
        except Exception as exc:  # the timeout, as a tool error
            timed_out = str(exc)
        threading.Timer(0.2, release.set).start()
        again = await mcp.call_tool("session_add", args)
        third = await mcp.call_tool("session_add", args)
        decided = await mcp.call_tool("session_decide", {"session": "m", "text": "keep it",
                                                            "idempotency_key": "d-1"})  # fmt: skip
        return timed_out, again, third, decided

    timed_out, again, third, decided = anyio.run(calls)
    assert "same idempotency_key" in timed_out
    assert str(again) == str(third) and "step 1" in str(again) and "step 2" in str(decided)
    assert [s.step for s in ws.session("m").items()] == [1, 2]
    ws.close()
