"""The API side of tune jobs: check a request (kernel, launch description, configs, target), fix its
tuning key, and create the job — done at once when every config is tuned already, attached to the job
already running for the key, or queued and handed to the executor (a 503 when the broker is down).
The kernel is read in a compile child (service.register_kernel); only the launch description's small
expressions are read here, by compiler.tune.launch's evaluator.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from tilec.compiler.tune import space
from tilec.compiler.tune.keys import tuning_key
from tilec.compiler.tune.launch import (
    GridTooLarge,
    LaunchDescription,
    LaunchDescriptionError,
    ResolvedLaunch,
    resolve,
)
from tilec.runtime.bench import _grid_env
from tilec.runtime.tune import TuneJobSpec
from tilec.wire import TuneJobCreate, TuneJobPublic, TuneTrialPublic

from .. import errors as E
from ..db import browse
from ..db.decisions import decide
from ..db.models import Kernel, TuneJob
from ..service import check_input, check_target, read_kernel, register_kernel
from ..state import AppState
from . import store
from .executor import BrokerUnavailable
from .runner import EARLIER, launch_budgets

JOB_RETRY_S = "30"  # a 429 for too many jobs: a tune takes a while


def job_public(job: TuneJob, *, trials: bool = True, attached: bool = False) -> TuneJobPublic:
    return TuneJobPublic(
        id=job.id, state=job.state, kernel_key=job.kernel_key, tuning_key=job.tuning_key,  # type: ignore[arg-type]
        key=job.key_values, dtypes=job.dtypes, target=job.target, strategy=job.strategy,  # type: ignore[arg-type]
        trials_done=job.trials_done, trials_planned=job.trials_planned, worker=job.worker,
        deliveries=job.deliveries, error=job.error, best_config=job.best_config, best_time_ms=job.best_time_ms,
        created_at=job.created_at, started_at=job.started_at, finished_at=job.finished_at, attached=attached,
        trials=[TuneTrialPublic.model_validate(t) for t in job.trials] if trials else [],
    )  # fmt: skip


async def _kernel(state: AppState, body: TuneJobCreate, token_id: int | None) -> tuple[Kernel, str | None, str]:
    """The kernel a job tunes, and the text it was sent as with its kind (None for a kernel sent by key: the
    kernel row's text then)."""
    given = [k for k in ("kernel_key", "source", "ir", "bundle") if getattr(body, k) is not None]
    if len(given) != 1:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_ONE_INPUT)
    if body.ir is not None:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_TUNE_NEEDS_SOURCE)
    if body.kernel_key is not None:
        kernel = await state.read(lambda s: read_kernel(s, state.metrics, key=body.kernel_key or ""))
        if kernel is None:
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=body.kernel_key), missing="kernel")
        if kernel.kind not in ("source", "bundle"):
            raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_TUNE_NEEDS_SOURCE)
        return kernel, None, kernel.kind
    kind, text = check_input(body, state)  # source, or a bundle as its JSON text
    kernel, _ = await register_kernel(state, kind=kind, text=text, name=body.name, signature=None, token_id=token_id)
    return kernel, text, kind


def _configs(body: TuneJobCreate, info: dict[str, Any], limit: int) -> list[dict]:
    try:
        if body.configs is not None and body.config_grid is not None:
            raise ValueError("give configs or config_grid, not both")
        if body.configs is not None:
            configs = space.from_list(c.model_dump() for c in body.configs)
        elif body.config_grid is not None:
            g = body.config_grid
            configs = space.from_grid(g.kwargs, g.num_warps, g.num_stages, limit=limit)
        else:
            configs = space.from_list((info.get("autotune") or {}).get("configs") or [])
    except ValueError as exc:
        raise E.ApiError(422, E.TOO_MANY_CONFIGS if "limit" in str(exc) else E.INVALID_REQUEST, str(exc)) from None
    if len(configs) > limit:
        raise E.ApiError(422, E.TOO_MANY_CONFIGS, E.MSG_TOO_MANY_CONFIGS.format(n=len(configs), limit=limit))
    return configs or [space.normalise({})]


