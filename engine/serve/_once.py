"""Writes a retry cannot repeat: the first call under an idempotency key does the work, and
a retry with the same key gets that call's answer (waiting for it while it still runs)
instead of writing again.

A call over ``REQUEST_TIMEOUT_S`` answers 504 but its thread cannot be stopped: a session
step still lands a little later. A client that retries on the 504 with the same
``Idempotency-Key`` finds that step rather than journaling it twice. A failed call is
forgotten at once (a write that raised wrote nothing), so its retry runs again.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from engine.core import ConfigError

__all__ = ["MAX_KEY_CHARS", "ONCE_KEPT", "ONCE_WINDOW_S", "Once", "check_key", "once_key"]

ONCE_WINDOW_S = 600.0  # a retry comes within seconds or minutes; an hour-old key is a new call
ONCE_KEPT = 64  # finished answers kept (a step's answer holds its text, up to 768 KiB)
MAX_KEY_CHARS = 255  # a UUID or a hash fits many times over


@dataclass(frozen=True, slots=True)
class _Claim:
    fingerprint: str  # what the request asked: a retry must ask the same
    future: Future[Any]
    since: float


class Once:
    """Idempotency keys and the answers of the calls made under them; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, _Claim] = {}

    def claim(self, key: str, fingerprint: str) -> tuple[Future[Any], bool]:
        """The future holding the answer under ``key``, and whether this caller is the first
        (and must run the call and settle the future with ``settle``). ``ConfigError`` when
        the key was used for another request (another ``fingerprint``)."""
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            held = self._claims.get(key)
            if held is not None:
                if held.fingerprint != fingerprint:
                    raise ConfigError(
                        "this Idempotency-Key was used for another request; "
                        "use a new key for a new call"
                    )
                return held.future, False
            future: Future[Any] = Future()
            self._claims[key] = _Claim(fingerprint, future, now)
            return future, True

    def settle(self, key: str, future: Future[Any], result: Any, exc: BaseException | None) -> None:
        """Give the first call's outcome to every retry; a failure is forgotten, so the next
        retry runs the call again."""
        if exc is not None:
            with self._lock:
                if (held := self._claims.get(key)) is not None and held.future is future:
                    del self._claims[key]
            future.set_exception(exc)
        else:
            future.set_result(result)

    def _expire(self, now: float) -> None:
        """Drop answers past the window, then the oldest past ``ONCE_KEPT``; calls still
        running are kept (their retries wait on them)."""
        done = sorted((c.since, k) for k, c in self._claims.items() if c.future.done())
        for i, (since, key) in enumerate(done):
            if now - since > ONCE_WINDOW_S or i < len(done) - ONCE_KEPT:
                del self._claims[key]


def check_key(raw: str) -> str:
    """An ``Idempotency-Key`` header's value, checked: 1 to ``MAX_KEY_CHARS`` printable ASCII
    characters (``ConfigError`` otherwise)."""
    if not raw or len(raw) > MAX_KEY_CHARS or not raw.isascii() or not raw.isprintable():
        raise ConfigError(
            f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} printable ASCII characters "
            "(a UUID, say)"
        )
    return raw


def once_key(scope: str, raw: str | None, asked: Mapping[str, Any]) -> tuple[str, str] | None:
    """(key, fingerprint) for ``Service.call_once``: the caller's idempotency key, checked
    and scoped (an HTTP path, an MCP tool and its session), and a fingerprint of what the
    call ``asked``; None when the caller gave no key."""
    if raw is None:
        return None
    body = json.dumps(asked, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return f"{scope}\n{check_key(raw)}", hashlib.sha256(body).hexdigest()
