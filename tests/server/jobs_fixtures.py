"""Fixtures for the tune-job tests: a dedicated Redis db, process groups that are always reaped, and the
services under test — an in-process API (uvicorn) and a Celery cluster (an API with a broker and
`tilec worker --target cpu` processes), each on its own migrated database, shared by a module's tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import drop_pg_database, make_pg_database
from tests.server.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
TILEC = ROOT / ".venv" / "bin" / "tilec"
# a db of its own, flushed at the start of each cluster; one per pytest-xdist worker (gw0 -> 11, gw1 -> 12, ...);
# TILEC_TEST_REDIS_DB moves the base, so that two checkouts can run these tests side by side on one Redis
REDIS_DB = int(os.environ.get("TILEC_TEST_REDIS_DB", "11")) + int(
    os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0
)
REDIS_URL = f"redis://localhost:6379/{REDIS_DB}"
FINISHED = ("done", "failed", "cancelled")
# seconds, shortened from the defaults so that in a test leases lapse, orphaned jobs are handed out again and
# messages are redelivered
FAST = {
    "TILEC_HEARTBEAT_S": "0.5",
    "TILEC_LEASE_S": "3",
    "TILEC_REAPER_INTERVAL_S": "1",
    "TILEC_TUNE_FULL_SECONDS": "0.2",
    "TILEC_TUNE_BRIEF_SECONDS": "0.05",
    "TILEC_TUNE_COMPILE_WORKERS": "1",
    "TILEC_AUTH": "false",
    # workers write results outside the API process: its lookup cache would answer the previous best
    # for up to its TTL (5 s) after a tune improved it
    "TILEC_LOOKUP_CACHE_TTL_S": "0",
}
# the Celery cluster: a message not acked in 1 s is redelivered (within 1-2 s, as the workers look every
# second): a tune of several seconds outlives it; a job is taken up at most twice
CELERY = {"TILEC_VISIBILITY_TIMEOUT_S": "1", "TILEC_MAX_DELIVERIES": "2", "TILEC_BROKER_TIMEOUT_S": "1"}


def redis_url() -> str:
    """REDIS_URL, flushed; a failure when Redis is down and CI=true (every Celery test runs in CI),
    a skip otherwise."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.flushdb()
    except redis.RedisError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis on localhost:6379 is unreachable ({exc}), and CI=true needs it")
        pytest.skip(f"Redis on localhost:6379 is not running ({exc})")
    finally:
        client.close()
    return REDIS_URL


