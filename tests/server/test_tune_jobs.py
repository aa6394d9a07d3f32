"""Tune jobs end to end, on real processes: uvicorn APIs, `tilec worker --target cpu` Celery workers on the
Redis at localhost:6379, SQLite and PostgreSQL. The same behaviour under both executors (a job completes,
its best is the fastest timed trial, a repeat is done at once, a new config alone is timed, attach,
cancel, compile failures), the refusals, and Celery's traps (a worker SIGKILLed mid-job, a tune that
outlives the visibility timeout, a job that kills every worker that takes it)."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tilec.server import errors as E
from tilec.server.settings import Settings

from .conftest import ADD_IR, free_port
from .jobs_fixtures import CELERY, FINISHED, Service, running

SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
VADD = """
import triton
import triton.language as tl


@triton.autotune(configs=[{configs}], key=["n"])
@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    {check}
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
BLOCKS = (64, 128, 256, 512)
SLOW_BLOCKS = (16, 32, 64, 128, 256, 512)  # at 8M elements: 3-7 s of compiles and timings on 2 cores
SLOW_N = 1 << 23
MAX_DELIVERIES = int(CELERY["TILEC_MAX_DELIVERIES"])
RETURNED = r"succeeded in [\d.]+s: '(\w+)'"  # Celery's log line of a task's return value: run_job's outcome
_sizes = itertools.count(4096, 64)  # each test its own n, so its own tuning key on a shared service


def vadd(blocks: tuple[int, ...] = BLOCKS, check: str = "") -> str:
    configs = ", ".join(f'triton.Config({{"BLOCK": {b}}})' for b in blocks)
    return VADD.format(configs=configs, check=check or "pass")


def job_body(source: str, n: int, **extra: object) -> dict:
    launch = {
        "grid": ["cdiv(n, BLOCK)"],
        "args": {"x_ptr": "randn(n)", "y_ptr": "randn(n)", "out_ptr": "empty(n)", "n": n},
    }
    return {"source": source, "signature": SIG, "launch": launch, "target": "cpu", **extra}


def slow_body(n: int = SLOW_N) -> dict:
    return job_body(vadd(SLOW_BLOCKS), n + next(_sizes), strategy="exhaustive")


# services: module-scoped, so their start-up is paid once


@pytest.fixture(scope="module")
def celery_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """An API with the Redis broker and two workers, on PostgreSQL (the workers share the API's database)."""
    with running(request, "celery", "postgresql", tmp_path_factory.mktemp("celery")) as service:
        yield service


@pytest.fixture(
    scope="module",
    # the database where it matters: Celery's workers share PostgreSQL with the API; the in-process
    # executor on SQLite (on PostgreSQL it runs the same store code as the Celery workers, for ~20 s more)
    params=[("inprocess", "sqlite"), ("celery", "postgresql")],
    ids=["inprocess-sqlite", "celery-postgresql"],
)
def service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    executor, database = request.param
    if executor == "celery":
        yield request.getfixturevalue("celery_service")
        return
    with running(request, executor, database, tmp_path_factory.mktemp(f"{executor}-{database}")) as svc:
        yield svc


@pytest.fixture
def cluster(celery_service: Service) -> Service:
    """The Celery service with two live workers (an earlier test may have killed some) and no message left
    from an earlier test (so what the workers log from here on is about this test's jobs)."""
    celery_service.ensure_workers(2)
    celery_service.wait_broker_idle()
    return celery_service


@pytest.fixture(autouse=True)
def _workers_ready(request: pytest.FixtureRequest) -> None:
    if "service" in request.fixturenames and request.getfixturevalue("service").executor == "celery":
        request.getfixturevalue("cluster")


# reading the results back


def submitted(service: Service, body: dict, status: int = 202) -> dict:
    r = service.submit(body)
    assert r.status_code == status, r.text
    return r.json()


def lookup(service: Service, job: dict) -> httpx.Response:
    params = {
        "kernel": job["kernel_key"],
        "target": job["target"],
        "key": job["key"],
        "dtypes": job["dtypes"],
    }
    return service.http.get(service.url + "/v1/lookup", params=params)


def stored_trials(service: Service, tuning_key: str) -> list[dict]:
    r = service.http.get(f"{service.url}/v1/tuning-results/{tuning_key}/trials")
    assert r.status_code == 200, r.text
    return r.json()


