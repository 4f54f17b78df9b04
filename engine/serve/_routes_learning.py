"""Learning from outcomes over HTTP: ``/v1/feedback`` and ``/v1/bundle``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core import DEFAULT_BUNDLE_BUDGET, ConfigError, check_model_citations
from engine.serve._answers import answer, json_body
from engine.serve._encode import to_json
from engine.serve._requests import field, only, state_of, strings, tool_results_of
from engine.serve._service import Service

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route


def learning_routes(service: Service) -> list[Route]:
    """The routes that learn from outcomes and read what was learned, for ``build_app``."""
    from starlette.routing import Route

    call = service.call

    async def feedback(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "replay_key", "model_citations", "tool_results", "outcome", "reason")
            key = field(body, "replay_key", str, None)
            if key is None:
                raise ConfigError("replay_key is required")
            cited = field(body, "model_citations", list, [])
            check_model_citations(cited)  # before the key is looked up, as the library does
            outcome = field(body, "outcome", (str, type(None)), None)
            reason = field(body, "reason", (str, type(None)), None)
            results = tool_results_of(body.get("tool_results"))
            fb = await call(service.feedback, key, cited, results, outcome, reason)
            return to_json(fb)

        return await answer(work)

    async def bundle(request: Request) -> Response:
        async def work() -> object:
            body = await json_body(request)
            only(body, "goal", "objects", "budget", "state")
            goal = field(body, "goal", str, None)
            if goal is None:
                raise ConfigError("goal is required")
            budget = field(body, "budget", int, DEFAULT_BUNDLE_BUDGET)
            found = await call(service.bundle, goal, strings(body, "objects"), budget,
                               state_of(body.get("state")))  # fmt: skip
            return to_json(found)

        return await answer(work)

    return [
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/v1/bundle", bundle, methods=["POST"]),
    ]
