"""The same request on every surface, for the inputs only the library and the CLI could
send: search's ``tool_signals``, the bundle's ``state``, a session's history lane at a
budget and the latest checkpoint loaded without a step. Each answers one real request alike
on the library, the CLI (``--json``), MCP over stdio (the SDK's client) and HTTP, and
refuses a bad value with one message (the CLI naming its option)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engine import Config, CortexError, SessionState, Workspace
from engine.cli import main
from engine.serve import files_json, hits_json, to_json
from tests.engine.serve.test_http import Server, server  # noqa: F401  (the fixture)
from tests.engine.serve.test_mcp import REPO_ROOT, server_env

SIGNAL = ('Traceback (most recent call last):\n  File "hooks.py", line 4, in register_hook\n'
          "KeyError: 'event'")  # fmt: skip
LOG = f"<returncode>1</returncode>\n{SIGNAL}\n"
TOO_MANY = [f"item {n}" for n in range(257)]  # one past MAX_ITEMS


@dataclass
class Surfaces:
    """One workspace on four surfaces: the library in this process, the CLI's ``main``,
    ``cortex mcp`` over stdio and ``cortex serve`` over HTTP (both started once)."""

    server: Server
    mcp_call: Callable[[str, dict[str, Any]], Any]

    def workspace(self) -> Workspace:
        config = Config(dense_model="hash", state_dir=str(self.server.state))
        return Workspace.open(self.server.repo, config)

    def library(self, call: Callable[[Workspace], Any]) -> Any:
        with self.workspace() as ws:
            return call(ws)

    def library_error(self, call: Callable[[Workspace], object]) -> str:
        with self.workspace() as ws, pytest.raises(CortexError) as caught:
            call(ws)
        return str(caught.value)

    def _cli(self, argv: tuple[str, ...]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
            mp.setenv("CORTEX_STATE_DIR", str(self.server.state))
            mp.setenv("CORTEX_DENSE_MODEL", "hash")
            code = main([*argv, "--path", str(self.server.repo)], out=out)
        return code, out.getvalue(), err.getvalue()

    def cli(self, *argv: str) -> Any:
        """What ``cortex ARGV --json`` prints, parsed (it must succeed)."""
        code, out, err = self._cli((*argv, "--json"))
        assert code == 0, err
        return json.loads(out)

    def cli_error(self, *argv: str) -> str:
        """The one line ``cortex ARGV`` prints on standard error (it must fail)."""
        code, _, err = self._cli(argv)
        assert code != 0 and err.count("\n") == 1, err
        return err.removeprefix("cortex: ").strip()

    def mcp(self, name: str, args: dict[str, Any]) -> Any:
        """A tool's structured content (the call must succeed)."""
        done = self.mcp_call(name, args)
        assert not done.is_error, done.content[0].text
        return done

    def mcp_error(self, name: str, args: dict[str, Any]) -> str:
        done = self.mcp_call(name, args)
        assert done.is_error, (name, args)
        return str(done.content[0].text)

    def http(self, method: str, path: str, body: object = None) -> Any:
        status, answer = self.server.request(method, path, body)
        assert status == 200, (status, answer)
        return answer

    def http_error(self, method: str, path: str, body: object = None) -> tuple[int, str]:
        status, answer = self.server.request(method, path, body)
        assert 400 <= status < 500, (status, answer)
        return status, str(answer["error"]["message"])


