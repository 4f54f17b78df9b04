"""``cortex serve``: MCP's streamable HTTP transport at ``/mcp`` and a JSON API under ``/v1``.

For planners that do not speak MCP::

    POST /v1/context        {goal, query, tool_signals, state, budget_tokens} -> the pack
    POST /v1/feedback       {replay_key, model_citations, tool_results, outcome, reason}
    POST /v1/bundle         {goal, objects, budget, state} -> the cold-start bundle
    GET  /v1/replay/{key}   the recorded prompt, byte for byte
    GET  /v1/search?q=&goal=&mode=&k=&files=1&tool_signals=
    POST /v1/search         {query, goal, mode, k, files, tool_signals} (signals too long
                            for a URL)
    GET  /v1/resolve?uri=&path=&sha256=     POST /v1/resolve {uri, proof: {path, sha256}}
    GET  /v1/status         POST /v1/index?wait=1
    POST /v1/session/{id}/steps       {role, text, tool, is_error, exit_status} -> the step
    POST /v1/session/{id}/decisions   {text, rationale, evidence} -> the step
    GET  /v1/session/{id}?step=       the steps (without text), or one step in full
    GET  /v1/session/{id}/lane?budget_tokens=&goal=&query=   the history lane (a read)
    POST /v1/session/{id}/compact     {load_bearing, budget_tokens, step, in_context}
                                      -> the compaction
    POST /v1/session/{id}/checkpoint  {step, budget_tokens}   GET .../checkpoint/{step}
                                      GET .../checkpoint (the latest)
    POST /v1/session/{id}/end         {scope} -> the summary note's save result
    POST /v1/memory                   {title, type, what, why, where, learned, topic_key,
                                       scope} -> what the save did
    GET  /v1/memory/search?q=&k=&types=&include_superseded=1   titles and previews
    GET  /v1/memory/{id}    GET /v1/memory/{id}/timeline?before=&after=
    POST /v1/memory/{id}/edges {dst, kind}   GET /v1/memory/{id}/graph?depth=&kinds=
    (admin profile) DELETE /v1/memory/{id}?hard=1   POST /v1/memory/{id}/archive {archived}
                    GET /v1/memory/stats   GET /v1/learned?k=   DELETE /v1/learned?reason=
    GET  /healthz           GET /openapi.json

Every route but ``/healthz`` checks the bearer token when one is set. Answers are the one
JSON encoding of the records (``engine.serve``'s ``to_json``); errors are
``{"error": {"type", "message"}}``, mapped from the exception tree in ``_answers``'s
``status_of``: 400 (bad input), 401, 404 (unknown key or route), 408 (a body that did
not arrive within ``BODY_TIMEOUT_S``, ``_bodies``), 413 (body over ``MAX_BODY_BYTES``),
429 (feedback with an outcome over the attest rate), 503 (the index is being built, busy,
or unusable: the message says what to run), 504 (over
``REQUEST_TIMEOUT_S``: the call goes on unseen, so a step or decision sent with an
``Idempotency-Key`` is found by its retry, ``_once``); 500 only for a bug. Reads run in
parallel on ``Service``'s thread pool; index refreshes run in the background, one at a time.
Starlette and uvicorn (both dependencies of the MCP SDK) are imported inside ``build_app``
and ``serve``.
"""

from __future__ import annotations

import hmac
import os
import socket
import stat
import sys
import warnings
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core import (
    Config,
    ConfigError,
    ConfigWarning,
)
from engine.serve._answers import MAX_BODY_BYTES, error
from engine.serve._bodies import BODY_TIMEOUT_S, Body
from engine.serve._mcp import ADMIN_TOOLS, build_mcp_server, tool_names
from engine.serve._openapi import OPENAPI
from engine.serve._routes_context import context_routes
from engine.serve._routes_learning import learning_routes
from engine.serve._routes_memory import memory_routes
from engine.serve._routes_session import session_routes
from engine.serve._service import WATCH_INTERVAL_S, Service

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "MIN_TOKEN_CHARS", "OPENAPI", "TOKEN_ENV", "build_app", "read_token",
           "serve"]  # fmt: skip

