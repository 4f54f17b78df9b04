"""``cortex serve``: MCP's streamable HTTP transport at ``/mcp`` and a JSON API under ``/v1``.

For planners that do not speak MCP::

    POST /v1/context        {goal, query, tool_signals, state, budget_tokens} -> the pack
    POST /v1/feedback       {replay_key, model_citations, tool_results, outcome, reason}
    POST /v1/bundle         {goal, objects, budget} -> the cold-start bundle
    GET  /v1/replay/{key}   the recorded prompt, byte for byte
    GET  /v1/search?q=&goal=&mode=&k=&files=1
    GET  /v1/resolve?uri=&path=&sha256=     POST /v1/resolve {uri, proof: {path, sha256}}
    GET  /v1/status         POST /v1/index?wait=1
    POST /v1/session/{id}/steps       {role, text, tool, is_error, exit_status} -> the step
    POST /v1/session/{id}/decisions   {text, rationale, evidence} -> the step
    GET  /v1/session/{id}?step=       the steps (without text), or one step in full
    POST /v1/session/{id}/compact     {load_bearing, budget_tokens, step, in_context}
                                      -> the compaction
    POST /v1/session/{id}/checkpoint  {step, budget_tokens}   GET .../checkpoint/{step}
    POST /v1/session/{id}/end         {scope} -> the summary note's save result
    POST /v1/memory                   {title, type, what, why, where, learned, topic_key,
                                       scope} -> what the save did
    GET  /v1/memory/search?q=&k=&types=&include_superseded=1   titles and previews
    GET  /v1/memory/{id}    GET /v1/memory/{id}/timeline?before=&after=
    POST /v1/memory/{id}/edges {dst, kind}   GET /v1/memory/{id}/graph?depth=&kinds=
    (admin profile) DELETE /v1/memory/{id}?hard=1   POST /v1/memory/{id}/archive {archived}
                    GET /v1/memory/stats
    GET  /healthz           GET /openapi.json

Every route but ``/healthz`` checks the bearer token when one is set. Answers are the one
JSON encoding of the records (``engine.serve``'s ``to_json``); errors are
``{"error": {"type", "message"}}``, mapped from the exception tree in ``_status``: 400 (bad
input), 401, 404 (unknown key or route), 413 (body over ``MAX_BODY_BYTES``), 429 (feedback
with an outcome over the attest rate), 503 (the index
is being built, busy, or unusable: the message says what to run), 504 (over
``REQUEST_TIMEOUT_S``); 500 only for a bug. Reads run in parallel on ``Service``'s thread
pool; index refreshes run in the background, one at a time. Starlette and uvicorn (both dependencies
of the MCP SDK) are imported inside ``build_app`` and ``serve``.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core import (
    DEFAULT_BUNDLE_BUDGET,
    BudgetUnreachableError,
    Config,
    ConfigError,
    CortexError,
    IndexBusyError,
    IndexNotBuiltError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
)
from engine.serve._encode import files_json, hits_json, notes_json, to_json
from engine.serve._mcp import ADMIN_TOOLS, build_mcp_server, tool_names
from engine.serve._requests import (
    Proof,
    evidence_of,
    field,
    only,
    proof_of,
    state_of,
    steps_of,
    strings,
    tool_results_of,
)
from engine.serve._service import REQUEST_TIMEOUT_S, WATCH_INTERVAL_S, Service

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "OPENAPI", "TOKEN_ENV", "build_app", "serve"]

MAX_BODY_BYTES = 1 << 20  # 1 MiB: 32 KiB of query plus 256 KiB of signals, JSON-escaped, fits
# A body a little over the limit is read to its end before the 413, so the client can read
# the answer (a server that stops reading makes most clients fail with a broken pipe).
_DRAIN_BYTES = 8 * MAX_BODY_BYTES
TOKEN_ENV = "CORTEX_TOKEN"  # kept out of Config: a secret must not land in logs or records
_OPEN_PATHS = frozenset({"/healthz"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _status(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and error type for an exception (the one place they are mapped)."""
    if isinstance(exc, PayloadTooLargeError):
        return 413, "too_large"
    if isinstance(exc, BudgetUnreachableError):  # what must be kept is over the budget
        return 413, "budget_unreachable"
    if isinstance(exc, NotFoundError):
        return 404, "not_found"
    if isinstance(exc, ConfigError):
        return 400, "bad_request"
    if isinstance(exc, RateLimitedError):
        return 429, "rate_limited"
    if isinstance(exc, IndexNotBuiltError):
        return 503, "not_ready"
    if isinstance(exc, IndexBusyError):
        return 503, "busy"
    if isinstance(exc, CortexError):  # the index, ledger, cache or model cannot be used now
        return 503, "unavailable"
    if isinstance(exc, TimeoutError):
        return 504, "timeout"
    return 500, "internal"


