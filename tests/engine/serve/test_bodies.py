"""Slow and vanishing clients: a request body that does not arrive in time is answered
408 and its connection closed; a client that leaves mid-body is logged as such, never as
an internal error; requests that send their body are untouched."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine import Config, Workspace
from engine.serve import Service, build_app

HEAD = b"POST /v1/context HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The HTTP app over an empty workspace, with a 0.3 s body deadline."""
    monkeypatch.setattr("engine.serve._bodies.BODY_TIMEOUT_S", 0.3)
    with Workspace.open(tmp_path, Config(dense_model="hash")) as ws:
        yield build_app(Service(ws))


def _call(app: Any, path: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run one request through the ASGI app: ``receive`` gives ``messages`` and then
    blocks (a client that stalls); returns what the app sent."""
    sent: list[dict[str, Any]] = []
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await anyio.sleep(30)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"127.0.0.1:8765"), (b"content-length", b"100000")]}  # fmt: skip

    async def run() -> None:
        with anyio.fail_after(10):
            await app(scope, receive, send)

    anyio.run(run)
    return sent


@pytest.mark.parametrize("path", ["/v1/context", "/mcp"])
def test_a_body_that_stalls_is_answered_408_and_closed(
    app: Any, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Headers and part of a body, then nothing: past the deadline the app is stopped and
    the client gets 408 with Connection: close (uvicorn has no read timeout of its own)."""
    started = time.monotonic()
    sent = _call(app, path, [{"type": "http.request", "body": b'{"goal":"', "more_body": True}])
    assert time.monotonic() - started < 5
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["type"] == "timeout"
    err = capsys.readouterr().err
    assert "did not arrive within" in err and "internal error" not in err
    assert "Error handling POST request" not in err


@pytest.mark.parametrize("path", ["/v1/context", "/mcp"])
def test_a_client_that_leaves_mid_body_is_a_disconnect_not_a_bug(
    app: Any, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """2,000 clients that closed mid-body were logged as 2,000 `internal error:
    ClientDisconnect()`: now one line each says a client went away, and nothing is sent."""
    sent = _call(app, path, [{"type": "http.request", "body": b'{"goal":"', "more_body": True},
                             {"type": "http.disconnect"}])  # fmt: skip
    assert sent == []
    err = capsys.readouterr().err
    assert "went away before its request body arrived" in err and "internal error" not in err


def test_a_body_that_arrives_is_served(app: Any) -> None:
    """A whole body, even sent in pieces, reaches the route as before."""
    sent = _call(app, "/v1/session/s/steps", [
        {"type": "http.request", "body": b'{"role": "user", ', "more_body": True},
        {"type": "http.request", "body": b'"text": "hi"}', "more_body": False}])  # fmt: skip
    assert sent[0]["status"] == 200 and json.loads(sent[1]["body"])["step"] == 1


def test_stalled_connections_are_closed_by_a_real_server(app: Any) -> None:
    """Over uvicorn, with its limits as ``serve`` sets them: 50 connections that send
    headers and part of a body each get a 408 and are closed, not held open."""
    import uvicorn

    from engine.serve import _http

    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", timeout_keep_alive=_http.KEEP_ALIVE_S,
        h11_max_incomplete_event_size=_http.MAX_HEAD_BYTES))  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        clients = [socket.create_connection(sock.getsockname(), timeout=10) for _ in range(50)]
        for c in clients:
            c.sendall(HEAD + b'{"goal":"')
        for c in clients:
            got = b""
            while chunk := c.recv(4096):  # until the server closes it
                got += chunk
            assert got.startswith(b"HTTP/1.1 408 ")
            c.close()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
