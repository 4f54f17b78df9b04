"""Request bodies that must arrive in time, and clients that leave while sending one.

uvicorn has no read timeout: a client that sends its headers and part of a body holds its
connection (and what it sent) for as long as it likes. So the ASGI gate hands the app a
``receive`` that gives the whole body ``BODY_TIMEOUT_S``; past that the app is cancelled
(an ``except Exception`` in it, ours or the MCP SDK's, does not see a cancellation) and
the client gets a 408 with ``Connection: close``. A client that disconnects before its
body arrived is cancelled the same way and logged as what it is, a client that went away,
not as an internal error: no one is left to answer.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anyio
    from starlette.types import Message, Receive, Scope

__all__ = ["BODY_TIMEOUT_S", "Body"]

# The whole body, from the request's start: 1 MiB (the largest body taken) at 70 KB/s. A
# planner on the same machine or network sends one in milliseconds.
BODY_TIMEOUT_S = 15.0


class Body:
    """The app's ``receive`` for one request: the body under the deadline, then the
    server's own ``receive`` untouched (a streamed answer listens there for a disconnect)."""

    def __init__(self, receive: Receive, scope: Scope, cancel: anyio.CancelScope) -> None:
        import anyio.lowlevel

        self._receive = receive
        self._where = f"{scope.get('method', '')} {scope.get('path', '')}"
        self._cancel = cancel
        self._deadline = anyio.current_time() + BODY_TIMEOUT_S
        self._done = False
        self.expired = False  # the body did not arrive in time: answer 408
        self.left = False  # the client went away while sending it: answer no one

    async def __call__(self) -> Message:
        import anyio.lowlevel

        if self._done:
            return await self._receive()
        message: Message | None = None
        with anyio.move_on_after(max(0.0, self._deadline - anyio.current_time())):
            message = await self._receive()
        if message is None:
            self.expired = True
            print(f"cortex: dropped a client whose request body did not arrive within "
                  f"{BODY_TIMEOUT_S:.0f} s ({self._where})", file=sys.stderr)  # fmt: skip
        elif message["type"] == "http.disconnect":
            self.left = True
            print(f"cortex: a client went away before its request body arrived ({self._where})",
                  file=sys.stderr)  # fmt: skip
        else:
            self._done = not message.get("more_body", False)
            return message
        self._cancel.cancel()
        await anyio.lowlevel.checkpoint()  # raises: the scope is cancelled, so the app unwinds
        return {"type": "http.disconnect"}  # (a receive called outside the scope: a disconnect)
