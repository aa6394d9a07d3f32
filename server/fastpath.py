"""The hot paths answered before FastAPI's routing, for a token already in the token cache: a lookup
that finds its result (in the in-process cache, or by one query: reads.answer) and
a download whose bytes verify (from the byte cache, or by one query: reads.read_form)
are sent straight from here. Anything else — no result, a database error, a conditional request, an
unknown token, odd parameters — goes through the routes, which own validation, auth and errors (told
what the fast path already read, so it is not read twice); this only repeats their answer for a hit.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from sqlalchemy.exc import SQLAlchemyError

from .db.crud import tuning_key
from .reads import FORM_READ, MISSED, answer, read_form
from .state import AppState

LOOKUP = "/v1/lookup"
ARTIFACTS = "/v1/artifacts/"
IMMUTABLE = b"public, max-age=31536000, immutable"
FORMS = {"cubin": b"application/octet-stream", "object": b"application/octet-stream",
         "ptx": b"text/plain; charset=utf-8", "llir": b"text/plain; charset=utf-8", "tir": b"text/plain; charset=utf-8"}


class FastPathMiddleware:
    def __init__(self, app: Any, state: AppState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and self._authorized(scope):
            path = scope["path"]
            if path == LOOKUP and await self._lookup(scope, send):
                return
            if path.startswith(ARTIFACTS) and await self._download(scope, send):
                return
        await self.app(scope, receive, send)

    def _authorized(self, scope: dict) -> bool:
        if not self.state.settings.auth_enabled:
            return True
        for name, value in scope["headers"]:
            if name == b"authorization":
                if value[:7].lower() != b"bearer ":
                    return False
                info = self.state.tokens.get(value[7:].decode("latin-1").strip())
                return info is not None and "read" in info.scopes
        return False

    async def _lookup(self, scope: dict, send: Any) -> bool:
        query = dict(parse_qsl(scope["query_string"].decode("latin-1")))
        if "kernel" not in query or "target" not in query:
            return False
        tkey = tuning_key(
            kernel_key=query["kernel"], key=query.get("key", ""), dtypes=query.get("dtypes", ""), target=query["target"]
        )
        try:
            body = await answer(self.state, tkey)
        except SQLAlchemyError:
            return False  # the route decides: a stale answer or a 503
        if body is None:
            scope[MISSED] = tkey
            return False
        scope["tilec.route"] = LOOKUP
        await _send(send, body, [(b"content-type", b"application/json")])
        return True

    async def _download(self, scope: dict, send: Any) -> bool:
        parts = scope["path"][len(ARTIFACTS):].split("/")
        if len(parts) != 2 or parts[1] not in FORMS or _has(scope, b"if-none-match"):
            return False
        try:
            status, body, digest = await read_form(self.state, parts[0], parts[1])
        except SQLAlchemyError:
            return False  # the route decides: a 503
        if status != "ok":
            scope[FORM_READ] = ((parts[0], parts[1]), (status, body, digest))
            return False
        scope["tilec.route"] = "/v1/artifacts/{artifact_id}/{form}"
        tag = digest.encode()
        headers = [(b"content-type", FORMS[parts[1]]), (b"etag", b'"' + tag + b'"'), (b"x-tilec-sha256", tag),
                   (b"cache-control", IMMUTABLE)]
        await _send(send, body, headers)
        return True


def _has(scope: dict, header: bytes) -> bool:
    return any(name == header for name, _ in scope["headers"])


async def _send(send: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
