"""``cortex mcp``: the official MCP client drives the server over stdio, end to end."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engine import Config, TiktokenCounter, Workspace
from engine.core import ConfigError, IndexNotBuiltError
from engine.serve import MAX_TEXT_BYTES, Proof, Service
from indexers import sha256_text
from tests.engine.test_workspace import GIT_ENV, make_repo

TOOLS = {"build_context", "feedback", "bundle", "search", "resolve", "replay", "status", "index",
         "session_add", "session_decide", "session_show", "session_lane", "session_compact",
         "session_checkpoint", "session_end", "memory_save", "memory_search", "memory_get",
         "memory_timeline", "memory_relate", "memory_graph"}  # fmt: skip
REPO_ROOT = Path(__file__).resolve().parents[3]


def server_env(state: Path) -> dict[str, str]:
    """The environment a server subprocess gets: the fast fake embedder, state under tmp."""
    return {
        **GIT_ENV,
        "CORTEX_DENSE_MODEL": "hash",
        "CORTEX_STATE_DIR": str(state),
        "PYTHONPATH": str(REPO_ROOT),
    }


def indexed_repo(base: Path) -> tuple[Path, Path]:
    """A small committed repository, indexed with the hash embedder; (repo, state dir)."""
    repo = make_repo(base / "repo")
    state = base / "state"
    with Workspace.open(repo, Config(dense_model="hash", state_dir=str(state))) as ws:
        ws.index()
    return repo, state


Call = Callable[[str, dict[str, Any]], Any]


@pytest.fixture(scope="module")
def mcp_call(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Call, Any]]:
    """One ``cortex mcp`` subprocess for the module, and a blocking ``call_tool``."""
    repo, state = indexed_repo(tmp_path_factory.mktemp("mcp"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine.cli", "mcp", str(repo), "--watch", "0"],
        env=server_env(state),
        cwd=str(REPO_ROOT),
    )
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(params, read_timeout_seconds=30)) as client,
    ):

        def call(name: str, args: dict[str, Any]) -> Any:
            return portal.call(client.call_tool, name, args)

        yield call, (portal, client)


def test_lists_the_agent_tools_with_descriptions(mcp_call: tuple[Call, Any]) -> None:
    """tools/list has the agent profile's twenty-one tools, each saying when to call it."""
    _, (portal, client) = mcp_call
    tools = {t.name: t for t in portal.call(client.list_tools).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, tool.name
    assert "[n]" in (tools["build_context"].description or "")
    assert "feedback" in (tools["build_context"].description or "")


def test_build_context_feedback_replay_round_trip(mcp_call: tuple[Call, Any]) -> None:
    """A pack within budget whose text is the render; feedback counts; replay gives it back."""
    call, _ = mcp_call
    result = call("build_context", {"goal": "register a hook", "budget_tokens": 400})
    assert not result.is_error
    body = result.structured_content
    render = result.content[0].text
    assert body["tokens_used"] <= 400 and body["budget_tokens"] == 400
    assert TiktokenCounter().count(render) <= 400
    assert body["citations"] and body["citations"][0]["source_uri"] == "hooks.py#L2-L4"
    assert {"id", "title", "source_uri", "start_line", "sha256"} <= set(body["citations"][0])
    assert body["replay_key"] in result.content[1].text  # the footer names the key
    key = body["replay_key"]

    last = len(body["citations"])  # cited as "[n]", the way a model writes it
    fb = call("feedback", {"replay_key": key, "model_citations": [1, f"[{last}]", 99, "x"],
                           "tool_results": [{"name": "pytest", "ok": True}]})  # as HTTP: no summary
    assert not fb.is_error, fb.content[0].text
    assert fb.structured_content["valid"] == sorted({1, last})
    assert fb.structured_content["dropped"] == ["99", "x"]

    again = call("replay", {"replay_key": key})
    assert not again.is_error and again.content[0].text == render


def test_resolve_with_and_without_proof(mcp_call: tuple[Call, Any]) -> None:
    """Without a proof: metadata (sha256, tokens) only; a matching proof (the lines' sha256
    or the file's) gets the text, a wrong one is withheld."""
    call, _ = mcp_call
    plain = call("resolve", {"uri": "hooks.py#L2-L4"})
    assert not plain.is_error and plain.structured_content["text"] is None
    sha = plain.structured_content["sha256"]
    good = call("resolve", {"uri": "hooks.py#L2-L4", "proof": {"path": "hooks.py", "sha256": sha}})
    assert good.structured_content["verified"] is True
    assert "def register_hook" in good.structured_content["text"]
    assert sha256_text(good.structured_content["text"]) == sha
    bad = call("resolve", {"uri": "hooks.py#L2-L4", "proof": {"path": "hooks.py", "sha256": "0"}})
    assert not bad.is_error
    assert bad.structured_content["verified"] is False and bad.structured_content["text"] is None


@pytest.mark.parametrize("uri", ["../secret.txt", "/etc/passwd", "sub/../../x.py#L1-L2"])
def test_resolve_outside_the_workspace_is_a_tool_error(
    mcp_call: tuple[Call, Any], uri: str
) -> None:
    """A path with '..' or an absolute path is refused as a tool error."""
    call, _ = mcp_call
    result = call("resolve", {"uri": uri})
    assert result.is_error and "inside the workspace" in result.content[0].text


def test_bad_input_is_a_tool_error_and_the_server_stays_up(mcp_call: tuple[Call, Any]) -> None:
    """Unknown key, wrong types, oversized query: clear tool errors; later calls still work."""
    call, _ = mcp_call
    unknown = call("replay", {"replay_key": "no-such-key"})
    assert unknown.is_error and "unknown replay key" in unknown.content[0].text
    wrong = call("build_context", {"goal": 5})
    assert wrong.is_error and "goal" in wrong.content[0].text
    missing = call("feedback", {"model_citations": [1]})
    assert missing.is_error and "replay_key" in missing.content[0].text
    huge = call("build_context", {"goal": "x", "query": "y" * (MAX_TEXT_BYTES + 1)})
    assert huge.is_error and "query" in huge.content[0].text
    fine = call("search", {"query": "register_hook", "k": 2})
    assert not fine.is_error
    assert fine.structured_content["hits"][0]["symbol"] == "Session.register_hook"


def test_status_and_index_tools(mcp_call: tuple[Call, Any]) -> None:
    """status reports the index; index with wait refreshes it and reports what it did."""
    call, _ = mcp_call
    status = call("status", {})
    assert status.structured_content["indexed"] and status.structured_content["files"] == 8
    done = call("index", {"wait": True})
    assert not done.is_error and done.structured_content["report"]["unchanged"] == 8


def test_importing_the_servers_loads_no_sdk() -> None:
    """engine, its CLI and both server modules import without loading mcp, starlette, uvicorn."""
    heavy = ("mcp", "starlette", "uvicorn", "anyio", "pydantic")
    code = (
        "import sys, engine, engine.cli, engine.serve; "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


# -- the service itself, in process ------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A ``Service`` over a small indexed repository with a secret and a symlink out."""
    base = tmp_path_factory.mktemp("service")
    repo, state = indexed_repo(base)
    (base / "outside.txt").write_text("not yours\n")
    os.symlink(base / "outside.txt", repo / "escape.txt")
    (repo / ".env").write_text("TOKEN=hunter2\n")
    svc = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    yield svc
    svc.close()


def test_resolve_refuses_symlinks_out_and_unindexed_files(service: Service) -> None:
    """A symlink leaving the root raises; a secret (never indexed) answers exactly as a
    file that is not there: the caller cannot learn that it exists."""
    with pytest.raises(ConfigError, match="outside the workspace"):
        service.resolve("escape.txt")
    secret = service.resolve(".env")
    assert not secret["exists"] and not secret["indexed"] and secret["text"] is None
    absent = service.resolve(".env.absent")
    assert {k: v for k, v in secret.items() if k not in ("uri", "path")} == {
        k: v for k, v in absent.items() if k not in ("uri", "path")
    }
    data = (Path(service.ws.root) / ".env").read_bytes()
    proved = service.resolve(".env", Proof(".env", hashlib.sha256(data).hexdigest()))
    assert proved["text"] is None  # a proof cannot pull in what the index never held


def test_resolve_whole_file_and_lines_past_the_end(service: Service) -> None:
    """A bare path with the file's sha256 as proof gives the whole file; lines the file does
    not have give metadata only."""
    data = (Path(service.ws.root) / "mod1.py").read_bytes()
    whole = service.resolve("mod1.py", Proof("mod1.py", hashlib.sha256(data).hexdigest()))
    assert whole["text"] == data.decode().rstrip("\n")
    gone = service.resolve("mod1.py#L40-L50")
    assert gone["text"] is None and "lines" in str(gone["reason"])
    with pytest.raises(ConfigError, match="proof is for"):
        service.resolve("mod1.py#L1-L2", Proof("mod2.py", "0"))
    with pytest.raises(ConfigError, match="line range"):
        service.resolve("mod1.py#L5-L2")


def test_service_limits(service: Service) -> None:
    """Budgets, k and item counts outside the named limits are ConfigErrors."""
    with pytest.raises(ConfigError, match="budget_tokens"):
        service.context("goal", budget_tokens=10**9)
    with pytest.raises(ConfigError, match="k must be"):
        service.search("x", k=0)
    with pytest.raises(ConfigError, match="items"):
        service.context("goal", tool_signals=["x"] * 1000)


def test_a_workspace_never_indexed_is_indexed_in_the_background(tmp_path: Path) -> None:
    """Opening starts the first index in the background; calls say so, then answer."""
    repo = make_repo(tmp_path / "repo")
    svc = Service.open(repo, Config(dense_model="hash", state_dir=str(tmp_path / "state")))
    try:
        try:
            svc.context("register a hook")
        except IndexNotBuiltError as exc:
            assert "being built" in str(exc)
        done = svc.refresh(wait=True)
        assert done["error"] is None and not done["running"]
        assert svc.context("register a hook").citations[0].source_uri == "hooks.py#L2-L4"
    finally:
        svc.close()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                 max_size=4),
    max_leaves=12,
)  # fmt: skip
_FIELDS = ["goal", "query", "budget_tokens", "state", "tool_signals", "replay_key", "k",
           "model_citations", "uri", "mode", "files", "proof", "outcome",
           "tool_results", "title", "type", "what", "topic_key", "scope", "id", "src", "dst",
           "kind", "depth", "before", "after", "types"]  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tool=st.sampled_from(sorted(TOOLS - {"index"})),
    args=st.dictionaries(st.sampled_from(_FIELDS) | st.text(max_size=10), _JSON, max_size=5),
)
def test_generated_arguments_never_break_the_server(
    mcp_call: tuple[Call, Any], tool: str, args: dict[str, Any]
) -> None:
    """Any JSON arguments to any tool get an answer (a result or a tool error naming the
    problem), never a dead server: the next call still works."""
    call, (portal, client) = mcp_call
    try:
        result = call(tool, args)
    except Exception as exc:  # a protocol-level refusal (schema validation) is an answer too
        assert "Connection closed" not in str(exc), exc
    else:
        if result.is_error:  # a cortex error or the SDK's argument validation, not a bug
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert not re.search(r"\b(Type|Attribute|Key|Index|Unicode\w*)Error\b", text), text
    assert {t.name for t in portal.call(client.list_tools).tools} == TOOLS