TOKEN_ENV = "CORTEX_TOKEN"  # kept out of Config: a secret must not land in logs or records
# Off loopback the token is all that guards the workspace: 16 random characters are past
# guessing over a network (`secrets.token_urlsafe(16)` gives 22).
MIN_TOKEN_CHARS = 16
# uvicorn's limits, named. It has no read timeout: a request body gets one in ``_bodies``.
# Its limit_concurrency is left off: it counts every open connection, so a flood of stalled
# ones made every request, a healthy one's too, a 503 (and a warning line) until they went.
KEEP_ALIVE_S = 5  # an idle kept-alive connection closes after this (uvicorn's default)
MAX_HEAD_BYTES = 16 << 10  # a request line and headers (h11's default): a URI of 8 KB fits
_OPEN_PATHS = frozenset({"/healthz"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def build_app(service: Service, *, token: str | None = None, host: str = "127.0.0.1",
              tools: str = "agent") -> ASGIApp:  # fmt: skip
    """The ASGI app: the JSON routes, MCP at ``/mcp``, the token check and JSON errors.
    ``tools`` (a profile or tool names) picks the MCP tools and whether the admin memory
    routes (delete, archive, stats) exist."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        kinds = {404: "not_found", 405: "method_not_allowed"}
        return error(code, kinds.get(code, "http_error"), getattr(exc, "detail", "") or "")

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
        *context_routes(service),
        *learning_routes(service),
        *session_routes(service),
        *memory_routes(service, admin),
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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(dict(scope["headers"]), scope["path"])
        if refusal is not None:
            await error(*refusal)(scope, receive, send)
            return
        import anyio

        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        cancel = anyio.CancelScope()
        body = Body(receive, scope, cancel)
        with cancel:  # the body's deadline, or its client leaving, cancels the app
            await self.app(scope, body, sending)
        if body.expired and not started:
            late = error(408, "timeout", f"the request body did not arrive within "
                                         f"{BODY_TIMEOUT_S:.0f} s")  # fmt: skip
            late.headers["Connection"] = "close"  # uvicorn then closes it at once
            await late(scope, receive, send)

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
        if (
            self.expected
            and path not in _OPEN_PATHS
            and not (bearer and hmac.compare_digest(given.strip(), self.expected))
        ):
            return 401, "unauthorized", "missing or wrong bearer token"
        return None


def _hostname(netloc: str) -> str:
    """``127.0.0.1:8765`` -> ``127.0.0.1``; ``[::1]:80`` -> ``::1``."""
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def read_token(path: str | Path) -> str:
    """The token in the file at ``path`` (surrounding blanks dropped): ``ConfigError`` when
    it cannot be read or is empty, and a ``ConfigWarning`` when group or others may read
    the file, as whoever reads it can call the server as its owner."""
    where = Path(path)
    try:
        token = where.read_text("utf-8").strip()
        mode = where.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"cannot read the token file {path}: {why}") from exc
    if not token:
        raise ConfigError(f"the token file {path} is empty")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warnings.warn(f"the token file {path} is readable by {_who(mode)} (mode "
                      f"{stat.S_IMODE(mode):04o}): `chmod 600 {path}`", ConfigWarning,
                      stacklevel=2)  # fmt: skip
    return token


def _who(mode: int) -> str:
    return " and ".join(name for bit, name in ((stat.S_IRGRP, "its group"),
                                               (stat.S_IROTH, "others")) if mode & bit)  # fmt: skip


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

    given = token if token else os.environ.get(TOKEN_ENV)
    if given and not given.strip():  # a blank token let the server bind anywhere, then
        # answered 401 to every request
        raise ConfigError(f"the token is blank (${TOKEN_ENV} or --token-file): give one, or "
                          "unset it to serve on loopback without one")  # fmt: skip
    token = given.strip() if given else None
    if not token and _hostname(host) not in _LOOPBACK:
        raise ConfigError(f"refusing to serve on {host} without a token: anyone who can "
                          f"reach it could read the workspace (set ${TOKEN_ENV} or "
                          "--token-file)")  # fmt: skip
    if token and len(token) < MIN_TOKEN_CHARS and _hostname(host) not in _LOOPBACK:
        raise ConfigError(
            f"refusing to serve on {host} with a {len(token)}-character token: it needs at "
            f"least {MIN_TOKEN_CHARS} (make one with `python -c \"import secrets; "
            "print(secrets.token_urlsafe(32))\"`)"
        )
    tool_names(tools)  # an unknown name fails before anything is opened
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    service = Service.open(path, config, watch=WATCH_INTERVAL_S if watch is None else watch)
    try:
        app = build_app(service, token=token, host=host, tools=tools)
        server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        ))  # fmt: skip
        where = f"[{host}]" if family == socket.AF_INET6 else host
        url = f"http://{where}:{sock.getsockname()[1]}"
        print(f"cortex: serving {service.ws.root} at {url} (MCP: {url}/mcp, API: {url}/v1)",
              file=sys.stderr, flush=True)  # fmt: skip
        server.run(sockets=[sock])
    finally:
        service.close()
        sock.close()
