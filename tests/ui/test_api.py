"""The JSON behind the web page (/v1/ui) and its shells and static files, over ASGI on SQLite and on PostgreSQL:
pages newest first with search and filters, the refusals, one kernel / artifact / tuning result in full, the IR
after each pass (the last dump is the stored build's tile IR), rows that cannot be read back, and every file
the page needs shipped by the wheel's package-data."""

from __future__ import annotations

import fnmatch
import tomllib
import zlib
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text

from tests.server.conftest import ADD_IR
from tilec.compiler.passes import pipeline
from tilec.server import errors as E
from tilec.server.db import crud
from tilec.server.db.artifacts import artifact_values, pack_pass_dumps, unpack_pass_dumps
from tilec.server.db.models import TuneJob
from tilec.server.jobs.store import now
from tilec.server.ui import STATIC_DIR, TEMPLATE_DIR

ROOT = Path(__file__).resolve().parents[2]


async def kernel(client: httpx.AsyncClient, name: str) -> str:
    """A kernel row as the service stores one (written directly: the listings are under test, not the
    compile pool, which test_a_kernel_its_builds_and_the_ir_after_each_pass uses)."""
    key = crud.stable_hash({"kernel": name})
    values = {"key": key, "name": name, "kind": "ir", "source": None, "ir": ADD_IR.replace("@add", f"@{name}"),
              "input_sha256": key, "info": {"params": []}, "submitted_by": None}  # fmt: skip
    client.app.state.tilec.write_sync(lambda s: crud.add_kernel(s, values=values))  # type: ignore[attr-defined]
    return key


def artifact(client: httpx.AsyncClient, key: str, name: str, target: str) -> None:
    art = {"kernel_name": name, "binary": b"\x7fELF", "tir": "", "llir": "", "ptx": "", "metadata": {},
           "compiler_version": "test"}  # fmt: skip
    spec = {"signature": {}, "constexprs": {}, "hints": {}, "emit": "object"}
    values = artifact_values(kernel_key=key, key=crud.stable_hash([key, target]), spec=spec,
                             config={"kwargs": {}, "num_warps": 4, "num_stages": 3}, target=target, art=art)  # fmt: skip
    client.app.state.tilec.write_sync(lambda s: crud.put_artifact(s, values=values))  # type: ignore[attr-defined]


async def registered(client: httpx.AsyncClient, name: str) -> str:
    r = await client.post("/v1/kernels", json={"ir": ADD_IR.replace("@add", f"@{name}")})
    assert r.status_code == 200, r.text
    return r.json()["key"]


async def build(client: httpx.AsyncClient, key: str, target: str = "cpu") -> dict:
    r = await client.post("/v1/compile", json={"kernel_key": key, "target": target})
    assert r.status_code == 200, r.text
    return r.json()


async def publish(
    client: httpx.AsyncClient, key: str, target: str, gpu: str | None, times: list[float]
) -> dict:
    trials = [{"config": {"kwargs": {"BLOCK": 32 << i}}, "time_ms": t, "gpu_model": gpu, "driver_version": gpu and "560.35"}
              for i, t in enumerate(times)]  # fmt: skip
    r = await client.post(
        "/v1/tuning-results", json={"kernel_key": key, "key": "k", "target": target, "trials": trials}
    )
    assert r.status_code == 200, r.text
    return r.json()


async def page(client: httpx.AsyncClient, path: str, **params: object) -> dict:
    r = await client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def names(found: dict) -> list[str]:
    return [i.get("name") or i["kernel_name"] for i in found["items"]]