def fastest(trials: list[dict], statuses: tuple[str, ...] = ("ok",)) -> dict:
    return min((t for t in trials if t["status"] in statuses), key=lambda t: t["time_ms"])


def blocks_of(trials: list[dict]) -> list[int]:
    return sorted(t["config"]["kwargs"]["BLOCK"] for t in trials)


def assert_best_is_fastest(service: Service, job: dict, statuses: tuple[str, ...] = ("ok",)) -> None:
    """The job's best, the stored result and the stored trials agree: the best is the fastest timed trial,
    or, where its interval overlaps the runner-up's, the one the stable rule picks (issue 27: decisions)."""
    from types import SimpleNamespace

    from tilec.server.db.decisions import decide

    timed_rows = [SimpleNamespace(**t) for t in job["trials"] if t["status"] in statuses]
    r = lookup(service, job)
    assert r.status_code == 200, r.text
    found = r.json()
    assert found["tuning_key"] == job["tuning_key"]
    assert (job["best_config"], job["best_time_ms"]) == (found["config"], found["time_ms"])
    if found["source"] == "tie":
        # the server decided on the timings it stored (a config's fastest run, its interval): where they
        # overlap, its pick is one of the tied configs, by the stable rule, not necessarily the job's fastest
        tied = [t["config"] for t in found["decision"]["tied"]]
        assert found["config"] in tied and found["config"] in [t.config for t in timed_rows]
    else:
        best = vars(decide(timed_rows)[0])
        assert (found["config"], found["time_ms"]) == (best["config"], best["time_ms"])
    rows = stored_trials(service, job["tuning_key"])  # every timed config, one row each, best first
    timed = [t for t in job["trials"] if t["status"] in ("ok", "stopped", "cached")]
    assert len(rows) == found["trials"] == len(timed)
    assert sorted((r["config"]["kwargs"]["BLOCK"], r["time_ms"]) for r in rows) == sorted(
        (t["config"]["kwargs"]["BLOCK"], t["time_ms"]) for t in timed
    )
    if all(t["status"] in ("ok", "cached") for t in timed):  # no brief timing ("stopped") among them
        assert rows[0]["config"] == fastest(job["trials"], statuses)["config"]


def wait_let_go(service: Service, since: dict[int, int]) -> None:
    """Until the run of a cancelled job has returned."""
    if service.executor == "celery":  # the worker's log says what its task returned
        deadline = time.monotonic() + 30
        while "cancelled" not in re.findall(RETURNED, service.worker_logs(since)):
            assert time.monotonic() < deadline, service.logs()
            time.sleep(0.1)
        return
    # the in-process executor runs one job at a time: one submitted later that finishes means it returned
    later = submitted(service, job_body(vadd((64,)), next(_sizes)))
    assert service.wait(later["id"])["state"] == "done"


# the same behaviour under both executors


def test_job_completes_with_the_fastest_trial_as_its_best(service: Service) -> None:
    body = job_body(vadd(), next(_sizes))  # strategy halving: two configs stopped after a brief timing
    job = submitted(service, body)
    assert (job["state"], job["trials_planned"], job["attached"], job["trials"]) == ("queued", 4, False, [])
    done = service.wait(job["id"])
    assert done["state"] == "done", done
    assert done["trials_done"] == done["trials_planned"] == len(done["trials"]) == 4
    assert blocks_of(done["trials"]) == list(BLOCKS)
    assert sorted(t["status"] for t in done["trials"]) == ["ok", "ok", "stopped", "stopped"]
    assert done["deliveries"] == 1 and done["error"] is None
    assert done["worker"].endswith(":celery" if service.executor == "celery" else ":inprocess")
    created, started, finished = (
        datetime.fromisoformat(done[k]) for k in ("created_at", "started_at", "finished_at")
    )
    assert created <= started <= finished
    assert_best_is_fastest(service, done)

    again = submitted(service, body, status=200)  # every config is tuned: done at once, nothing timed
    assert again["id"] != job["id"] and again["state"] == "done" and again["deliveries"] == 0
    assert sorted(t["status"] for t in again["trials"]) == ["cached", "cached", "stopped", "stopped"]
    assert again["trials_done"] == again["trials_planned"] == 4
    assert (again["best_config"], again["best_time_ms"]) == (done["best_config"], done["best_time_ms"])

    r = service.http.post(f"{service.url}/v1/tune-jobs/{job['id']}/cancel")  # finished: returned as it is
    assert r.status_code == 200 and r.json() == done

    configs = [{"kwargs": {"BLOCK": b}} for b in (*BLOCKS, 1024)]
    more = service.wait(submitted(service, {**body, "configs": configs})["id"])
    assert more["state"] == "done", more
    earlier = {t["config"]["kwargs"]["BLOCK"]: t["status"] for t in done["trials"]}
    statuses = {t["config"]["kwargs"]["BLOCK"]: t["status"] for t in more["trials"]}
    assert statuses == {**{b: {"ok": "cached"}.get(s, s) for b, s in earlier.items()}, 1024: "ok"}
    assert_best_is_fastest(service, more, ("ok", "cached"))
    assert len(stored_trials(service, job["tuning_key"])) == 5


