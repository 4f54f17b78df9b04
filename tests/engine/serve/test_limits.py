"""One rule and one message per input limit on every surface: the library, the CLI, HTTP
and MCP refuse the same request with the same words (the library enforces each limit)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Config, CortexError, Workspace
from engine.cli import main
from tests.engine.serve.test_http import TOKEN, Server, server  # noqa: F401  (the fixture)

LONG = "q " * 70_000  # 140 KB: over the 128 KiB a goal or a query may be


def _mcp_error(server: Server, name: str, args: dict[str, Any]) -> str:  # noqa: F811
    """The text of the tool error an MCP call answers (the call must fail)."""

    async def call() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            return await c.call_tool(name, args)

    done = anyio.run(call)
    assert done.is_error, (name, args)
    return str(done.content[0].text)


def _cli_error(server: Server, *argv: str) -> str:  # noqa: F811
    """The one line ``cortex ARGV`` prints on standard error (it must fail)."""
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        mp.setenv("CORTEX_STATE_DIR", str(server.state))
        mp.setenv("CORTEX_DENSE_MODEL", "hash")
        code = main([*argv, "--path", str(server.repo)], out=io.StringIO())
    assert code != 0 and err.getvalue().count("\n") == 1, err.getvalue()
    return err.getvalue().removeprefix("cortex: ").strip()


def _library_error(server: Server, call: Callable[[Workspace], object]) -> str:  # noqa: F811
    config = Config(dense_model="hash", state_dir=str(server.state))
    with Workspace.open(server.repo, config) as ws, pytest.raises(CortexError) as caught:
        call(ws)
    return str(caught.value)


def _http_error(server: Server, method: str, path: str, body: object = None) -> str:  # noqa: F811
    status, answer = server.request(method, path, body)
    assert 400 <= status < 500, (status, answer)
    return str(answer["error"]["message"])


@pytest.mark.parametrize("k", [0, 101])
def test_k_is_one_rule_everywhere(server: Server, k: int) -> None:  # noqa: F811
    """``k`` outside 1..100 is refused with one message by the CLI, HTTP and MCP; the
    library, answering in its caller's process, takes any k of at least 1."""
    said = {
        _cli_error(server, "search", "hook", "-k", str(k)),
        _http_error(server, "GET", f"/v1/search?q=hook&k={k}"),
        _mcp_error(server, "search", {"query": "hook", "k": k}),
    }
    assert said == {f"k must be a whole number within 1..100, got {k}"}
    if k < 1:
        said = _library_error(server, lambda ws: ws.search("hook", k=k))
        assert said == f"k must be a whole number of at least 1, got {k}"
    else:
        with Workspace.open(server.repo, Config(dense_model="hash",
                                                state_dir=str(server.state))) as ws:  # fmt: skip
            assert ws.search("hook", k=k)


def test_a_long_query_and_a_bad_budget_are_one_rule_everywhere(server: Server) -> None:  # noqa: F811
    """A 40 KB query and a budget out of range are refused alike on every surface."""
    said = {
        _library_error(server, lambda ws: ws.search(LONG)),
        _library_error(server, lambda ws: ws.build_context(query=LONG)),
        _cli_error(server, "search", LONG),
        _cli_error(server, "context", LONG),
        _http_error(server, "POST", "/v1/context", {"query": LONG}),
        _mcp_error(server, "search", {"query": LONG}),
        _mcp_error(server, "build_context", {"query": LONG}),
    }
    assert said == {"query is over 131072 bytes; send a shorter one"}
    said = {
        _library_error(server, lambda ws: ws.build_context("hook", budget_tokens=10)),
        _http_error(server, "POST", "/v1/context", {"query": "hook", "budget_tokens": 10}),
        _mcp_error(server, "build_context", {"query": "hook", "budget_tokens": 10}),
    }
    assert said == {"budget_tokens must be a whole number within 64..200000, got 10"}
    # the same message, naming the option the CLI has
    said = {_cli_error(server, "context", "hook", "--budget", "10")}
    assert said == {"--budget must be a whole number within 64..200000, got 10"}


def test_an_unknown_replay_key_is_one_message_everywhere(server: Server) -> None:  # noqa: F811
    """replay of a key never recorded says the same on every surface."""
    key = "0" * 32
    said = {
        _library_error(server, lambda ws: ws.replay(key)),
        _cli_error(server, "replay", key),
        _cli_error(server, "ledger", "show", key),
        _http_error(server, "GET", f"/v1/replay/{key}"),
        _mcp_error(server, "replay", {"replay_key": key}),
    }
    assert said == {f"unknown replay key {key!r}: no turn recorded under it"}