async def test_kernels_paged_newest_first_and_filtered(client: httpx.AsyncClient) -> None:
    keys = {n: await kernel(client, n) for n in ("scale_a", "scaleb", "softmax", "SCALE_big", "gelu")}
    artifact(client, keys["softmax"], "softmax", "cpu")
    artifact(client, keys["gelu"], "gelu", "cpu")
    everything = await page(client, "/v1/ui/kernels")
    assert (
        names(everything) == ["gelu", "SCALE_big", "softmax", "scaleb", "scale_a"] and not everything["more"]
    )
    first, second = (
        await page(client, "/v1/ui/kernels", limit=2),
        await page(client, "/v1/ui/kernels", limit=2, offset=2),
    )
    last = await page(client, "/v1/ui/kernels", limit=2, offset=4)
    assert (first["more"], second["more"], last["more"]) == (True, True, False)
    assert names(first) + names(second) + names(last) == names(everything)
    assert names(await page(client, "/v1/ui/kernels", name="scale")) == [
        "SCALE_big",
        "scaleb",
        "scale_a",
    ]  # any case
    assert names(await page(client, "/v1/ui/kernels", name="e_b")) == ["SCALE_big"]
    assert names(await page(client, "/v1/ui/kernels", name="l_b")) == []  # _ is a character, not a wildcard
    assert names(await page(client, "/v1/ui/kernels", name="%")) == []
    built = await page(client, "/v1/ui/kernels", target="cpu")
    assert names(built) == ["gelu", "softmax"] and built["items"][0]["artifacts"] == {"cpu": 1}
    assert names(await page(client, "/v1/ui/kernels", target="cpu", name="soft")) == ["softmax"]
    assert names(await page(client, "/v1/ui/kernels", target="cuda:sm_90")) == []
    assert everything["items"][0]["submitted_by"] is None and everything["items"][0]["created_at"]


async def test_listings_refuse_what_they_do_not_take(client: httpx.AsyncClient) -> None:
    for path in ("/v1/ui/kernels", "/v1/ui/tuning-results", "/v1/ui/tune-jobs"):
        await _refusals(client, path)


async def _refusals(client: httpx.AsyncClient, path: str) -> None:
    for params, code in (({"limit": 201}, E.INVALID_REQUEST), ({"offset": -1}, E.INVALID_REQUEST),
                         ({"kernel": "x"}, E.INVALID_REQUEST), ({"target": "tpu"}, E.BAD_TARGET),
                         ({"name": "a" * 201}, E.INVALID_REQUEST)):  # fmt: skip
        r = await client.get(path, params=params)
        assert r.status_code == 422 and r.json()["error"] == code, (params, r.text)
    r = await client.get(path + "?name=a&name=b")
    assert r.status_code == 422 and r.json()["detail"] == E.MSG_QUERY_REPEATED.format(name="name")


async def test_tuning_results_filtered_by_name_target_and_gpu(client: httpx.AsyncClient) -> None:
    keys = {n: await kernel(client, n) for n in ("softmax", "gelu", "matmul")}
    await publish(client, keys["softmax"], "cuda:sm_90", "NVIDIA H100 80GB HBM3", [2.0, 1.0])
    await publish(client, keys["gelu"], "cuda:sm_80", "NVIDIA A100-SXM4-80GB", [3.0])
    await publish(client, keys["matmul"], "cpu", None, [5.0, 4.0, 6.0])
    everything = await page(client, "/v1/ui/tuning-results")
    assert names(everything) == ["matmul", "gelu", "softmax"]
    top = everything["items"][2]
    assert (top["trials"], top["best_time_ms"], top["best_config"]["kwargs"], top["gpu_models"]) == (
        2, 1.0, {"BLOCK": 64}, ["NVIDIA H100 80GB HBM3"])  # fmt: skip
    assert names(await page(client, "/v1/ui/tuning-results", gpu="NVIDIA A100-SXM4-80GB")) == ["gelu"]
    assert names(await page(client, "/v1/ui/tuning-results", gpu="NVIDIA")) == []  # a model exactly
    assert names(await page(client, "/v1/ui/tuning-results", target="cpu")) == ["matmul"]
    assert names(await page(client, "/v1/ui/tuning-results", name="MAT")) == ["matmul"]
    two = await page(client, "/v1/ui/tuning-results", limit=2)
    assert names(two) == ["matmul", "gelu"] and two["more"]
    facets = await page(client, "/v1/ui/facets")
    assert facets == {"targets": ["cpu", "cuda:sm_80", "cuda:sm_90"],
                      "gpu_models": ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]}  # fmt: skip


