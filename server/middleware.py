"""Pure ASGI middleware: the body gate (size limit, token and time limit, before the body is buffered
by anyone), request metrics,
and a last-resort JSON 500 that keeps the connection alive."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from . import errors as E
from .api.deps import authorize, bearer_credentials
from .metrics import Metrics

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CLOSE = [(b"connection", b"close")]  # the body was not read to its end: the connection cannot go on


async def _send_json(send: Any, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw + (headers or [])})
    await send({"type": "http.response.body", "body": data})


READ_BODIES = {("POST", "/v1/misses")}  # routes that take a body from a read token (routes/misses.py)


class BodyLimitMiddleware:
    """The body gate, before anyone buffers a body: 413 for a declared Content-Length over the limit;
    then, with auth on, 401/403 unless the request carries a token with the submit scope (every route
    that takes a body needs at least that, but a miss report, READ_BODIES; the route checks its own scope again); then the body is read
    within TILEC_BODY_TIMEOUT_S (a 408 past it) and refused with a 413 as soon as it goes over the limit.
    So a stranger's stalled bodies cost the server no memory, and a token holder's only for a while."""

    def __init__(self, app: Any, max_bytes: int, state: Any = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.state = state  # AppState: tokens are checked when it is given and auth is on

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                return await self._refuse(send)
        settings = self.state.settings if self.state is not None else None
        if settings is not None and settings.auth_enabled and not await self._admitted(scope, send):
            return None
        timeout = settings.body_timeout_s if settings is not None else None
        try:
            async with asyncio.timeout(timeout):
                body = await self._read(receive)
        except TimeoutError:
            detail = E.MSG_BODY_TIMEOUT.format(limit=timeout)
            return await _send_json(send, 408, {"error": E.BODY_TIMEOUT, "detail": detail}, CLOSE)
        if body is None:
            return None
        if isinstance(body, int):
            return await self._refuse(send)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, receive: Any) -> bytes | int | None:
        """The whole body; its size so far once it is over the limit; None when the client went away."""
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return size
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _admitted(self, scope: dict, send: Any) -> bool:
        # a miss report is the one body a read token sends: production reports what it lacked, builds nothing
        scope_needed = "read" if (scope["method"], scope["path"]) in READ_BODIES else "submit"
        try:
            await authorize(self.state, bearer_credentials(scope["headers"]), scope_needed)
        except SQLAlchemyError:
            self.state.metrics.db_errors.inc()
            body = {"error": E.DB_UNAVAILABLE, "detail": E.MSG_DB_UNAVAILABLE}
            await _send_json(send, 503, body, [(b"retry-after", b"1"), *CLOSE])
            return False
        except E.ApiError as exc:
            # no `connection: close`: uvicorn (h11 and httptools alike) discards a body the app left unread,
            # as it arrives, and keeps the connection (the header timeout ends one whose body never does)
            headers = [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
            await _send_json(send, exc.status, exc.body(), headers)
            return False
        return True

    async def _refuse(self, send: Any) -> None:
        detail = E.MSG_BODY_TOO_LARGE.format(limit=self.max_bytes)
        await _send_json(send, 413, {"error": E.BODY_TOO_LARGE, "detail": detail}, CLOSE)


class InternalErrorMiddleware:
    """An exception no handler took becomes a JSON 500 here, logged, and is not re-raised: uvicorn closes
    the connection on any exception that reaches it, resetting the client's next keep-alive request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.log = logging.getLogger("tilec.server")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watch(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            if started:  # half a response is out: only closing the connection can end it
                raise
            self.log.exception("internal error on %s %s", scope["method"], scope["path"])
            await _send_json(send, 500, {"error": E.INTERNAL, "detail": E.MSG_INTERNAL})


class MetricsMiddleware:
    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500
        self.metrics.active += 1

        async def send_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.active -= 1
            route = scope.get("route")
            path = getattr(route, "path", None) or scope.get("tilec.route") or "unmatched"
            self.metrics.requests.labels(scope["method"], path, str(status)).inc()
            self.metrics.latency.labels(path).observe(time.perf_counter() - start)
