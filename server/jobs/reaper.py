"""The API process's watch over tune jobs. The job rows are the truth and a broker message only names a job,
so a message may be lost (a broker restarted without its data, flushed or failed over) without losing the
job: every reaper_interval_s the reaper sends again
- a running job whose worker stopped renewing its lease (killed): back to queued, at the front of its queue;
- with a broker, a queued job that no worker took within resend_after_s of its last message (doubled for each
  message sent since, up to resend_max_s) and whose message is not waiting in the broker's queue (Redis: the
  queue's lists are read): its message is lost.
Each is marked sent (sends + 1) under a compare-and-set before it is sent, whichever API process sends it, so a
job has at most one message waiting in its queue. At start, with the in-process executor (whose queue died with
the previous process), every queued or running job is handed out again. A delivery of a job that is
finished or held by a live worker does nothing, so a message sent twice is harmless.

Why not a transactional outbox: the outbox makes "row committed" and "message published" one fact, but a
message the broker accepted and then lost is lost either way; something has to notice a job that no worker
took and send it again, and once that exists (the reaper, reading the rows) it covers the publish that never
happened too (the API died between its commit and its publish: sent_at is set at the commit).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.concurrency import run_in_threadpool

from ..state import AppState
from . import store

log = logging.getLogger("tilec.jobs")


async def requeue(state: AppState, jobs: list[tuple[int, str]]) -> int:
    handed = 0
    for job_id, target in jobs:
        try:
            await run_in_threadpool(state.executor.submit, job_id, target)
            handed += 1
        except Exception:  # noqa: BLE001 - the broker is down: the next round tries again
            log.warning("job %s: could not hand it out again", job_id, exc_info=True)
    return handed


async def reap_once(state: AppState) -> int:
    """Send again every job whose message is presumed lost; how many were sent."""
    s, executor = state.settings, state.executor
    loses = executor.name != "in-process"  # a broker's message can be lost; a thread's queue cannot
    due = await state.read(lambda ses: store.due_for_resend(ses, lease_s=s.lease_s, after_s=s.resend_after_s,
                                                            max_s=s.resend_max_s, queued=loses))  # fmt: skip
    queued = {d.target for d in due if d.state == "queued"}
    waiting: set[int] = set()
    if queued and hasattr(executor, "waiting"):
        try:  # the messages still in the broker's queues: those jobs wait behind others, nothing was lost
            waiting = await run_in_threadpool(executor.waiting, queued)
        except Exception:  # noqa: BLE001 - the broker is down: nothing can be sent this round
            log.warning("tune-job reaper: the broker cannot be read", exc_info=True)
            return 0
    sent = 0
    for d in due:
        if d.state == "queued" and d.id in waiting:
            await state.write(lambda ses, d=d: store.mark_waiting(ses, d))
            continue
        if not await state.write(lambda ses, d=d: store.mark_sent(ses, d, lease_s=s.lease_s)):
            continue  # taken by a worker, or sent by another API process, since it was read
        try:
            await run_in_threadpool(executor.submit, d.id, d.target, resend=True)
            sent += 1
            log.info("job %s (%s): sent again, message %s", d.id, d.state, d.sends + 1)
        except Exception:  # noqa: BLE001 - the broker is down: due again at the next round
            log.warning("job %s: could not send it again", d.id, exc_info=True)
            await state.write(lambda ses, d=d: store.undo_send(ses, d))
    return sent


async def reap(state: AppState) -> None:
    try:
        if state.executor.name == "in-process":  # its queue died with the previous process
            try:
                await requeue(state, await state.read(store.active))
            except Exception:  # noqa: BLE001 - the database is down: orphans are found by the rounds
                log.warning("tune-job reaper: could not read the jobs", exc_info=True)
        while True:
            await asyncio.sleep(state.settings.reaper_interval_s)
            try:
                await reap_once(state)
            except Exception:  # noqa: BLE001 - the database is down: try again next round
                log.warning("tune-job reaper: could not read the jobs", exc_info=True)
    except asyncio.CancelledError:
        return