async def test_one_tuning_result_with_its_trials_and_the_configs_its_job_did_not_time(
    client: httpx.AsyncClient,
) -> None:
    key = await kernel(client, "softmax")
    result = await publish(client, key, "cuda:sm_90", "NVIDIA H200", [2.0, 1.0, 3.0])
    tkey = result["tuning_key"]
    stopped = {
        "config": {"kwargs": {"BLOCK": 128}},
        "status": "stopped",
        "reason": "not among the 2 fastest",
        "time_ms": 3.0,
    }
    failed = {"config": {"kwargs": {"BLOCK": 512}}, "status": "failed", "reason": "compile: too big"}
    ok = {"config": {"kwargs": {"BLOCK": 32}}, "status": "ok", "time_ms": 2.0}
    state = client.app.state.tilec  # type: ignore[attr-defined]
    for trials in ([failed], [ok, stopped, failed]):  # the newest job's record is the one shown
        state.write_sync(lambda s, trials=trials: s.add(TuneJob(
            kernel_key=key, tuning_key=tkey, key_values="k", dtypes="", target="cuda:sm_90", strategy="halving",
            request={}, state="done", trials=trials, trials_done=len(trials), trials_planned=len(trials),
            deliveries=1, created_at=now())))  # fmt: skip
    detail = await page(client, f"/v1/ui/tuning-results/{tkey}")
    assert [t["time_ms"] for t in detail["trial_rows"]] == [1.0, 2.0, 3.0]  # fastest first
    assert [t["best"] for t in detail["trial_rows"]] == [True, False, False]
    assert {t["gpu_model"] for t in detail["trial_rows"]} == {"NVIDIA H200"}
    assert detail["trial_rows"][0]["driver_version"] == "560.35"
    assert [(u["status"], u["reason"]) for u in detail["untimed"]] == [("stopped", stopped["reason"]),
                                                                        ("failed", failed["reason"])]  # fmt: skip
    assert detail["job_id"] is not None and detail["kernel_name"] == "softmax"
    r = await client.get("/v1/ui/tuning-results/" + "0" * 64)
    assert r.status_code == 404 and r.json()["detail"] == E.MSG_TUNING_RESULT_NOT_FOUND.format(tkey="0" * 64)


async def test_tune_jobs_by_state_target_and_name(client: httpx.AsyncClient) -> None:
    keys = {n: await kernel(client, n) for n in ("softmax", "gelu")}
    state = client.app.state.tilec  # type: ignore[attr-defined]
    for i, (name, job_state, target) in enumerate((("softmax", "done", "cpu"), ("gelu", "running", "cpu"),
                                                   ("gelu", "queued", "cuda:sm_90"))):  # fmt: skip
        state.write_sync(lambda s, i=i, name=name, job_state=job_state, target=target: s.add(TuneJob(
            kernel_key=keys[name], tuning_key=f"{i:064d}", key_values="", dtypes="", target=target, strategy="halving",
            request={}, state=job_state, trials=[], trials_done=i, trials_planned=5, worker="w:1:x" if i else None,
            deliveries=0, created_at=now())))  # fmt: skip
    everything = await page(client, "/v1/ui/tune-jobs")
    assert [(j["kernel_name"], j["state"], j["trials_done"], j["trials_planned"]) for j in everything["items"]] == [
        ("gelu", "queued", 2, 5), ("gelu", "running", 1, 5), ("softmax", "done", 0, 5)]  # fmt: skip
    assert everything["items"][1]["worker"] == "w:1:x"
    assert names(await page(client, "/v1/ui/tune-jobs", state="running")) == ["gelu"]
    assert names(await page(client, "/v1/ui/tune-jobs", target="cpu")) == ["gelu", "softmax"]
    assert names(await page(client, "/v1/ui/tune-jobs", name="soft")) == ["softmax"]
    r = await client.get("/v1/ui/tune-jobs", params={"state": "lost"})
    assert r.status_code == 422


