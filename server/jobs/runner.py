"""Running one tune job on a worker (a Celery worker, or the in-process executor's thread).

The job row is the truth, the message only names it: a take is a claim with a lease (worker id and a
heartbeat renewed by a thread), so a second delivery of a job whose lease is live does nothing, and a
job whose worker died is taken up again once its lease runs out. Trials, artifacts and the best config
are written in one transaction at the end with upserts: a job run twice leaves one result.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from tilec.compiler.artifact import Artifact, artifact_key, compiler_version
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import Budgets
from tilec.compiler.tune.keys import TuningKey
from tilec.compiler.tune.launch import LaunchBudgets, LaunchDescriptionError
from tilec.compiler.tune.space import config_hash
from tilec.compiler.tune.tuner import (
    BRIEF,
    FULL,
    CompileLimitError,
    Outcome,
    Trial,
    limited_compiler,
    run_limited,
)
from tilec.runtime.sandbox import Limits, clean
from tilec.runtime.tune import Prepared, TuneJobSpec, TuneSpec, prepare_job, run_tune, source_kernel_key

from ..db import crud
from ..db.artifacts import artifact_values, store_build
from ..db.engine import make_engine, session_factories
from ..db.models import TuneJob
from ..settings import Settings
from ..signing import SigningKey, load_signing_key
from . import retune, store

log = logging.getLogger("tilec.jobs")
# a stored trial of the same GPU model, as a tune that does not time its config again records it
EARLIER = {"ok": ("cached", "timed by an earlier tune"), "stopped": ("stopped", "stopped by an earlier tune")}
T = TypeVar("T")


def worker_id(label: str = "") -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{label or uuid.uuid4().hex[:8]}"


@dataclass
class WorkerContext:
    """What a worker needs to run jobs: settings, a write session factory, its id."""

    settings: Settings
    rw: sessionmaker[Session]
    worker: str = field(default_factory=worker_id)
    budgets: dict[str, int] = field(default_factory=dict)
    signer: SigningKey | None = None
    metrics: Any = None  # the API's Metrics when jobs run in its process (a Celery worker serves none)
    executor: Any = None  # where new jobs go (the in-process executor); None: the reaper sends them

    @classmethod
    def open(cls, settings: Settings, *, label: str = "") -> WorkerContext:
        engine = make_engine(settings.resolved_database_url, connect_timeout_s=settings.db_connect_timeout_s,
                             pool_size=2)  # fmt: skip
        rw, _ = session_factories(engine)
        return cls(settings=settings, rw=rw, worker=worker_id(label))

    def write(self, fn: Callable[[Session], T]) -> T:
        with self.rw() as session, session.begin():
            return fn(session)

    def signing_key(self) -> SigningKey:
        """The service's key, which signs each build this worker stores (TILEC_SIGNING_KEY, or the data dir's:
        a worker on another machine needs the API's key, or pinned clients refuse its builds)."""
        if self.signer is None:
            self.signer = load_signing_key(self.settings)
        return self.signer


class Heartbeat(threading.Thread):
    """Renews the lease every heartbeat_s; notices a cancel or a lost lease."""

    def __init__(self, ctx: WorkerContext, job_id: int) -> None:
        super().__init__(daemon=True, name=f"tilec-heartbeat-{job_id}")
        self.ctx, self.job_id = ctx, job_id
        self.stopping = threading.Event()
        self.state = "running"

    def run(self) -> None:
        while not self.stopping.wait(self.ctx.settings.heartbeat_s):
            try:
                self.state = self.ctx.write(lambda s: store.heartbeat(s, self.job_id, worker=self.ctx.worker))
            except Exception:  # noqa: BLE001 - the database is away: the lease may lapse, the job is retried
                log.warning("job %s: heartbeat failed", self.job_id, exc_info=True)

    @property
    def stop_now(self) -> bool:
        return self.state != "running"

    def stop(self) -> None:
        self.stopping.set()


