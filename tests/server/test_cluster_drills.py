"""The cluster stays available (issue 25), drilled as an operator would, on a Redis and a PostgreSQL this module
starts for itself (so they can be killed): Redis killed and restarted under load loses no accepted job; a
SIGKILLed worker's job is finished elsewhere within 20 s with the default lease, by one message sent again at
the front of the queue; a pool exhausted by concurrent publishes is overload (never `database_unavailable`) and
/healthz stays 200, reporting the database and the broker each; a refused broker costs no retry pause.

Each drill prints its figures (`-s` shows them). Loads are bounded to keep CI short: TILEC_DRILL_SCALE
(default 0.25) scales the lookup drill's reads and the publish drill's clients; TILEC_DRILL_SCALE=1 is the
issue's drill (40,000 reads; 64 clients x 2 publishes of 200 trials)."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tilec.server import errors as E
from tilec.server.settings import Settings

from .conftest import ADD_IR, free_port
from .jobs_fixtures import FINISHED, Service, running
from .own_services import PostgresServer, RedisServer
from .test_tune_jobs import job_body, submitted, vadd

SCALE = float(os.environ.get("TILEC_DRILL_SCALE", "0.25"))
# TILEC_DRILL_MEASURE=1: wait long enough to measure a failing drill's figure (the "before" of the note)
MEASURE = os.environ.get("TILEC_DRILL_MEASURE") == "1"
_sizes = itertools.count(1 << 14, 64)  # each job its own n, so its own tuning key
HANDBACK_BLOCKS = (64, 128, 256, 512)  # at 4M elements: a few seconds of compiles and timings, killed midway
# the lease, heartbeat and reaper period a deployment gets: the hand-back drill runs on these, not the tests' FAST
DEFAULTS = {f"TILEC_{name.upper()}": str(Settings.model_fields[name].default)
            for name in ("lease_s", "heartbeat_s", "reaper_interval_s", "visibility_timeout_s")}  # fmt: skip


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PostgresServer]:
    pg = PostgresServer()
    try:
        yield pg.start()
    finally:
        pg.close()


@pytest.fixture(scope="module")
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.close()


def sends_of(database_url: str, job_id: int) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT sends FROM tune_jobs WHERE id = :i"), {"i": job_id}).scalar_one()
    finally:
        engine.dispose()


# hand-back after a worker's death


@pytest.mark.slow
def test_a_sigkilled_workers_job_finishes_elsewhere_within_20_s(
    request: pytest.FixtureRequest, own_pg: PostgresServer, own_redis: RedisServer, tmp_path: Path
) -> None:
    """On the default lease, heartbeat and reaper period (and Redis's default visibility timeout, an hour: only
    the reaper hands the job back), with the other worker idle. Before: a 60 s lease, a 15 s reaper period."""
    url = own_pg.new_database()
    with running(request, "celery", "postgresql", tmp_path, broker_url=own_redis.url(), database_url=url,
                 env=DEFAULTS) as cluster:  # fmt: skip
        job = submitted(
            cluster, job_body(vadd(HANDBACK_BLOCKS), (1 << 22) + next(_sizes), strategy="exhaustive")
        )
        first = cluster.wait(
            job["id"], lambda j: j["state"] == "running" and j["trials_done"] >= 1, timeout=60
        )
        victim = cluster.worker_of(first)
        victim.kill()
        killed = time.monotonic()
        done = cluster.wait(job["id"], timeout=150 if MEASURE else 20)
        took = time.monotonic() - killed
        print(
            f"\n[drill hand-back] SIGKILL -> done elsewhere in {took:.1f} s (lease {DEFAULTS['TILEC_LEASE_S']} s)"
        )
        assert took < 20, took
        assert done["state"] == "done" and done["worker"] != first["worker"], done
        assert done["deliveries"] == 2 and done["trials_done"] == len(HANDBACK_BLOCKS), done
        assert cluster.worker_of(done).alive()
        # one message sent again, not one per reaper round: the job's row counts them
        time.sleep(3 * float(DEFAULTS["TILEC_REAPER_INTERVAL_S"]))
        assert sends_of(url, job["id"]) == 2
        victim.reap()


@pytest.mark.slow
def test_a_job_waiting_in_a_long_queue_gets_no_second_message(
    request: pytest.FixtureRequest, own_pg: PostgresServer, own_redis: RedisServer, tmp_path: Path
) -> None:
    """With no worker consuming, a queued job's message waits in Redis past resend_after_s: the reaper sees it
    there and sends nothing more (at most one message waits per job); a message that is gone is sent again."""
    url = own_pg.new_database()
    env = {**DEFAULTS, "TILEC_RESEND_AFTER_S": "1", "TILEC_REAPER_INTERVAL_S": "0.5"}
    with running(request, "celery", "postgresql", tmp_path, workers=0, broker_url=own_redis.url(), database_url=url,
                 env=env) as cluster:  # fmt: skip
        job = submitted(cluster, job_body(vadd((64,)), next(_sizes)))
        time.sleep(3.5)  # resend_after_s 1 s, then 2 s: without the look at the queue 2 or 3 sends by now
        assert sends_of(url, job["id"]) == 1
        import redis

        client = redis.Redis.from_url(own_redis.url())
        client.flushdb()  # the message is lost
        client.close()
        deadline = time.monotonic() + 10
        while sends_of(url, job["id"]) == 1:
            assert time.monotonic() < deadline, "the lost message was never sent again"
            time.sleep(0.2)
        cluster.start_worker()
        cluster.wait_workers_ready()
        assert cluster.wait(job["id"], timeout=30)["state"] == "done"
        assert sends_of(url, job["id"]) == 2


# a lost broker


@pytest.mark.slow
def test_redis_killed_and_restarted_under_load_every_accepted_job_finishes(
    request: pytest.FixtureRequest, own_pg: PostgresServer, tmp_path: Path
) -> None:
    """Jobs are submitted without pause while Redis is SIGKILLed (no persistence: every queued message is
    lost) and started again 3 s later; every job that was accepted (202) finishes. While Redis is down a
    submit is a quick 503 and /healthz says the broker is unavailable. Before: the lost jobs stayed queued with
    0 deliveries for good, and resubmitting their key attached to them."""
    redis_server = RedisServer().start()
    url = own_pg.new_database()
    env = {"TILEC_RESEND_AFTER_S": "2"}
    try:
        with running(request, "celery", "postgresql", tmp_path, broker_url=redis_server.url(), database_url=url,
                     env=env) as cluster:  # fmt: skip
            accepted, refused, slow_refusals, broker_seen = _submit_through_an_outage(cluster, redis_server)
            started = time.monotonic()
            pending = set(accepted)
            deadline = started + 90
            while pending and time.monotonic() < deadline:
                pending = {i for i in pending if cluster.job(i)["state"] not in FINISHED}
                time.sleep(0.5)
            lost = [cluster.job(i) for i in sorted(pending)]
            resent = sum(sends_of(url, i) > 1 for i in accepted)
            print(
                f"\n[drill redis] accepted {len(accepted)}, refused {refused} (slowest refusal "
                f"{slow_refusals:.2f} s), sent again {resent}, unfinished after {time.monotonic() - started:.1f} s: "
                f"{len(lost)}"
            )
            assert not lost, f"{len(lost)} accepted jobs never finished: {lost[:3]}\n{cluster.logs()}"
            assert all(cluster.job(i)["state"] == "done" for i in accepted)
            assert "unavailable" in broker_seen and slow_refusals < 1.0, (broker_seen, slow_refusals)
            # a key whose job was lost can be tuned again: a new submit of a finished key is done at once
            r = cluster.submit(_bodies[accepted[-1]])
            assert r.status_code == 200 and r.json()["state"] == "done", r.text
    finally:
        redis_server.close()


_bodies: dict[int, dict] = {}  # job id -> the body that submitted it


def _submit_through_an_outage(
    cluster: Service, redis_server: RedisServer
) -> tuple[list[int], int, float, set[str]]:
    accepted: list[int] = []
    refused = 0
    slowest = 0.0
    broker_seen: set[str] = set()
    phases = [("up", 2.0), ("down", 3.0), ("back", 2.0)]
    for phase, seconds in phases:
        if phase == "down":
            redis_server.kill()
        if phase == "back":
            redis_server.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            body = job_body(vadd((64,)), next(_sizes))
            t0 = time.monotonic()
            r = cluster.submit(body)
            took = time.monotonic() - t0
            if r.status_code == 202:
                accepted.append(r.json()["id"])
                _bodies[r.json()["id"]] = body
            else:
                assert r.status_code == 503 and r.json()["error"] == E.BROKER_UNAVAILABLE, r.text
                refused += 1
                slowest = max(slowest, took)
            health = cluster.http.get(cluster.url + "/healthz", timeout=5)
            assert health.status_code == 200, (
                health.text
            )  # the database is up: a broker outage is no API outage
            broker_seen.add(str(health.json().get("broker")))
            time.sleep(0.15)
    return accepted, refused, slowest, broker_seen


async def test_a_refused_broker_costs_no_retry_pause(make_client, migrated_database: str) -> None:  # noqa: ANN001
    """Nothing listens at the broker's port: each submit is refused at once (503, the row gone), not after
    kombu's 2 s retry interval; /healthz reports the database ok and the broker unavailable."""
    if not migrated_database.startswith("sqlite"):
        pytest.skip("the broker's refusal does not depend on the database")
    async with make_client(
        broker_url=f"redis://127.0.0.1:{free_port()}/0"
    ) as client:  # default broker_timeout_s
        took = []
        for i in range(3):
            t0 = time.monotonic()
            r = await client.post("/v1/tune-jobs", json=job_body(vadd(), 4096 + 64 * i))
            took.append(time.monotonic() - t0)
            assert r.status_code == 503 and r.json()["error"] == E.BROKER_UNAVAILABLE, r.text
        print(f"\n[drill broker refused] submits took {', '.join(f'{t:.2f}' for t in took)} s")
        # the first also reads the kernel in a compile child; kombu's retry pause would be 2 s per submit, a submit
        # takes tens of ms here: the bound leaves a loaded machine the rest
        assert max(took[1:]) < 1.5, took
        health = await client.get("/healthz")
        assert health.status_code == 200, health.text
        assert (health.json()["database"], health.json().get("broker"), health.json()["status"]) == (
            "ok", "unavailable", "degraded")  # fmt: skip
        assert (await client.get("/v1/tune-jobs")).json() == []