def _error(status: int, kind: str, message: str) -> Response:
    from starlette.responses import JSONResponse

    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = {"error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _answer(work: Callable[[], Awaitable[object]]) -> Response:
    from starlette.responses import JSONResponse

    try:
        return JSONResponse(await work())
    except (CortexError, TimeoutError) as exc:
        status, kind = _status(exc)
        message = str(exc) or f"timed out after {REQUEST_TIMEOUT_S:.0f} s"
        return _error(status, kind, message)
    except Exception as exc:  # a bug: say so without leaking internals, keep serving
        print(f"cortex: internal error: {exc!r}", file=sys.stderr)
        return _error(500, "internal", "internal error; see the server's log")


async def _json_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _DRAIN_BYTES:
        raise PayloadTooLargeError(f"the body is over {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= MAX_BODY_BYTES:
            chunks.append(chunk)
        elif size > _DRAIN_BYTES:
            break
    if size > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(b"".join(chunks) or b"{}")
    except ValueError as exc:
        raise ConfigError(f"the body is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError("the body is nested too deeply") from exc
    if not isinstance(body, dict):
        raise ConfigError("the body must be a JSON object")
    try:  # "\ud800" is valid JSON but no text: refuse it here, not deep in a 500
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError("the body holds a lone surrogate (\\ud800-\\udfff): not text") from exc
    except RecursionError as exc:
        raise ConfigError("the body is nested too deeply") from exc
    return body


def build_app(service: Service, *, token: str | None = None, host: str = "127.0.0.1",
              tools: str = "agent") -> ASGIApp:  # fmt: skip
    """The ASGI app: the JSON routes, MCP at ``/mcp``, the token check and JSON errors.
    ``tools`` (a profile or tool names) picks the MCP tools and whether the admin memory
    routes (delete, archive, stats) exist."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    call = service.call

    async def context(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "goal", "query", "tool_signals", "budget_tokens", "state")
            pack = await call(
                service.context,
                field(body, "goal", str, ""),
                field(body, "query", str, ""),
                strings(body, "tool_signals"),
                field(body, "budget_tokens", (int, type(None)), None),
                state_of(body.get("state")),
            )
            return to_json(pack)

        return await _answer(work)

    async def feedback(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "replay_key", "model_citations", "tool_results", "outcome", "reason")
            key = field(body, "replay_key", str, None)
            if key is None:
                raise ConfigError("replay_key is required")
            cited = field(body, "model_citations", list, [])
            if any(isinstance(c, bool) or not isinstance(c, int | str) for c in cited):
                raise ConfigError("model_citations must be a list of int or str")
            outcome = field(body, "outcome", (str, type(None)), None)
            reason = field(body, "reason", (str, type(None)), None)
            results = tool_results_of(body.get("tool_results"))
            fb = await call(service.feedback, key, cited, results, outcome, reason)
            return to_json(fb)

        return await _answer(work)

    async def bundle(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "goal", "objects", "budget")
            goal = field(body, "goal", str, None)
            if goal is None:
                raise ConfigError("goal is required")
            budget = field(body, "budget", int, DEFAULT_BUNDLE_BUDGET)
            return to_json(await call(service.bundle, goal, strings(body, "objects"), budget))

        return await _answer(work)

    async def replay(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.replay, request.path_params["key"]))

        return await _answer(work)

    async def search(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            k = q.get("k", "10")
            if not k.isdigit():
                raise ConfigError(f"k must be a whole number, got {k!r}")
            query, mode, goal = q.get("q", ""), q.get("mode", "hybrid"), q.get("goal", "")
            if q.get("files", "") in ("1", "true", "yes"):
                return files_json(await call(service.search_files, query, mode, int(k), goal))
            return hits_json(await call(service.search, query, mode, int(k), goal))

        return await _answer(work)

    async def resolve(request: Request) -> Response:
        async def work() -> object:
            if request.method == "POST":
                body = await _json_body(request)
                only(body, "uri", "proof")
                uri = field(body, "uri", str, "")
                proof = proof_of(body.get("proof"))
            else:
                uri = request.query_params.get("uri", "")
                sha = request.query_params.get("sha256")
                path = request.query_params.get("path") or uri.split("#", 1)[0]
                proof = Proof(path, sha) if sha else None
            return await call(service.resolve, uri, proof)

        return await _answer(work)

    async def status(request: Request) -> Response:
        return await _answer(lambda: call(service.status))

    async def index(request: Request) -> Response:
        wait = request.query_params.get("wait", "") in ("1", "true", "yes")
        return await _answer(lambda: call(service.refresh, wait=wait))

    async def session_steps(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "role", "text", "tool", "is_error", "exit_status")
            role, text = field(body, "role", str, None), field(body, "text", str, None)
            if role is None or text is None:
                raise ConfigError("role and text are required")
            step = await call(
                service.session_add,
                request.path_params["session"],
                role,
                text,
                field(body, "tool", (str, type(None)), None),
                field(body, "is_error", (bool, type(None)), None),
                field(body, "exit_status", (int, type(None)), None),
            )
            return to_json(step)

        return await _answer(work)

    async def session_decisions(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "text", "rationale", "evidence")
            text = field(body, "text", str, None)
            if text is None:
                raise ConfigError("text is required")
            step = await call(service.session_decide, request.path_params["session"], text,
                              field(body, "rationale", str, ""),
                              evidence_of(body.get("evidence")))  # fmt: skip
            return to_json(step)

        return await _answer(work)

    async def session_show(request: Request) -> Response:
        async def work() -> object:
            raw = request.query_params.get("step")
            if raw is not None and not raw.isdigit():
                raise ConfigError(f"step must be a whole number, got {raw!r}")
            step = int(raw) if raw is not None else None
            return await call(service.session_show, request.path_params["session"], step)

        return await _answer(work)

    async def session_compact(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "load_bearing", "budget_tokens", "step", "in_context")
            held = body.get("in_context")
            done = await call(service.session_compact, request.path_params["session"],
                              steps_of(body.get("load_bearing")),
                              field(body, "budget_tokens", int, 4000),
                              field(body, "step", (int, type(None)), None),
                              None if held is None else steps_of(held, "in_context"))  # fmt: skip
            return to_json(done)

        return await _answer(work)

    async def session_end(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "scope")
            saved = await call(service.session_end, request.path_params["session"],
                               field(body, "scope", str, "personal"))  # fmt: skip
            return to_json(saved)

        return await _answer(work)

    async def session_checkpoint(request: Request) -> Response:
        async def work() -> object:
            session = request.path_params["session"]
            if request.method == "GET":
                raw = request.path_params["step"]
                if not raw.isdigit():
                    raise ConfigError(f"step must be a whole number, got {raw!r}")
                done = await call(service.session_checkpoint, session, int(raw), load=True)
                return to_json(done)
            body = await _json_body(request)
            only(body, "step", "budget_tokens")
            step = field(body, "step", int, None)
            if step is None:
                raise ConfigError("step is required")
            done = await call(service.session_checkpoint, session, step,
                              budget_tokens=field(body, "budget_tokens", int, 4000))  # fmt: skip
            return to_json(done)

        return await _answer(work)

    async def memory_save(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            names = ("title", "type", "what", "why", "where", "learned", "topic_key", "scope")
            only(body, *names)
            title = field(body, "title", str, None)
            if title is None:
                raise ConfigError("title is required")
            saved = await call(
                service.memory_save, title, field(body, "type", str, "note"),
                *(field(body, n, str, "") for n in ("what", "why", "where", "learned")),
                field(body, "topic_key", (str, type(None)), None),
                field(body, "scope", str, "project"),
            )  # fmt: skip
            return to_json(saved)

        return await _answer(work)

    async def memory_search(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            types = [t for t in q.get("types", "").split(",") if t]
            superseded = q.get("include_superseded", "") in ("1", "true", "yes")
            hits = await call(service.memory_search, q.get("q", ""), _whole(q, "k", 10),
                              types, superseded)  # fmt: skip
            return notes_json(hits)

        return await _answer(work)

    async def memory_get(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.memory_get, request.path_params["id"]))

        return await _answer(work)

    async def memory_timeline(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            hits = await call(service.memory_timeline, request.path_params["id"],
                              _whole(q, "before", 5), _whole(q, "after", 5))  # fmt: skip
            return notes_json(hits)

        return await _answer(work)

    async def memory_edges(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "dst", "kind")
            dst, kind = field(body, "dst", (int, str), None), field(body, "kind", str, None)
            if dst is None or kind is None:
                raise ConfigError("dst and kind are required")
            return to_json(await call(service.memory_relate, request.path_params["id"], dst,
                                      kind))  # fmt: skip

        return await _answer(work)

    async def memory_graph(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            kinds = [k for k in q.get("kinds", "").split(",") if k]
            graph = await call(service.memory_graph, request.path_params["id"],
                               _whole(q, "depth", 1), kinds)  # fmt: skip
            return to_json(graph)

        return await _answer(work)

    async def memory_delete(request: Request) -> Response:
        hard = request.query_params.get("hard", "") in ("1", "true", "yes")
        return await _answer(lambda: call(service.memory_forget, request.path_params["id"], hard))

    async def memory_archive(request: Request) -> Response:
        async def work() -> object:
            body = await _json_body(request)
            only(body, "archived")
            archived = field(body, "archived", bool, True)
            return to_json(await call(service.memory_archive, request.path_params["id"],
                                      archived))  # fmt: skip

        return await _answer(work)

    async def memory_stats(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.memory_stats))

        return await _answer(work)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        kinds = {404: "not_found", 405: "method_not_allowed"}
        return _error(code, kinds.get(code, "http_error"), getattr(exc, "detail", "") or "")

    mcp = build_mcp_server(service, tools)
    admin = set(tool_names(tools)) & set(ADMIN_TOOLS)
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", host=host, max_request_body_size=MAX_BODY_BYTES
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    routes = [
        Route("/v1/context", context, methods=["POST"]),
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/v1/bundle", bundle, methods=["POST"]),
        Route("/v1/replay/{key}", replay, methods=["GET"]),
        Route("/v1/search", search, methods=["GET"]),
        Route("/v1/resolve", resolve, methods=["GET", "POST"]),
        Route("/v1/status", status, methods=["GET"]),
        Route("/v1/index", index, methods=["POST"]),
        Route("/v1/session/{session}/steps", session_steps, methods=["POST"]),
        Route("/v1/session/{session}/decisions", session_decisions, methods=["POST"]),
        Route("/v1/session/{session}", session_show, methods=["GET"]),
        Route("/v1/session/{session}/compact", session_compact, methods=["POST"]),
        Route("/v1/session/{session}/checkpoint", session_checkpoint, methods=["POST"]),
        Route("/v1/session/{session}/checkpoint/{step}", session_checkpoint, methods=["GET"]),
        Route("/v1/session/{session}/end", session_end, methods=["POST"]),
        Route("/v1/memory", memory_save, methods=["POST"]),
        Route("/v1/memory/search", memory_search, methods=["GET"]),
        *([Route("/v1/memory/stats", memory_stats, methods=["GET"])]
          if "memory_stats" in admin else []),
        Route("/v1/memory/{id}", memory_get, methods=["GET"]),
        *([Route("/v1/memory/{id}", memory_delete, methods=["DELETE"])]
          if "memory_delete" in admin else []),
        Route("/v1/memory/{id}/timeline", memory_timeline, methods=["GET"]),
        Route("/v1/memory/{id}/edges", memory_edges, methods=["POST"]),
        Route("/v1/memory/{id}/graph", memory_graph, methods=["GET"]),
        *([Route("/v1/memory/{id}/archive", memory_archive, methods=["POST"])]
          if "memory_archive" in admin else []),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *mcp_app.routes,
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error}
    )
    return _Gate(app, token, loopback=_hostname(host) in _LOOPBACK)


class _Gate:
    """Pure ASGI (MCP's streamed responses pass untouched): the bearer token and, on a
    loopback address, the Host and Origin checks that stop DNS rebinding and cross-site
    requests from a browser (the SDK does the same for /mcp alone)."""

    def __init__(self, app: ASGIApp, token: str | None, *, loopback: bool) -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(dict(scope["headers"]), scope["path"])
            if refusal is not None:
                await _error(*refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes], path: str) -> tuple[int, str, str] | None:
        if self.loopback:
            host = headers.get(b"host", b"").decode("latin-1")
            origin = headers.get(b"origin", b"").decode("latin-1")
            if _hostname(host) not in _LOOPBACK or (
                origin and _hostname(origin.split("://", 1)[-1]) not in _LOOPBACK
            ):
                return 403, "forbidden", "only local pages may call a server on a loopback address"
        # "Bearer" is case-insensitive (RFC 9110 auth schemes); the token itself is not.
        scheme, _, given = headers.get(b"authorization", b"").strip().partition(b" ")
        bearer = scheme.lower() == b"bearer"
        if self.expected and path not in _OPEN_PATHS and not (
            bearer and hmac.compare_digest(given.strip(), self.expected)
        ):
            return 401, "unauthorized", "missing or wrong bearer token"
        return None


def _whole(params: Mapping[str, str], name: str, default: int) -> int:
    """A query parameter that must be a whole number (``default`` when absent)."""
    raw = params.get(name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ConfigError(f"{name} must be a whole number, got {raw!r}")
    return int(raw)


def _hostname(netloc: str) -> str:
    """``127.0.0.1:8765`` -> ``127.0.0.1``; ``[::1]:80`` -> ``::1``."""
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def serve(
    path: str | Path,
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    watch: float | None = None,
    tools: str = "agent",
) -> None:
    """Serve ``path`` over HTTP until interrupted; prints the address on stderr once ready
    (``tools``: the MCP tools and memory routes, a profile or tool names)."""
    import uvicorn

    token = token or os.environ.get(TOKEN_ENV) or None
    if not token and _hostname(host) not in _LOOPBACK:
        raise ConfigError(f"refusing to serve on {host} without a token: anyone who can "
                          f"reach it could read the workspace (set ${TOKEN_ENV} or "
                          "--token-file)")  # fmt: skip
    tool_names(tools)  # an unknown name fails before anything is opened
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    service = Service.open(path, config, watch=WATCH_INTERVAL_S if watch is None else watch)
    try:
        app = build_app(service, token=token, host=host, tools=tools)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        where = f"[{host}]" if family == socket.AF_INET6 else host
        url = f"http://{where}:{sock.getsockname()[1]}"
        print(f"cortex: serving {service.ws.root} at {url} (MCP: {url}/mcp, API: {url}/v1)",
              file=sys.stderr, flush=True)  # fmt: skip
        server.run(sockets=[sock])
    finally:
        service.close()
        sock.close()


# fmt: off
_ERR = {"$ref": "#/components/schemas/Error"}
_Q = {"in": "query", "schema": {"type": "string"}}
_OK = {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}
_ERRS = {str(c): {"description": d, "content": {"application/json": {"schema": _ERR}}}
         for c, d in ((400, "bad input"), (401, "missing or wrong token"), (404, "unknown key"),
                      (413, "body too large"), (503, "index not ready, busy or unusable"),
                      (504, "timeout"))}


def _body(props: dict[str, object], required: list[str]) -> dict[str, object]:
    schema = {"type": "object", "properties": props, "required": required}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


_STRS = {"type": "array", "items": {"type": "string"}}
_TURN = {"type": "object", "properties": {"role": {"type": "string"}, "text": {"type": "string"}},
         "required": ["role", "text"], "additionalProperties": False}
_STATE = {"type": "object", "additionalProperties": False,
          "properties": {"recent_turns": {"type": "array", "items": _TURN},
                         "constraints": _STRS, "subgoals": _STRS,
                         "session": {"type": "string"}}}
_SID = {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}
_INTS = {"type": "array", "items": {"type": "integer"}}
_NID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
_NOTE_TYPES = ["decision", "bugfix", "pattern", "discovery", "config", "identity", "constraint",
               "goal", "note"]
_EDGE_KINDS = ["references", "relates_to", "follows", "supersedes", "contradicts"]
_PROOF = {"type": "object", "additionalProperties": False, "required": ["path", "sha256"],
          "properties": {"path": {"type": "string"}, "sha256": {"type": "string"}}}
OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "cortex", "version": "1",
             "description": "Budgeted, cited context for coding agents. MCP lives at /mcp."},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "object",
                    "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}},
    },
    "security": [{"bearer": []}],
    "paths": {
        "/v1/context": {"post": {
            "summary": "Build the context for the next step (render is the prompt text)",
            "requestBody": _body({"goal": {"type": "string"}, "query": {"type": "string"},
                                  "tool_signals": _STRS, "budget_tokens": {"type": "integer"},
                                  "state": _STATE}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/feedback": {"post": {
            "summary": "Report the [n] citations the model used",
            "requestBody": _body({"replay_key": {"type": "string"},
                                  "model_citations": {"type": "array", "items": {}},
                                  "tool_results": {"type": "array", "items": {}},
                                  "outcome": {"type": "string"},
                                  "reason": {"type": "string"}}, ["replay_key"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/bundle": {"post": {
            "summary": "The cold-start bundle: pinned, earlier outcomes, code for the goal",
            "requestBody": _body({"goal": {"type": "string"}, "objects": _STRS,
                                  "budget": {"type": "integer"}}, ["goal"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/replay/{key}": {"get": {
            "summary": "The recorded prompt, byte for byte",
            "parameters": [{"name": "key", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/search": {"get": {
            "summary": "Sections (or files=1: files) in build_context's ranking",
            "parameters": [{"name": "q", **_Q, "required": True}, {"name": "goal", **_Q},
                           {"name": "files", **_Q},
                           {"name": "mode", "in": "query",
                            "schema": {"enum": ["bm25", "dense", "hybrid"]}},
                           {"name": "k", "in": "query", "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/resolve": {"get": {
            "summary": "The text of path#Lstart-Lend, checked against an optional proof",
            "parameters": [{"name": "uri", **_Q, "required": True}, {"name": "path", **_Q},
                           {"name": "sha256", **_Q}],
            "responses": {"200": _OK, **_ERRS}}, "post": {
            "summary": "The text of path#Lstart-Lend, checked against an optional proof",
            "requestBody": _body({"uri": {"type": "string"}, "proof": _PROOF}, ["uri"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/status": {"get": {"summary": "What is indexed, how stale, refresh state",
                               "responses": {"200": _OK, **_ERRS}}},
        "/v1/index": {"post": {"summary": "Refresh the index in the background (wait=1 blocks)",
                               "parameters": [{"name": "wait", **_Q}],
                               "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/steps": {"post": {
            "summary": "Journal one step of a session (role user, assistant, tool, changes, "
                       "request)",
            "parameters": [_SID],
            "requestBody": _body({"role": {"type": "string"}, "text": {"type": "string"},
                                  "tool": {"type": "string"}, "is_error": {"type": "boolean"},
                                  "exit_status": {"type": "integer"}}, ["role", "text"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/decisions": {"post": {
            "summary": "Record a decision, its rationale and the evidence it rests on",
            "parameters": [_SID],
            "requestBody": _body({"text": {"type": "string"}, "rationale": {"type": "string"},
                                  "evidence": {"type": "array", "items": {}}}, ["text"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}": {"get": {
            "summary": "A session's steps, or one step in full (step=N)",
            "parameters": [_SID, {"name": "step", "in": "query",
                                  "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/compact": {"post": {
            "summary": "Compact into budget_tokens and journal a checkpoint (413 when even the "
                       "stubs do not fit)",
            "parameters": [_SID],
            "requestBody": _body({"load_bearing": _INTS, "budget_tokens": {"type": "integer"},
                                  "step": {"type": "integer"}, "in_context": _INTS}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/checkpoint": {"post": {
            "summary": "Journal a checkpoint of the working set at step",
            "parameters": [_SID],
            "requestBody": _body({"step": {"type": "integer"},
                                  "budget_tokens": {"type": "integer"}}, ["step"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/checkpoint/{step}": {"get": {
            "summary": "The latest checkpoint at step, as written",
            "parameters": [_SID, {"name": "step", "in": "path", "required": True,
                                  "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/session/{session}/end": {"post": {
            "summary": "Save the session's summary as a memory note (ending again updates it)",
            "parameters": [_SID],
            "requestBody": _body({"scope": {"enum": ["personal", "project"]}}, []),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory": {"post": {
            "summary": "Save a note (same topic_key: updated in place; same content: nothing "
                       "added)",
            "requestBody": _body({"title": {"type": "string"}, "type": {"enum": _NOTE_TYPES},
                                  "what": {"type": "string"}, "why": {"type": "string"},
                                  "where": {"type": "string"}, "learned": {"type": "string"},
                                  "topic_key": {"type": "string"},
                                  "scope": {"enum": ["project", "personal"]}}, ["title"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/search": {"get": {
            "summary": "Notes for a query: titles and previews, best first",
            "parameters": [{"name": "q", **_Q, "required": True},
                           {"name": "k", "in": "query", "schema": {"type": "integer"}},
                           {"name": "types", **_Q}, {"name": "include_superseded", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}": {"get": {
            "summary": "One note in full, its code links re-checked",
            "parameters": [_NID], "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/timeline": {"get": {
            "summary": "The notes saved around one, oldest first",
            "parameters": [_NID, {"name": "before", "in": "query", "schema": {"type": "integer"}},
                           {"name": "after", "in": "query", "schema": {"type": "integer"}}],
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/edges": {"post": {
            "summary": "Link this note to dst (references, relates_to, follows, supersedes, "
                       "contradicts)",
            "parameters": [_NID],
            "requestBody": _body({"dst": {"type": "integer"}, "kind": {"enum": _EDGE_KINDS}},
                                 ["dst", "kind"]),
            "responses": {"200": _OK, **_ERRS}}},
        "/v1/memory/{id}/graph": {"get": {
            "summary": "The notes within depth (1-10) edges, and the edges",
            "parameters": [_NID, {"name": "depth", "in": "query", "schema": {"type": "integer"}},
                           {"name": "kinds", **_Q}],
            "responses": {"200": _OK, **_ERRS}}},
        "/healthz": {"get": {"summary": "Liveness (no token needed)", "security": [],
                             "responses": {"200": _OK}}},
    },
}
# fmt: on