class Proc:
    """A subprocess in a session of its own, so that stopping it also ends what it started (compile
    pools, bench children) — even after the process itself was SIGKILLed by a test."""

    def __init__(self, cmd: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.log_file = tempfile.TemporaryFile()  # a pipe nobody reads would fill up and stall the process
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self, since: int = 0) -> str:
        """What it has written (stdout and stderr) from byte `since` on."""
        self.log_file.seek(since)
        return self.log_file.read().decode(errors="replace")

    def mark(self) -> int:
        """Where its log ends now: log(since=mark()) is what it writes from here on."""
        self.log_file.seek(0, os.SEEK_END)
        return self.log_file.tell()

    def kill(self) -> None:
        """SIGKILL the process alone (its children live on, as after a crash)."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def reap(self) -> None:
        """SIGKILL what is left of its process group once it is dead itself (a killed worker's compile
        pool outlives it)."""
        if not self.alive():
            self._signal_group(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the process group (a Celery worker shuts down warm)."""
        if self.alive():
            self._signal_group(signal.SIGTERM)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after 5 s or when the leader is gone already."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)
        self.proc.wait(10)

    def wait_for(self, text: str, timeout: float = 30) -> None:
        """Until its log shows `text`."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline or not self.alive():
                raise AssertionError(f"{self.name} never wrote {text!r}:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)  # the group id is the leader's pid (start_new_session)
        except ProcessLookupError:
            pass


@dataclass
class Service:
    """An API process (and Celery workers when it has a broker) on one database, with an HTTP client."""

    executor: str  # "inprocess" | "celery"
    database_url: str
    env: dict[str, str]
    api: Proc | None = None
    url: str = ""
    workers: list[Proc] = field(default_factory=list)
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))
    broker_url: str = REDIS_URL

    def start_api(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "uvicorn", "tilec.server.main:app", "--port", str(port), "--log-level", "warning"]  # fmt: skip
        self.api = Proc(cmd, {**self.env, "TILEC_PORT": str(port)}, "api")
        deadline = time.monotonic() + 180  # generous: a loaded 2-core machine took over 30 s to start one
        while time.monotonic() < deadline:
            if not self.api.alive():
                raise RuntimeError(f"uvicorn exited: {self.api.log()[-3000:]}")
            try:
                if self.http.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("uvicorn did not become healthy in 180 s")

    def start_worker(self, **env: str) -> Proc:
        """A `tilec worker --target cpu` with the service's settings (and `env` over them)."""
        cmd = [str(TILEC), "worker", "--target", "cpu"]
        worker = Proc(cmd, {**self.env, **env}, f"worker{len(self.workers)}")
        self.workers.append(worker)
        return worker

    def wait_workers_ready(self, timeout: float = 30) -> None:
        """Until every live worker has said it is ready (Celery's `ready.` line)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [w for w in self.workers if w.alive()]
            if all(" ready." in w.log() for w in live):
                return
            time.sleep(0.1)
        raise RuntimeError("workers not ready:\n" + self.logs())

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def stop_workers(self) -> None:
        """Stop every live worker (they stay listed, with their logs)."""
        live = self.live_workers()
        for worker in live:  # all at once: each takes a moment to shut down
            worker.terminate()
        for worker in live:
            worker.stop()

    def ensure_workers(self, n: int = 2) -> None:
        """Start workers until n are alive (a test may have killed some: what they left is ended), and wait
        until they are ready."""
        for worker in self.workers:
            worker.reap()
        for _ in range(n - len(self.live_workers())):
            self.start_worker()
        self.wait_workers_ready()

    def marks(self) -> dict[int, int]:
        return {w.pid: w.mark() for w in self.workers}

    def wait_broker_idle(self, timeout: float = 30) -> None:
        """Until no message is left in the cpu queue or unacknowledged (held by a worker, or waiting to be
        redelivered): every delivery of every job has happened."""
        import redis

        from tilec.server.jobs.celery_app import queue_name

        client = redis.Redis.from_url(self.broker_url, socket_timeout=5)
        queue = queue_name("cpu")
        lists = [queue, *(f"{queue}\x06\x16{p}" for p in (3, 6, 9))]  # kombu's list per priority step
        try:
            deadline = time.monotonic() + timeout
            while sum(client.llen(k) for k in lists) or client.hlen("unacked"):
                if time.monotonic() > deadline:
                    raise AssertionError(f"messages left in the broker after {timeout} s\n{self.logs()}")
                time.sleep(0.1)
        finally:
            client.close()

    def worker_logs(self, since: dict[int, int]) -> str:
        """What the workers wrote after `since` (from marks(); a worker started later, all of it)."""
        return "\n".join(w.log(since.get(w.pid, 0)) for w in self.workers)

    def worker_of(self, job: dict) -> Proc:
        """The worker process holding the job (its `worker` field is host:pid:label)."""
        pid = int(job["worker"].split(":")[1])
        return next(w for w in self.workers if w.pid == pid)

    def logs(self) -> str:
        procs = [p for p in (self.api, *self.workers) if p is not None]
        return "\n".join(f"--- {p.name} (pid {p.pid}) ---\n{p.log()[-4000:]}" for p in procs)

    def stop(self) -> None:
        for p in (*self.workers, self.api):
            if p is not None:
                p.stop()
                p.log_file.close()
        self.http.close()

    # the API

    def submit(self, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(self.url + "/v1/tune-jobs", json=body)

    def job(self, job_id: int) -> dict:
        r = self.http.get(f"{self.url}/v1/tune-jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait(self, job_id: int, until: Callable[[dict], bool] = lambda j: j["state"] in FINISHED,
             timeout: float = 60) -> dict:  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            assert job["trials_done"] == len(job["trials"]) <= job["trials_planned"], job  # progress, always
            if until(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} not there in {timeout} s: {self.job(job_id)}\n{self.logs()}")


def _database(request: pytest.FixtureRequest, kind: str, tmp: Path) -> tuple[str, Callable[[], None]]:
    """A fresh migrated database of this kind and how to drop it."""
    from tilec.server.db.migrate import upgrade

    if kind == "sqlite":
        url = f"sqlite:///{tmp / 'tilec.db'}"
        upgrade(url)
        return url, lambda: None
    admin = request.getfixturevalue("pg_admin_url")
    url = make_pg_database(admin)
    upgrade(url)
    return url, lambda: drop_pg_database(admin, url)


@contextmanager
def running(
    request: pytest.FixtureRequest, executor: str, database: str, tmp: Path, workers: int = 2, *,
    broker_url: str | None = None, database_url: str | None = None, env: dict[str, str] | None = None,
) -> Iterator[Service]:  # fmt: skip
    """A started Service of this executor on a fresh database of this kind (or on `database_url`, migrated
    already, with the broker at `broker_url`: servers a test owns); stopped (every process group ended) and
    the database dropped on the way out, whatever happened. `env` goes over the settings."""
    broker_url = broker_url or (redis_url() if executor == "celery" else "")  # may skip: first
    broker = {**CELERY, "TILEC_BROKER_URL": broker_url} if executor == "celery" else {}
    url, drop = (database_url, lambda: None) if database_url else _database(request, database, tmp)
    settings = {
        **FAST,
        **broker,
        "TILEC_DATABASE_URL": url,
        "TILEC_DATA_DIR": str(tmp),
        "TILEC_MIGRATE_ON_START": "false",
        **(env or {}),
    }
    service = Service(executor, url, settings, broker_url=broker_url or REDIS_URL)
    try:
        service.start_api()
        for _ in range(workers if executor == "celery" else 0):
            service.start_worker()
        service.wait_workers_ready()
        yield service
    finally:
        service.stop()
        drop()
