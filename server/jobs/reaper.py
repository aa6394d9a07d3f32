"""The API process's watch over tune jobs: at start, jobs left queued or running by a previous process
are handed to the executor again; then, every reaper_interval_s, a running job whose worker stopped
renewing its lease (killed, or the message lost with it) is handed out again. A delivery of a job that
is finished or held by a live worker does nothing, so handing one out twice is harmless.
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
    lease = state.settings.lease_s
    return await requeue(state, await state.read(lambda s: store.orphaned(s, lease_s=lease)))


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