@pytest.fixture(scope="module")
def surfaces(server: Server) -> Iterator[Surfaces]:  # noqa: F811
    """The HTTP server's workspace, also served by ``cortex mcp`` over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine.cli", "mcp", str(server.repo), "--watch", "0"],
        env=server_env(server.state),
        cwd=str(REPO_ROOT),
    )
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(params, read_timeout_seconds=30)) as client,
    ):

        def call(name: str, args: dict[str, Any]) -> Any:
            return portal.call(client.call_tool, name, args)

        yield Surfaces(server, call)


def _query(**params: object) -> str:
    return urlencode(params, doseq=True)


def test_search_takes_tool_signals_on_every_surface(surfaces: Surfaces) -> None:
    """A traceback given as a tool signal lifts the function it names on the library, the
    CLI (--signal), MCP and HTTP (GET's repeated tool_signals, POST's body) alike: the
    same hits, sections and files (MCP and HTTP took no signals for a search)."""
    s = surfaces
    plain = s.library(lambda ws: hits_json(ws.search("value", k=5)))
    hits = s.library(lambda ws: hits_json(ws.search("value", k=5, tool_signals=[SIGNAL])))
    assert hits != plain and hits["hits"][0]["source_uri"] == "hooks.py#L2-L4"
    assert s.cli("search", "value", "-k", "5", "--signal", SIGNAL) == hits
    assert s.mcp("search", {"query": "value", "k": 5, "tool_signals": [SIGNAL]}) \
        .structured_content == hits  # fmt: skip
    assert s.http("GET", "/v1/search?" + _query(q="value", k=5, tool_signals=[SIGNAL])) == hits
    body = {"query": "value", "k": 5, "tool_signals": [SIGNAL]}
    assert s.http("POST", "/v1/search", body) == hits

    plain = s.library(lambda ws: files_json(ws.search_files("demo", k=3)))
    files = s.library(lambda ws: files_json(ws.search_files("demo", k=3,
                                                            tool_signals=[SIGNAL])))  # fmt: skip
    assert plain["files"][0]["path"] == "mod5.py" and files["files"][0]["path"] == "hooks.py"
    assert s.cli("search", "demo", "-k", "3", "--files", "--signal", SIGNAL) == files
    assert s.mcp("search", {"query": "demo", "k": 3, "files": True, "tool_signals": [SIGNAL]}) \
        .structured_content == files  # fmt: skip
    path = "/v1/search?" + _query(q="demo", k=3, files=1, tool_signals=[SIGNAL])
    assert s.http("GET", path) == files
    body = {"query": "demo", "k": 3, "files": True, "tool_signals": [SIGNAL]}
    assert s.http("POST", "/v1/search", body) == files


def test_too_many_search_signals_are_one_message_everywhere(surfaces: Surfaces) -> None:
    """257 tool signals are refused by the library's check, in its words, on every surface."""
    s = surfaces
    said = {
        s.library_error(lambda ws: ws.search("value", tool_signals=TOO_MANY)),
        s.mcp_error("search", {"query": "value", "tool_signals": TOO_MANY}),
        s.http_error("GET", "/v1/search?" + _query(q="value", tool_signals=TOO_MANY))[1],
        s.http_error("POST", "/v1/search", {"query": "value", "tool_signals": TOO_MANY})[1],
    }
    assert said == {"tool_signals has over 256 items"}
    argv = [arg for signal in TOO_MANY for arg in ("--signal", signal)]
    assert s.cli_error("search", "value", *argv) == "--signal has over 256 items"


STATE = {"constraints": ["never change the public hook API"],
         "subgoals": ["guard the event key"]}  # fmt: skip