def run_job(ctx: WorkerContext, job_id: int) -> str:
    """Run the job if it is this worker's to run; what happened: done, failed, cancelled, lost, or the
    claim's decision (held, finished, gone)."""
    s = ctx.settings
    claim = ctx.write(lambda ses: store.claim(ses, job_id, worker=ctx.worker, lease_s=s.lease_s,
                                              max_deliveries=s.max_deliveries))  # fmt: skip
    if claim.decision != "run":
        log.info("job %s: %s (delivery %s)", job_id, claim.decision, claim.deliveries)
        return claim.decision
    beat = Heartbeat(ctx, job_id)
    beat.start()
    try:
        return _run(ctx, job_id, beat)
    except OperationalError:  # the database went away mid-take: the caller sends the job round again
        beat.stop()
        give_back(ctx, job_id)
        raise
    finally:
        beat.stop()


def _owner(job: TuneJob, st: Settings) -> tuple | None:
    """Whose jobs may share a kept GPU bench child (runtime/standby.py): one submit token's; on a service without
    auth, where every caller already reads and writes everything, every job's; none for a job without a token
    on a service with auth (none such is submitted)."""
    if job.submitted_by is not None:
        return ("token", job.submitted_by)
    return None if st.auth_enabled else ("open",)


def give_back(ctx: WorkerContext, job_id: int, wait_s: float = store.RETRY_S) -> bool:
    """After the database went away under a take: once it answers again (within wait_s) the job is queued again and
    the take not counted. max_deliveries counts takes that killed their worker or lost their lease; an outage is
    neither, and three restarts of PostgreSQL must not fail a job as "taken up 3 times". False when it stayed
    away: the take stays counted (the lease lapses and the reaper sends the job again)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            released = ctx.write(lambda s: store.release(s, job_id, worker=ctx.worker))
            log.info("job %s: given back after a database outage (%s)", job_id, "uncounted" if released else "taken already")
            return released
        except OperationalError:
            if time.monotonic() >= deadline:
                log.warning("job %s: the database is still away; its take stays counted", job_id)
                return False
            time.sleep(0.5)


def _run(ctx: WorkerContext, job_id: int, beat: Heartbeat) -> str:
    started = time.monotonic()
    job, source, kind = ctx.write(lambda s: _load(s, job_id))
    st = ctx.settings
    try:  # the job as submit prepared it: its tuning key is not made again here
        stored = TuneJobSpec.model_validate(job.request)
        key = TuningKey(job.kernel_key, job.key_values or "", job.dtypes or "", job.target)
        spec = _spec(ctx, job, stored, source, kind)
        prepared = prepare_job(spec, key, stored.params)
        # never build one kernel's artifacts under another's key: the source is read (in a limited child,
        # never here) into the kernel key the row names
        read_key = _read_key(source, stored.name, spec.budgets, kind, st)
    except ValidationError as exc:
        return _fail(ctx, job_id, f"the stored job spec is not one this worker runs: {exc.errors()[0]['msg']}")
    except CompileLimitError as exc:
        return _fail(ctx, job_id, f"reading the kernel {exc}")
    except (CompileError, LaunchDescriptionError, ValueError) as exc:
        return _fail(ctx, job_id, f"{type(exc).__name__}: {exc}")
    if read_key != job.kernel_key:
        return _fail(ctx, job_id, f"the job's source reads as kernel {read_key}, not {job.kernel_key}")

    def known(device: dict) -> dict[str, Trial]:
        if stored.retune:  # a retune times every config again (a new compiler, a new GPU model, a request)
            return {}
        rows = ctx.write(lambda s: store.stored_trials(s, tkey=job.tuning_key, gpu_model=device.get("gpu_model")))
        return {r.config_hash: Trial(r.config, *EARLIER[r.status], r.time_ms, r.lo_ms, r.hi_ms, r.reps)
                for r in rows if r.status in EARLIER}  # fmt: skip

    def on_plan(n: int) -> None:
        ctx.write(lambda s: store.set_planned(s, job_id, worker=ctx.worker, planned=n))

    def on_trial(t: Trial) -> None:
        if not ctx.write(lambda s: store.add_trial(s, job_id, worker=ctx.worker, trial=t.public())):
            beat.state = ctx.write(lambda s: store.heartbeat(s, job_id, worker=ctx.worker))  # cancelled, or lost

    # every config compiles under the compile limits and stops on a cancel; the bench child is sandboxed
    compiler = limited_compiler(st.tune_compile_workers or None, timeout_s=st.compile_timeout_s,
                                memory_mb=st.compile_memory_mb, cancelled=lambda: beat.stop_now)  # fmt: skip
    limits = bench_limits(st)
    tuning = time.monotonic()
    try:
        outcome, device = run_tune(prepared, known=known, on_plan=on_plan, on_trial=on_trial,
                                   cancelled=lambda: beat.stop_now, compiler=compiler,
                                   bench_timeout_s=st.bench_timeout_s, bench_limits=limits,
                                   bench_owner=_owner(job, st))  # fmt: skip
    except OperationalError:  # the database went away mid-tune: not the job's fault; it is taken up again
        raise
    except Exception as exc:  # noqa: BLE001 - the tune's own failure (not the worker's): fail once, with it
        log.exception("job %s failed", job_id)
        return _fail(ctx, job_id, clean(f"{type(exc).__name__}: {exc}", 2000))
    if beat.state not in ("running", "cancelled"):  # another worker holds it, or the reaper took it back (queued)
        return "lost"
    if outcome.cancelled or beat.state == "cancelled":
        return "cancelled"
    finishing = time.monotonic()
    result = _finish(ctx, job, prepared, outcome, device)
    # where a job's time goes, for a cluster's operator (the GPU drill's per-job times): reading and checking the
    # kernel, the tune (compiles and timing, and the tune's own phases), storing the result
    phases = ", ".join(f"{k} {v:.2f}" for k, v in outcome.phases.items())
    log.info("job %s: %s in %.2f s (prepare %.2f s, tune %.2f s [%s], store %.2f s)", job_id, result,
             time.monotonic() - started, tuning - started, finishing - tuning, phases, time.monotonic() - finishing)  # fmt: skip
    return result


_READ_KEYS: OrderedDict[tuple, str] = OrderedDict()  # (source sha256, name, budgets, kind) -> kernel key, LRU
_READ_KEYS_MAX = 256
_READ_KEYS_LOCK = threading.Lock()


def _read_key(source: str, name: str | None, budgets: Any, kind: str, st: Settings) -> str:
    """The kernel key `source` reads as, read in a limited child; a worker tunes one kernel for many keys, and the
    read is a function of these inputs alone, so a read already made (and passed) is not made again."""
    memo = (hashlib.sha256(source.encode()).hexdigest(), name, repr(budgets), kind)
    with _READ_KEYS_LOCK:
        if memo in _READ_KEYS:
            _READ_KEYS.move_to_end(memo)
            return _READ_KEYS[memo]
    key = run_limited(source_kernel_key, (source, name, budgets, kind), timeout_s=st.compile_timeout_s,
                      memory_mb=st.compile_memory_mb)  # fmt: skip
    with _READ_KEYS_LOCK:
        _READ_KEYS[memo] = key
        while len(_READ_KEYS) > _READ_KEYS_MAX:
            _READ_KEYS.popitem(last=False)
    return key


def _load(session: Session, job_id: int) -> tuple[TuneJob, str, str]:
    """The job, the source it compiles and its kind ("source", or "bundle": its JSON text): the one it was sent
    with (a job sent by kernel key: the kernel row's). _run checks that the source is still read into the job's
    kernel key."""
    job = session.get_one(TuneJob, job_id)
    source, kind = (job.request or {}).get("source"), (job.request or {}).get("kind") or "source"
    if not isinstance(source, str):
        kernel = crud.get_kernel(session, key=job.kernel_key)
        if kernel is None or kernel.source is None:
            raise LookupError(f"job {job_id}: kernel {job.kernel_key} has no source")
        source, kind = kernel.source, kernel.kind
    session.expunge(job)
    return job, source, kind


def _spec(ctx: WorkerContext, job: TuneJob, r: TuneJobSpec, source: str, kind: str = "source") -> TuneSpec:
    s = ctx.settings
    return TuneSpec(
        source=source,
        kind=kind,
        name=r.name,
        signature=r.signature,
        launch=r.launch,
        target=job.target,
        constexprs=r.constexprs,
        configs=r.configs,
        strategy=job.strategy,
        budget=r.budget,
        seed=r.seed,
        budgets=Budgets(**r.budgets),
        launch_budgets=launch_budgets(s),
        full=replace(FULL, max_seconds=s.tune_full_seconds),
        brief=replace(BRIEF, max_seconds=s.tune_brief_seconds),
        graph=r.cuda_graph,
    )


def bench_limits(s: Settings) -> Limits:
    """What a tune's bench child may use (the worker's bench children started ahead are made with these)."""
    return Limits(memory_mb=s.bench_memory_mb, cpu_s=s.bench_cpu_s, life_cpu_s=s.bench_life_cpu_s)


def launch_budgets(s: Settings) -> LaunchBudgets:
    return LaunchBudgets(max_tensor_bytes=s.max_tensor_bytes, max_total_bytes=s.max_launch_bytes,
                         max_programs=s.max_grid_programs)  # fmt: skip


def _fail(ctx: WorkerContext, job_id: int, error: str) -> str:
    ok = ctx.write(lambda s: store.finish(s, job_id, worker=ctx.worker, state="failed", error=error))
    return "failed" if ok else "lost"


def _finish(ctx: WorkerContext, job: TuneJob, prepared: Prepared, outcome: Outcome, device: dict) -> str:
    measured = [t for t in outcome.trials if t.status in ("ok", "stopped") and t.time_ms is not None]
    if outcome.best is None:
        reasons = "; ".join(f"{t.config['kwargs']}: {t.reason}" for t in outcome.trials if t.reason)[:4000]
        return _fail(ctx, job.id, f"no config could be timed ({reasons})")
    spec = {"signature": prepared.base.signature, "constexprs": prepared.base.constexprs,
            "hints": prepared.base.hints, "emit": "cubin" if job.target.startswith("cuda") else "object"}  # fmt: skip
    codegen = prepared.base.options.cuda
    signer = ctx.signing_key()
    artifacts = [_artifact_values(job, spec, t.config, t.artifact, codegen, signer) for t in measured
                 if t.status == "ok" and t.artifact]  # fmt: skip
    links = {config_hash(a["config"]): a["key"] for a in artifacts}
    rows = [_trial_row(t, device, links.get(config_hash(t.config))) for t in measured]

    def write(session: Session) -> str:
        for values in artifacts:
            if store_build(session, values=values, signer=signer) == "conflict" and ctx.metrics is not None:
                ctx.metrics.artifact_conflicts.inc()
        best = store.record(session, tkey=job.tuning_key, kernel_key=job.kernel_key, key=job.key_values,
                            dtypes=job.dtypes, target=job.target, trials=rows, gpu_model=device.get("gpu_model"))  # fmt: skip
        if best is None:  # every config was cached from trials of this GPU model: the result stands
            found = crud.lookup(session.connection(), tkey=job.tuning_key)
            best = found and {"config": found[0].best_config, "time_ms": found[0].best_time_ms}
        ok = store.finish(session, job.id, worker=ctx.worker, state="done", best=best)
        fresh = retune.note_gpu_model(session, gpu_model=device.get("gpu_model"), target=job.target,
                                      enabled=ctx.settings.retune_on_change)  # fmt: skip
        return ("done" if ok else "lost"), fresh

    state, fresh = ctx.write(write)
    if fresh and ctx.executor is not None:
        retune.send(ctx.executor, fresh)
    return state


def _artifact_values(job: TuneJob, spec: dict, config: dict, art: Artifact, codegen: Any,
                     signer: SigningKey) -> dict[str, Any]:  # fmt: skip
    key = artifact_key(job.kernel_key, spec, config, job.target, compiler_version(), codegen=codegen)
    return artifact_values(kernel_key=job.kernel_key, key=key, spec=spec, config=config, target=job.target,
                           art=asdict(art), signer=signer)  # fmt: skip


def _trial_row(t: Trial, device: dict, artifact: str | None) -> dict[str, Any]:
    return {
        "config_hash": config_hash(t.config), "config": t.config, "time_ms": t.time_ms, "artifact_key": artifact,
        "gpu_model": device.get("gpu_model"), "driver_version": device.get("driver_version"),
        "sm_clock_mhz": device.get("sm_clock_mhz"), "mem_clock_mhz": device.get("mem_clock_mhz"),
        "status": t.status, "lo_ms": t.lo_ms, "hi_ms": t.hi_ms, "reps": t.reps,
    }  # fmt: skip
