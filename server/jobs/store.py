"""Tune-job rows: create (or attach to the job already running for the tuning key), claim with a lease,
heartbeat, progress, finish, cancel; and writing a finished tune's trials and best config.

Every function takes a Session inside the caller's transaction. Writes of a worker check that it still
holds the job (`worker` matches): a worker that lost its lease to another writes nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ..db import crud
from ..db.models import Trial, TuneJob, TuningResult

ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled")
LIST_LIMIT = 200
RETRY_S = 5.0  # a job that could not be claimed (the database is down) is handed out again after this


def now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def create_job(session: Session, *, values: dict[str, Any]) -> tuple[TuneJob, bool]:
    """A new queued job, or the one already queued or running for the same tuning key (attached)."""
    stmt = crud._insert(session, TuneJob).values(
        **values, state="queued", active_key=values["tuning_key"], trials=[], trials_done=0, deliveries=0,
        created_at=now(),
    )
    new_id = session.execute(stmt.on_conflict_do_nothing(index_elements=["active_key"]).returning(TuneJob.id)).scalar()
    if new_id is not None:
        return session.get_one(TuneJob, new_id), False
    found = session.scalars(select(TuneJob).where(TuneJob.active_key == values["tuning_key"])).first()
    if found is None:  # it finished between the two statements: try once more
        return create_job(session, values=values)
    return found, True


def add_finished(session: Session, *, values: dict[str, Any], trials: list[dict], best: dict | None) -> TuneJob:
    """A job that is done at once: every config of it is tuned already."""
    job = TuneJob(**{**values, "trials_planned": len(trials)}, state="done", active_key=None, trials=trials,
                  trials_done=len(trials), deliveries=0, created_at=now(), finished_at=now(),
                  best_config=best and best["config"], best_time_ms=best and best["time_ms"])  # fmt: skip
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, job_id: int) -> TuneJob | None:
    return session.get(TuneJob, job_id)


def list_jobs(session: Session, *, state: str | None, kernel: str | None, limit: int = LIST_LIMIT,
              offset: int = 0) -> list[TuneJob]:  # fmt: skip
    q = select(TuneJob).order_by(TuneJob.id.desc()).limit(limit).offset(offset)
    if state is not None:
        q = q.where(TuneJob.state == state)
    if kernel is not None:
        q = q.where(TuneJob.kernel_key == kernel)
    return list(session.scalars(q).all())


def cancel(session: Session, job_id: int) -> TuneJob | None:
    job = session.get(TuneJob, job_id, with_for_update=True)
    if job is not None and job.state in ACTIVE:
        job.state, job.active_key, job.finished_at = "cancelled", None, now()
        job.error = job.error or "cancelled by request"
    return job


@dataclass(frozen=True)
class Claim:
    decision: str  # "run" | "held" (another worker's lease is live) | "finished" | "gone" | "failed"
    deliveries: int = 0


def claim(session: Session, job_id: int, *, worker: str, lease_s: float, max_deliveries: int) -> Claim:
    """Take the job for `worker` unless it is finished or a worker's lease on it is live; each take
    counts a delivery, and the take past `max_deliveries` fails the job instead (it keeps killing its
    worker: an endless redelivery otherwise)."""
    job = session.get(TuneJob, job_id, with_for_update=True)
    if job is None:
        return Claim("gone")
    if job.state in FINISHED:
        return Claim("finished", job.deliveries)
    beat = _aware(job.heartbeat_at)
    if job.state == "running" and beat is not None and now() - beat < timedelta(seconds=lease_s):
        return Claim("held", job.deliveries)
    if job.deliveries >= max_deliveries:
        _end(job, "failed", f"the job was taken up {job.deliveries} times and never finished: each time its "
                            f"worker died or lost its lease (last: {job.worker}); it is not retried")  # fmt: skip
        return Claim("failed", job.deliveries)
    job.deliveries += 1
    job.state, job.worker, job.heartbeat_at = "running", worker, now()
    job.started_at = job.started_at or now()
    job.trials, job.trials_done = [], 0  # a new take starts its record afresh (earlier trials are kept as rows)
    return Claim("run", job.deliveries)


def _end(job: TuneJob, state: str, error: str | None = None) -> None:
    job.state, job.active_key, job.finished_at = state, None, now()
    if error is not None:
        job.error = error[:10000]


def heartbeat(session: Session, job_id: int, *, worker: str) -> str:
    """Renew the lease; the job's state for this worker: its state, or "lost" when another holds it."""
    job = session.get(TuneJob, job_id)
    if job is None:
        return "gone"
    if job.worker != worker:
        return "lost"
    if job.state == "running":
        job.heartbeat_at = now()
    return job.state


