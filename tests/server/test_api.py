"""Every route over HTTP (ASGITransport), on SQLite and on PostgreSQL: kernels, compile, artifacts,
lookup, tuning results, health and metrics."""

from __future__ import annotations

import hashlib

import httpx

from tilec.server import errors as E

from .conftest import ADD_IR


async def add_kernel(client: httpx.AsyncClient) -> dict:
    r = await client.post("/v1/kernels", json={"ir": ADD_IR})
    assert r.status_code == 200, r.text
    return r.json()


async def test_health(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["database"] == "ok"


async def test_kernel_from_ir_same_key_twice(client: httpx.AsyncClient) -> None:
    first = await add_kernel(client)
    assert first["name"] == "add" and first["kind"] == "ir" and first["created"]
    assert [p["name"] for p in first["params"]] == ["x", "y", "out", "n"]
    assert first["ir"].startswith("module {")
    # reformatted IR (extra blank lines and indentation) is the same kernel
    again = await client.post("/v1/kernels", json={"ir": ADD_IR.replace("\n", "\n\n").replace("    %", "      %")})
    assert again.json()["key"] == first["key"] and not again.json()["created"]
    got = await client.get(f"/v1/kernels/{first['key']}")
    assert got.status_code == 200 and got.json()["key"] == first["key"]


async def test_kernel_errors_are_located(client: httpx.AsyncClient) -> None:
    bad = ADD_IR.replace("%13 = add %9, %12", "%13 = add %9, %nope")
    r = await client.post("/v1/kernels", json={"ir": bad})
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == E.COMPILE_ERROR and body["line"] == 17 and body["col"] > 1
    assert "%nope" in body["detail"] and "^" in body["excerpt"]


async def test_kernel_not_found(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/kernels/" + "0" * 64)
    assert r.status_code == 404
    assert r.json() == {"error": E.NOT_FOUND, "detail": E.MSG_KERNEL_NOT_FOUND.format(key="0" * 64), "missing": "kernel"}


async def test_compile_tir_then_cached(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/compile", json={"ir": ADD_IR, "emit": "tir", "target": "cpu"})
    assert r.status_code == 200, r.text
    art = r.json()
    assert art["cached"] is False and art["emit"] == "tir" and "tir" in art["links"]
    again = await client.post("/v1/compile", json={"kernel_key": art["kernel_key"], "emit": "tir", "target": "cpu"})
    assert again.json()["cached"] is True and again.json()["id"] == art["id"]
    tir = await client.get(art["links"]["tir"])
    assert tir.status_code == 200 and "kernel @add" in tir.text


async def test_compile_cpu_object_and_download(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"})
    assert r.status_code == 200, r.text
    art = r.json()
    assert art["size"] > 0 and art["emit"] == "object"
    obj = await client.get(f"/v1/artifacts/{art['id']}/object")
    assert obj.status_code == 200
    assert hashlib.sha256(obj.content).hexdigest() == art["sha256"] == obj.headers["x-tilec-sha256"]
    assert obj.headers["etag"] == f'"{art["sha256"]}"'
    assert obj.headers["cache-control"] == "public, max-age=31536000, immutable"
    not_modified = await client.get(f"/v1/artifacts/{art['id']}/object", headers={"If-None-Match": obj.headers["etag"]})
    assert not_modified.status_code == 304 and not_modified.content == b""
    head = await client.head(f"/v1/artifacts/{art['id']}/object")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(art["size"])
    meta = await client.get(f"/v1/artifacts/{art['id']}")
    assert meta.status_code == 200 and meta.json()["sha256"] == art["sha256"] and "etag" in meta.headers
    meta_head = await client.head(f"/v1/artifacts/{art['id']}")
    assert meta_head.status_code == 200 and meta_head.headers["etag"] == meta.headers["etag"]
    llir = await client.get(f"/v1/artifacts/{art['id']}/llir")
    assert llir.status_code == 200 and "define" in llir.text
    cubin = await client.get(f"/v1/artifacts/{art['id']}/cubin")
    assert cubin.status_code == 404 and cubin.json()["missing"] == "cubin"
    missing = await client.get("/v1/artifacts/nope/object")
    assert missing.status_code == 404 and missing.json()["missing"] == "artifact"


async def test_lookup_and_tuning_results(client: httpx.AsyncClient) -> None:
    kernel = await add_kernel(client)
    query = {"kernel": kernel["key"], "key": "1024", "dtypes": "fp32,fp32,fp32,i32", "target": "cpu"}
    miss = await client.get("/v1/lookup", params=query)
    assert miss.status_code == 404 and miss.json()["missing"] == "tuning_result"
    unknown = await client.get("/v1/lookup", params={**query, "kernel": "f" * 64})
    assert unknown.status_code == 404 and unknown.json()["missing"] == "kernel"

    compile_body = {"kernel_key": kernel["key"], "target": "cpu", "config": {"kwargs": {"BLOCK": 1024}}}
    art = (await client.post("/v1/compile", json=compile_body)).json()  # the build of the trial's config
    trials = [
        {"config": {"kwargs": {"BLOCK": 256}, "num_warps": 4}, "time_ms": 2.0},
        {"config": {"kwargs": {"BLOCK": 1024}, "num_warps": 4}, "time_ms": 1.0, "artifact_id": art["id"],
         "gpu_model": "host", "driver_version": "none"},
    ]
    body = {"kernel_key": kernel["key"], "key": "1024", "dtypes": "fp32,fp32,fp32,i32", "target": "cpu", "trials": trials}
    r = await client.post("/v1/tuning-results", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["config"]["kwargs"] == {"BLOCK": 1024} and r.json()["trials"] == 2
    hit = await client.get("/v1/lookup", params=query)
    assert hit.status_code == 200
    assert hit.json()["time_ms"] == 1.0 and hit.json()["artifact"]["id"] == art["id"]
    # a slower result does not replace the best; a faster one does (and the cached answer is dropped)
    slower = {**body, "trials": [{"config": {"kwargs": {"BLOCK": 512}}, "time_ms": 5.0}]}
    assert (await client.post("/v1/tuning-results", json=slower)).json()["time_ms"] == 1.0
    faster = {**body, "trials": [{"config": {"kwargs": {"BLOCK": 128}}, "time_ms": 0.5}]}
    assert (await client.post("/v1/tuning-results", json=faster)).status_code == 200
    best = (await client.get("/v1/lookup", params=query)).json()
    assert best["config"]["kwargs"] == {"BLOCK": 128} and best["artifact"] is None and best["trials"] == 4
    listed = await client.get(f"/v1/tuning-results/{best['tuning_key']}/trials")
    assert [t["time_ms"] for t in listed.json()] == [0.5, 1.0, 2.0, 5.0]


async def test_tuning_result_for_unknown_kernel(client: httpx.AsyncClient) -> None:
    body = {"kernel_key": "a" * 64, "target": "cpu", "trials": [{"config": {}, "time_ms": 1.0}]}
    r = await client.post("/v1/tuning-results", json=body)
    assert r.status_code == 404 and r.json()["missing"] == "kernel"


async def test_tuning_result_artifact_must_exist_and_be_this_kernels(client: httpx.AsyncClient) -> None:
    kernel = await add_kernel(client)
    art = (await client.post("/v1/compile", json={"kernel_key": kernel["key"], "emit": "tir"})).json()
    other = (await client.post("/v1/kernels", json={"ir": ADD_IR.replace("@add", "@add2")})).json()
    good = {"config": {}, "time_ms": 2.0, "artifact_id": art["id"]}
    for missing in ("f" * 64, "x" * 100, ""):
        trials = [good, {"config": {"kwargs": {"B": 1}}, "time_ms": 1.0, "artifact_id": missing}]
        r = await client.post("/v1/tuning-results", json={"kernel_key": kernel["key"], "target": "cpu", "trials": trials})
        assert r.status_code == 422, r.text
        assert r.json() == {"error": E.UNKNOWN_ARTIFACT, "detail": E.MSG_TRIAL_ARTIFACT_NOT_FOUND.format(index=1, id=missing),
                            "missing": "artifact", "artifact_id": missing, "trial": 1}
    r = await client.post("/v1/tuning-results", json={"kernel_key": other["key"], "target": "cpu", "trials": [good]})
    assert r.status_code == 422
    assert r.json()["detail"] == E.MSG_TRIAL_ARTIFACT_OTHER_KERNEL.format(
        index=0, id=art["id"], other=kernel["key"], kernel=other["key"]
    )
    # nothing was recorded by the refused requests; the good trial alone goes through
    assert (await client.get("/v1/lookup", params={"kernel": kernel["key"], "target": "cpu"})).status_code == 404
    ok = await client.post("/v1/tuning-results", json={"kernel_key": kernel["key"], "target": "cpu", "trials": [good]})
    assert ok.status_code == 200 and ok.json()["artifact"]["id"] == art["id"]


async def test_metrics(client: httpx.AsyncClient) -> None:
    await client.get("/healthz")
    r = await client.get("/metrics")
    assert r.status_code == 200
    assert 'tilec_requests_total{method="GET",route="/healthz",status="200"}' in r.text
    for name in ("tilec_compiles_waiting", "tilec_sha_mismatches_total", "tilec_request_seconds_bucket"):
        assert name in r.text
