"""Every refusal is a 4xx with a JSON `{"error", "detail"}` that says why; auth gives 401/403."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tilec.server import errors as E

from .conftest import ADD_IR


async def test_body_too_large_by_content_length(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(max_body_bytes=1000) as client:
        r = await client.post("/v1/kernels", content=b"x" * 2000, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"error": E.BODY_TOO_LARGE, "detail": E.MSG_BODY_TOO_LARGE.format(limit=1000)}


async def test_body_too_large_chunked(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(50):
            yield b"y" * 100

    async with make_client(max_body_bytes=1000) as client:
        r = await client.post("/v1/kernels", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == E.BODY_TOO_LARGE


async def test_source_too_large(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(max_source_bytes=100) as client:
        r = await client.post("/v1/kernels", json={"ir": ADD_IR})
    assert r.status_code == 413
    # where the 100 bytes end: ADD_IR's 100th byte is on its second line
    head = ADD_IR.encode()[:100].decode()
    line, col = head.count("\n") + 1, len(head) - head.rfind("\n")
    assert r.json() == {"error": E.SOURCE_TOO_LARGE, "detail": E.MSG_SOURCE_TOO_LARGE.format(limit=100),
                        "line": line, "col": col}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, E.INVALID_REQUEST),
        ({"ir": ADD_IR, "source": "x = 1"}, E.INVALID_REQUEST),
        ({"ir": ADD_IR, "target": "cuda:sm_5"}, E.BAD_TARGET),
        ({"ir": ADD_IR, "target": "cpu", "emit": "cubin"}, E.BAD_TARGET),
        ({"ir": ADD_IR, "config": {"num_warps": 0}}, E.INVALID_REQUEST),
        ({"ir": "module { kernel @k() { return } }", "name": "other"}, E.COMPILE_ERROR),
    ],
)
async def test_compile_refusals(client: httpx.AsyncClient, body: dict, code: str) -> None:
    r = await client.post("/v1/compile", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == code and r.json()["detail"]


async def test_compile_unknown_kernel_key(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/compile", json={"kernel_key": "b" * 64})
    assert r.status_code == 404 and r.json()["missing"] == "kernel"


async def test_too_many_trials(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(max_trials=2) as client:
        trials = [{"config": {"kwargs": {"B": i}}, "time_ms": 1.0} for i in range(3)]
        r = await client.post("/v1/tuning-results", json={"kernel_key": "k", "target": "cpu", "trials": trials})
    assert r.status_code == 422
    assert r.json()["detail"] == E.MSG_TOO_MANY_TRIALS.format(n=3, limit=2)


def big_ir(n: int) -> str:
    lines = [f"    %v{i} = add %1, %c : i32" for i in range(n)]
    head = "module {\n  kernel @big(%n: i32) {\n    %1 = program_id {axis = 0} : i32\n    %c = constant {value = 3} : i32\n"
    return head + "\n".join(lines) + "\n    return\n  }\n}\n"


async def test_compile_timeout_kills_the_child(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(compile_timeout_s=0.05) as client:
        r = await client.post("/v1/kernels", json={"ir": big_ir(6000)})
        assert r.status_code == 422
        assert r.json() == {"error": E.COMPILE_TIMEOUT, "detail": E.MSG_COMPILE_TIMEOUT.format(limit=0.05)}
        # the pool recovers: a small input goes through
        client.app.state.tilec.pool.timeout_s = 30  # type: ignore[attr-defined]
        assert (await client.post("/v1/kernels", json={"ir": ADD_IR})).status_code == 200


async def test_compile_memory_limit(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(compile_memory_mb=1) as client:
        r = await client.post("/v1/kernels", json={"ir": big_ir(3000)})
    assert r.status_code == 422
    assert r.json() == {"error": E.COMPILE_MEMORY, "detail": E.MSG_COMPILE_MEMORY.format(limit=1)}


async def test_auth(make_client: Callable[..., httpx.AsyncClient]) -> None:
    async with make_client(auth=True) as client:
        assert (await client.get("/healthz")).status_code == 200
        missing = await client.get("/v1/lookup", params={"kernel": "k", "target": "cpu"})
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert missing.json() == {"error": E.UNAUTHORIZED, "detail": E.MSG_MISSING_TOKEN}
        bad = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["detail"] == E.MSG_BAD_TOKEN

        state = client.app.state.tilec  # type: ignore[attr-defined]
        from tilec.server.db import crud

        admin = state.write_sync(lambda s: crud.create_token(s, scopes=["admin"])[0])
        r = await client.post("/v1/tokens", json={"scopes": ["read"]}, headers={"Authorization": f"Bearer {admin}"})
        assert r.status_code == 201, r.text
        read = r.json()["token"]
        auth = {"Authorization": f"Bearer {read}"}
        assert (await client.get("/metrics", headers=auth)).status_code == 200
        forbidden = await client.post("/v1/kernels", json={"ir": ADD_IR}, headers=auth)
        assert forbidden.status_code == 403
        assert forbidden.json() == {"error": E.FORBIDDEN, "detail": E.MSG_MISSING_SCOPE.format(scope="submit")}
        no_admin = await client.post("/v1/tokens", json={"scopes": ["read"]}, headers=auth)
        assert no_admin.status_code == 403
        ok = await client.post("/v1/kernels", json={"ir": ADD_IR}, headers={"Authorization": f"Bearer {admin}"})
        assert ok.status_code == 200


def test_auth_default_follows_host(tmp_path: object) -> None:
    from tilec.server.settings import Settings

    assert Settings(host="127.0.0.1").auth_enabled is False
    assert Settings(host="0.0.0.0").auth_enabled is True
    assert Settings(host="0.0.0.0", auth=False).auth_enabled is False


async def test_unknown_route_and_method(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"] == E.NOT_FOUND
    r = await client.delete("/v1/kernels")
    assert r.status_code == 405 and r.json()["error"] == E.METHOD_NOT_ALLOWED


async def test_cached_answers_still_need_a_token(make_client: Callable[..., httpx.AsyncClient]) -> None:
    """Cache hits are answered before routing; they must not skip auth."""
    async with make_client(auth=True) as client:
        from tilec.server.db import crud

        state = client.app.state.tilec  # type: ignore[attr-defined]
        admin = {"Authorization": f"Bearer {state.write_sync(lambda s: crud.create_token(s, scopes=['admin'])[0])}"}
        submit = {"Authorization": f"Bearer {state.write_sync(lambda s: crud.create_token(s, scopes=['submit'])[0])}"}
        art = (await client.post("/v1/compile", json={"ir": ADD_IR}, headers=admin)).json()
        trials = [{"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}]
        body = {"kernel_key": art["kernel_key"], "target": "cpu", "trials": trials}
        assert (await client.post("/v1/tuning-results", json=body, headers=admin)).status_code == 200
        query = {"kernel": art["kernel_key"], "target": "cpu"}
        obj = f"/v1/artifacts/{art['id']}/object"
        for _ in range(2):  # the second round is served from the in-process caches
            assert (await client.get("/v1/lookup", params=query, headers=admin)).status_code == 200
            assert (await client.get(obj, headers=submit)).status_code == 200
            assert (await client.get("/v1/lookup", params=query)).status_code == 401
            assert (await client.get(obj, headers={"Authorization": "Bearer wrong"})).status_code == 401
            assert (await client.get(obj, headers={"Authorization": "Basic abc"})).status_code == 401
        m = (await client.get("/metrics", headers=admin)).text
        assert 'tilec_cache_hits_total{kind="lookup"} 1.0' in m and 'tilec_cache_hits_total{kind="download"} 1.0' in m


async def test_revoked_token_is_refused_at_once(make_client: Callable[..., httpx.AsyncClient]) -> None:
    """DELETE /v1/tokens/{id}: the revoked token is refused on the next request, including the cache hits
    answered before routing (its entry in the token cache is dropped)."""
    async with make_client(auth=True) as client:
        from tilec.server.db import crud

        state = client.app.state.tilec  # type: ignore[attr-defined]
        admin = {"Authorization": f"Bearer {state.write_sync(lambda s: crud.create_token(s, scopes=['admin'])[0])}"}
        made = (await client.post("/v1/tokens", json={"scopes": ["read"], "description": "ci"}, headers=admin)).json()
        reader = {"Authorization": f"Bearer {made['token']}"}
        kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR}, headers=admin)).json()
        body = {"kernel_key": kernel["key"], "target": "cpu", "trials": [{"config": {}, "time_ms": 1.0}]}
        assert (await client.post("/v1/tuning-results", json=body, headers=admin)).status_code == 200
        query = {"kernel": kernel["key"], "target": "cpu"}
        for _ in range(2):  # the second is a cache hit for both the answer and the token
            assert (await client.get("/v1/lookup", params=query, headers=reader)).status_code == 200

        assert (await client.delete(f"/v1/tokens/{made['id']}", headers=reader)).status_code == 403
        revoked = await client.delete(f"/v1/tokens/{made['id']}", headers=admin)
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] and revoked.json()["token"] is None
        refused = await client.get("/v1/lookup", params=query, headers=reader)
        assert refused.status_code == 401 and refused.json() == {"error": E.UNAUTHORIZED, "detail": E.MSG_BAD_TOKEN}
        assert (await client.get("/v1/lookup", params=query, headers=admin)).status_code == 200

        again = await client.delete(f"/v1/tokens/{made['id']}", headers=admin)
        assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
        listed = {t["id"]: t for t in (await client.get("/v1/tokens", headers=admin)).json()}
        assert listed[made["id"]]["revoked_at"] == revoked.json()["revoked_at"] and listed[made["id"]]["token"] is None
        assert len(listed) == 2
        missing = await client.delete("/v1/tokens/999999", headers=admin)
        assert missing.status_code == 404
        assert missing.json() == {"error": E.NOT_FOUND, "detail": E.MSG_TOKEN_NOT_FOUND.format(id=999999), "missing": "token"}
        assert (await client.delete(f"/v1/tokens/{2**40}", headers=admin)).status_code == 422
