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

from tilec.compiler.artifact import compiler_version

from ..db import crud, decisions
from ..db.models import Trial, TuneJob, TuningResult

ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled")
LIST_LIMIT = 200
RETRY_S = 5.0  # a job that could not be claimed (the database is down) is handed out again after this


def now() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def create_job(session: Session, *, values: dict[str, Any]) -> tuple[TuneJob, bool]:
    """A new queued job, or the one already queued or running for the same tuning key (attached)."""
    stmt = crud._insert(session, TuneJob).values(
        **values, state="queued", active_key=values["tuning_key"], trials=[], trials_done=0, deliveries=0,
        created_at=now(), sent_at=now(), sends=1,
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
    beat = aware(job.heartbeat_at)
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


def release(session: Session, job_id: int, *, worker: str) -> bool:
    """Give back a take that the database interrupted: the job queued again and the take not counted (the next
    claim counts its own). Only while `worker` still holds it (running, or queued by the reaper meanwhile); False
    when another worker took it or it finished."""
    done = session.execute(update(TuneJob).where(TuneJob.id == job_id, TuneJob.worker == worker,
                                                 TuneJob.state.in_(ACTIVE), TuneJob.deliveries > 0)
                           .values(state="queued", deliveries=TuneJob.deliveries - 1))  # fmt: skip
    return done.rowcount == 1


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


def resend_pause(sends: int, *, after_s: float, max_s: float) -> float:
    """How long a queued job waits for a worker after its `sends`-th message before it is sent again: after_s,
    doubled for each message sent since the first, at most max_s."""
    return min(max_s, after_s * 2.0 ** max(0, sends - 1))


@dataclass(frozen=True)
class Due:
    """A job whose message is presumed lost, as due_for_resend read it."""

    id: int
    target: str
    state: str  # "running" (its lease lapsed) or "queued"
    sent_at: datetime | None
    sends: int


def due_for_resend(session: Session, *, lease_s: float, after_s: float, max_s: float, queued: bool = True) -> list[Due]:
    """The jobs whose message is presumed lost: a running job whose worker stopped renewing its lease in lease_s
    (killed), and, unless `queued` is false (an executor that loses no message), a queued job that no worker took
    within resend_pause of its last message."""
    cutoff = now() - timedelta(seconds=lease_s)
    due = (TuneJob.state == "running") & (TuneJob.heartbeat_at < cutoff)
    if queued:
        sent_before = now() - timedelta(seconds=after_s)
        due |= (TuneJob.state == "queued") & ((TuneJob.sent_at < sent_before) | TuneJob.sent_at.is_(None))
    q = select(TuneJob.id, TuneJob.target, TuneJob.state, TuneJob.sent_at, TuneJob.sends).where(due).order_by(TuneJob.id)
    found = []
    for job_id, target, state, sent, sends in session.execute(q).all():
        pause = timedelta(seconds=resend_pause(sends, after_s=after_s, max_s=max_s))
        if state == "queued" and sent is not None and now() - aware(sent) < pause:  # type: ignore[operator]
            continue
        found.append(Due(job_id, target, state, aware(sent), sends))
    return found


def _unchanged(due: Due, *, lease_s: float) -> Any:
    """The row is as due_for_resend read it: nobody took or sent it since (and a running one's worker did not
    beat): the compare of a compare-and-set, so two API processes never both send it."""
    same = (TuneJob.id == due.id) & (TuneJob.state == due.state) & (TuneJob.sends == due.sends)
    if due.state == "running":
        same &= TuneJob.heartbeat_at < now() - timedelta(seconds=lease_s)
    return same


def mark_sent(session: Session, due: Due, *, lease_s: float) -> bool:
    """Mark the job sent now (sends + 1), back to queued if it was running (its worker, should it still be alive,
    sees that at its next heartbeat and stops), before its message goes out; False when it changed meanwhile."""
    done = session.execute(update(TuneJob).where(_unchanged(due, lease_s=lease_s))
                           .values(state="queued", sent_at=now(), sends=due.sends + 1))  # fmt: skip
    return done.rowcount == 1


def mark_waiting(session: Session, due: Due) -> None:
    """The broker still holds a message for this queued job (the queue is long, not lost): look again after
    another pause, without sending one more."""
    session.execute(update(TuneJob).where(_unchanged(due, lease_s=0)).values(sent_at=now()))


def undo_send(session: Session, due: Due) -> None:
    """The broker refused the message mark_sent marked: the job is due again at the next round."""
    session.execute(update(TuneJob).where(TuneJob.id == due.id, TuneJob.state == "queued", TuneJob.sends == due.sends + 1)
                    .values(sent_at=due.sent_at, sends=due.sends))  # fmt: skip


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
    rows = [{"tuning_key": tkey, "created_at": now(), **t} for t in crud.fastest_per_config(trials)]
    stmt = crud._insert(session, Trial)
    cols = ("config", "time_ms", "artifact_key", "gpu_model", "driver_version", "sm_clock_mhz", "mem_clock_mhz",
            "status", "lo_ms", "hi_ms", "reps", "created_at")  # fmt: skip
    session.execute(stmt.on_conflict_do_update(index_elements=["tuning_key", "config_hash"],
                                               set_={c: stmt.excluded[c] for c in cols}), rows)  # one batch
    rows = [r for r in stored_trials(session, tkey=tkey, gpu_model=gpu_model) if r.status == "ok"]
    if not rows:
        return None
    best, decision = decisions.decide(rows)  # a winner only where its interval is clear of the runner-up's
    value = {"config": best.config, "time_ms": best.time_ms, "artifact_key": best.artifact_key}
    decisions.add_history(session, tkey=tkey, gpu_model=gpu_model, compiler_version=compiler_version(), best=value)
    if decisions.get_pin(session, tkey=tkey) is not None:  # a pinned config stands over any measured one
        return value
    crud.replace_result(session, tkey=tkey, kernel_key=kernel_key, key=key, dtypes=dtypes, target=target, best=value)
    decisions.set_decision(session, tkey=tkey, decision=decision)
    return value


def count_jobs(session: Session, *, state: str) -> int:
    return session.scalar(select(func.count()).select_from(TuneJob).where(TuneJob.state == state)) or 0
