"""Executors hand a job id to a worker. In-process (the embedded default): a thread in the API process
runs jobs one at a time on the local GPU, or on the cpu target when there is none. Celery: the job id
goes to the target's queue on the broker; `tilec worker --target T` processes consume it.
"""

from __future__ import annotations

import ast
import json
import logging
import queue
import threading
import time
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from ..settings import Settings
from .store import RETRY_S

log = logging.getLogger("tilec.jobs")


LIVE_TTL_S = 5.0  # how long the answer to "which targets have a live worker" is reused
LIVE_STALE_S = 60.0  # how old an answer a submit's warning takes while a fresh one is asked in the background


def worker_hostname(target: str, pid: int) -> str:
    """The Celery hostname `tilec worker --target T` takes (before its @host): the target is read back
    from it by worker_target."""
    return f"tilec-{target.replace(':', '-')}-{pid}"


def worker_target(hostname: str) -> str | None:
    """'tilec-cuda-sm_90-1234@host' -> 'cuda:sm_90'; None for a worker that is not tilec's."""
    name = hostname.split("@", 1)[0]
    if not name.startswith("tilec-") or name.count("-") < 2:
        return None
    target = name.removeprefix("tilec-").rsplit("-", 1)[0]
    return target.replace("-", ":", 1) if target.startswith("cuda-") else target


class BrokerUnavailable(Exception):
    """The job could not be handed to the broker (it is down or unreachable)."""


class Executor(Protocol):
    name: str

    def targets(self) -> set[str] | None: ...  # the targets it can run (None: any; a worker may take it)

    def submit(self, job_id: int, target: str, *, resend: bool = False) -> None: ...  # resend: to the queue's front

    def live_targets(self, *, wait: bool = True) -> set[str] | None: ...  # targets some worker serves now (None: unknown)

    def last_seen(self, target: str) -> datetime | None: ...  # when this process last saw a worker of target

    def close(self) -> None: ...


def local_targets() -> set[str]:
    """cpu, and cuda:sm_XX of this machine's first GPU when there is one."""
    found = {"cpu"}
    try:
        from tilec.runtime.cuda import device_sm

        found.add(f"cuda:sm_{device_sm(0)}")
    except Exception:  # noqa: BLE001 - no cuda-python, no driver or no GPU: the cpu target only
        pass
    return found


class InProcessExecutor:
    name = "in-process"

    def __init__(self, settings: Settings, rw: sessionmaker[Session]) -> None:
        from .runner import WorkerContext, worker_id

        self.ctx = WorkerContext(settings=settings, rw=rw, worker=worker_id("inprocess"))
        self.ctx.executor = self  # retunes a job starts (a new GPU model) are run here too
        self.queue: queue.Queue[int | None] = queue.Queue()
        self.thread: threading.Thread | None = None
        self._targets: set[str] | None = None
        self.lock = threading.Lock()

    def targets(self) -> set[str]:
        if self._targets is None:
            self._targets = local_targets()
        return self._targets

    def live_targets(self, *, wait: bool = True) -> set[str]:
        """What the thread in this process runs: certain (a job for another target is refused at submit,
        but one queued before a restart on another machine, or by a Celery setup, can wait for it)."""
        return self.targets()

    def last_seen(self, target: str) -> datetime | None:
        return datetime.now(UTC) if target in self.targets() else None

    def submit(self, job_id: int, target: str, *, resend: bool = False) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, daemon=True, name="tilec-tune")
                self.thread.start()
        self.queue.put(job_id)

    def _loop(self) -> None:
        from .runner import run_job

        while (job_id := self.queue.get()) is not None:
            try:
                run_job(self.ctx, job_id)
            except Exception:  # noqa: BLE001 - the database is away: try the job again later
                log.exception("job %s: the executor could not run it; retrying in %s s", job_id, RETRY_S)
                retry = threading.Timer(RETRY_S, self.queue.put, [job_id])
                retry.daemon = True
                retry.start()

    def close(self) -> None:
        self.queue.put(None)