async def test_a_kernel_its_builds_and_the_ir_after_each_pass(client: httpx.AsyncClient) -> None:
    key = await registered(client, "add")
    art = await build(client, key)
    detail = await page(client, f"/v1/ui/kernels/{key}")
    assert detail["ir"].startswith("module") and detail["source"] is None and detail["kind"] == "ir"
    assert [a["id"] for a in detail["artifact_rows"]] == [art["id"]] and detail["artifacts"] == {"cpu": 1}
    assert detail["artifact_rows"][0]["size"] == art["size"] > 0
    one = await page(client, f"/v1/ui/artifacts/{art['id']}")
    assert one["forms"] == ["llir", "tir"] and one["spec"]["emit"] == "object" and one["registers"] is None
    dumps = await page(client, f"/v1/ui/artifacts/{art['id']}/passes")
    assert [p["name"] for p in dumps["passes"]] == ["input", *pipeline("default")]
    tir = (await client.get(f"/v1/artifacts/{art['id']}/tir")).text
    assert dumps["passes"][-1]["ir"] == tir  # kept by the compile: its last dump is the build's tile IR
    assert await page(client, f"/v1/ui/artifacts/{art['id']}/passes") == dumps  # from memory the second time
    for path in (
        f"/v1/ui/kernels/{'f' * 64}",
        f"/v1/ui/artifacts/{'f' * 64}",
        f"/v1/ui/artifacts/{'f' * 64}/passes",
    ):
        r = await client.get(path)
        assert r.status_code == 404 and r.json()["error"] == E.NOT_FOUND, path


