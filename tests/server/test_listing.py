"""The listings GET /v1/kernels, /v1/artifacts and /v1/tuning-results, on SQLite and on PostgreSQL:
newest first, paged by limit/offset, filtered by kernel and target, read scope; a row that cannot be
read back is left out of the page and counted, never a 500."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import Engine

from tilec.server import errors as E
from tilec.server.db import crud
from tilec.server.db.models import Artifact, Kernel, TuningResult

from .conftest import ADD_IR
from .test_cache import metric
from .test_integrity import CORRUPT, _corrupt, _json_garbage, engine  # noqa: F401 - engine is a fixture

LISTINGS = ("/v1/kernels", "/v1/artifacts", "/v1/tuning-results", "/v1/tune-jobs")


async def add_kernel(client: httpx.AsyncClient, name: str) -> str:
    r = await client.post("/v1/kernels", json={"ir": ADD_IR.replace("@add", f"@{name}")})
    assert r.status_code == 200, r.text
    return r.json()["key"]


async def compile_(client: httpx.AsyncClient, kernel: str, target: str = "cpu", **body: object) -> dict:
    r = await client.post("/v1/compile", json={"kernel_key": kernel, "target": target, **body})
    assert r.status_code == 200, r.text
    return r.json()


async def record(client: httpx.AsyncClient, kernel: str, key: str, target: str, ms: float, art: str | None) -> dict:
    trial = {"config": {}, "time_ms": ms, **({"artifact_id": art} if art else {})}
    body = {"kernel_key": kernel, "key": key, "target": target, "trials": [trial]}
    r = await client.post("/v1/tuning-results", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def listed(client: httpx.AsyncClient, path: str, **params: object) -> list[dict]:
    r = await client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def test_kernels_newest_first_paged_without_ir(client: httpx.AsyncClient) -> None:
    assert await listed(client, "/v1/kernels") == []
    keys = [await add_kernel(client, name) for name in ("k0", "k1", "k2")]
    page = await listed(client, "/v1/kernels")
    assert [k["key"] for k in page] == keys[::-1]
    assert [k["name"] for k in page] == ["k2", "k1", "k0"]
    assert all(k["ir"] is None and "source" not in k and k["kind"] == "ir" for k in page)
    assert [p["name"] for p in page[0]["params"]] == ["x", "y", "out", "n"]
    assert [k["key"] for k in await listed(client, "/v1/kernels", limit=2)] == keys[:0:-1]
    assert [k["key"] for k in await listed(client, "/v1/kernels", limit=2, offset=2)] == keys[:1]
    assert await listed(client, "/v1/kernels", offset=3) == []


async def test_artifacts_filtered_by_kernel_and_target(client: httpx.AsyncClient) -> None:
    k0, k1 = await add_kernel(client, "k0"), await add_kernel(client, "k1")
    a = await compile_(client, k0)
    b = await compile_(client, k0, "cuda:sm_80", emit="ptx")
    c = await compile_(client, k1)
    everything = await listed(client, "/v1/artifacts")
    assert [x["id"] for x in everything] == [c["id"], b["id"], a["id"]]
    assert everything[2] == (await client.get(f"/v1/artifacts/{a['id']}")).json()
    assert [x["id"] for x in await listed(client, "/v1/artifacts", kernel=k0)] == [b["id"], a["id"]]
    assert [x["id"] for x in await listed(client, "/v1/artifacts", target="cpu")] == [c["id"], a["id"]]
    assert [x["id"] for x in await listed(client, "/v1/artifacts", kernel=k0, target="cpu")] == [a["id"]]
    assert [x["id"] for x in await listed(client, "/v1/artifacts", limit=1, offset=1)] == [b["id"]]
    assert await listed(client, "/v1/artifacts", kernel="f" * 64) == []
    assert await listed(client, "/v1/artifacts", target="cuda:sm_90") == []


async def test_tuning_results_as_lookup_serves_them(client: httpx.AsyncClient) -> None:
    k0, k1 = await add_kernel(client, "k0"), await add_kernel(client, "k1")
    art = await compile_(client, k0)
    first = await record(client, k0, "1024", "cpu", 2.0, art["id"])
    second = await record(client, k0, "2048", "cuda:sm_90", 1.0, None)
    third = await record(client, k1, "", "cpu", 3.0, None)
    page = await listed(client, "/v1/tuning-results")
    assert [r["tuning_key"] for r in page] == [third["tuning_key"], second["tuning_key"], first["tuning_key"]]
    lookup = await client.get("/v1/lookup", params={"kernel": k0, "key": "1024", "target": "cpu"})
    assert page[2] == lookup.json() and page[2]["artifact"]["id"] == art["id"]
    by_kernel = await listed(client, "/v1/tuning-results", kernel=k0)
    assert [r["key"] for r in by_kernel] == ["2048", "1024"]
    assert [r["key"] for r in await listed(client, "/v1/tuning-results", target="cpu")] == ["", "1024"]
    assert [r["key"] for r in await listed(client, "/v1/tuning-results", kernel=k0, target="cpu")] == ["1024"]
    assert [r["key"] for r in await listed(client, "/v1/tuning-results", limit=1, offset=1)] == ["2048"]
    # a better time moves a result to the front: the most recently improved come first
    await record(client, k0, "1024", "cpu", 0.5, None)
    assert (await listed(client, "/v1/tuning-results", limit=1))[0]["tuning_key"] == first["tuning_key"]


@pytest.mark.parametrize("path", LISTINGS)
async def test_paging_and_filters_are_checked(client: httpx.AsyncClient, path: str) -> None:
    refused = ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "x"}, {"offset": 2**31}, {"page": 2}, {"": "x"})
    for params in refused:  # an unknown parameter too: it is a typo, not a filter
        r = await client.get(path, params=params)
        assert r.status_code == 422, (params, r.text)
    twice = await client.get(path, params=[("limit", 5), ("limit", 6)])  # not "whichever came last"
    assert twice.status_code == 422 and "more than once" in twice.json()["detail"], twice.text
    assert (await client.get(path, params={"limit": 1000, "offset": 2**31 - 1})).json() == []
    if path == "/v1/kernels":
        assert (await client.get(path, params={"kernel": "k"})).status_code == 422  # kernels take no filter
        return
    bad = await client.get(path, params={"target": "sm_90"})
    code = E.INVALID_REQUEST if path == "/v1/tune-jobs" else E.BAD_TARGET  # jobs filter by state, not target
    assert bad.status_code == 422 and bad.json()["error"] == code
    assert (await client.get(path, params={"kernel": ""})).status_code == 422
    assert (await client.get(path, params={"kernel": "a\x00b"})).status_code == 422


async def test_read_scope(make_client) -> None:  # noqa: ANN001 - the fixture's factory
    async with make_client(auth=True) as client:
        state = client.app.state.tilec  # type: ignore[attr-defined]
        tokens = {s: state.write_sync(lambda sess, s=s: crud.create_token(sess, scopes=[s])[0]) for s in ("read", "submit")}
        submit = {"Authorization": f"Bearer {tokens['submit']}"}
        assert (await client.post("/v1/kernels", json={"ir": ADD_IR}, headers=submit)).status_code == 200
        for path in LISTINGS:
            anonymous = await client.get(path)
            assert anonymous.status_code == 401 and anonymous.json()["detail"] == E.MSG_MISSING_TOKEN
            wrong = await client.get(path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and wrong.json()["detail"] == E.MSG_BAD_TOKEN
            for token in tokens.values():  # read is enough; submit includes read
                r = await client.get(path, headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 200, r.text
        r = await client.get("/v1/kernels", headers={"Authorization": f"Bearer {tokens['read']}"})
        assert len(r.json()) == 1


async def test_unreadable_rows_are_left_out_and_counted(client: httpx.AsyncClient, engine: Engine) -> None:  # noqa: F811
    good, bad = await add_kernel(client, "good"), await add_kernel(client, "bad")
    good_art, bad_art = await compile_(client, good), await compile_(client, bad)
    good_result = await record(client, good, "", "cpu", 1.0, good_art["id"])
    bad_result = await record(client, bad, "", "cpu", 1.0, None)
    garbage = _json_garbage(engine)
    for how, value in garbage:
        _corrupt(engine, Kernel, "info", how, value, key=bad)
        _corrupt(engine, Artifact, "meta", how, value, key=bad_art["id"])
        _corrupt(engine, TuningResult, "best_config", how, value, tuning_key=bad_result["tuning_key"])
        kernels = await listed(client, "/v1/kernels")
        assert [k["key"] for k in kernels] == [good], (value, kernels)
        artifacts = await listed(client, "/v1/artifacts")
        assert [a["id"] for a in artifacts] == [good_art["id"]], (value, artifacts)
        results = await listed(client, "/v1/tuning-results")
        assert [r["tuning_key"] for r in results] == [good_result["tuning_key"]], (value, results)
        assert results[0]["artifact"]["id"] == good_art["id"]
    text = (await client.get("/metrics")).text
    for table in ("kernels", "artifacts", "tuning_results"):
        assert metric(text, CORRUPT.format(table=table)) >= len(garbage), table