def test_a_bundle_tunes_as_its_source_does(service: Service) -> None:
    """A kernel bundle (as the client's resolver sends one: its configs as data) is tuned by the worker."""
    source = vadd().replace("from .helpers import add\n", "")
    bundle = {
        "modules": {"pkg": "", "pkg.helpers": "import triton\n\n@triton.jit\ndef add(a, b):\n    return a + b\n",
                    "pkg.kern": source.replace("import triton.language as tl\n", "import triton.language as tl\n"
                                               "from .helpers import add\n", 1)
                    .replace("tl.load(x_ptr + offs, mask=mask) + tl.load", "add(tl.load(x_ptr + offs, mask=mask), tl.load")
                    .replace("mask=mask), mask=mask)", "mask=mask)), mask=mask)")},
        "packages": ["pkg"],
        "kernel": "pkg.kern:vadd",
        "autotune": {"configs": [{"kwargs": {"BLOCK": b}} for b in BLOCKS], "key": ["n"]},
    }
    assert "add(tl.load" in bundle["modules"]["pkg.kern"]
    body = job_body("", next(_sizes))
    del body["source"]
    done = service.wait(submitted(service, {**body, "bundle": bundle})["id"])
    assert done["state"] == "done", done
    assert blocks_of(done["trials"]) == list(BLOCKS) and done["trials_done"] == 4
    assert_best_is_fastest(service, done)


def test_second_submit_attaches_and_a_running_job_cancels(service: Service) -> None:
    body = slow_body()
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: service.submit(body), range(2)))
    assert [r.status_code for r in answers] == [202, 202], [r.text for r in answers]
    jobs = sorted((r.json() for r in answers), key=lambda j: j["attached"])
    assert [j["attached"] for j in jobs] == [False, True] and jobs[0]["id"] == jobs[1]["id"]
    job_id = jobs[0]["id"]

    since = service.marks()
    service.wait(job_id, lambda j: j["state"] == "running")
    r = service.http.post(f"{service.url}/v1/tune-jobs/{job_id}/cancel")
    assert r.status_code == 200, r.text
    cancelled = r.json()
    assert cancelled["state"] == "cancelled" and cancelled["error"] == "cancelled by request"
    wait_let_go(service, since)
    after = service.job(job_id)
    assert after["state"] == "cancelled" and after["finished_at"] == cancelled["finished_at"]
    assert after["deliveries"] == 1 and after["best_config"] is None
    assert lookup(service, after).status_code == 404  # a cancelled tune records no result
    listed = service.http.get(service.url + "/v1/tune-jobs", params={"state": "cancelled"}).json()
    assert [j["id"] for j in listed] == [job_id]


def test_a_config_that_fails_to_compile_is_a_failed_trial(service: Service) -> None:
    source = vadd((64, 128, 1024), check="tl.static_assert(BLOCK <= 256)")
    done = service.wait(submitted(service, job_body(source, next(_sizes)))["id"])
    assert done["state"] == "done" and done["deliveries"] == 1, done
    failed = [t for t in done["trials"] if t["status"] == "failed"]
    assert blocks_of(failed) == [1024] and "compile" in failed[0]["reason"], failed
    assert done["best_config"]["kwargs"]["BLOCK"] in (64, 128)
    assert_best_is_fastest(service, done)