def _check_grid(resolved: ResolvedLaunch, configs: list[dict]) -> None:
    """Refuse a grid that no config can compute (a name that is neither a scalar nor a config parameter,
    say): resolve checks only its syntax, and such a job would fail on the worker, every trial alike. And
    refuse a grid that any config computes to more programs than a launch may have (2^31-1 programs once
    burnt 60 s per config): a config that asks for one names itself."""
    first: LaunchDescriptionError | None = None
    computed = False
    for config in configs:
        try:
            resolved.grid(_grid_env(config))
            computed = True
        except GridTooLarge as exc:
            raise E.ApiError(
                422, E.BAD_LAUNCH, f"config {config['kwargs']}: {exc}", field=exc.field
            ) from None
        except LaunchDescriptionError as exc:
            first = first or exc
    if not computed and first is not None:
        raise E.ApiError(422, E.BAD_LAUNCH, str(first), field=first.field)


def _check_target(state: AppState, target: str) -> None:
    check_target(target)
    runs = state.executor.targets()
    if runs is not None and target not in runs:
        here = ", ".join(sorted(runs))
        raise E.ApiError(422, E.NO_WORKER, E.MSG_NO_WORKER.format(target=target, here=here))


async def submit(state: AppState, body: TuneJobCreate, token_id: int | None) -> tuple[TuneJobPublic, int]:
    """The job for this request and the status to answer with (202, or 200 when it is done at once)."""
    _check_target(state, body.target)
    try:
        launch = LaunchDescription.model_validate(body.launch)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise E.ApiError(422, E.BAD_LAUNCH, f"launch.{where}: {first.get('msg')}") from None
    kernel, sent, kind = await _kernel(state, body, token_id)
    info = kernel.info or {}
    # an Inductor module's decorator types its runtime arguments: the request need not (names it overrides)
    signature = {**((info.get("inductor") or {}).get("signature") or {}), **body.signature}
    params = info.get("params") or []
    runtime = [p["name"] for p in params if not p.get("constexpr") and p["name"] not in body.constexprs]
    s = state.settings
    try:
        resolved = resolve(launch, signature, runtime,
                           launch_budgets(s))  # fmt: skip
    except LaunchDescriptionError as exc:
        raise E.ApiError(422, E.BAD_LAUNCH, str(exc), field=exc.field) from None
    configs = _configs(body, info, s.max_configs)
    _check_grid(resolved, configs)
    autotune = info.get("autotune")
    tk = tuning_key(kernel_key=kernel.key, key_names=(autotune.get("key") or []) if autotune is not None else None,
                    value=lambda n: resolved.key_values([n])[n], runtime=runtime, signature=signature,
                    target=body.target, launch_key=lambda: resolved.launch_key_string())  # fmt: skip
    tkey = tk.digest
    # the job compiles the source it was sent (the kernel row's only when sent by key): its own meaning
    spec = TuneJobSpec(source=sent, kind=kind, name=kernel.name, signature=signature, constexprs=body.constexprs,
                       launch=launch, params=runtime, configs=configs, budget=body.budget, seed=body.seed,
                       cuda_graph=body.cuda_graph, budgets=state.budgets())  # fmt: skip
    request = spec.model_dump(mode="json")  # what the worker runs (runner.py: TuneJobSpec.model_validate)
    values = {"kernel_key": kernel.key, "tuning_key": tkey, "key_values": tk.key, "dtypes": tk.dtypes,
              "target": body.target, "strategy": body.strategy, "request": request, "trials_planned": len(configs),
              "submitted_by": token_id}  # fmt: skip

    def create(session: Session) -> tuple[TuneJobPublic, bool, bool]:
        done = _tuned_already(session, tkey, configs)
        if done is not None:
            trials, best = done
            return job_public(store.add_finished(session, values=values, trials=trials, best=best)), False, True
        _check_job_limit(session, token_id, tkey, s.max_jobs_per_token)
        job, attached = store.create_job(session, values=values)
        return job_public(job, attached=attached), attached, False

    public, attached, finished = await state.write(create)
    if not attached and not finished:
        try:
            await run_in_threadpool(state.executor.submit, public.id, body.target)
        except BrokerUnavailable as exc:
            await state.write(lambda s: s.delete(s.get_one(TuneJob, public.id)))
            raise E.ApiError(503, E.BROKER_UNAVAILABLE, E.MSG_BROKER_UNAVAILABLE.format(reason=str(exc)[:300]),
                             headers={"Retry-After": "5"}) from None  # fmt: skip
    if not finished and public.state == "queued":
        public.warning = await _no_worker_warning(state, body.target)
    return public, (200 if finished else 202)


