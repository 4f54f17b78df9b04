"""Sessions over HTTP: ``/v1/session/{id}`` and its steps, decisions, history lane,
compaction, checkpoints and end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core import ConfigError, check_budget, whole_number
from engine.serve._answers import answer, idempotency, json_body
from engine.serve._encode import to_json
from engine.serve._requests import evidence_of, field, only, steps_of
from engine.serve._service import Service

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route


def session_routes(service: Service) -> list[Route]:
    """The session routes, for ``build_app``."""
    from starlette.routing import Route

    call = service.call

    async def session_steps(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "role", "text", "tool", "is_error", "exit_status")
            role, text = field(body, "role", str, None), field(body, "text", str, None)
            if role is None or text is None:
                raise ConfigError("role and text are required")
            step = await service.call_once(
                idempotency(request, body),
                service.session_add,
                request.path_params["session"],
                role,
                text,
                field(body, "tool", (str, type(None)), None),
                field(body, "is_error", (bool, type(None)), None),
                field(body, "exit_status", (int, type(None)), None),
            )
            return to_json(step)

        return await answer(work)

    async def session_decisions(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "text", "rationale", "evidence")
            text = field(body, "text", str, None)
            if text is None:
                raise ConfigError("text is required")
            step = await service.call_once(
                idempotency(request, body), service.session_decide,
                request.path_params["session"], text, field(body, "rationale", str, ""),
                evidence_of(body.get("evidence")),
            )  # fmt: skip
            return to_json(step)

        return await answer(work)

    async def session_show(request: Request) -> Response:
        async def work() -> object:
            raw = request.query_params.get("step")
            step = None if raw is None else whole_number("step", raw, signed=True)
            return await call(service.session_show, request.path_params["session"], step)

        return await answer(work)

    async def session_compact(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "load_bearing", "budget_tokens", "step", "in_context")
            held = body.get("in_context")
            done = await call(service.session_compact, request.path_params["session"],
                              steps_of(body.get("load_bearing")),
                              field(body, "budget_tokens", int, 4000),
                              field(body, "step", (int, type(None)), None),
                              None if held is None else steps_of(held, "in_context"))  # fmt: skip
            return to_json(done)

        return await answer(work)

    async def session_end(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "scope")
            saved = await call(service.session_end, request.path_params["session"],
                               field(body, "scope", str, "personal"))  # fmt: skip
            return to_json(saved)

        return await answer(work)

    async def session_checkpoint(request: Request) -> Response:
        async def work() -> object:
            session = request.path_params["session"]
            if request.method == "GET":  # no step in the path: the latest checkpoint
                raw = request.path_params.get("step")
                step = None if raw is None else whole_number("step", raw, signed=True)
                done = await call(service.session_checkpoint, session, step, load=True)
                return to_json(done)
            body = await json_body(request)
            only(body, "step", "budget_tokens")
            done = await call(service.session_checkpoint, session,
                              field(body, "step", int, None),
                              budget_tokens=field(body, "budget_tokens", int, 4000))  # fmt: skip
            return to_json(done)

        return await answer(work)

    async def session_lane(request: Request) -> Response:
        async def work() -> object:  # a read: journals nothing
            q = request.query_params
            if "budget_tokens" not in q:
                raise ConfigError("budget_tokens is required")
            raw = q["budget_tokens"]
            try:
                budget = whole_number("budget_tokens", raw, signed=True)
            except ConfigError:
                budget = check_budget(raw)  # it raises: the library's one message
            lane = await call(service.session_lane, request.path_params["session"], budget,
                              q.get("goal", ""), q.get("query", ""))  # fmt: skip
            return to_json(lane)

        return await answer(work)

    return [
        Route("/v1/session/{session}/steps", session_steps, methods=["POST"]),
        Route("/v1/session/{session}/decisions", session_decisions, methods=["POST"]),
        Route("/v1/session/{session}", session_show, methods=["GET"]),
        Route("/v1/session/{session}/compact", session_compact, methods=["POST"]),
        Route("/v1/session/{session}/lane", session_lane, methods=["GET"]),
        Route("/v1/session/{session}/checkpoint", session_checkpoint, methods=["GET", "POST"]),
        Route("/v1/session/{session}/checkpoint/{step}", session_checkpoint, methods=["GET"]),
        Route("/v1/session/{session}/end", session_end, methods=["POST"]),
    ]