def test_a_job_whose_every_config_fails_fails_once(service: Service) -> None:
    source = vadd((512, 1024), check="tl.static_assert(BLOCK <= 256)")
    job = submitted(service, job_body(source, next(_sizes)))
    failed = service.wait(job["id"])
    assert failed["state"] == "failed" and failed["deliveries"] == 1, failed
    error = failed["error"]  # the compile's own reason, once: not "taken up N times"
    assert error.startswith("no config could be timed"), error
    assert "static_assert" in error and "'BLOCK': 1024" in error, error
    assert [t["status"] for t in failed["trials"]] == ["failed", "failed"]
    assert lookup(service, failed).status_code == 404 and stored_trials(service, failed["tuning_key"]) == []


# refusals: the in-process app over ASGI (on SQLite: no refusal depends on the database)

SQLITE_ONLY = pytest.mark.parametrize("migrated_database", ["sqlite"], indirect=True)
BAD_LAUNCHES = [  # a change to the launch description, the field the refusal names, a word of its reason
    ({"grid": ["cdiv(m, BLOCK)"]}, "grid[0]", "unknown name 'm'"),
    (
        {"args": {"x_ptr": "randn(n)", "y_ptr": "randn(m)", "out_ptr": "empty(n)", "n": 4096}},
        "args.y_ptr",
        "'m'",
    ),
    ({"args": {"x_ptr": "randn(n)", "y_ptr": "randn(n)", "n": 4096}}, "args.out_ptr", "missing"),
    (
        {"args": {"x_ptr": "randn(n)", "y_ptr": "randn(n)", "out_ptr": "empty(n)", "n": 1 << 20}},
        "args.x_ptr",
        "bytes",
    ),
]


@SQLITE_ONLY
async def test_refusals(make_client: Callable[..., httpx.AsyncClient]) -> None:
    body = job_body(vadd(), 4096)
    async with make_client(max_tensor_bytes=1 << 20) as client:  # a tensor of 1M fp32 elements is over
        for change, field, word in BAD_LAUNCHES:
            r = await client.post("/v1/tune-jobs", json={**body, "launch": {**body["launch"], **change}})
            assert r.status_code == 422, r.text
            refusal = r.json()
            assert (refusal["error"], refusal["field"]) == (E.BAD_LAUNCH, field), refusal
            assert refusal["detail"].startswith(field) and word in refusal["detail"], refusal
        r = await client.post("/v1/tune-jobs", json={**body, "source": None, "ir": ADD_IR})
        assert r.status_code == 422 and r.json()["detail"] == E.MSG_TUNE_NEEDS_SOURCE, r.text
        r = await client.post("/v1/tune-jobs", json={**body, "source": None, "kernel_key": "0" * 64})
        assert r.status_code == 404 and r.json()["missing"] == "kernel", r.text
        r = await client.post("/v1/tune-jobs", json={**body, "target": "cuda:sm_90"})
        assert r.status_code == 422 and r.json()["error"] == E.NO_WORKER, r.text
        assert "cuda:sm_90" in r.json()["detail"] and "cpu" in r.json()["detail"]
        assert (await client.get("/v1/tune-jobs")).json() == []