def _check_job_limit(session: Session, token_id: int | None, tkey: str, limit: int) -> None:
    """429 when the token has `limit` jobs queued or running already and this request would add one (one
    that joins the job already active for its tuning key adds none). Anonymous requests (auth off) and
    a limit of 0 are not counted."""
    if token_id is None or limit <= 0:
        return
    joins = session.scalar(select(TuneJob.id).where(TuneJob.active_key == tkey))
    active = session.scalar(
        select(func.count()).where(TuneJob.submitted_by == token_id, TuneJob.state.in_(store.ACTIVE))
    )
    if joins is None and (active or 0) >= limit:
        detail = E.MSG_TOO_MANY_JOBS.format(limit=limit)
        raise E.ApiError(429, E.TOO_MANY_JOBS, detail, headers={"Retry-After": JOB_RETRY_S})


async def _no_worker_warning(state: AppState, target: str) -> str | None:
    """A job for a target no live worker serves waits queued until one starts: said at submit (a 202 all
    the same, not a 422: a worker may be starting, and the queue keeps the job for it)."""
    live_targets = getattr(state.executor, "live_targets", None)
    if live_targets is None:
        return None
    # a recent answer that names the target will do (no submit waits on a ping while workers serve it); one that
    # does not is asked again before the job is said to wait for nobody
    live = await run_in_threadpool(live_targets, wait=False)
    if live is not None and target not in live:
        live = await run_in_threadpool(live_targets)
    if live is None or target in live:
        return None
    serving = ", ".join(sorted(live)) or "none"
    return (f"no worker for {target} answers now (workers serve: {serving}); the job waits queued until one "
            f"starts: tilec worker --target {target}, on a machine with that GPU")  # fmt: skip


async def unserved_targets(state: AppState, targets: Iterable[str]) -> dict[str, datetime | None]:
    """Of these targets, those no live worker serves now, each with when a worker of it was last seen (a ping
    this process's executor got answered, or a heartbeat a worker wrote on a job of that target; None: never,
    as far as the service knows). Empty when the executor cannot tell (the broker is down). For the web page:
    a job of such a target waits queued with no word otherwise."""
    wanted = set(targets)
    live_targets = getattr(state.executor, "live_targets", None)
    if not wanted or live_targets is None:
        return {}
    live = await run_in_threadpool(live_targets)
    missing = wanted - live if live is not None else set()
    if not missing:
        return {}
    beats = await state.query(lambda conn: browse.last_heartbeats(conn, targets=missing))
    last_seen = getattr(state.executor, "last_seen", lambda _target: None)
    out: dict[str, datetime | None] = {}
    for target in sorted(missing):
        seen = [t for t in (store.aware(beats.get(target)), last_seen(target)) if t is not None]
        out[target] = max(seen, default=None)
    return out


def _tuned_already(session: Session, tkey: str, configs: list[dict]) -> tuple[list[dict], dict | None] | None:
    """When one GPU model has a trial of every config for this key (timed in full, or stopped by a
    strategy): those trials (as "cached" or "stopped") and the best of them as the tune decided it (the fastest,
    or where intervals overlap the stable rule's pick: db/decisions.py). Trials of different GPU
    models are never mixed: a key tuned on one model and partly on another is tuned again."""
    by_model: dict[str | None, dict[str, Any]] = {}
    for r in store.stored_trials(session, tkey=tkey, any_model=True):
        by_model.setdefault(r.gpu_model, {})[r.config_hash] = r
    hashes = [space.config_hash(c) for c in configs]
    rows = next((m for m in by_model.values() if all(h in m for h in hashes)), None)
    if rows is None:
        return None
    trials = [{"config": rows[h].config, "status": EARLIER[rows[h].status][0], "reason": EARLIER[rows[h].status][1],
               "time_ms": rows[h].time_ms, "lo_ms": rows[h].lo_ms, "hi_ms": rows[h].hi_ms, "reps": rows[h].reps,
               "gpu_model": rows[h].gpu_model, "artifact_id": rows[h].artifact_key} for h in hashes]  # fmt: skip
    timed = [rows[h] for h in hashes if rows[h].status == "ok"]
    if not timed:
        return trials, None
    best, _ = decide(timed)  # the rule the tune that stored them decided by: a tie goes the same way
    return trials, {"config": best.config, "time_ms": best.time_ms}
