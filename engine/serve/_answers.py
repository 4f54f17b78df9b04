"""The JSON API's answers: request bodies read under a size limit, errors mapped from
the exception tree to HTTP statuses in one place, and every handler's answer or error as JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from engine.core import (
    BudgetUnreachableError,
    ConfigError,
    CortexError,
    IndexBusyError,
    IndexNotBuiltError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    whole_number,
    yes_no,
)
from engine.serve._once import once_key
from engine.serve._service import REQUEST_TIMEOUT_S

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

MAX_BODY_BYTES = 1 << 20  # 1 MiB: a 128 KiB goal and query plus 256 KiB of signals fit
# A body a little over the limit is read to its end before the 413, so the client can read
# the answer (a server that stops reading makes most clients fail with a broken pipe).
_DRAIN_BYTES = 8 * MAX_BODY_BYTES


# The thread of a call over the limit cannot be stopped: say that it may still land.
TIMED_OUT = (
    f"timed out after {REQUEST_TIMEOUT_S:.0f} s; the call goes on and a write may still "
    "land: retry a session step or decision with the same Idempotency-Key to get its answer"
)


def status_of(exc: BaseException) -> tuple[int, str]:
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


def error(status: int, kind: str, message: str) -> Response:
    """An error answer (a 401 names the Bearer scheme)."""
    from starlette.responses import JSONResponse

    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = {"error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


async def answer(work: Callable[[], Awaitable[object]]) -> Response:
    """``work``'s result as JSON, or its error as ``{"error": {"type", "message"}}``."""
    from starlette.requests import ClientDisconnect
    from starlette.responses import JSONResponse

    try:
        return JSONResponse(await work())
    except ClientDisconnect:  # no one to answer; the gate (``_bodies``) logged it
        return error(400, "bad_request", "the client went away before its request arrived")
    except (CortexError, TimeoutError) as exc:
        status, kind = status_of(exc)
        message = str(exc) or TIMED_OUT
        return error(status, kind, message)
    except Exception as exc:  # a bug: say so without leaking internals, keep serving
        print(f"cortex: internal error: {exc!r}", file=sys.stderr)
        return error(500, "internal", "internal error; see the server's log")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's body: a JSON object of at most ``MAX_BODY_BYTES``, all of it text."""
    declared = request.headers.get("content-length", "")
    if declared and whole_number("Content-Length", declared) > _DRAIN_BYTES:
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


def idempotency(request: Request, body: Mapping[str, Any]) -> tuple[str, str] | None:
    """The request's ``Idempotency-Key`` (scoped to its path) and a fingerprint of what it
    asks, for ``Service.call_once``; None when the client sent no key."""
    return once_key(request.url.path, request.headers.get("idempotency-key"), body)


def flag(params: Mapping[str, str], name: str) -> bool:
    """A query parameter that is a yes or a no (absent: no; ``engine.core.yes_no``)."""
    return yes_no(name, params.get(name, ""))


def whole(params: Mapping[str, str], name: str, default: int) -> int:
    """A query parameter that must be a whole number (``default`` when absent); a negative
    one is read, so that the library's range check answers it as on every other surface."""
    raw = params.get(name)
    return default if raw is None else whole_number(name, raw, signed=True)