# the pool under load


def test_pool_exhaustion_is_overload_never_an_outage(own_pg: PostgresServer, tmp_path: Path) -> None:
    """64 concurrent publishes of 200 trials, twice, on the default pool, with /healthz probed throughout:
    no `database_unavailable`, every probe 200. Before: a pool of 8 + 8 with a 1 s wait, one upsert per trial:
    most publishes 503 `database_unavailable`, and /healthz 503 on half the probes."""
    from .conftest import Uvicorn

    url = own_pg.new_database()
    server = Uvicorn({"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(tmp_path), "TILEC_AUTH": "false",
                      "TILEC_MIGRATE_ON_START": "false"}).start()  # fmt: skip
    try:
        http = httpx.Client(timeout=120)
        kernel = http.post(server.url + "/v1/kernels", json={"ir": ADD_IR}).json()
        n_trials, clients, rounds = 200, max(8, int(64 * SCALE)), 2
        statuses: list[tuple[int, str, str]] = []
        probes: list[int] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                try:
                    probes.append(http.get(server.url + "/healthz", timeout=5).status_code)
                except httpx.TransportError:
                    probes.append(0)
                stop.wait(0.25)

        def publish(i: int) -> tuple[int, str, str]:
            trials = [
                {"config": {"kwargs": {"B": b, "R": i}}, "time_ms": 1.0 + (b * 7 + i) % 97}
                for b in range(n_trials)
            ]
            body = {"kernel_key": kernel["key"], "target": "cpu", "key": f"k{i % 8}", "trials": trials}
            r = http.post(server.url + "/v1/tuning-results", json=body)
            return (
                r.status_code,
                r.json().get("error", "") if r.status_code != 200 else "",
                r.headers.get("retry-after", ""),
            )

        watcher = threading.Thread(target=probe, daemon=True)
        watcher.start()
        started = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            for _ in range(rounds):
                statuses += pool.map(publish, range(clients))
        took = time.monotonic() - started
        stop.set()
        watcher.join()
        errors = [e for _, e, _ in statuses if e]
        overloaded = [(s, ra) for s, e, ra in statuses if e == E.OVERLOADED]
        print(f"\n[drill pool] {len(statuses)} publishes of {n_trials} trials by {clients} clients in {took:.1f} s: "
              f"{statuses.count((200, '', ''))} ok, {errors.count(E.DB_UNAVAILABLE)} database_unavailable, "
              f"{len(overloaded)} overloaded; /healthz {probes.count(200)}/{len(probes)} 200 "
              f"(others: {[p for p in probes if p != 200]})")  # fmt: skip
        assert E.DB_UNAVAILABLE not in errors, errors
        assert set(errors) <= {E.OVERLOADED}, errors
        assert all(s == 503 and int(ra) >= 1 for s, ra in overloaded), overloaded
        assert probes and all(p == 200 for p in probes), probes
        health = http.get(server.url + "/healthz").json()
        assert (health["database"], health.get("broker")) == ("ok", None), health
        http.close()
    finally:
        server.stop()


