"""Memory on every surface: HTTP routes under /v1/memory, MCP tools in the agent and admin
profiles, and ``cortex memory`` give one note the same JSON, and bad input a clear error."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Config, ConfigError, Workspace
from engine.cli._main import main
from engine.serve import Service
from engine.serve._mcp import ADMIN_TOOLS, AGENT_MEMORY_TOOLS, build_mcp_server, tool_names
from tests.engine.serve.test_http import TOKEN, Server, server  # noqa: F401  (the fixture)


def test_memory_routes(server: Server) -> None:  # noqa: F811
    """Save, dedupe, search, get, timeline, edges and graph over /v1/memory; admin routes
    are absent in the default (agent) profile; bad input is 400, 404 or 413."""
    note = {"title": "Hooks are registered per event", "type": "decision",
            "what": "see `register_hook` in hooks.py", "topic_key": "hooks/registry"}  # fmt: skip
    status, saved = server.request("POST", "/v1/memory", note)
    assert status == 200 and saved["action"] == "created"
    assert any(lk["entity"] == "register_hook" for lk in saved["links"])
    assert server.request("POST", "/v1/memory", note)[1]["action"] == "duplicate"
    status, again = server.request("POST", "/v1/memory", {**note, "why": "plugins call it"})
    assert again["action"] == "updated" and again["revision"] == 2
    other = server.request("POST", "/v1/memory", {"title": "Older hook note"})[1]["id"]
    status, found = server.request("GET", "/v1/memory/search?q=hooks%20registered&k=5")
    assert status == 200 and found["notes"][0]["id"] == saved["id"]
    assert len(found["notes"][0]["preview"]) <= 300
    status, full = server.request("GET", f"/v1/memory/{saved['id']}")
    assert status == 200 and full["why"] == "plugins call it" and full["stale"] == []
    assert server.request("GET", f"/v1/memory/{saved['id']}/timeline?before=2&after=2")[0] == 200
    edge = {"dst": other, "kind": "supersedes"}
    status, made = server.request("POST", f"/v1/memory/{saved['id']}/edges", edge)
    assert status == 200 and made["kind"] == "supersedes"
    status, graph = server.request("GET", f"/v1/memory/{other}/graph?depth=2")
    assert {n["id"] for n in graph["nodes"]} == {saved["id"], other}
    bad = [
        ("POST", "/v1/memory", {"title": ""}, 400),
        ("POST", "/v1/memory", {"title": "t", "colour": "red"}, 400),
        ("POST", "/v1/memory", {"title": "t", "type": "opinion"}, 400),
        ("POST", "/v1/memory", {"title": "t", "what": "x" * 20_000}, 413),
        ("GET", "/v1/memory/424242", None, 404),
        ("GET", "/v1/memory/abc", None, 404),
        ("GET", "/v1/memory/search?q=", None, 400),
        ("GET", f"/v1/memory/{other}/graph?depth=11", None, 400),
        ("POST", f"/v1/memory/{other}/edges", {"dst": other, "kind": "supersedes"}, 400),
        ("POST", f"/v1/memory/{other}/edges", {"dst": 999999, "kind": "relates_to"}, 404),
    ]
    for method, path, body, code in bad:
        status, err = server.request(method, path, body)
        assert status == code, (method, path, body, status, err)
    # The agent profile's server answered "no note 'stats'" and a bare 405 for the admin
    # routes; each now says it is an admin route and how to offer it.
    for method, path, body, tool in (
        ("GET", "/v1/memory/stats", None, "memory_stats"),
        ("DELETE", f"/v1/memory/{other}", None, "memory_delete"),
        ("POST", f"/v1/memory/{other}/archive", {"archived": True}, "memory_archive"),
    ):
        status, err = server.request(method, path, body)
        assert status == 403 and err["error"]["type"] == "admin_only", (path, err)
        assert err["error"]["message"].startswith(f"{tool} is an admin route")
        assert "--tools admin" in err["error"]["message"]
    assert server.request("GET", f"/v1/memory/{other}")[0] == 200  # nothing was deleted
    paths = server.request("GET", "/openapi.json")[1]["paths"]
    assert {"delete"} <= set(paths["/v1/memory/{id}"]) and "/v1/memory/stats" in paths
    assert "/v1/memory/{id}/archive" in paths


def test_memory_tools_over_mcp_answer_as_http(server: Server) -> None:  # noqa: F811
    """memory_save and memory_get over MCP answer HTTP's JSON; admin tools are not listed
    in the agent profile; an unknown argument is refused."""

    async def mcp() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            names = {t.name for t in (await c.list_tools()).tools}
            note = {"title": "MCP saved note", "what": "a fact", "type": "config"}
            saved = await c.call_tool("memory_save", note)
            got = await c.call_tool("memory_get", {"id": saved.structured_content["id"]})
            cited = await c.call_tool("memory_get",
                                      {"id": f"memory:{saved.structured_content['id']}"})
            assert not cited.is_error
            assert cited.structured_content["id"] == got.structured_content["id"]
            bad = await c.call_tool("memory_search", {"query": "fact", "colour": "red"})
            return names, saved.structured_content, got.structured_content, bad

    names, saved, got, bad = anyio.run(mcp)
    assert set(AGENT_MEMORY_TOOLS) <= names and not set(ADMIN_TOOLS) & names
    http = server.request("GET", f"/v1/memory/{saved['id']}")[1]
    for body in (got, http):
        body.pop("accessed")
        body.pop("access_count")
        body.pop("importance")
    assert got == http
    assert bad.is_error and "colour" in bad.content[0].text


def test_profiles_pick_the_tools(tmp_path: Path) -> None:
    """--tools admin adds memory_delete, memory_stats and memory_archive; a list of names
    gives exactly those; an unknown name is a ConfigError."""
    assert set(ADMIN_TOOLS) <= set(tool_names("admin"))
    assert tool_names("memory_save,status") == ("memory_save", "status")
    with pytest.raises(ConfigError, match="unknown tool"):
        tool_names("agent,wizard")
    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    admin = build_mcp_server(Service(ws), "admin")
    listed = {t.name for t in anyio.run(admin.list_tools)}
    assert set(ADMIN_TOOLS) <= listed and set(AGENT_MEMORY_TOOLS) <= listed
    small = build_mcp_server(Service(ws), "memory_search")
    assert {t.name for t in anyio.run(small.list_tools)} == {"memory_search"}
    ws.close()


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_cli_memory_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cortex memory save|search|get|timeline|relate|graph|forget|stats, each with --json
    giving the library's encoding."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    monkeypatch.setitem(os.environ, "CORTEX_USER", "ann")
    at = ("--path", str(tmp_path))
    code, text = _cli("memory", "save", *at, "--title", "Use make test", "--type", "config",
                      "--what", "the suite runs with make test", "--json")  # fmt: skip
    first = json.loads(text)
    assert code == 0 and first["action"] == "created"
    _cli("memory", "save", *at, "--title", "Lint with make lint", "--where", "Makefile")
    code, text = _cli("memory", "search", *at, "make test", "--json")
    assert code == 0 and json.loads(text)["notes"][0]["id"] == first["id"]
    code, text = _cli("memory", "get", *at, str(first["id"]))
    assert code == 0 and "Use make test" in text and "importance" in text
    assert _cli("memory", "relate", *at, "2", "relates_to", str(first["id"]))[0] == 0
    code, text = _cli("memory", "graph", *at, str(first["id"]), "--json")
    assert len(json.loads(text)["nodes"]) == 2
    code, text = _cli("memory", "timeline", *at, "2", "--json")
    assert [n["id"] for n in json.loads(text)["notes"]] == [first["id"], 2]
    code, text = _cli("memory", "forget", *at, "memory:2", "--json")
    assert code == 0 and json.loads(text)["id"] == 2  # a number, as HTTP and MCP answer it
    code, text = _cli("memory", "stats", *at, "--json")
    assert json.loads(text)["notes"] == 1 and json.loads(text)["deleted"] == 1
    assert _cli("memory", "get", *at, "2")[0] == 1
    assert _cli("memory", "save", *at, "--title", " ")[0] == 2
    # the library's one line, as MCP and HTTP answer (argparse's usage block before)
    assert _cli("memory", "save", *at, "--title", "x", "--scope", "team")[0] == 2


def test_a_dated_note_on_every_surface(server: Server, tmp_path: Path,  # noqa: F811
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``created`` (importing a dated history) reaches the store the same way over HTTP,
    MCP and the CLI (epoch seconds or ISO 8601 there); a future time is refused."""
    when = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    status, saved = server.request("POST", "/v1/memory", {"title": "Dated over HTTP",
                                                          "created": when})  # fmt: skip
    assert status == 200
    assert server.request("GET", f"/v1/memory/{saved['id']}")[1]["created"] == when
    status, err = server.request("POST", "/v1/memory", {"title": "From the future",
                                                        "created": 4_000_000_000})  # fmt: skip
    assert status == 400, err

    async def mcp() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            made = await c.call_tool("memory_save", {"title": "Dated over MCP", "created": when})
            return made.structured_content

    over_mcp = anyio.run(mcp)
    assert server.request("GET", f"/v1/memory/{over_mcp['id']}")[1]["created"] == when

    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    folder = tmp_path / "cli"
    folder.mkdir()
    for given in (str(when), "2023-11-14T22:13:20"):
        code, text = _cli("memory", "save", "--title", f"Dated {given}", "--created", given,
                          "--path", str(folder), "--json")  # fmt: skip
        assert code == 0, text
        code, text = _cli("memory", "get", str(json.loads(text)["id"]), "--path", str(folder),
                          "--json")  # fmt: skip
        assert json.loads(text)["created"] == when
    with pytest.raises(SystemExit):
        _cli("memory", "save", "--title", "t", "--created", "last tuesday", "--path", str(folder))