# The same hand-chosen bad inputs as HTTP's table: (tool, arguments, words in the error).
_DEEP: dict[str, Any] = {}
_node = _DEEP
for _ in range(150):  # past ~200 the SDK's JSON reader drops the message unanswered
    _node["x"] = {}
    _node = _node["x"]
BAD_MCP_INPUTS = [
    ("build_context", {"goal": "hooks", "budget_token": 100}, "budget_token"),
    ("build_context", {"goal": "hooks", "state": "recent"}, "state"),
    ("build_context", {"goal": "hooks", "budget_tokens": 0}, "budget"),
    ("build_context", {"goal": "", "query": ""}, "goal"),
    ("build_context", {"goal": "hooks", "state": _DEEP}, "x"),
    ("build_context", {"goal": "hooks", "state": {"recent_turns": [{"role": "u"}]}}, "text"),
    ("resolve", {"uri": "hooks.py", "proof": {"path": "hooks.py", "sha": "0"}}, "sha"),
    ("search", {"query": ""}, "query"),
    ("search", {"query": "hooks", "k": 0}, "k"),
    ("search", {"query": "hooks", "mode": "fuzzy"}, "mode"),
    ("resolve", {"uri": "hooks.py\u0000#L1"}, "path"),
    ("feedback", {"replay_key": "k", "model_citations": [1], "outcome": 5}, "outcome"),
    ("replay", {"replay_key": ""}, "replay key"),
    ("memory_save", {"title": " "}, "title"),
    ("memory_save", {"title": "t", "what": "x" * 20_000}, "what"),
    ("memory_get", {"id": 424242}, "no note"),
    ("memory_graph", {"id": 1, "depth": 11}, "depth"),
    ("memory_relate", {"src": 3, "dst": 3, "kind": "supersedes"}, "itself"),
    ("memory_search", {"query": "x", "k": 0}, "k"),
    # JSON types as HTTP takes them: no string for a number, no true for a citation or a
    # status, no 1.0 for 1 (pydantic's lax mode read each of these as the other type).
    ("build_context", {"goal": "x", "budget_tokens": "2000"}, "budget_tokens"),
    ("search", {"query": "x", "k": "3"}, "k"),
    ("feedback", {"replay_key": "k", "model_citations": [True]}, "model_citations"),
    ("feedback", {"replay_key": "k", "model_citations": [1.0]}, "model_citations"),
    ("session_add", {"session": "s", "role": "tool", "text": "t", "exit_status": True},
     "exit_status"),
    ("session_add", {"session": "s", "role": "tool", "text": "t", "is_error": "yes"},
     "is_error"),
    ("session_compact", {"session": "s", "load_bearing": ["1"]}, "load_bearing"),
    ("memory_save", {"title": "t", "created": True}, "created"),
]


