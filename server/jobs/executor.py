"""Executors hand a job id to a worker. In-process (the embedded default): a thread in the API process
runs jobs one at a time on the local GPU, or on the cpu target when there is none. Celery: the job id
goes to the target's queue on the broker; `tilec worker --target T` processes consume it.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from ..settings import Settings
from .store import RETRY_S

log = logging.getLogger("tilec.jobs")


class BrokerUnavailable(Exception):
    """The job could not be handed to the broker (it is down or unreachable)."""


class Executor(Protocol):
    name: str

    def targets(self) -> set[str] | None: ...  # the targets it can run (None: any; a worker may take it)

    def submit(self, job_id: int, target: str) -> None: ...

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
        self.queue: queue.Queue[int | None] = queue.Queue()
        self.thread: threading.Thread | None = None
        self._targets: set[str] | None = None
        self.lock = threading.Lock()

    def targets(self) -> set[str]:
        if self._targets is None:
            self._targets = local_targets()
        return self._targets

    def submit(self, job_id: int, target: str) -> None:
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

    def targets(self) -> None:
        return None

    def submit(self, job_id: int, target: str) -> None:
        from kombu.exceptions import OperationalError

        from .celery_app import TASK, queue_name

        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=self.settings.broker_timeout_s)
                self.app.send_task(TASK, args=[job_id], queue=queue_name(target), connection=conn, retry=False)
        except (OperationalError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(str(exc)) from exc

    def close(self) -> None:
        pass


def make_executor(settings: Settings, rw: sessionmaker[Session]) -> Executor:
    if settings.broker_url:
        return CeleryExecutor(settings)
    return InProcessExecutor(settings, rw)