def test_memory_stats_name_no_path_of_the_machine(tmp_path: Path) -> None:
    """The admin tools' memory_stats (MCP and HTTP) gave the store's absolute path, though
    status gives paths relative to the workspace."""
    with Workspace.open(tmp_path, Config(dense_model="hash")) as ws:
        service = Service(ws)
        service.memory_save("Use make test", "config", what="the suite runs with make test")
        assert service.memory_stats().path == ".cortex/memory.sqlite"


def test_admin_routes_over_http(tmp_path: Path) -> None:
    """With --tools admin, stats, archive and delete answer over HTTP (no test called them)."""
    from starlette.testclient import TestClient

    from engine.serve import build_app

    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    app = build_app(Service(ws), tools="admin")
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        saved = client.post("/v1/memory", json={"title": "Use make test"}).json()
        note = client.post(f"/v1/memory/{saved['id']}/archive", json={}).json()
        assert note["archived"] is True
        stats = client.get("/v1/memory/stats").json()
        assert (stats["notes"], stats["archived"]) == (1, 1)
        back = client.post(f"/v1/memory/{saved['id']}/archive", json={"archived": False})
        assert back.json()["archived"] is False
        refused = client.delete(f"/v1/memory/{saved['id']}?hard=True-ish")
        assert refused.status_code == 400 and "hard must be" in refused.text
        assert client.get("/v1/memory/search?q=make&include_superseded=maybe").status_code == 400
        gone = client.delete(f"/v1/memory/{saved['id']}?hard=True").json()
        assert gone["forgotten"] is True
        assert client.get(f"/v1/memory/{saved['id']}").status_code == 404
    ws.close()