@SQLITE_ONLY
async def test_broker_down_is_a_quick_503_and_leaves_no_job(
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    async with make_client(broker_url=f"redis://127.0.0.1:{free_port()}/0", broker_timeout_s=1.0) as client:
        started = time.monotonic()
        r = await client.post("/v1/tune-jobs", json=job_body(vadd(), 4096))
        took = time.monotonic() - started
        assert r.status_code == 503 and r.json()["error"] == E.BROKER_UNAVAILABLE, r.text
        assert r.headers["Retry-After"] == "5" and took < 5, took
        assert (await client.get("/v1/tune-jobs")).json() == []


# Celery's traps


def test_sigkill_mid_job_completes_on_the_other_worker_once(cluster: Service) -> None:
    since = cluster.marks()
    job = submitted(cluster, slow_body())
    # mid-job by a condition, not a sleep: a trial recorded, others to come (six configs, timed in full)
    running_job = cluster.wait(job["id"], lambda j: j["state"] == "running" and j["trials_done"] >= 1)
    assert running_job["trials_done"] < running_job["trials_planned"], running_job
    victim = cluster.worker_of(running_job)
    victim.kill()
    done = cluster.wait(job["id"], timeout=90)
    assert done["state"] == "done", done
    assert done["deliveries"] == 2 and done["worker"] != running_job["worker"], done
    assert cluster.worker_of(done).alive()
    assert done["trials_done"] == done["trials_planned"] == len(SLOW_BLOCKS)
    rows = stored_trials(cluster, done["tuning_key"])  # one result: a row per config, none twice
    assert blocks_of(rows) == list(SLOW_BLOCKS)
    assert_best_is_fastest(cluster, done)
    # the killed worker's message came back after the visibility timeout, the reaper sent one: once all
    # are delivered, the job is as it was and one run of it ended "done"
    cluster.wait_broker_idle()
    assert cluster.job(job["id"]) == done
    assert re.findall(RETURNED, cluster.worker_logs(since)).count("done") == 1, cluster.logs()


def test_a_tune_longer_than_the_visibility_timeout_runs_once(cluster: Service) -> None:
    since = cluster.marks()
    job = submitted(cluster, slow_body(2 * SLOW_N))  # 5 s or more, against 1 s
    first = cluster.wait(job["id"], lambda j: j["state"] == "running")
    done = cluster.wait(job["id"], timeout=90)
    assert done["state"] == "done" and done["deliveries"] == 1 and done["worker"] == first["worker"], done
    cluster.wait_broker_idle()
    outcomes = re.findall(RETURNED, cluster.worker_logs(since))  # redelivered while the lease was live
    assert outcomes.count("done") == 1 and "held" in outcomes, cluster.logs()
    assert len(stored_trials(cluster, done["tuning_key"])) == len(SLOW_BLOCKS)


def test_a_job_that_kills_every_worker_fails_after_max_deliveries(cluster: Service) -> None:
    job = submitted(cluster, slow_body())
    killed: list[str] = []
    deadline = time.monotonic() + 90
    while (now := cluster.job(job["id"]))["state"] not in FINISHED:
        assert time.monotonic() < deadline, f"{now}\n{cluster.logs()}"
        if now["state"] == "running" and now["worker"] not in killed:
            cluster.worker_of(now).kill()
            killed.append(now["worker"])
            cluster.start_worker()  # a replacement, so the job is taken up again
        time.sleep(0.05)
    assert now["state"] == "failed" and now["deliveries"] == MAX_DELIVERIES == len(killed), now
    assert f"taken up {MAX_DELIVERIES} times" in now["error"] and killed[-1] in now["error"], now["error"]
    assert lookup(cluster, now).status_code == 404


def test_a_job_taken_while_the_database_is_away_runs_once_it_is_back(cluster: Service) -> None:
    """A worker that cannot reach the database gives the job back to the queue rather than acking it with
    a failure (which would leave the job queued for good); a worker that can reach it then runs it."""
    cluster.stop_workers()  # only the worker without a database is there to take the job
    away = cluster.start_worker(TILEC_DATABASE_URL=f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x")
    try:
        cluster.wait_workers_ready()
        job = submitted(cluster, job_body(vadd((64,)), next(_sizes)))
        away.wait_for("] received")
        assert cluster.job(job["id"])["state"] == "queued"
        back = cluster.start_worker()
        done = cluster.wait(job["id"], timeout=30)
        assert done["state"] == "done" and done["deliveries"] == 1, done
        assert cluster.worker_of(done) is back
    finally:
        away.stop()


def test_a_job_for_a_target_no_worker_serves_is_queued_with_a_warning(cluster: Service) -> None:
    """The cluster's workers serve cpu: a cuda job is accepted (202: a worker may yet start) with a warning
    naming the target and how to start one; a cpu job has none."""
    r = cluster.submit(job_body(vadd((64,)), next(_sizes), target="cuda:sm_90"))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["state"] == "queued" and job["warning"], job
    assert "no worker for cuda:sm_90" in job["warning"] and "workers serve: cpu" in job["warning"]
    assert "tilec worker --target cuda:sm_90" in job["warning"]
    # the web page's JSON says it of the queued job as long as it waits: no worker, and none ever seen
    shown = cluster.http.get(f"{cluster.url}/v1/ui/tune-jobs/{job['id']}").json()
    assert (shown["state"], shown["no_worker"], shown["worker_last_seen"]) == ("queued", True, None), shown
    cancelled = cluster.http.post(f"{cluster.url}/v1/tune-jobs/{job['id']}/cancel").json()
    assert cancelled["state"] == "cancelled" and cancelled["warning"] is None  # said at submit only
    fine = submitted(cluster, job_body(vadd((64,)), next(_sizes)))
    assert fine["warning"] is None
    assert cluster.http.get(f"{cluster.url}/v1/ui/tune-jobs/{fine['id']}").json()["no_worker"] is False
    assert cluster.wait(fine["id"])["state"] == "done"


def test_the_live_targets_answer_is_reused_and_a_seen_worker_remembered(tmp_path: Path) -> None:
    """CeleryExecutor.live_targets pings once per LIVE_TTL_S (a page polling each second asks every time), a
    failed ping included, and remembers when a worker of each target last answered (the web page's "last
    seen"); no broker is reached: the ping is this test's."""
    from tilec.server.jobs import executor as ex

    celery = ex.CeleryExecutor(Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:1/0"))
    answers: list[object] = [[{f"{ex.worker_hostname('cuda:sm_90', 7)}@gpu1": {"ok": "pong"}}, {"other@x": {}}]]

    def ping(timeout: float) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def expire() -> None:  # as if LIVE_TTL_S had passed since the last ping
        assert celery._live is not None
        celery._live = (celery._live[0] - ex.LIVE_TTL_S, celery._live[1])

    celery.app.control.ping = ping  # type: ignore[method-assign]
    assert celery.live_targets() == {"cuda:sm_90"}
    seen = celery.last_seen("cuda:sm_90")
    assert seen is not None and celery.last_seen("cpu") is None
    assert celery.live_targets() == {"cuda:sm_90"} and answers == []  # reused: no second ping
    expire()
    answers.append(ConnectionError("broker down"))
    assert celery.live_targets() is None
    assert celery.live_targets() is None and answers == []  # the failure is reused as long
    expire()
    answers.append([])
    assert celery.live_targets() == set() and celery.last_seen("cuda:sm_90") == seen  # gone: last seen kept


def test_a_submits_warning_does_not_wait_for_a_ping_once_there_is_an_answer(tmp_path: Path) -> None:
    """live_targets(wait=False), what a submit's no-worker warning asks: with no answer yet it pings; with an
    answer older than LIVE_TTL_S it gives that one at once while a ping renews it in the background (a ping
    waits its whole timeout for replies: every 5 s, one submit answered a second late); the renewed answer is
    there after it. No broker is reached: the ping is this test's."""
    import threading

    from tilec.server.jobs import executor as ex

    celery = ex.CeleryExecutor(Settings(data_dir=tmp_path, broker_url="redis://127.0.0.1:1/0"))
    host = f"{ex.worker_hostname('cuda:sm_90', 7)}@gpu1"
    release, pinged = threading.Event(), threading.Event()
    answers: list[object] = [[{host: {"ok": "pong"}}], []]

    def ping(timeout: float) -> object:
        pinged.set()
        if len(answers) == 1:  # the renewal: slow, as a real ping is (it waits out its timeout)
            assert release.wait(10)
        return answers.pop(0)

    celery.app.control.ping = ping  # type: ignore[method-assign]
    assert celery.live_targets(wait=False) == {"cuda:sm_90"}, "no answer yet: it waits for the first ping"
    assert celery._live is not None
    celery._live = (celery._live[0] - ex.LIVE_TTL_S, celery._live[1])  # as if LIVE_TTL_S had passed
    pinged.clear()
    start = time.monotonic()
    assert celery.live_targets(wait=False) == {"cuda:sm_90"}, "the stale answer, at once"
    assert time.monotonic() - start < 0.5 and pinged.wait(5), "while a ping renews it in the background"
    assert celery.live_targets(wait=False) == {"cuda:sm_90"} and len(answers) == 1, "one renewal at a time"
    release.set()
    deadline = time.monotonic() + 5
    while celery._live[1] != set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert celery.live_targets(wait=False) == set() and answers == [], "the renewed answer: no worker now"
    assert celery.live_targets() == set(), "wait=True reuses it too (fresh)"