def set_planned(session: Session, job_id: int, *, worker: str, planned: int) -> None:
    session.execute(update(TuneJob).where(TuneJob.id == job_id, TuneJob.worker == worker, TuneJob.state == "running")
                    .values(trials_planned=planned, heartbeat_at=now()))  # fmt: skip


def add_trial(session: Session, job_id: int, *, worker: str, trial: dict) -> bool:
    job = session.get(TuneJob, job_id, with_for_update=True)
    if job is None or job.worker != worker or job.state != "running":
        return False
    job.trials = [*job.trials, trial]
    job.trials_done = len(job.trials)
    job.heartbeat_at = now()
    return True


def finish(session: Session, job_id: int, *, worker: str, state: str, error: str | None = None,
           best: dict | None = None) -> bool:  # fmt: skip
    job = session.get(TuneJob, job_id, with_for_update=True)
    if job is None or job.worker != worker or job.state != "running":
        return False
    _end(job, state, error)
    if best is not None:
        job.best_config, job.best_time_ms = best["config"], best["time_ms"]
    return True


def orphaned(session: Session, *, lease_s: float) -> list[tuple[int, str]]:
    """Running jobs whose worker has not renewed its lease in lease_s: (id, target)."""
    cutoff = now() - timedelta(seconds=lease_s)
    q = select(TuneJob.id, TuneJob.target).where(TuneJob.state == "running", TuneJob.heartbeat_at < cutoff)
    return [(i, t) for i, t in session.execute(q).all()]


def active(session: Session) -> list[tuple[int, str]]:
    return [(i, t) for i, t in session.execute(select(TuneJob.id, TuneJob.target).where(TuneJob.state.in_(ACTIVE))).all()]


# trials and the best config


def stored_trials(session: Session, *, tkey: str, gpu_model: str | None = None, any_model: bool = False) -> list[Trial]:
    q = select(Trial).where(Trial.tuning_key == tkey)
    if not any_model:
        q = q.where(Trial.gpu_model.is_(None) if gpu_model is None else Trial.gpu_model == gpu_model)
    return list(session.scalars(q).all())


def record(session: Session, *, tkey: str, kernel_key: str, key: str, dtypes: str, target: str,
           trials: list[dict], gpu_model: str | None) -> dict | None:  # fmt: skip
    """Write measured trials (one row per config: a re-run replaces its row, and a row from another GPU
    model is replaced outright, never compared) and make the tuning result the best "ok" trial of this
    GPU model. Idempotent: writing the same trials twice leaves the same rows. The best, or None."""
    if not trials:
        return None
    if session.get(TuningResult, tkey) is None:
        first = min(trials, key=lambda t: t["time_ms"])
        crud.replace_result(session, tkey=tkey, kernel_key=kernel_key, key=key, dtypes=dtypes, target=target, best=first)
    for t in trials:
        stmt = crud._insert(session, Trial).values(tuning_key=tkey, created_at=now(), **t)
        cols = ("config", "time_ms", "artifact_key", "gpu_model", "driver_version", "sm_clock_mhz", "mem_clock_mhz",
                "status", "lo_ms", "hi_ms", "reps", "created_at")  # fmt: skip
        session.execute(stmt.on_conflict_do_update(index_elements=["tuning_key", "config_hash"],
                                                   set_={c: stmt.excluded[c] for c in cols}))
    rows = [r for r in stored_trials(session, tkey=tkey, gpu_model=gpu_model) if r.status == "ok"]
    if not rows:
        return None
    best = min(rows, key=lambda r: r.time_ms)
    value = {"config": best.config, "time_ms": best.time_ms, "artifact_key": best.artifact_key}
    crud.replace_result(session, tkey=tkey, kernel_key=kernel_key, key=key, dtypes=dtypes, target=target, best=value)
    return value


def count_jobs(session: Session, *, state: str) -> int:
    return session.scalar(select(func.count()).select_from(TuneJob).where(TuneJob.state == state)) or 0