def test_the_cli_shows_control_characters_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note holding an escape sequence or a carriage return recoloured or overwrote what
    a person read from `cortex memory get`, `search` and `session show`; --json keeps it."""
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    at = ("--path", str(tmp_path))
    evil = "\x1b[31mred\x1b[0m\rover\x07"
    code, text = _cli("memory", "save", *at, "--title", "ctrl note", "--what", evil, "--json")
    number = str(json.loads(text)["id"])
    for argv in (("memory", "get", *at, number), ("memory", "search", *at, "ctrl note")):
        code, text = _cli(*argv)
        assert code == 0 and "\x1b" not in text and "\r" not in text and "\x07" not in text
        assert "\\x1b[31mred" in text
    code, text = _cli("memory", "get", *at, number, "--json")
    assert json.loads(text)["what"] == evil
    assert _cli("session", "add", *at, "--session", "s1", "--role", "tool", evil)[0] == 0
    for argv in (("session", "show", *at, "--session", "s1"),
                 ("session", "show", *at, "--session", "s1", "--step", "1")):  # fmt: skip
        code, text = _cli(*argv)
        assert code == 0 and "\x1b" not in text and "\r" not in text, text


def test_learned_state_is_shown_on_every_surface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No surface showed what outcomes taught (stop 44's review): `cortex learned`,
    `GET /v1/learned` and the MCP tool `learned` (both in the admin profile) give one JSON."""
    from starlette.testclient import TestClient

    from engine.serve import build_app, learned_json

    (tmp_path / "hooks.py").write_text("def register_hook(event):\n    return event\n")
    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    ws.index()
    assert learned_json(ws) == {"weights": {}, "salience": [], "items": 0, "digest": ""}
    pack = ws.build_context("where are hooks registered", "register_hook")
    ws.feedback(pack.replay_key, [1], outcome="success")
    body = learned_json(ws, k=2)
    assert body["items"] == 3 and len(body["salience"]) == 2 and body["digest"]
    assert body["salience"][0]["item"].startswith(("dir:", "file:", "symbol:"))
    with TestClient(build_app(Service(ws), tools="admin"),
                    base_url="http://127.0.0.1:8765") as client:  # fmt: skip
        assert client.get("/v1/learned?k=2").json() == body
        assert client.get("/v1/learned?k=0").status_code == 400
    with TestClient(build_app(Service(ws)), base_url="http://127.0.0.1:8765") as client:
        refused = client.get("/v1/learned")
        assert refused.status_code == 403 and "learned is an admin route" in refused.text
    admin = build_mcp_server(Service(ws), "admin")
    assert "learned" in {t.name for t in anyio.run(admin.list_tools)}
    agent = build_mcp_server(Service(ws), "agent")
    assert "learned" not in {t.name for t in anyio.run(agent.list_tools)}
    ws.close()
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    code, text = _cli("learned", str(tmp_path), "-k", "2", "--json")
    assert code == 0 and json.loads(text) == body
    code, text = _cli("learned", str(tmp_path))
    assert code == 0 and f"learned state {body['digest']}" in text and "3 salient items" in text


