"""Pure ASGI middleware: the body-size limit (before the body is buffered by anyone), request metrics,
and a last-resort JSON 500 that keeps the connection alive."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from . import errors as E
from .metrics import Metrics

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _send_json(send: Any, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw + (headers or [])})
    await send({"type": "http.response.body", "body": data})


class BodyLimitMiddleware:
    """413 for a declared Content-Length over the limit, or as soon as a (chunked) body goes over it."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                return await self._refuse(send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await self._refuse(send)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        detail = E.MSG_BODY_TOO_LARGE.format(limit=self.max_bytes)
        await _send_json(send, 413, {"error": E.BODY_TOO_LARGE, "detail": detail}, [(b"connection", b"close")])


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
