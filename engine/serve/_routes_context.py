"""The planner contract over HTTP: ``/v1/context``, ``/v1/replay``, ``/v1/search``,
``/v1/resolve``, ``/v1/status`` and ``/v1/index``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core import ConfigError, check_k, uri_path, whole_number
from engine.serve._answers import answer, flag, json_body
from engine.serve._encode import files_json, hits_json, to_json
from engine.serve._requests import Proof, field, only, proof_of, state_of, strings
from engine.serve._service import Service

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route


def context_routes(service: Service) -> list[Route]:
    """The planner contract's routes, for ``build_app``."""
    from starlette.routing import Route

    call = service.call

    async def context(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
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

        return await answer(work)

    async def replay(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.replay, request.path_params["key"]))

        return await answer(work)

    async def search(request: Request) -> Response:
        async def work() -> object:
            if request.method == "POST":  # the search tool's arguments, as a body
                body = await json_body(request)
                only(body, "query", "mode", "k", "files", "goal", "tool_signals")
                query, mode = field(body, "query", str, ""), field(body, "mode", str, "hybrid")
                k, goal = field(body, "k", int, 10), field(body, "goal", str, "")
                files, signals = field(body, "files", bool, False), strings(body, "tool_signals")
            else:
                q = request.query_params
                raw = q.get("k", "10")
                try:
                    k = whole_number("k", raw, signed=True)
                except ConfigError:
                    k = check_k(raw)  # it raises: the one message for a k that is no number
                query, mode, goal = q.get("q", ""), q.get("mode", "hybrid"), q.get("goal", "")
                files, signals = flag(q, "files"), q.getlist("tool_signals")
            if files:
                ranked = await call(service.search_files, query, mode, k, goal, signals)
                return files_json(ranked)
            return hits_json(await call(service.search, query, mode, k, goal, signals))

        return await answer(work)

    async def resolve(request: Request) -> Response:
        async def work() -> object:
            if request.method == "POST":
                body = await json_body(request)
                only(body, "uri", "proof")
                uri = field(body, "uri", str, "")
                proof = proof_of(body.get("proof"))
            else:
                uri = request.query_params.get("uri", "")
                sha = request.query_params.get("sha256")
                path = request.query_params.get("path") or uri_path(uri)
                proof = Proof(path, sha) if sha else None
            return await call(service.resolve, uri, proof)

        return await answer(work)

    async def status(request: Request) -> Response:
        return await answer(lambda: call(service.status))

    async def index(request: Request) -> Response:
        async def work() -> object:  # a wait outlasts `call`'s limit: a first build takes minutes
            return await service.index(wait=flag(request.query_params, "wait"))

        return await answer(work)

    return [
        Route("/v1/context", context, methods=["POST"]),
        Route("/v1/replay/{key}", replay, methods=["GET"]),
        Route("/v1/search", search, methods=["GET", "POST"]),
        Route("/v1/resolve", resolve, methods=["GET", "POST"]),
        Route("/v1/status", status, methods=["GET"]),
        Route("/v1/index", index, methods=["POST"]),
    ]