@pytest.mark.parametrize("cited", [True, 1.0])
def test_a_bool_or_float_citation_is_refused_everywhere(server: Server, cited: object) -> None:  # noqa: F811
    """``True`` and ``1.0`` are no citation numbers: the library refuses them as HTTP does."""
    key = server.request("POST", "/v1/context", {"query": "hook"})[1]["replay_key"]
    body = {"replay_key": key, "model_citations": [cited]}
    said = {
        _library_error(server, lambda ws: ws.feedback(key, model_citations=[cited])),
        _http_error(server, "POST", "/v1/feedback", body),
        _mcp_error(server, "feedback", body),
    }
    name = type(cited).__name__
    assert said == {f'model_citations must be a list of numbers or "[n]" markers, not {name} '
                    f"{cited!r}"}  # fmt: skip


@pytest.mark.parametrize(
    ("tool", "args", "route", "body"),
    [
        ("build_context", {"query": "hook", "budget_tokens": "2000"}, "/v1/context",
         {"query": "hook", "budget_tokens": "2000"}),
        ("build_context", {"query": "hook", "budget_token": 2000}, None, None),
        ("build_context", {"query": 5}, "/v1/context", {"query": 5}),
        ("build_context", {"query": "hook", "tool_signals": [1]}, "/v1/context",
         {"query": "hook", "tool_signals": [1]}),
        ("build_context", {"query": "hook", "state": {"turns": []}}, "/v1/context",
         {"query": "hook", "state": {"turns": []}}),
        ("search", {"query": "hook", "mode": "foo"}, "/v1/search?q=hook&mode=foo", None),
        ("search", {"query": "hook", "k": "5"}, None, None),
        ("memory_save", {"title": "t", "type": "opinion"}, "/v1/memory",
         {"title": "t", "type": "opinion"}),
        ("memory_save", {"title": "t", "scope": "team"}, "/v1/memory",
         {"title": "t", "scope": "team"}),
        ("session_add", {"session": "s", "role": "robot", "text": "x"}, "/v1/session/s/steps",
         {"role": "robot", "text": "x"}),
        ("feedback", {"replay_key": "k", "model_citations": "12"}, "/v1/feedback",
         {"replay_key": "k", "model_citations": "12"}),
        ("feedback", {"model_citations": [1]}, "/v1/feedback", {"model_citations": [1]}),
    ],
)  # fmt: skip
def test_mcp_refuses_bad_arguments_in_http_words(
    server: Server,  # noqa: F811
    tool: str,
    args: dict[str, Any],
    route: str | None,
    body: object,
) -> None:
    """A wrong type, a bad choice or an unknown field is one line over MCP (never the
    validator's dump), the very message HTTP gives for the same request."""
    said = _mcp_error(server, tool, args)
    assert "\n" not in said and "pydantic" not in said and "validation error" not in said
    if route is not None:
        method = "GET" if body is None else "POST"
        assert said == _http_error(server, method, route, body)
    elif "budget_token" in args:
        assert said.startswith("unknown field(s): budget_token;")
    else:
        assert said == "k must be a whole number within 1..100, got '5'"  # check_k's words


@pytest.mark.parametrize("digit", ["²", "٣", "1²"])
def test_a_digit_that_is_not_ascii_is_no_number_on_any_surface(
    server: Server,  # noqa: F811
    digit: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``str.isdigit()`` passes "²", which ``int()`` refuses (HTTP 500, an MCP "Error
    executing tool", a CLI traceback), and ``int()`` reads "٣" as 3: a number a caller
    writes is ASCII digits everywhere. A count or step is a 400 / exit 2; a note id that is
    no number names no note, as ``memory/abc`` does (404 / exit 1)."""
    for path in (f"/v1/search?q=hook&k={digit}", f"/v1/session/s1?step={digit}",
                 f"/v1/session/s1/checkpoint/{digit}", f"/v1/memory/search?q=x&k={digit}",
                 f"/v1/memory/1/timeline?before={digit}"):  # fmt: skip
        status, body = server.request("GET", quote(path, safe="/?=&"))
        assert status == 400 and "whole number" in body["error"]["message"], (path, body)
    status, body = server.request("GET", quote(f"/v1/resolve?uri=session:s1%23{digit}",
                                               safe="/?=&%"))  # fmt: skip
    assert status == 400 and "bad uri" in body["error"]["message"]
    for path in (f"/v1/memory/{digit}", f"/v1/resolve?uri=memory:{digit}"):
        status, body = server.request("GET", quote(path, safe="/?=&"))
        assert status == 404, (path, body)
    assert "no note" in _mcp_error(server, "resolve", {"uri": f"memory:{digit}"})
    assert "no note" in _cli_error(server, "memory", "get", digit)
    assert "no note" in _cli_error(server, "resolve", f"memory:{digit}")
    assert "SEQ:HASH" in _cli_error(server, "ledger", "verify", "--anchor", f"{digit}:{'0' * 64}")
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["search", "hook", "-k", digit, "--path", str(server.repo)], out=io.StringIO())
    assert done.value.code == 2 and "whole number" in capsys.readouterr().err
