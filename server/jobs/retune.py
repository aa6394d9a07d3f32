"""The inventory and its retunes: tune jobs for every (kernel, tuning key, target) the server holds, queued
on request (POST /v1/retune, `tilec retune`) and, with TILEC_RETUNE_ON_CHANGE, when the compiler version
changes (at start) or a worker of a GPU model the server has not seen finishes its first job.

A retune runs the key's newest job request again with `retune` set: every config is timed anew (stored
trials are not reused), and the result is decided again. A key the server holds no job request for (a
client tuned it on its own arguments and published) is skipped: no launch description to run it from.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tilec.compiler.artifact import compiler_version

from ..db import decisions
from ..db.models import TuneJob, TuningResult
from . import store

log = logging.getLogger("tilec.retune")
NO_REQUEST = "published by a client: the server holds no launch description to tune it from"


def queue_inventory(session: Session, *, target: str, gpu_model: str | None = None, kernel: str | None = None,
                    since: str | None = None, tkey: str | None = None,
                    token_id: int | None = None) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Create (or join) a retune job for every key of the inventory: (queued, skipped) as RetuneItemPublic
    dicts; a queued one carries `new` (True when this call created the job: it is to be sent)."""
    queued, skipped = [], []
    for r in decisions.inventory(session, target=target, gpu_model=gpu_model, kernel=kernel,
                                 compiler_version=since, tkey=tkey):  # fmt: skip
        item = {"tuning_key": r.tuning_key, "kernel_key": r.kernel_key, "key": r.key_values, "dtypes": r.dtypes}
        last = session.scalar(select(TuneJob).where(TuneJob.tuning_key == r.tuning_key).order_by(TuneJob.id.desc()).limit(1))
        if last is None or not isinstance(last.request, dict):
            skipped.append({**item, "why": NO_REQUEST})
            continue
        request = {**last.request, "retune": True}
        values = {"kernel_key": r.kernel_key, "tuning_key": r.tuning_key, "key_values": r.key_values,
                  "dtypes": r.dtypes, "target": r.target, "strategy": last.strategy, "request": request,
                  "trials_planned": len(request.get("configs") or []), "submitted_by": token_id}  # fmt: skip
        job, attached = store.create_job(session, values=values)
        queued.append({**item, "job_id": job.id, "new": not attached, "target": r.target})
    return queued, skipped


def targets_held(session: Session) -> list[str]:
    return list(session.scalars(select(TuningResult.target).distinct()).all())


def note_compiler_version(session: Session, *, enabled: bool) -> list[dict]:
    """At start: remember this compiler's version; when it differs from the one before and `enabled`, queue
    the whole inventory (the jobs to send)."""
    current = compiler_version()
    before = decisions.get_fact(session, "compiler_version")
    decisions.set_fact(session, "compiler_version", current)
    if not enabled or before is None or before == current:
        return []
    log.info("compiler version %s -> %s: retuning the inventory", str(before)[:12], current[:12])
    jobs = []
    for target in targets_held(session):
        jobs += queue_inventory(session, target=target)[0]
    return [j for j in jobs if j["new"]]


def note_gpu_model(session: Session, *, gpu_model: str | None, target: str, enabled: bool) -> list[dict]:
    """After a job: remember its worker's GPU model; a model not seen before (when some were) queues the
    target's inventory when `enabled` (the jobs to send)."""
    if not gpu_model:
        return []
    seen = decisions.get_fact(session, "gpu_models") or []
    if gpu_model in seen:
        return []
    decisions.set_fact(session, "gpu_models", sorted([*seen, gpu_model]))
    if not enabled or not seen:
        return []
    log.info("a worker with a new GPU model (%s) on %s: retuning the inventory", gpu_model, target)
    return [j for j in queue_inventory(session, target=target)[0] if j["new"]]


def send(executor: Any, jobs: list[dict]) -> None:
    """Hand new jobs to the executor; one it cannot take now is left queued (the reaper sends it again)."""
    for j in jobs:
        try:
            executor.submit(j["job_id"], j["target"])
        except Exception:  # noqa: BLE001 - the broker is away: the job stays queued, the reaper resends it
            log.warning("retune job %s could not be sent now; it stays queued", j["job_id"])
