"""The Celery side of tune jobs: the app (broker from TILEC_BROKER_URL, the rest Celery's defaults but
for the settings that make a killed worker lose nothing), one queue per target, and the task, whose
message carries only the job id.
"""

from __future__ import annotations

import logging
import time
from functools import cache

from celery import Celery

from ..settings import Settings

TASK = "tilec.tune_job"
# message priorities: on Redis, kombu keeps a list per priority step (0, 3, 6, 9) and a worker pops the
# lowest step first, so a job sent again (its worker died, its message was lost) goes to the queue's front
FIRST, RESENT = 9, 0
log = logging.getLogger("tilec.jobs")


def queue_name(target: str) -> str:
    return f"tilec.tune.{target}"


def make_celery(settings: Settings) -> Celery:
    app = Celery("tilec", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,  # acked when the task ends: a worker killed mid-job leaves the message to redeliver
        task_reject_on_worker_lost=True,  # a pool child that dies puts its message back (deliveries bound it)
        worker_prefetch_multiplier=1,  # a worker holds one unacked job, not a batch others could run
        task_ignore_result=True,  # the job row is the result
        broker_connection_timeout=settings.broker_timeout_s,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            # kombu's workers look for messages past the visibility timeout only every 10 s x 10 (its restore
            # interval and throttle): a short timeout would redeliver ~100 s late. Look every timeout/2 (1-10 s).
            "unacked_restore_interval": max(1.0, min(10.0, settings.visibility_timeout_s / 2)),
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": settings.broker_timeout_s,
            "socket_timeout": max(settings.broker_timeout_s, 5.0),
        },
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    app.task(name=TASK)(_tune_job)
    return app


@cache
def _context():  # noqa: ANN202 - a WorkerContext, made once per worker process
    from .runner import WorkerContext

    return WorkerContext.open(Settings(), label="celery")


def _tune_job(job_id: int) -> str:
    from celery.exceptions import Reject
    from sqlalchemy.exc import OperationalError

    from .runner import run_job
    from .store import RETRY_S

    try:
        return run_job(_context(), int(job_id))
    except OperationalError as exc:
        # the database is away: a task that raised would be acked and its job left queued for good, so the
        # message goes back to the queue (after a pause, not a hot loop) and the job runs once it is back;
        # the claim makes a repeat harmless (and a take the outage interrupted was given back uncounted)
        log.warning(
            "job %s: the database is unavailable; the job goes back to the queue in %s s", job_id, RETRY_S
        )
        time.sleep(RETRY_S)
        raise Reject(str(exc)[:300], requeue=True) from None
