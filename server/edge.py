"""The HTTP edge, before any route: the Host allow-list (no DNS rebinding), uvicorn protocols with a
header timeout, and the access log's query-string redaction.

A web page that rebinds its own DNS name to 127.0.0.1 makes the browser send requests to a local
service with `Host: <its name>`; refusing every Host that is not the bound address or a configured
name stops it, with auth on or off.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
from functools import cache
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from . import errors as E
from .settings import LOOPBACK_HOSTS, Settings

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional, as in uvicorn
    HttpToolsProtocol = None  # type: ignore[assignment, misc]

WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """The name in a Host header, without its port, lower case, without a trailing dot."""
    text = value.strip().lower()
    if text.startswith("["):  # [v6]:port
        end = text.find("]")
        return text[1:end] if end > 0 else text
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostPolicy:
    """Which Host names a service bound to `settings.host` answers to: the bound address (every loopback
    name when that is a loopback address), the names in TILEC_ALLOWED_HOSTS, and on a wildcard bind
    (0.0.0.0, ::) any literal IP address as well: a literal address is where the browser really
    connects, so its same-origin rule holds, while rebinding needs a DNS name."""

    def __init__(self, settings: Settings) -> None:
        bound = host_name(settings.host)
        self.any_ip = bound in WILDCARD_BINDS
        names = {bound} if not self.any_ip else set()
        if bound in LOOPBACK_HOSTS or self.any_ip:
            names |= LOOPBACK_HOSTS
        self.suffixes: list[str] = []
        self.any = False
        for entry in settings.allowed_hosts.split(","):
            name = host_name(entry)
            if name == "*":
                self.any = True
            elif name.startswith("*."):
                self.suffixes.append(name[1:])
            elif name:
                names.add(name)
        self.names = frozenset(names)

    def allows(self, host: str) -> bool:
        name = host_name(host)
        if self.any or name in self.names:
            return True
        if any(name.endswith(suffix) for suffix in self.suffixes):
            return True
        return self.any_ip and _is_ip(name)


class HostCheckMiddleware:
    """421 for a request whose Host the policy does not allow (a request without one is no browser's)."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.policy = HostPolicy(settings)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
                if not self.policy.allows(host):
                    return await _refuse_host(send, host)
                break
        await self.app(scope, receive, send)


async def _refuse_host(send: Any, host: str) -> None:
    shown = host.encode("ascii", "backslashreplace").decode()[:100]
    body = json.dumps(
        {"error": E.HOST_NOT_ALLOWED, "detail": E.MSG_HOST_NOT_ALLOWED.format(host=shown)}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]  # fmt: skip
    await send({"type": "http.response.start", "status": 421, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# uvicorn protocols with a header timeout: uvicorn times out idle keep-alive connections, but a
# connection that never finishes its headers (slowloris), or never sends any, it keeps forever.

TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@cache
def _settings() -> Settings:
    return Settings()  # each worker process reads TILEC_* once (`tilec serve` exports its options)


class HeaderTimeout:
    """Mixed into a uvicorn HTTP protocol: a request's headers must be complete within
    TILEC_HEADER_TIMEOUT_S of the connection's start or of the previous response's end; else a 408 and
    the connection is closed. (The body's own timeout is the body gate's, in middleware.py.)"""

    cycle: Any
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._await_headers(self.cycle)

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # type: ignore[misc]
        if self.cycle is before:  # no pipelined request has been read yet: wait for the next headers
            self._await_headers(before)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def _await_headers(self, cycle: Any) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(_settings().header_timeout_s, self._headers_late, cycle)

    def _headers_late(self, cycle: Any) -> None:
        self._header_timer = None
        if self.cycle is not cycle or self.transport.is_closing():
            return  # a request's headers arrived in time
        self.transport.write(TIMEOUT_408)
        self.transport.close()


class H11TimeoutProtocol(HeaderTimeout, H11Protocol):
    pass


if HttpToolsProtocol is not None:

    class HttpToolsTimeoutProtocol(HeaderTimeout, HttpToolsProtocol):
        pass


def http_protocol() -> type:
    """uvicorn's own choice of HTTP implementation ("auto": httptools when installed, else h11), with
    the header timeout."""
    return H11TimeoutProtocol if HttpToolsProtocol is None else HttpToolsTimeoutProtocol


# the access log: a query string can carry a token or a password; it is never printed as sent

_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]{1,40}")


def redact_target(target: str) -> str:
    """A request target with each query value replaced by `***` (a name that is not a plain identifier
    too): `/v1/lookup?kernel=***&target=***`."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    parts = []
    for item in query.split("&"):
        name = item.partition("=")[0]
        parts.append(f"{name}=***" if _NAME.fullmatch(name) else "***")
    return f"{path}?{'&'.join(parts)}"


class RedactQuery(logging.Filter):
    """On uvicorn's access logger: its record's args are (client, method, full path, http version,
    status); the full path loses its query values."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_target(args[2]), *args[3:])
        return True


def redact_access_log() -> None:
    """Put the filter on uvicorn's access logger once (the app factory calls this in every process)."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in logger.filters):
        logger.addFilter(RedactQuery())