def test_learned_state_is_reset_on_every_surface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing undid learning (stop 44's review): `cortex learned --reset`, `DELETE
    /v1/learned` and the MCP tool `learned_reset` (admin) say what they forgot, in one
    JSON; a second reset forgets nothing."""
    from starlette.testclient import TestClient

    from engine.serve import build_app, learned_json

    (tmp_path / "hooks.py").write_text("def register_hook(event):\n    return event\n")
    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    ws.index()

    def teach(budget: int) -> str:
        pack = ws.build_context("where are hooks registered", "register_hook", budget_tokens=budget)
        ws.feedback(pack.replay_key, [1], outcome="success")
        return learned_json(ws)["digest"]  # type: ignore[return-value]

    digest = teach(1500)
    with TestClient(build_app(Service(ws)), base_url="http://127.0.0.1:8765") as client:
        refused = client.delete("/v1/learned")
        assert refused.status_code == 403 and "learned_reset is an admin route" in refused.text
    with TestClient(build_app(Service(ws), tools="admin"),
                    base_url="http://127.0.0.1:8765") as client:  # fmt: skip
        body = client.delete("/v1/learned?reason=wrong habit").json()
        assert body == {"reset": True, "weights": {}, "items": 3, "digest_before": digest,
                        "digest": ""}  # fmt: skip
        assert client.delete("/v1/learned").json()["reset"] is False
    assert ws.journal.free_text(ws.journal.learning_records(0)[-2].payload, "reason") == (
        "wrong habit"
    )
    digest = teach(1501)
    admin = build_mcp_server(Service(ws), "admin")
    assert "learned_reset" in {t.name for t in anyio.run(admin.list_tools)}
    agent = build_mcp_server(Service(ws), "agent")
    assert "learned_reset" not in {t.name for t in anyio.run(agent.list_tools)}
    called = anyio.run(admin.call_tool, "learned_reset", {"reason": "again"})
    assert f'"digest_before": "{digest}"' in str(called)
    digest = teach(1502)
    ws.close()
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    code, text = _cli("learned", str(tmp_path), "--reset", "--reason", "third")
    assert code == 0 and f"reset learned state {digest}: forgot 3 salient items" in text
    code, text = _cli("learned", str(tmp_path), "--reset", "--json")
    assert code == 0 and json.loads(text)["reset"] is False
    capsys.readouterr()
    code, _ = _cli("learned", str(tmp_path), "--reason", "x")
    assert code == 2 and "--reason goes with --reset" in capsys.readouterr().err


def test_a_forgotten_notes_id_is_a_number_on_every_surface(tmp_path: Path) -> None:
    """Deleting a note answers its id as a number, as save, get and search give it, however
    it was named (12 or "memory:12"); it was the string "12" on every surface."""
    from mcp import Client
    from starlette.testclient import TestClient

    from engine.serve import build_app, build_mcp_server, forget_json

    ws = Workspace.open(tmp_path, Config(dense_model="hash"))
    service = Service(ws)
    ids = [ws.memory.save(f"note {n} about make", "config").id for n in range(4)]

    async def over_mcp() -> Any:
        async with Client(build_mcp_server(service, "admin")) as client:
            return await client.call_tool("memory_delete", {"id": f"memory:{ids[2]}"})

    with TestClient(build_app(service, tools="admin"), base_url="http://127.0.0.1:8765") as c:
        http = [c.delete(f"/v1/memory/{ids[0]}").json(),
                c.delete(f"/v1/memory/memory:{ids[1]}").json()]  # fmt: skip
    answers = [*http, anyio.run(over_mcp).structured_content, forget_json(ws, str(ids[3]))]
    assert answers == [{"id": i, "forgotten": True, "hard": False} for i in ids]
    ws.close()
