"""Database outages: new work is refused with 503 + Retry-After within a second, cached lookups keep
answering, and once the database is back nothing that was accepted is missing. PostgreSQL is made
unreachable through a TCP proxy this test owns (the machine's server keeps running)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy.engine import make_url

from tilec.server import errors as E

from .conftest import ADD_IR, free_port


class Proxy:
    """Forwards 127.0.0.1:port to the real server; stop() closes the listener and every connection."""

    def __init__(self, upstream: tuple[str, int], port: int) -> None:
        self.upstream = upstream
        self.port = port
        self.sockets: list[socket.socket] = []
        self.listener: socket.socket | None = None

    def start(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        if self.listener is not None:
            try:
                self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            except OSError:
                pass
            self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.sockets.clear()


# "fast" against what it guards: a request that waits for the pool (30 s) or a TCP timeout. A refused
# connection answers in milliseconds, but on a loaded 2-core machine a request can take seconds: the
# bound is generous, and still far below the hang it catches.
FAST_S = 10.0


def _pg_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("an outage is a PostgreSQL matter; SQLite is a local file")


async def test_nothing_listening_means_503_fast(database_url: str, make_client: Callable[..., httpx.AsyncClient]) -> None:
    _pg_only(database_url)
    dead = make_url(database_url).set(port=free_port()).render_as_string(hide_password=False)
    async with make_client(database_url=dead) as client:
        start = time.monotonic()
        r = await client.post("/v1/kernels", json={"ir": ADD_IR})
        assert time.monotonic() - start < FAST_S
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json() == {"error": E.DB_UNAVAILABLE, "detail": E.MSG_DB_UNAVAILABLE}
        health = await client.get("/healthz")
        assert health.status_code == 503 and health.headers["retry-after"] == "1", health.headers


async def test_outage_and_recovery(database_url: str, make_client: Callable[..., httpx.AsyncClient]) -> None:
    _pg_only(database_url)
    real = make_url(database_url)
    proxy = Proxy((real.host or "localhost", real.port or 5432), free_port())
    proxy.start()
    via_proxy = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        async with make_client(database_url=via_proxy, lookup_cache_ttl_s=0) as client:
            kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
            trials = [{"config": {"kwargs": {"B": 1}}, "time_ms": 1.0}]
            body = {"kernel_key": kernel["key"], "target": "cpu", "trials": trials}
            assert (await client.post("/v1/tuning-results", json=body)).status_code == 200
            query = {"kernel": kernel["key"], "target": "cpu"}
            assert (await client.get("/v1/lookup", params=query)).status_code == 200

            proxy.stop()
            cached = await client.get("/v1/lookup", params=query)
            assert cached.status_code == 200 and cached.json()["time_ms"] == 1.0
            start = time.monotonic()
            refused = await client.post("/v1/tuning-results", json={**body, "key": "during-outage"})
            assert time.monotonic() - start < FAST_S
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            uncached = await client.get("/v1/lookup", params={**query, "key": "never-seen"})
            assert uncached.status_code == 503

            proxy.start()
            retried = await client.post("/v1/tuning-results", json={**body, "key": "during-outage"})
            assert retried.status_code == 200
            assert (await client.get("/v1/lookup", params={**query, "key": "during-outage"})).status_code == 200
            assert (await client.get("/v1/lookup", params=query)).json()["time_ms"] == 1.0
    finally:
        proxy.stop()