async def test_a_pool_timeout_is_overload_with_a_retry_after_that_grows(
    make_client, database_url: str
) -> None:  # noqa: ANN001
    """Every pooled connection held: a request waits db_pool_timeout_s, then is a 503 `overloaded` (never
    `database_unavailable`) whose Retry-After is larger under more load; /healthz, on its own connection, is 200."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no pool to exhaust: a local file, one writer at a time")
    async with make_client(db_pool_size=1, db_pool_overflow=0, db_pool_timeout_s=0.3) as client:
        state = client.app.state.tilec  # type: ignore[attr-defined]
        held = state.engine.connect()  # the pool's only connection
        try:
            one = await client.get("/v1/tune-jobs")
            many = await asyncio.gather(*(client.get("/v1/tune-jobs") for _ in range(12)))
            health = await client.get("/healthz")
        finally:
            held.close()
        for r in (one, *many):
            assert r.status_code == 503 and r.json()["error"] == E.OVERLOADED, r.text
        alone, crowded = int(one.headers["retry-after"]), max(int(r.headers["retry-after"]) for r in many)
        assert 1 <= alone < crowded, (alone, crowded)
        assert health.status_code == 200 and health.json()["database"] == "ok", health.text
        assert (await client.get("/v1/tune-jobs")).status_code == 200  # the connection is back: served


# fresh reads


async def test_lookups_never_see_the_best_get_worse(make_client, database_url: str) -> None:  # noqa: ANN001
    """One writer publishes ever faster times for one tuning key while readers look it up (the lookup cache on,
    its default TTL): no reader ever sees the best time go up. Before: a lookup that read the row before a
    commit cached its answer after the writer dropped the entry (38 of 42,444 reads on SQLite, 2 on PostgreSQL)."""
    reads_total = int(40_000 * SCALE)
    readers = 8
    async with make_client() as client:
        kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()

        def body(time_ms: float, i: int) -> dict:
            trial = {"config": {"kwargs": {"B": i % 16}}, "time_ms": time_ms}
            return {"kernel_key": kernel["key"], "target": "cpu", "key": "k", "trials": [trial]}

        assert (await client.post("/v1/tuning-results", json=body(1e6, 0))).status_code == 200
        query = {"kernel": kernel["key"], "target": "cpu", "key": "k"}
        done = asyncio.Event()
        writes = 0

        async def writer() -> None:
            nonlocal writes
            t = 1e6
            while not done.is_set():
                t *= 0.999
                r = await client.post("/v1/tuning-results", json=body(t, writes))
                assert r.status_code == 200, r.text
                writes += 1

        async def reader(n: int) -> int:
            # n reads at least, and on until the writer has published a dozen times (on a busy machine the
            # readers can be done before the writer got going), within a generous deadline
            seen, worse, count, deadline = float("inf"), 0, 0, time.monotonic() + 300
            while (count < n or writes <= 10) and time.monotonic() < deadline:
                count += 1
                r = await client.get("/v1/lookup", params=query)
                assert r.status_code == 200, r.text
                t = r.json()["time_ms"]
                worse += t > seen
                seen = min(seen, t)
                await asyncio.sleep(
                    0
                )  # a hit from the cache never suspends: let the writer and the others run
            return worse

        started = time.monotonic()
        task = asyncio.create_task(writer())
        worse = await asyncio.gather(*(reader(reads_total // readers) for _ in range(readers)))
        done.set()
        await task
        print(
            f"\n[drill lookups {database_url.split(':')[0]}] {reads_total} reads, {writes} writes in "
            f"{time.monotonic() - started:.1f} s: {sum(worse)} saw the best get worse"
        )
        assert writes > 10 and sum(worse) == 0, (writes, worse)


# single flight


async def test_single_flight_holds_across_the_read_miss_and_the_compile(
    make_client, database_url: str
) -> None:  # noqa: ANN001
    """Bursts of 100 identical compile requests for a known kernel with a new config each: one compile per
    burst. Before: a request that missed the database just before a flight ended started a second compile (2 in
    3 of 10 bursts on PostgreSQL)."""
    bursts, size = 10, 100
    async with make_client() as client:
        kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
        state = client.app.state.tilec  # type: ignore[attr-defined]
        compiles = state.metrics.compiles.labels("compile", "ok")
        per_burst = []
        for burst in range(bursts):
            before = compiles._value.get()
            body = {
                "kernel_key": kernel["key"],
                "target": "cpu",
                "emit": "tir",
                "constexprs": {"unused": 1000 + burst},
            }
            answers = await asyncio.gather(*(client.post("/v1/compile", json=body) for _ in range(size)))
            assert all(r.status_code == 200 for r in answers), [
                r.text for r in answers if r.status_code != 200
            ][:2]
            assert len({r.json()["id"] for r in answers}) == 1
            per_burst.append(int(compiles._value.get() - before))
        print(
            f"\n[drill single flight {database_url.split(':')[0]}] compiles per burst of {size}: {per_burst}"
        )
        assert per_burst == [1] * bursts, per_burst


# the reaper's bookkeeping, row by row


async def test_resend_backs_off_and_two_reapers_never_both_send(make_client, database_url: str) -> None:  # noqa: ANN001
    """A queued job is due resend_after_s after its message, then after twice as long each time; a running job
    whose lease lapsed is due at once and goes back to queued; of two reapers that read the same due job, one
    marks it sent; a send the broker refused is undone (due again)."""
    from datetime import timedelta

    from tilec.server.db.models import TuneJob
    from tilec.server.jobs import store

    async with make_client() as client:
        state = client.app.state.tilec  # type: ignore[attr-defined]
        kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
        values = {"kernel_key": kernel["key"], "tuning_key": "t" * 64, "key_values": "", "dtypes": "", "target": "cpu",
                  "strategy": "halving", "request": {}, "trials_planned": 1, "submitted_by": None}  # fmt: skip
        job_id = state.write_sync(lambda s: store.create_job(s, values=values)[0].id)

        def age(**fields: float) -> None:  # move the job's times back by these many seconds
            def move(s) -> None:  # noqa: ANN001
                job = s.get_one(TuneJob, job_id)
                for name, seconds in fields.items():
                    setattr(job, name, store.now() - timedelta(seconds=seconds))

            state.write_sync(move)

        def due() -> list[store.Due]:
            return state.read_sync(lambda s: store.due_for_resend(s, lease_s=6, after_s=30, max_s=600))

        assert due() == []  # just sent
        age(sent_at=31)
        first = due()
        assert [(d.id, d.state, d.sends) for d in first] == [(job_id, "queued", 1)]
        twice = [first[0], due()[0]]  # two reapers read it
        marked = [state.write_sync(lambda s, d=d: store.mark_sent(s, d, lease_s=6)) for d in twice]
        assert marked == [True, False]
        age(sent_at=59)
        assert due() == []  # the second message waits 60 s
        age(sent_at=61)
        again = due()
        assert [d.sends for d in again] == [2]
        assert state.write_sync(lambda s: store.mark_sent(s, again[0], lease_s=6))
        state.write_sync(lambda s: store.undo_send(s, again[0]))  # the broker refused it
        assert [d.sends for d in due()] == [2]
        # a running job whose worker stopped beating: due at once, and queued again once marked
        state.write_sync(lambda s: store.claim(s, job_id, worker="w", lease_s=6, max_deliveries=3))
        assert due() == []
        age(heartbeat_at=7)
        lapsed = due()
        assert [(d.state, d.sends) for d in lapsed] == [("running", 2)]
        assert state.write_sync(lambda s: store.mark_sent(s, lapsed[0], lease_s=6))
        job = state.read_sync(lambda s: s.get_one(TuneJob, job_id))
        assert (job.state, job.sends) == ("queued", 3)
        assert (
            state.write_sync(lambda s: store.heartbeat(s, job_id, worker="w")) == "queued"
        )  # the worker stops


async def test_a_take_the_database_interrupted_is_given_back_uncounted(make_client, monkeypatch) -> None:  # noqa: ANN001
    """A tune whose database went away mid-take: once it answers again the job is queued again and the take is not
    counted, so outages never add up to max_deliveries (found by bench/cluster_gpu.py's PostgreSQL restart: each
    running job was charged a take). A database that stays away leaves the take counted."""
    from sqlalchemy.exc import OperationalError

    from tilec.server.db.models import TuneJob
    from tilec.server.jobs import runner, store

    async with make_client() as client:
        state = client.app.state.tilec  # type: ignore[attr-defined]
        kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
        values = {"kernel_key": kernel["key"], "tuning_key": "g" * 64, "key_values": "", "dtypes": "", "target": "cpu",
                  "strategy": "halving", "request": {}, "trials_planned": 1, "submitted_by": None}  # fmt: skip
        job_id = state.write_sync(lambda s: store.create_job(s, values=values)[0].id)
        ctx = runner.WorkerContext(settings=state.settings, rw=state.rw)

        def away(*_args: object, **_kw: object) -> None:
            raise OperationalError("UPDATE tune_jobs", {}, Exception("server closed the connection unexpectedly"))

        def row() -> tuple[str, int]:
            job = state.read_sync(lambda s: s.get_one(TuneJob, job_id))
            return job.state, job.deliveries

        monkeypatch.setattr(runner, "_run", away)  # each take meets the outage after its claim
        for _ in range(2 * state.settings.max_deliveries):
            with pytest.raises(OperationalError):
                runner.run_job(ctx, job_id)
            assert row() == ("queued", 0)
        assert state.write_sync(lambda s: store.claim(s, job_id, worker=ctx.worker, lease_s=6, max_deliveries=3)).decision == "run"
        monkeypatch.setattr(store, "release", away)  # and now it stays away
        assert runner.give_back(ctx, job_id, wait_s=0.2) is False
        assert row() == ("running", 1)