@pytest.mark.parametrize(("tool", "arguments", "words"), BAD_MCP_INPUTS)
def test_each_bad_input_is_a_named_tool_error(
    mcp_call: tuple[Call, Any], tool: str, arguments: dict[str, Any], words: str
) -> None:
    """Every bad input the HTTP table lists is, over MCP, a tool error naming what is wrong,
    and the server answers the next call."""
    call, _ = mcp_call
    result = call(tool, arguments)
    assert result.is_error, (tool, arguments)
    assert words in result.content[0].text.lower(), result.content[0].text
    assert "traceback" not in result.content[0].text.lower()
    assert not call("status", {}).is_error


def test_bundle_tool_matches_the_library(mcp_call: tuple[Call, Any]) -> None:
    """The bundle tool answers the cold-start bundle: its render, items and token count."""
    call, _ = mcp_call
    out = call("bundle", {"goal": "register a hook", "objects": ["hooks.py"], "budget": 500})
    body = out.structured_content
    assert not out.is_error and body["tokens_used"] <= 500 and body["items"]
    assert out.content[0].text == body["text"]


@pytest.mark.parametrize("tool", ["session_add", "session_decide"])
@pytest.mark.parametrize("key", ["", "k" * 256, "a\tb", "ключ"])
def test_a_bad_idempotency_key_is_a_tool_error_with_https_message(
    mcp_call: tuple[Call, Any], tool: str, key: str
) -> None:
    """A key HTTP refuses with 400 is, over MCP, a tool error with HTTP's message: it was
    checked outside the error mapping, so the caller got a bare 'Error executing tool'."""
    call, _ = mcp_call
    args = {"session": "keys", "text": "make", "idempotency_key": key}
    result = call(tool, args | ({"role": "tool"} if tool == "session_add" else {}))
    assert result.is_error
    assert result.content[0].text == (
        "Idempotency-Key must be 1 to 255 printable ASCII characters (a UUID, say)"
    )