def _bundle(body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    body.pop("latency_ms")  # the one field that measures the call, not what it found
    return body


def test_bundle_takes_the_session_state_on_every_surface(surfaces: Surfaces) -> None:
    """The bundle's pinned tier holds the constraints and sub-goals given as state, the
    same items and text on the library, the CLI (--constraint, --subgoal), MCP and HTTP
    (which took no state for a bundle)."""
    s = surfaces
    state = SessionState(constraints=tuple(STATE["constraints"]),
                         subgoals=tuple(STATE["subgoals"]))  # fmt: skip
    found = _bundle(s.library(lambda ws: to_json(ws.bundle("register a hook", state=state))))
    pinned = [item["uri"] for item in found["items"] if item["tier"] == "pinned"]
    assert pinned[:2] == ["state:constraint/1", "state:goal/1"]
    assert "never change the public hook API" in found["text"]
    cli = s.cli("bundle", "register a hook", "--constraint", STATE["constraints"][0],
                "--subgoal", STATE["subgoals"][0])  # fmt: skip
    assert _bundle(cli) == found
    ask = {"goal": "register a hook", "state": STATE}
    assert _bundle(s.mcp("bundle", ask).structured_content) == found
    assert _bundle(s.http("POST", "/v1/bundle", ask)) == found


def test_too_many_bundle_constraints_are_one_message_everywhere(surfaces: Surfaces) -> None:
    """257 constraints are refused for a bundle as for a context, by the library's one
    check (the library took any number for a bundle)."""
    s = surfaces
    too_many = SessionState(constraints=tuple(TOO_MANY))
    ask = {"goal": "register a hook", "state": {"constraints": TOO_MANY}}
    said = {
        s.library_error(lambda ws: ws.bundle("register a hook", state=too_many)),
        s.mcp_error("bundle", ask),
        s.http_error("POST", "/v1/bundle", ask)[1],
        s.http_error("POST", "/v1/context", {"query": "hook", "state": ask["state"]})[1],
    }
    assert said == {"constraints has over 256 items"}
    argv = [arg for item in TOO_MANY for arg in ("--constraint", item)]
    assert s.cli_error("bundle", "register a hook", *argv) == "--constraint has over 256 items"


def _session(ws: Workspace, sid: str) -> None:
    session = ws.session(sid)
    session.add("user", "fix hooks")
    for i in range(8):
        session.add("assistant", f"THOUGHT: try {i}\n```bash\npython hooks.py --case {i}\n```")
        output = "\n".join(f"case {i} line {j}: value {j * i}" for j in range(30))
        session.add("tool", LOG + output, "bash", None, 1)


def test_the_history_lane_is_the_same_on_every_surface_and_journals_nothing(
    surfaces: Surfaces,
) -> None:
    """A session's history lane at a budget, ranked by a goal and a query: the same text,
    tokens and compacted steps from ``Workspace.session_lane``, ``session show --lane``,
    MCP's session_lane and GET /v1/session/{id}/lane, none of which journals a thing."""
    s = surfaces
    s.library(lambda ws: _session(ws, "lane-1"))
    head = s.library(lambda ws: ws.journal.head())
    goal, query = "fix the hook", "KeyError event"
    lane = s.library(lambda ws: to_json(ws.session_lane("lane-1", 1500, goal, query)))
    assert lane["session"] == "lane-1" and lane["upto"] == 17 and lane["compacted"]
    assert s.cli("session", "show", "--session", "lane-1", "--lane", "1500", "--goal", goal,
                 "--query", query) == lane  # fmt: skip
    done = s.mcp("session_lane", {"session": "lane-1", "budget_tokens": 1500, "goal": goal,
                                  "query": query})  # fmt: skip
    assert done.structured_content == lane and done.content[0].text == lane["text"]
    path = "/v1/session/lane-1/lane?" + _query(budget_tokens=1500, goal=goal, query=query)
    assert s.http("GET", path) == lane
    assert s.library(lambda ws: ws.journal.head()) == head


def test_a_lane_budget_out_of_range_is_one_message_everywhere(surfaces: Surfaces) -> None:
    """A lane's budget is a context's: out of range, the library's message on every
    surface, the CLI naming --lane (it named --budget, an option show does not have)."""
    s = surfaces
    said = {
        s.library_error(lambda ws: ws.session_lane("lane-1", 10)),
        s.mcp_error("session_lane", {"session": "lane-1", "budget_tokens": 10}),
        s.http_error("GET", "/v1/session/lane-1/lane?budget_tokens=10")[1],
    }
    assert said == {"budget_tokens must be a whole number within 64..200000, got 10"}
    assert s.cli_error("session", "show", "--session", "lane-1", "--lane", "10") == \
        "--lane must be a whole number within 64..200000, got 10"  # fmt: skip


def test_the_latest_checkpoint_loads_without_a_step_on_every_surface(
    surfaces: Surfaces,
) -> None:
    """With no step, load reads the checkpoint journaled last (here at step 2, after one
    at step 4), as written: ``load_checkpoint()``, ``session checkpoint --load``, MCP's
    session_checkpoint with load and no step, GET /v1/session/{id}/checkpoint."""
    s = surfaces

    def setup(ws: Workspace) -> dict[str, Any]:
        _session(ws, "cp-1")
        ws.session("cp-1").checkpoint(4, 2000)
        return to_json(ws.session("cp-1").checkpoint(2, 2000))

    written = s.library(setup)
    latest = s.library(lambda ws: to_json(ws.session("cp-1").load_checkpoint()))
    assert latest == written and latest["step"] == 2
    assert s.cli("session", "checkpoint", "--session", "cp-1", "--load") == latest
    assert s.mcp("session_checkpoint", {"session": "cp-1", "load": True}) \
        .structured_content == latest  # fmt: skip
    assert s.http("GET", "/v1/session/cp-1/checkpoint") == latest


def test_no_checkpoint_to_load_is_one_message_everywhere(surfaces: Surfaces) -> None:
    """A session with no checkpoint: the library's not-found message on every surface
    (404 on HTTP, exit 1 on the CLI); with neither a step nor load, MCP asks for the step
    as HTTP's POST does."""
    s = surfaces
    s.library(lambda ws: ws.session("cp-none").add("user", "fix hooks"))
    said = {
        s.library_error(lambda ws: ws.session("cp-none").load_checkpoint()),
        s.cli_error("session", "checkpoint", "--session", "cp-none", "--load"),
        s.mcp_error("session_checkpoint", {"session": "cp-none", "load": True}),
    }
    status, message = s.http_error("GET", "/v1/session/cp-none/checkpoint")
    assert said == {message} == {"session 'cp-none' has no checkpoint"} and status == 404
    asked = s.http_error("POST", "/v1/session/cp-none/checkpoint", {})[1]
    assert s.mcp_error("session_checkpoint", {"session": "cp-none"}) == asked == "step is required"


@pytest.mark.parametrize(
    ("name", "value"),
    [("query", 5), ("tool_signals", SIGNAL), ("budget_tokens", "2000"), ("goal", None)],
)
def test_a_wrong_type_is_the_librarys_message_everywhere(
    surfaces: Surfaces, name: str, value: object
) -> None:
    """A field of the wrong type gets the library's own words on MCP and HTTP (``query must
    be text, not int``; one string for a list says ``for one item pass [item]``; a budget
    as a string says its range), not the servers' ``has the wrong type (str)``."""
    s = surfaces
    args: dict[str, Any] = {"goal": "g", "query": "register a hook", "budget_tokens": 2000}
    said = s.library_error(lambda ws: ws.build_context(**{**args, name: value}))
    if name == "goal" and value is None:
        said = said.replace("NoneType", "null")  # JSON's null is Python's None
    assert s.mcp_error("build_context", {**args, name: value}) == said
    assert s.http_error("POST", "/v1/context", {**args, name: value}) == (400, said)
