"""Saved notes over HTTP: ``/v1/memory`` (save, search, get, timeline, edges, graph) and,
in the admin profile, delete, archive and stats, and ``/v1/learned`` (what outcomes taught)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from engine.core import ConfigError
from engine.serve._answers import answer, error, flag, json_body, whole
from engine.serve._encode import notes_json, to_json
from engine.serve._mcp import not_offered
from engine.serve._requests import field, only
from engine.serve._service import Service

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route


def memory_routes(service: Service, admin: set[str]) -> list[Route]:
    """The saved notes' routes, for ``build_app`` (``admin``: the admin tools this server
    offers, which add delete, archive and stats)."""
    from starlette.routing import Route

    call = service.call

    async def memory_save(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            names = ("title", "type", "what", "why", "where", "learned", "topic_key", "scope",
                     "created")
            only(body, *names)
            title = field(body, "title", str, None)
            if title is None:
                raise ConfigError("title is required")
            saved = await call(
                service.memory_save, title, field(body, "type", str, "note"),
                *(field(body, n, str, "") for n in ("what", "why", "where", "learned")),
                field(body, "topic_key", (str, type(None)), None),
                field(body, "scope", str, "project"),
                field(body, "created", (int, float, type(None)), None),
            )  # fmt: skip
            return to_json(saved)

        return await answer(work)

    async def memory_search(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            types = [t for t in q.get("types", "").split(",") if t]
            superseded = flag(q, "include_superseded")
            hits = await call(service.memory_search, q.get("q", ""), whole(q, "k", 10),
                              types, superseded)  # fmt: skip
            return notes_json(hits)

        return await answer(work)

    async def memory_get(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.memory_get, request.path_params["id"]))

        return await answer(work)

    async def memory_timeline(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            hits = await call(service.memory_timeline, request.path_params["id"],
                              whole(q, "before", 5), whole(q, "after", 5))  # fmt: skip
            return notes_json(hits)

        return await answer(work)

    async def memory_edges(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "dst", "kind")
            dst, kind = field(body, "dst", (int, str), None), field(body, "kind", str, None)
            if dst is None or kind is None:
                raise ConfigError("dst and kind are required")
            return to_json(await call(service.memory_relate, request.path_params["id"], dst,
                                      kind))  # fmt: skip

        return await answer(work)

    async def memory_graph(request: Request) -> Response:
        async def work() -> object:
            q = request.query_params
            kinds = [k for k in q.get("kinds", "").split(",") if k]
            graph = await call(service.memory_graph, request.path_params["id"],
                               whole(q, "depth", 1), kinds)  # fmt: skip
            return to_json(graph)

        return await answer(work)

    async def memory_delete(request: Request) -> Response:
        async def work() -> object:
            hard = flag(request.query_params, "hard")
            return await call(service.memory_forget, request.path_params["id"], hard)

        return await answer(work)

    async def memory_archive(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "archived")
            archived = field(body, "archived", bool, True)
            return to_json(await call(service.memory_archive, request.path_params["id"],
                                      archived))  # fmt: skip

        return await answer(work)

    async def learned(request: Request) -> Response:
        async def work() -> object:
            return await call(service.learned, whole(request.query_params, "k", 20))

        return await answer(work)

    async def learned_reset(request: Request) -> Response:
        async def work() -> object:
            return await call(service.learned_reset, request.query_params.get("reason", ""))

        return await answer(work)

    async def memory_stats(request: Request) -> Response:
        async def work() -> object:
            return to_json(await call(service.memory_stats))

        return await answer(work)

    def gated(name: str, handler: Callable[[Request], Awaitable[Response]]
              ) -> Callable[[Request], Awaitable[Response]]:  # fmt: skip
        """``handler`` where this server offers the admin tool ``name``; else an answer that
        says so (it was "no note 'stats'" or a bare 405)."""
        if name in admin:
            return handler

        async def refused(request: Request) -> Response:
            return error(403, "admin_only", not_offered(name, "route"))

        return refused

    return [
        Route("/v1/memory", memory_save, methods=["POST"]),
        Route("/v1/memory/search", memory_search, methods=["GET"]),
        Route("/v1/memory/stats", gated("memory_stats", memory_stats), methods=["GET"]),
        Route("/v1/memory/{id}", memory_get, methods=["GET"]),
        Route("/v1/memory/{id}", gated("memory_delete", memory_delete), methods=["DELETE"]),
        Route("/v1/memory/{id}/timeline", memory_timeline, methods=["GET"]),
        Route("/v1/memory/{id}/edges", memory_edges, methods=["POST"]),
        Route("/v1/memory/{id}/graph", memory_graph, methods=["GET"]),
        Route(
            "/v1/memory/{id}/archive", gated("memory_archive", memory_archive), methods=["POST"]
        ),
        Route("/v1/learned", gated("learned", learned), methods=["GET"]),
        Route("/v1/learned", gated("learned_reset", learned_reset), methods=["DELETE"]),
    ]
