"""``cortex serve``: the JSON API and MCP over HTTP against a real server on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import Config, ConfigError, SessionState, Turn, Workspace
from engine.cli import main
from engine.core import IndexNotBuiltError, NotFoundError
from engine.serve import (
    MAX_BODY_BYTES,
    MIN_TOKEN_CHARS,
    Service,
    build_app,
    read_token,
    serve,
    to_json,
)
from engine.serve._answers import status_of as _status
from indexers import sha256_text
from tests.engine.serve.test_mcp import REPO_ROOT, indexed_repo, server_env
from tests.engine.test_workspace import make_repo

TOKEN = "test-token"
START_TIMEOUT_S = 30.0


class Server:
    """A running ``cortex serve`` subprocess and a small urllib client for it."""

    def __init__(self, proc: subprocess.Popen[str], url: str, repo: Path, state: Path) -> None:
        self.proc = proc
        self.url = url
        self.repo = repo
        self.state = state

    def request(
        self, method: str, path: str, body: object = None, *, token: str | None = TOKEN,
        raw: bytes | None = None, headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:  # fmt: skip
        """(status, parsed JSON) of one request."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            req.add_header(name, value)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``cortex serve <repo> --port 0 --token-file ...`` started once for the module."""
    repo, state = indexed_repo(tmp_path_factory.mktemp("http"))
    cmd = [sys.executable, "-m", "engine.cli", "serve", str(repo), "--port", "0"]
    token_file = tmp_path_factory.mktemp("secret") / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)  # a token file others may read is warned about
    proc = subprocess.Popen(
        [*cmd, "--token-file", str(token_file), "--watch", "0"],
        env=server_env(state),
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    line = ""
    while "serving" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "the server exited before it was ready"
    url = line.split(" at ", 1)[1].split()[0]
    assert url.startswith("http://127.0.0.1:")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    yield Server(proc, url, repo, state)
    proc.terminate()
    proc.wait(timeout=10)


def test_healthz_needs_no_token_but_everything_else_does(server: Server) -> None:
    """/healthz answers anyone; /v1 and /mcp answer 401 without the right bearer token."""
    assert server.request("GET", "/healthz", token=None) == (200, {"status": "ok"})
    for token in (None, "wrong"):
        status, body = server.request("GET", "/v1/status", token=token)
        assert status == 401 and body["error"]["type"] == "unauthorized"
    assert server.request("POST", "/mcp", {}, token=None)[0] == 401


def test_the_bearer_scheme_is_case_insensitive(server: Server) -> None:
    """``bearer``, ``BEARER`` and ``Bearer`` all carry the token (RFC 9110)."""
    for scheme in ("bearer", "BEARER", "Bearer"):
        req = urllib.request.Request(server.url + "/v1/status",
                                     headers={"Authorization": f"{scheme} {TOKEN}"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    """``--host 0.0.0.0`` without a token is refused with one line (a usage error: 2)."""
    env = {k: v for k, v in os.environ.items() if k != "CORTEX_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "engine.cli", "serve", str(tmp_path),
                           "--host", "0.0.0.0", "--port", "0"], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "without a token" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    blank = subprocess.run([sys.executable, "-m", "engine.cli", "serve", str(tmp_path),
                            "--host", "0.0.0.0", "--port", "0"], env={**env, "CORTEX_TOKEN": " "},
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert blank.returncode == 2 and "the token is blank" in blank.stderr  # it served, 401s


def test_a_short_token_or_a_token_file_others_read_is_refused_or_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off loopback a token shorter than MIN_TOKEN_CHARS is refused, naming its length (a
    one-character token guarded 0.0.0.0); a token file group or others may read is
    warned about as settings are, and one only its owner reads is not."""
    loose = tmp_path / "tok1"
    loose.write_text("a\n")
    loose.chmod(0o644)
    code = main(["serve", str(tmp_path), "--host", "0.0.0.0", "--port", "0",
                 "--token-file", str(loose)], out=io.StringIO())  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 2
    assert err[0] == (f"cortex: warning: the token file {loose} is readable by its group and "
                      f"others (mode 0644): `chmod 600 {loose}`")  # fmt: skip
    assert "with a 1-character token: it needs at least 16" in err[1]
    with pytest.raises(ConfigError, match="a 15-character token"):
        serve(tmp_path, Config(), host="0.0.0.0", port=0, token="x" * 15)
    tight = tmp_path / "tok2"
    tight.write_text("t" * MIN_TOKEN_CHARS + "\n")
    tight.chmod(0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_token(tight) == "t" * MIN_TOKEN_CHARS
    tight.write_text(" \n")
    with pytest.raises(ConfigError, match="is empty"):
        read_token(tight)


@pytest.mark.parametrize(
    "headers", [{"Host": "evil.example:80"}, {"Origin": "http://evil.example"}]
)
def test_foreign_host_or_origin_is_refused(server: Server, headers: dict[str, str]) -> None:
    """A loopback server refuses a rebound Host or a foreign page's Origin (403)."""
    status, body = server.request("GET", "/v1/status", headers=headers)
    assert status == 403 and body["error"]["type"] == "forbidden"
    local = {"Origin": server.url}
    assert server.request("GET", "/v1/status", headers=local)[0] == 200


def test_a_call_over_the_time_limit_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Service.call gives up after REQUEST_TIMEOUT_S; the HTTP layer maps that to 504."""
    monkeypatch.setattr("engine.serve._service.REQUEST_TIMEOUT_S", 0.05)
    service = Service(Workspace.open(tmp_path, Config(dense_model="hash")))
    with pytest.raises(TimeoutError):
        anyio.run(service.call, time.sleep, 0.5)
    assert _status(TimeoutError()) == (504, "timeout")
    service.close()


def test_context_feedback_replay(server: Server) -> None:
    """POST /v1/context within budget; feedback validates; replay returns the same render."""
    status, pack = server.request(
        "POST", "/v1/context", {"goal": "register a hook", "budget_tokens": 300}
    )
    assert status == 200 and pack["tokens_used"] <= 300
    assert pack["citations"][0]["source_uri"] == "hooks.py#L2-L4"
    assert pack["render"].startswith("You are working in a code repository")
    key = pack["replay_key"]
    status, fb = server.request(
        "POST", "/v1/feedback", {"replay_key": key, "model_citations": [1, "[9]"],
                                 "tool_results": ["pytest passed", {"name": "ruff", "ok": True,
                                                                    "summary": "clean"}],
                                 "outcome": "success"},
    )  # fmt: skip
    assert status == 200 and fb["valid"] == [1] and fb["dropped"] == ["[9]"]
    status, replay = server.request("GET", f"/v1/replay/{key}")
    assert status == 200 and replay["text"] == pack["render"]


def test_search_status_index_openapi(server: Server) -> None:
    """The read routes answer JSON; the OpenAPI document lists every route."""
    status, found = server.request("GET", "/v1/search?q=register_hook&mode=bm25&k=2")
    assert status == 200 and found["hits"][0]["symbol"] == "Session.register_hook"
    status, st = server.request("GET", "/v1/status")
    assert status == 200 and st["indexed"] and st["files"] == 8
    status, done = server.request("POST", "/v1/index?wait=1")
    assert status == 200 and done["report"]["unchanged"] == 8
    status, doc = server.request("GET", "/v1/resolve?uri=hooks.py%23L2-L4")
    assert status == 200 and doc["text"] is None and doc["sha256"]  # no proof: metadata
    status, doc = server.request("GET", f"/v1/resolve?uri=hooks.py%23L2-L4&sha256={doc['sha256']}")
    assert status == 200 and "register_hook" in doc["text"]
    status, spec = server.request("GET", "/openapi.json")
    assert status == 200 and {"/v1/context", "/v1/feedback", "/healthz"} <= set(spec["paths"])


@pytest.mark.parametrize(
    ("method", "path", "body", "raw", "code"),
    [
        ("POST", "/v1/context", None, b"{not json", 400),
        ("POST", "/v1/context", {"goal": 5}, None, 400),
        ("POST", "/v1/context", {"goal": "x", "budget_tokens": "many"}, None, 400),
        ("POST", "/v1/context", {"goal": "", "query": ""}, None, 400),
        ("POST", "/v1/context", {"goal": "x", "tool_signals": [1]}, None, 400),
        ("POST", "/v1/feedback", {"model_citations": [1]}, None, 400),
        ("POST", "/v1/feedback", {"replay_key": "nope", "model_citations": [1]}, None, 404),
        ("GET", "/v1/replay/nope", None, None, 404),
        ("GET", "/v1/search?q=x&mode=fuzzy", None, None, 400),
        ("GET", "/v1/search?q=x&k=-1", None, None, 400),
        ("GET", "/v1/resolve?uri=../etc/passwd", None, None, 400),
        ("GET", "/v1/nothing", None, None, 404),
        ("GET", "/v1/context", None, None, 405),
        ("POST", "/v1/context", None, b'{"goal": "' + b"x" * MAX_BODY_BYTES + b'"}', 413),
    ],
)
def test_bad_requests_get_json_errors(
    server: Server, method: str, path: str, body: object, raw: bytes | None, code: int
) -> None:
    """Bad input, unknown keys and routes, and oversized bodies: the right code, JSON error."""
    status, answer = server.request(method, path, body, raw=raw)
    assert status == code
    assert answer["error"]["type"] and answer["error"]["message"]


def test_four_concurrent_clients_get_identical_renders(server: Server) -> None:
    """Four threads asking at once all succeed and get byte-identical renders."""
    request = {"goal": "compute the offset", "query": "offset_3 value", "budget_tokens": 500}
    results: list[tuple[int, Any]] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        results.append(server.request("POST", "/v1/context", request))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [status for status, _ in results] == [200] * 4
    assert len({body["render"] for _, body in results}) == 1
    assert len({body["replay_key"] for _, body in results}) == 1


def test_mcp_over_http_with_the_official_client(server: Server) -> None:
    """The SDK's streamable HTTP client, with the token, lists tools and builds a context."""

    async def session() -> tuple[set[str], str]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("build_context", {"goal": "register a hook"})
            return names, result.content[0].text

    names, render = anyio.run(session)
    assert "build_context" in names and "hooks.py" in render


def test_reads_keep_answering_while_a_refresh_runs(tmp_path: Path) -> None:
    """Reads in four threads during a background refresh all succeed; the new code is found."""
    repo, state = indexed_repo(tmp_path)
    for i in range(40):
        (repo / f"extra{i}.py").write_text(f"def brand_new_{i}(x):\n    return x + {i}\n")
    # "advise": reads answer from the index as it is instead of refreshing it themselves.
    config = Config(dense_model="hash", state_dir=str(state), refresh="advise")
    service = Service.open(repo, config)
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                service.context("register a hook", budget_tokens=300)
                service.search("brand_new", k=3)
            except BaseException as exc:  # any failure under concurrency is the finding
                errors.append(exc)
                return

    readers = [threading.Thread(target=read) for _ in range(4)]
    for t in readers:
        t.start()
    try:
        done = service.refresh(wait=True)
        time.sleep(0.2)
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=30)
    assert not errors, errors
    assert done["error"] is None and done["report"]["added"] == 40  # type: ignore[index]
    assert service.search("brand_new_7", mode="bm25", k=1)[0].chunk.path == "extra7.py"
    assert service.ws.journal.verify().ok  # turns recorded from four threads: one intact chain
    service.close()
    with Workspace.open(repo, Config(dense_model="hash", state_dir=str(state))) as ws:
        assert ws.status(check_files=True).stale_files == 0


STATE = {
    "recent_turns": [{"role": "user", "text": "we need a registry of hooks"}],
    "constraints": ["keep the public API"],
    "subgoals": ["find where hooks are registered"],
}


def test_one_request_one_answer_on_every_surface(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same request, with session state, through the library, the CLI's --json, HTTP
    and MCP's structured content: the same JSON, field for field (replay key included)."""
    ask = {"goal": "register a hook", "query": "where are hooks kept", "budget_tokens": 400}
    status, http = server.request("POST", "/v1/context", {**ask, "state": STATE})
    assert status == 200

    async def mcp() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
            Client(streamable_http_client(server.url + "/mcp", http_client=client_http)) as c,
        ):
            result = await c.call_tool("build_context", {**ask, "state": STATE})
            return result.structured_content

    config = Config(dense_model="hash", state_dir=str(server.state))
    with Workspace.open(server.repo, config) as ws:
        state = SessionState(
            (Turn("user", "we need a registry of hooks"),),
            ("keep the public API",),
            ("find where hooks are registered",),
        )
        library = to_json(ws.build_context(ask["goal"], ask["query"], state=state,
                                           budget_tokens=400))  # fmt: skip
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    monkeypatch.setenv("CORTEX_STATE_DIR", str(server.state))
    out = io.StringIO()
    code = main(["context", "where are hooks kept", "--goal", "register a hook", "--budget", "400",
                 "--path", str(server.repo), "--json", "--turn", "user:we need a registry of hooks",
                 "--constraint", "keep the public API", "--subgoal",
                 "find where hooks are registered"], out=out)  # fmt: skip
    assert code == 0
    cli = json.loads(out.getvalue())
    assert http == anyio.run(mcp) == library == cli
    assert "keep the public API" in http["render"] and "registry of hooks" in http["render"]


def test_bad_state_and_resolve_proofs_the_same_way_everywhere(server: Server) -> None:
    """Wrongly typed or unknown state fields are a 400; resolve takes {path, sha256} as a
    POST body as it does as query parameters."""
    for bad in ({"recent_turns": "x"}, {"turns": []}, {"recent_turns": [{"role": "u"}]}, [1]):
        status, body = server.request("POST", "/v1/context", {"goal": "hooks", "state": bad})
        assert status == 400 and body["error"]["type"] == "bad_request", bad
    lines = (Path(server.repo) / "hooks.py").read_text().split("\n")[1:4]
    sha = sha256_text("\n".join(lines))
    status, got = server.request(
        "POST",
        "/v1/resolve",
        {"uri": "hooks.py#L2-L4", "proof": {"path": "hooks.py", "sha256": sha}},
    )
    status_get, got_get = server.request("GET", f"/v1/resolve?uri=hooks.py%23L2-L4&sha256={sha}")
    assert status == status_get == 200 and got == got_get and got["verified"] is True


def test_search_files_is_the_same_ranking_on_http_and_cli(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /v1/search?files=1 and `cortex search --files --json` rank the same files with
    the same sections; the hook module comes first for a question about hooks."""
    status, http = server.request("GET", "/v1/search?q=register+a+hook&files=1&k=5")
    assert status == 200 and http["files"][0]["path"] == "hooks.py"
    assert http["files"][0]["sections"][0]["symbol"] == "Session.register_hook"
    monkeypatch.setenv("CORTEX_DENSE_MODEL", "hash")
    monkeypatch.setenv("CORTEX_STATE_DIR", str(server.state))
    out = io.StringIO()
    code = main(["search", "register a hook", "--files", "-k", "5", "--json",
                 "--path", str(server.repo)], out=out)  # fmt: skip
    assert code == 0 and json.loads(out.getvalue()) == http


BAD_INPUTS = [
    ("POST", "/v1/context", b"[" * 5000 + b"]" * 5000, "nested"),
    ("POST", "/v1/context", b'{"goal": "fix \\ud800 the parser"}', "surrogate"),
    ("POST", "/v1/context", b'{"goal": "x", "budget_token": 500}', "unknown field"),
    ("POST", "/v1/context", b'{"goal": "x", "state": "recent"}', "state must be"),
    ("POST", "/v1/context", b'{"goal": "x", "budget_tokens": 0}', "budget_tokens"),
    ("POST", "/v1/context", b'{"goal": "", "query": ""}', "goal or a query"),
    ("POST", "/v1/resolve", b'{"uri": "hooks.py\\u0000#L1"}', "not a path"),
    ("GET", "/v1/resolve?uri=hooks.py%00", None, "not a path"),
    ("POST", "/v1/feedback", b'{"replay_key": "k", "extra": 1}', "unknown field"),
    ("GET", "/v1/search?q=", None, "query"),
]


@pytest.mark.parametrize(("method", "path", "raw", "says"), BAD_INPUTS)
def test_bad_input_is_a_400_never_a_500(
    server: Server, method: str, path: str, raw: bytes | None, says: str
) -> None:
    """What a caller sent wrong is a 400 naming the problem; the server keeps serving."""
    status, body = server.request(method, path, raw=raw)
    assert status == 400 and says in body["error"]["message"], (status, body)
    assert server.request("GET", "/healthz", token=None)[0] == 200


def test_status_shows_no_absolute_path(server: Server) -> None:
    """/v1/status names paths relative to the workspace: nothing of the machine's layout."""
    status, body = server.request("GET", "/v1/status")
    assert status == 200 and body["root"] == "."
    text = json.dumps(body)
    assert str(server.repo) not in text and str(server.state) not in text


def test_bundle_route_and_attest_rate_limit(server: Server) -> None:
    """POST /v1/bundle answers the bundle under its budget; feedback with an outcome past
    five at once for one intent is a 429, and a reason without an outcome a 400."""
    status, bundle = server.request("POST", "/v1/bundle", {"goal": "register a hook",
                                                            "objects": ["hooks.py"],
                                                            "budget": 400})  # fmt: skip
    assert status == 200 and bundle["tokens_used"] <= 400 and bundle["items"]
    status, _ = server.request("POST", "/v1/bundle", {"goal": "x", "budget": 5000})
    assert status == 400
    keys = [server.request("POST", "/v1/context", {"goal": "hook limits",
                                                   "budget_tokens": 300 + i})[1]["replay_key"]
            for i in range(6)]  # six turns of one intent  # fmt: skip
    body = {"replay_key": keys[0], "model_citations": [1], "outcome": "success"}
    status, first = server.request("POST", "/v1/feedback", body)
    assert status == 200 and first["repeated"] is False
    status, again = server.request("POST", "/v1/feedback", body)  # a retry: nothing counted
    assert status == 200 and again["repeated"] is True
    codes = [server.request("POST", "/v1/feedback", {**body, "replay_key": k})[0]
             for k in keys[1:]]  # fmt: skip
    assert codes == [200] * 4 + [429]
    status, _ = server.request("POST", "/v1/feedback", {**body, "outcome": None,
                                                         "reason": "factual_error"})  # fmt: skip
    assert status == 400


def test_status_shows_a_first_builds_stage_and_progress(tmp_path: Path) -> None:
    """While the first index is built, status shows its stage, done of total and time left
    (it said only 'running', with 0 files, for minutes), and a read's 503 says where it is;
    once done, progress is null."""
    from starlette.testclient import TestClient

    repo = make_repo(tmp_path / "repo", files=150)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(tmp_path / "state")))
    seen: list[dict[str, Any]] = []
    with TestClient(build_app(service), base_url="http://127.0.0.1:8765") as client:
        refused = client.post("/v1/context", json={"goal": "register a hook"}).json()
        while True:
            got = client.get("/v1/status")
            # A 503 "no index in …/bases/…" can come between the base's 'complete' marker
            # and its rename into place (engine.index's Layers; not this test's concern).
            state = got.json()["refresh"] if got.status_code != 503 else {"running": True}
            if not state["running"]:
                break
            if state.get("progress") is not None:
                seen.append(state["progress"])
            time.sleep(0.005)
        after = client.get("/v1/status").json()["refresh"]
    service.close()
    assert "being built" in refused["error"]["message"]
    assert "status shows its progress" in refused["error"]["message"]
    assert seen and set(seen[-1]) == {"stage", "number", "unit", "done", "total", "elapsed_s",
                                      "eta_s"}  # fmt: skip
    assert {p["stage"] for p in seen} & {"reading files", "chunking", "lexical index"}
    assert all(p["total"] is None or 0 <= p["done"] <= p["total"] for p in seen)
    assert after["progress"] is None and after["error"] is None and after["report"]


def test_index_with_wait_outlasts_the_call_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /v1/index?wait=1 answers when the refresh is done, however long past a call's
    time limit (it was a 504 at 60 s, while a first build of the standard library takes
    ~150 s and the 503 for reads advised exactly this wait)."""
    from starlette.testclient import TestClient

    repo, state = indexed_repo(tmp_path)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    for i in range(60):
        (repo / f"new{i}.py").write_text(f"def new_{i}():\n    return {i}\n")
    monkeypatch.setattr("engine.serve._service.REQUEST_TIMEOUT_S", 0.01)  # any refresh is over
    with TestClient(build_app(service), base_url="http://127.0.0.1:8765") as client:
        done = client.post("/v1/index?wait=1")
    service.close()
    assert done.status_code == 200, done.text
    assert done.json()["running"] is False and done.json()["report"]["added"] == 60


def test_index_with_wait_past_its_own_limit_says_the_build_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past REFRESH_WAIT_S the wait answers 504 saying where the build is and that it goes
    on, to be followed in status (not the session steps' advice to retry with a key)."""
    from starlette.testclient import TestClient

    repo, state = indexed_repo(tmp_path)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    for i in range(60):
        (repo / f"new{i}.py").write_text(f"def new_{i}():\n    return {i}\n")
    monkeypatch.setattr("engine.serve._service.REFRESH_WAIT_S", 0.0)
    with TestClient(build_app(service), base_url="http://127.0.0.1:8765") as client:
        late = client.post("/v1/index?wait=1")
    while service.status(check_files=False)["refresh"]["running"]:  # type: ignore[index]
        time.sleep(0.05)
    assert service.status(check_files=False)["refresh"]["report"]["added"] == 60  # type: ignore
    service.close()
    assert late.status_code == 504
    message = late.json()["error"]["message"]
    assert "still being built" in message and "call status" in message
    assert "Idempotency-Key" not in message


def test_the_stage_recorder_gives_the_stage_and_its_time_left() -> None:
    """ETA is the stage's units left at its pace so far; unknown without a total or a
    unit done; a new build numbers its stages from 1 again."""
    from engine.serve._progress import StageRecorder

    now = [100.0]
    rec = StageRecorder(clock=lambda: now[0])
    assert rec.snapshot() is None
    rec.stage("reading files", None, "files")
    rec.advance(7)
    now[0] += 2
    first = rec.snapshot()
    assert first is not None and (first.done, first.total, first.eta_s) == (7, None, None)
    rec.stage("chunking", 100, "files")
    assert rec.snapshot().eta_s is None  # type: ignore[union-attr]
    now[0] += 10
    rec.advance(25)
    shown = rec.snapshot()
    assert shown is not None and (shown.number, shown.elapsed_s, shown.eta_s) == (2, 10.0, 30.0)
    assert shown.line() == "chunking (stage 2): 25/100 files, ~30 s left in this stage"
    rec.start()
    rec.stage("reading files", None, "files")
    assert rec.snapshot().number == 1  # type: ignore[union-attr]


def test_a_first_build_by_another_process_is_named_while_it_runs(tmp_path: Path) -> None:
    """While another writer (here a second workspace, as `cortex index` would be) builds
    the first index, the server's reads say another process is building it (they said "run
    `cortex index` first", the command that was then refused); then they answer."""
    repo = make_repo(tmp_path / "repo")
    config = Config(dense_model="hash", state_dir=str(tmp_path / "state"))
    go, started = threading.Event(), threading.Event()

    class Paused:  # holds the other build (and its writer lock) in its first stage
        def stage(self, name: str, total: int | None, unit: str) -> None:
            started.set()
            go.wait(30)

        def advance(self, n: int = 1) -> None: ...

        def end(self) -> None: ...

    other = Workspace.open(repo, config)
    builder = threading.Thread(target=other.index, kwargs={"progress": Paused()})
    builder.start()
    assert started.wait(30)
    service = Service.open(repo, config)
    try:
        assert "IndexBusyError" in str(service.refresh(wait=True)["error"])
        with pytest.raises(IndexNotBuiltError, match="being built by another process"):
            service.search("register_hook")
        go.set()
        builder.join(30)
        assert service.search("register_hook", k=1)[0].chunk.path == "hooks.py"
    finally:
        go.set()
        service.close()
        other.close()


def test_a_negative_number_in_a_query_or_path_gets_the_librarys_answer(tmp_path: Path) -> None:
    """-1 as a step, k, before or depth in a query string or a path is answered as the
    library answers it (404 for a step no session has, the range message otherwise); it was
    a 400 'digits 0-9' on HTTP alone."""
    from starlette.testclient import TestClient

    repo, state = indexed_repo(tmp_path)
    service = Service.open(repo, Config(dense_model="hash", state_dir=str(state)))
    ws = service.ws
    ws.session("neg").add("user", "fix hooks")
    note = ws.memory.save("hooks keep their order", "decision").id
    cases: list[tuple[str, Any]] = [
        ("/v1/session/neg?step=-1", lambda: ws.session("neg").step(-1)),
        ("/v1/session/neg/checkpoint/-1", lambda: ws.session("neg").load_checkpoint(-1)),
        ("/v1/search?q=hooks&k=-1", lambda: service.search("hooks", k=-1)),
        ("/v1/memory/search?q=hooks&k=-1", lambda: ws.memory.search("hooks", -1)),
        (f"/v1/memory/{note}/timeline?before=-1", lambda: ws.memory.timeline(note, -1, 5)),
        (f"/v1/memory/{note}/graph?depth=-1", lambda: ws.memory.graph(note, -1)),
    ]
    with TestClient(build_app(service), base_url="http://127.0.0.1:8765") as client:
        for path, library in cases:
            with pytest.raises((ConfigError, NotFoundError)) as caught:
                library()
            got = client.get(path)
            wanted = (_status(caught.value)[0], str(caught.value))
            assert (got.status_code, got.json()["error"]["message"]) == wanted, path
    service.close()


def test_openapi_lists_429_and_note_ids_as_memory_uris(server: Server) -> None:
    """The document lists the 429 feedback answers over the attest rate, and a note id
    path parameter that takes 'memory:12' as the routes do (it typed it integer only)."""
    import re

    spec = server.request("GET", "/openapi.json")[1]
    assert "429" in spec["paths"]["/v1/feedback"]["post"]["responses"]
    (param,) = [p for p in spec["paths"]["/v1/memory/{id}"]["get"]["parameters"]
                if p["name"] == "id"]  # fmt: skip
    assert param["schema"]["type"] == "string"
    for given in ("12", "memory:12"):
        assert re.fullmatch(param["schema"]["pattern"].strip("^$"), given)
        assert server.request("GET", f"/v1/memory/{given}")[0] == 404  # read, no such note


def test_status_differs_from_the_librarys_only_as_the_readme_says(server: Server) -> None:
    """/v1/status has the library's fields and values, but root '.' and state_dir relative
    to the workspace (a caller learns nothing of the layout) and the servers' refresh."""
    body = server.request("GET", "/v1/status")[1]
    with Workspace.open(server.repo, Config(dense_model="hash", state_dir=str(server.state))) as ws:
        library = to_json(ws.status(check_files=True))
    assert set(body) == set(library) | {"refresh"}
    assert body["root"] == "." and body["state_dir"] == "(outside)"  # the state is in tmp
    same = {k for k in library if k not in ("root", "state_dir")}
    assert {k: body[k] for k in same} == {k: library[k] for k in same}
    assert {"running", "progress"} <= set(body["refresh"])
    readme = (REPO_ROOT / "README.md").read_text()
    assert "Two differences are deliberate" in readme and "`(outside)`" in readme