class CeleryExecutor:
    name = "celery"

    def __init__(self, settings: Settings) -> None:
        from .celery_app import make_celery

        self.settings = settings
        self.app = make_celery(settings)
        self._live: tuple[float, set[str] | None] | None = None
        self._seen: dict[str, datetime] = {}  # target -> when a worker of it last answered a ping here
        self._asking = threading.Lock()  # one ping at a time: the callers that queue behind it reuse its answer

    def targets(self) -> None:
        return None

    def live_targets(self, *, wait: bool = True) -> set[str] | None:
        """The targets of the workers that answer a ping now (their hostnames, as `tilec worker` names
        them, carry the target), remembered for LIVE_TTL_S: a submit, or the web page's poll, asks at most
        that often. None when the broker cannot be asked (remembered as long: a page polling while the
        broker is down does not wait on a failing ping each time). With wait=False (a submit's warning) an
        answer older than LIVE_TTL_S but younger than LIVE_STALE_S is given as it is while a ping renews it in
        the background: a ping waits its whole timeout (1 s) for the replies, which a submit's answer need not
        wait for; with no answer that recent it waits."""
        live = self._live
        if not wait and live is not None and time.monotonic() - live[0] < LIVE_STALE_S:
            if time.monotonic() - live[0] >= LIVE_TTL_S and self._asking.acquire(blocking=False):
                threading.Thread(target=self._renew, name="tilec-live-targets", daemon=True).start()
            return live[1]
        with self._asking:
            now = time.monotonic()
            if self._live is not None and now - self._live[0] < LIVE_TTL_S:
                return self._live[1]
            return self._ping(now)

    def _renew(self) -> None:
        """A ping in the background (the caller acquired _asking for it)."""
        try:
            self._ping(time.monotonic())
        finally:
            self._asking.release()

    def _ping(self, now: float) -> set[str] | None:
        """Ask the workers (under _asking) and remember the answer."""
        try:
            replies = self.app.control.ping(timeout=min(1.0, self.settings.broker_timeout_s))
        except Exception:  # noqa: BLE001 - the broker down: submit says so itself; here we only do not know
            self._live = (now, None)
            return None
        found = {t for reply in replies for host in reply if (t := worker_target(host)) is not None}
        seen = datetime.now(UTC)
        self._seen.update((t, seen) for t in found)
        self._live = (now, found)
        return found

    def last_seen(self, target: str) -> datetime | None:
        """When a worker of `target` last answered one of this process's pings (None: not since it started)."""
        return self._seen.get(target)

    def submit(self, job_id: int, target: str, *, resend: bool = False) -> None:
        """Publish the job's message: a first one behind the queue's other first messages, one sent again (its
        worker died, or its message was lost) at the front. A broker that refuses the connection fails at once
        (no retry pause: kombu's would cost 2 s per submit); a publish that fails on the connection once open is
        tried once more."""
        from kombu.exceptions import OperationalError

        from .celery_app import FIRST, RESENT, TASK, queue_name

        timeout = self.settings.broker_timeout_s
        policy = {"max_retries": 1, "interval_start": 0, "interval_step": 0, "interval_max": 0}
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=0, timeout=timeout)
                self.app.send_task(TASK, args=[job_id], queue=queue_name(target), connection=conn,
                                   priority=RESENT if resend else FIRST, retry=True, retry_policy=policy)  # fmt: skip
        except (OperationalError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(str(exc)) from exc

    def waiting(self, targets: set[str]) -> set[int]:
        """The jobs whose message is outstanding: waiting in one of these targets' queues (the lists of kombu's
        Redis transport, one per priority step), or taken by a worker within lease_s that has not claimed the job
        yet (Redis's unacked messages: one older than that was taken by a worker that died before its claim).
        Another transport: none known (every due job is sent)."""
        from .celery_app import queue_name

        found: set[int] = set()
        with self.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0, timeout=self.settings.broker_timeout_s)
            channel = conn.default_channel
            client = getattr(channel, "client", None)
            if client is None or not hasattr(channel, "_q_for_pri"):
                return found
            for target in targets:
                for key in {channel._q_for_pri(queue_name(target), p) for p in channel.priority_steps}:
                    found.update(j for raw in client.lrange(key, 0, -1) if (j := _job_of(json.loads(raw))) is not None)
            recent = client.zrangebyscore(channel.unacked_index_key, time.time() - self.settings.lease_s, "+inf")
            for raw in client.hmget(channel.unacked_key, recent) if recent else []:
                if raw is not None and (j := _job_of(json.loads(raw)[0])) is not None:
                    found.add(j)
        return found

    def ping(self, timeout_s: float) -> None:
        """Reach the broker on a connection of its own (for /healthz); raises when it cannot."""
        conn = self.app.connection_for_write()  # a connection of its own
        try:
            conn.ensure_connection(max_retries=0, timeout=timeout_s)
            client = getattr(conn.default_channel, "client", None)
            if client is not None:  # redis: the connection is made lazily, on the first command
                client.ping()
        finally:
            conn.release()

    def close(self) -> None:
        pass


def _job_of(message: dict) -> int | None:
    """The job id a Celery message names (its `argsrepr` header, "[42]"), or None."""
    try:
        return int(ast.literal_eval(message["headers"]["argsrepr"])[0])
    except (ValueError, KeyError, TypeError, IndexError, SyntaxError):
        return None


def make_executor(settings: Settings, rw: sessionmaker[Session]) -> Executor:
    if settings.broker_url:
        return CeleryExecutor(settings)
    return InProcessExecutor(settings, rw)