async def test_the_ir_after_each_pass_is_kept_by_the_compile_and_recomputed_for_a_row_without_it(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    art = await build(client, await registered(client, "kept"))
    select = text("SELECT pass_dumps FROM artifacts WHERE key = :k")
    with engine.begin() as conn:
        kept = unpack_pass_dumps(conn.execute(select, {"k": art["id"]}).scalar_one())
        # a build stored without them (a tune trial's, a row from before migration 0006)
        conn.execute(text("UPDATE artifacts SET pass_dumps = NULL WHERE key = :k"), {"k": art["id"]})
    assert kept is not None and [d["name"] for d in kept] == ["input", *pipeline("default")]
    recomputed = await page(client, f"/v1/ui/artifacts/{art['id']}/passes")
    assert recomputed["passes"] == kept


def test_damaged_pass_dumps_are_not_served() -> None:
    dumps = [{"name": "input", "ir": "module {}"}]
    assert unpack_pass_dumps(pack_pass_dumps(dumps)) == dumps
    assert pack_pass_dumps(None) is None and unpack_pass_dumps(None) is None
    packed = bytearray(pack_pass_dumps(dumps) or b"")
    packed[len(packed) // 2] ^= 0xFF
    assert unpack_pass_dumps(bytes(packed)) is None  # zlib's checksum, or JSON, refuses it
    assert unpack_pass_dumps(zlib.compress(b'[{"name": 1, "ir": "x"}]')) is None
    assert unpack_pass_dumps(b"not zlib") is None


@pytest.fixture
def engine(database_url: str) -> Engine:
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


async def test_a_row_that_cannot_be_read_back_is_left_out(client: httpx.AsyncClient, engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL refuses to store text that is not UTF-8")
    good, bad = await kernel(client, "good"), await kernel(client, "bad")
    with engine.begin() as conn:
        conn.execute(text("UPDATE kernels SET name = CAST(X'62ff' AS TEXT) WHERE key = :k"), {"k": bad})
    found = await page(client, "/v1/ui/kernels")
    assert [k["key"] for k in found["items"]] == [good] and found["hidden"] == 1
    result = await publish(client, good, "cpu", None, [1.0, 2.0])
    with engine.begin() as conn:
        conn.execute(text("UPDATE trials SET config = '{not json' WHERE time_ms = 2.0"))
        conn.execute(text("UPDATE trials SET gpu_model = CAST(X'62ff' AS TEXT) WHERE time_ms = 1.0"))
    detail = await page(client, f"/v1/ui/tuning-results/{result['tuning_key']}")
    assert [t["time_ms"] for t in detail["trial_rows"]] == [2.0] and detail["trial_rows"][0]["config"] is None
    assert detail["hidden"] == 1


async def test_pages_static_files_and_their_headers(client: httpx.AsyncClient) -> None:
    r = await client.get("/ui", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/kernels"
    for path in (
        "/ui/kernels",
        "/ui/kernels/abc",
        "/ui/artifacts/abc",
        "/ui/tuning",
        "/ui/tuning/abc",
        "/ui/jobs",
    ):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
        assert (
            "script-src 'self'" in r.headers["content-security-policy"]
            and r.headers["referrer-policy"] == "no-referrer"
        )
        assert "https://" not in r.text and "http://" not in r.text  # nothing from elsewhere: works offline
    r = await client.get("/ui/kernels/<script>x")
    assert r.status_code == 200 and "<script>x" not in r.text and "&lt;script&gt;x" in r.text
    for name in ("ui.js", "ui.css", "vendor/d3.min.js", "vendor/plot.umd.min.js", "vendor/d3.LICENSE.txt",
                 "vendor/plot.LICENSE.txt"):  # fmt: skip
        r = await client.get(f"/ui/static/{name}")
        assert r.status_code == 200 and r.content == (STATIC_DIR / name).read_bytes(), name
        again = await client.get(f"/ui/static/{name}", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    assert "ISC" in (STATIC_DIR / "vendor" / "README.md").read_text()
    for name in ("nope.js", "../__init__.py", "vendor", "%2e%2e/__init__.py"):
        assert (await client.get(f"/ui/static/{name}")).status_code == 404, name


async def test_whoami_says_what_the_token_may_do(make_client) -> None:  # noqa: ANN001 - the fixture's factory
    from tilec.server.db import crud

    async with make_client(auth=True) as client:
        state = client.app.state.tilec
        token = state.write_sync(lambda s: crud.create_token(s, scopes=["read"])[0])
        assert (await client.get("/v1/ui/whoami")).status_code == 401
        r = await client.get("/v1/ui/whoami", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["auth"] is True and r.json()["scopes"] == ["read"]
    async with make_client() as client:
        assert (await page(client, "/v1/ui/whoami"))["auth"] is False


def test_the_wheel_ships_every_template_and_static_file() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "tilec.server.ui"
    ]
    base = STATIC_DIR.parent
    files = [
        p.relative_to(base).as_posix()
        for d in (TEMPLATE_DIR, STATIC_DIR)
        for p in d.rglob("*")
        if p.is_file()
    ]
    assert files and all(
        any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in data) for f in files
    ), files


def unserved_target() -> str:
    """A cuda target the in-process executor cannot run here (it serves cpu and this machine's GPU, if any)."""
    from tilec.server.jobs.executor import local_targets

    return next(t for t in ("cuda:sm_80", "cuda:sm_90", "cuda:sm_100") if t not in local_targets())


def add_job(client: httpx.AsyncClient, key: str, n: int, target: str, job_state: str, **extra: object) -> int:
    state = client.app.state.tilec  # type: ignore[attr-defined]
    values = {
        "trials": [],
        "trials_done": 0,
        "trials_planned": 3,
        "deliveries": 0,
        "created_at": now(),
        **extra,
    }
    job = TuneJob(kernel_key=key, tuning_key=f"{n:064d}", key_values=f'{{"n":{n}}}', dtypes="", target=target,
                  strategy="halving", request={}, state=job_state, **values)  # fmt: skip
    state.write_sync(lambda s: s.add(job))
    return state.read_sync(lambda s: s.query(TuneJob.id).filter_by(tuning_key=f"{n:064d}").scalar())


class StubBroker:
    """The executor's answers as a Celery one gives them: the targets whose workers answer a ping, and when
    this process last saw a worker of a target."""

    name = "celery"

    def __init__(self, live: set[str] | None, seen: dict[str, object]) -> None:
        self.live, self.seen = live, seen

    def live_targets(self, *, wait: bool = True) -> set[str] | None:
        return self.live

    def last_seen(self, target: str) -> object:
        return self.seen.get(target)

    def close(self) -> None:
        pass


async def test_a_queued_job_no_worker_serves_says_so_and_since_when(client: httpx.AsyncClient) -> None:
    key = await kernel(client, "softmax")
    gpu = unserved_target()
    beat = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
    add_job(client, key, 1, gpu, "done", worker="tilec-gpu-1@host", heartbeat_at=beat)  # a worker, seen then
    waiting = add_job(client, key, 2, gpu, "queued")
    served = add_job(client, key, 3, "cpu", "queued")
    items = {j["id"]: j for j in (await page(client, "/v1/ui/tune-jobs"))["items"]}
    assert (
        items[waiting]["no_worker"] is True and items[waiting]["worker_last_seen"] == "2026-11-02T09:30:00Z"
    )
    assert items[served]["no_worker"] is False and items[served]["worker_last_seen"] is None
    assert not any(
        j["no_worker"] for j in items.values() if j["state"] != "queued"
    )  # said of queued jobs only
    one = await page(client, f"/v1/ui/tune-jobs/{waiting}")
    assert (
        one["no_worker"] is True and one["worker_last_seen"] == "2026-11-02T09:30:00Z" and one["trials"] == []
    )

    state = client.app.state.tilec  # type: ignore[attr-defined]
    in_process = state.executor
    try:
        # a broker: a ping this process got answered later than the last heartbeat is the time shown
        state.executor = StubBroker({"cpu"}, {gpu: datetime(2026, 11, 3, 8, 0, tzinfo=UTC)})
        one = await page(client, f"/v1/ui/tune-jobs/{waiting}")
        assert one["no_worker"] is True and one["worker_last_seen"] == "2026-11-03T08:00:00Z"
        state.executor = StubBroker({"cpu", gpu}, {})  # a worker of it answers now
        assert (await page(client, f"/v1/ui/tune-jobs/{waiting}"))["no_worker"] is False
        state.executor = StubBroker(None, {})  # the broker cannot be asked: nothing is claimed
        assert not any(j["no_worker"] for j in (await page(client, "/v1/ui/tune-jobs"))["items"])
        state.executor = StubBroker({"cpu"}, {})  # never seen: no time
        other = add_job(client, key, 4, "cuda:sm_75", "queued")
        one = await page(client, f"/v1/ui/tune-jobs/{other}")
        assert one["no_worker"] is True and one["worker_last_seen"] is None
    finally:
        state.executor = in_process


async def test_one_tune_job_with_its_trials(client: httpx.AsyncClient) -> None:
    key = await kernel(client, "softmax")
    trials = [{"config": {"kwargs": {"BLOCK": 32}}, "status": "ok", "time_ms": 2.0},
              {"config": {"kwargs": {"BLOCK": 64}}, "status": "failed", "reason": "compile: too big"},
              {"nonsense": True}]  # fmt: skip
    job_id = add_job(client, key, 5, "cpu", "running", worker="w:1:x", trials=trials)
    one = await page(client, f"/v1/ui/tune-jobs/{job_id}")
    assert one["kernel_name"] == "softmax" and one["worker"] == "w:1:x" and one["no_worker"] is False
    assert [(t["status"], t["time_ms"], t["reason"]) for t in one["trials"]] == [
        ("ok", 2.0, None), ("failed", None, "compile: too big")]  # fmt: skip
    r = await client.get("/v1/ui/tune-jobs/999999")
    assert r.status_code == 404 and r.json()["detail"] == E.MSG_JOB_NOT_FOUND.format(id=999999)


async def test_a_source_kernel_shows_the_tile_ir_of_one_of_its_builds(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    source = (ROOT / "tests" / "kernels" / "vector_add.py").read_text()
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
    r = await client.post("/v1/kernels", json={"source": source, "name": "add_kernel"})
    assert r.status_code == 200, r.text
    key = r.json()["key"]
    bare = await page(client, f"/v1/ui/kernels/{key}")
    assert bare["ir"] is None and bare["ir_from"] is None  # no build: no specialisation to build it for
    r = await client.post("/v1/compile", json={"source": source, "name": "add_kernel", "signature": sig,
                                               "constexprs": {"BLOCK_SIZE": 256}, "target": "cpu"})  # fmt: skip
    assert r.status_code == 200, r.text
    art = r.json()["id"]
    detail = await page(client, f"/v1/ui/kernels/{key}")
    dumps = await page(client, f"/v1/ui/artifacts/{art}/passes")
    assert detail["ir"] == dumps["passes"][0]["ir"] and "kernel @add_kernel" in detail["ir"]
    assert detail["ir_from"] == {
        "artifact_id": art,
        "target": "cpu",
        "signature": sig,
        "constexprs": {"BLOCK_SIZE": 256},
    }
    with engine.begin() as conn:  # a build that kept no dumps (a tune trial's): the page asks for them
        conn.execute(text("UPDATE artifacts SET pass_dumps = NULL WHERE key = :k"), {"k": art})
    kept_none = await page(client, f"/v1/ui/kernels/{key}")
    assert kept_none["ir"] is None and kept_none["ir_from"]["artifact_id"] == art
