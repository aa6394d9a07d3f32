"""Against a real uvicorn process: restart persistence, concurrent identical compiles over the wire,
and the HTTP client (client._client) end to end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from tilec.client._client import AsyncClient, Client, NotFoundError
from tilec.client._models import CompileCreate, KernelCreate, TrialCreate, TuningResultCreate

from .conftest import ADD_IR, Uvicorn
from .test_cache import metric


def test_restart_keeps_the_cache(uvicorn_server: Callable[..., Uvicorn]) -> None:
    server = uvicorn_server()
    with Client(server.url) as c:
        art = c.compile(CompileCreate(ir=ADD_IR, target="cpu"))
        kernel_key = art.kernel_key
        c.record_tuning(TuningResultCreate(kernel_key=kernel_key, key="n", dtypes="f32", target="cpu",
                                           trials=[TrialCreate(config={}, time_ms=1.5,
                                                               artifact_id=art.id)]))
        binary = c.download(art.id, "object")
    server.stop()
    again = uvicorn_server()
    with Client(again.url) as c:
        assert c.download(art.id, "object") == binary
        again_art = c.compile(CompileCreate(kernel_key=kernel_key, target="cpu"))
        assert again_art.id == art.id and again_art.cached
        found = c.lookup(kernel_key, "cpu", key="n", dtypes="f32")
        assert found is not None and found.artifact is not None and found.artifact.id == art.id
        assert c.lookup(kernel_key, "cpu", key="other") is None
        try:
            c.artifact("missing")
            raise AssertionError("expected a 404")
        except NotFoundError as exc:
            assert exc.body["missing"] == "artifact"


async def test_concurrent_identical_compiles_over_http(uvicorn_server: Callable[..., Uvicorn]) -> None:
    server = uvicorn_server()
    async with AsyncClient(server.url) as c:
        kernel = await c.submit_kernel(KernelCreate(ir=ADD_IR))
        body = CompileCreate(kernel_key=kernel.key, target="cpu", constexprs={"x": 7})
        arts = await asyncio.gather(*(c.compile(body) for _ in range(6)))
    assert len({a.id for a in arts}) == 1
    text = httpx.get(server.url + "/metrics").text
    assert metric(text, 'tilec_compiles_total{outcome="ok",task="compile"}') == 1