def test_index_with_wait_outlasts_the_call_time_limit_and_reports_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP's index with wait=true answers when the refresh is done, past a call's time
    limit (it was "timed out after 60 s" while a first build of a big tree takes minutes),
    and meanwhile sends the client MCP progress notifications: the stage, done of total."""
    import anyio

    from engine.serve import build_mcp_server

    repo, state = indexed_repo(tmp_path)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    for i in range(150):
        (repo / f"new{i}.py").write_text(f"def new_{i}():\n    return {i}\n")
    monkeypatch.setattr("engine.serve._service.REQUEST_TIMEOUT_S", 0.01)  # any refresh is over
    monkeypatch.setattr("engine.serve._service.WAIT_POLL_S", 0.001, raising=False)
    told: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append((done, message))

    async def wait() -> Any:
        async with Client(build_mcp_server(service)) as client:
            return await client.call_tool("index", {"wait": True}, progress_callback=progress)

    try:
        done = anyio.run(wait)
    finally:
        service.close()
    assert not done.is_error, done.content[0].text
    assert done.structured_content["report"]["added"] == 150
    assert told and all("(stage " in (m or "") for _, m in told)
    assert [d for d, _ in told] == sorted(d for d, _ in told)  # progress only ever grows


@pytest.mark.parametrize("tool", ["memory_stats", "memory_delete", "learned", "learned_reset"])
def test_an_admin_tool_in_the_agent_profile_says_how_to_offer_it(
    mcp_call: tuple[Call, Any], tool: str
) -> None:
    """A known admin tool the agent profile leaves out is a tool error saying how to offer
    it, as HTTP's 403 says (it was "Unknown tool"); a name no profile has is still unknown."""
    call, _ = mcp_call
    result = call(tool, {})
    assert result.is_error
    assert result.content[0].text == (
        f"{tool} is an admin tool, which this server does not offer: start it with --tools "
        f"admin (or name {tool})"
    )
    assert "Unknown tool" in call("memory_nuke", {}).content[0].text


def test_replaying_a_purged_turn_says_so_in_the_text(tmp_path: Path) -> None:
    """After forget purged a file's text from the ledger, MCP's replay keeps the prompt as
    its first text block, byte for byte, and says in a second one that it was purged: only
    structured content's purged said it, and a model reads the text."""
    import anyio

    from engine.serve import build_mcp_server

    repo, state = indexed_repo(tmp_path)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    key = service.context("register a hook", budget_tokens=400).replay_key
    service.ws.forget(["hooks.py"])

    async def replay() -> Any:
        async with Client(build_mcp_server(service)) as client:
            return await client.call_tool("replay", {"replay_key": key})

    try:
        got = anyio.run(replay)
        assert got.content[0].text == service.ws.replay(key).text
        assert got.structured_content["purged"] is True
        said = "purged: forget removed parts of this prompt from the ledger; they read [PURGED]"
        assert [c.text for c in got.content[1:]] == [f"{said} above"]
    finally:
        service.close()
