"""GET /v1/ui/...: the JSON the /ui pages are filled from, under the API's tokens (read scope; the pages
themselves carry no data). Pages of kernels, tuning results and tune jobs with search and filters; one
kernel, artifact or tuning result in full; an artifact's IR after each pass, as its compile kept it, or
recomputed in the compile pool for a submit token and then kept in the row (a read token starts no compile).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Row
from sqlalchemy.orm import Session

from tilec.wire import ErrorPublic, JobState, Text, TuneTrialPublic

from ... import errors as E
from ...db import browse, crud
from ...db.artifacts import pack_pass_dumps, unpack_pass_dumps
from ...db.models import Kernel
from ...jobs.service import unserved_targets
from ...service import (
    UNREADABLE,
    build_request,
    check_target,
    read_kernel,
    run_task,
    sha256,
    stored_config,
    stored_spec,
)
from ...state import AppState
from ...ui.models import (
    ArtifactDetailPublic,
    ArtifactRowPublic,
    FacetsPublic,
    IrFromPublic,
    JobDetailPublic,
    JobPagePublic,
    JobRowPublic,
    KernelDetailPublic,
    KernelPagePublic,
    KernelRowPublic,
    PassDumpsPublic,
    ResultDetailPublic,
    ResultPagePublic,
    ResultRowPublic,
    TrialRowPublic,
    UntimedPublic,
    WhoamiPublic,
)
from ..deps import OnceEach, StateDep, TokenDep

router = APIRouter(prefix="/ui", tags=["ui"])
NOT_FOUND = {404: {"model": ErrorPublic}}
Key = Annotated[Text, Path(min_length=1, max_length=128)]
UNTIMED = ("failed", "pruned", "stopped")  # a job's outcomes listed with their reason beside the chart
T = TypeVar("T")
RESOURCES = ("registers", "spill_stores", "spill_loads", "shared_bytes", "threads_per_block")


class UiPageQuery(BaseModel):
    """A page of a listing (newest first), with its filters; an unknown query parameter is a 422."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=50, ge=1, le=200, description="rows per page (1..200)")
    offset: int = Field(default=0, ge=0, le=1_000_000, description="rows to skip")
    name: Text | None = Field(default=None, max_length=200, description="part of the kernel's name")
    target: Text | None = Field(default=None, max_length=32, description="cpu or cuda:sm_XX")


class ResultsQuery(UiPageQuery):
    gpu: Text | None = Field(default=None, max_length=200, description="a GPU model a trial ran on")


class JobsQuery(UiPageQuery):
    state: JobState | None = None


def _json(text: Any) -> Any:
    """A JSON column read as text (browse.raw); None when it does not parse."""
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def _dict(text: Any) -> dict[str, Any] | None:
    value = _json(text)
    return value if isinstance(value, dict) else None


def _target(target: str | None) -> str | None:
    if target:
        check_target(target)
    return target or None


def _hidden(state: AppState, table: str, dropped: int) -> int:
    if dropped:
        state.metrics.corrupt_rows.labels(table).inc(dropped)
    return dropped


def _or_none(state: AppState, read: Callable[[Connection], list[str]], conn: Connection) -> list[str]:
    """The filter's choices, or none when a stored value cannot be read back (typing one still works)."""
    try:
        return read(conn)
    except UNREADABLE:
        _hidden(state, "trials", 1)
        return []


def _each(state: AppState, table: str, rows: list[Row], convert: Callable[[Row], T]) -> tuple[list[T], int]:
    """Each row converted; one whose stored values do not convert is left out (and counted)."""
    out: list[T] = []
    for row in rows:
        try:
            out.append(convert(row))
        except UNREADABLE:
            _hidden(state, table, 1)
    return out, len(rows) - len(out)


@router.get("/whoami", response_model=WhoamiPublic)
def whoami(state: StateDep, token: TokenDep) -> WhoamiPublic:
    """Whether the service asks for tokens, and what this one may do (the page shows cancel to submit)."""
    return WhoamiPublic(auth=state.settings.auth_enabled, scopes=sorted(token.scopes), token_id=token.id)


@router.get("/facets", response_model=FacetsPublic)
async def facets(state: StateDep, _token: TokenDep) -> FacetsPublic:
    def read(conn: Connection) -> FacetsPublic:
        return FacetsPublic(
            targets=_or_none(state, browse.targets, conn),
            gpu_models=_or_none(state, browse.all_gpu_models, conn),
        )

    return await state.query(read)


# kernels


def _kernel_row(row: Row, counts: dict[str, dict[str, int]]) -> KernelRowPublic:
    return KernelRowPublic(key=row.key, name=row.name, kind=row.kind, created_at=row.created_at,
                           submitted_by=row.submitted_by, submitter=row.submitter, artifacts=counts.get(row.key, {}))  # fmt: skip


@router.get("/kernels", response_model=KernelPagePublic, dependencies=[OnceEach])
async def kernels(
    state: StateDep, _token: TokenDep, query: Annotated[UiPageQuery, Query()]
) -> KernelPagePublic:
    """A page of kernels, newest first: by part of their name, and/or those built for a target."""
    target = _target(query.target)

    def read(conn: Connection) -> KernelPagePublic:
        rows, dropped = browse.kernels_page(
            conn, name=query.name, target=target, limit=query.limit, offset=query.offset
        )
        page = rows[: query.limit]
        counts = browse.artifact_counts(conn, kernel_keys=[r.key for r in page])
        items, bad = _each(state, "kernels", page, lambda r: _kernel_row(r, counts))
        return KernelPagePublic(items=items, limit=query.limit, offset=query.offset, more=len(rows) > query.limit,
                                hidden=_hidden(state, "kernels", dropped) + bad)  # fmt: skip

    return await state.query(read)


def _artifact_row(
    row: Row, cls: type[ArtifactRowPublic] = ArtifactRowPublic, **extra: Any
) -> ArtifactRowPublic:
    meta = _dict(row.meta) or {}
    resources = {k: meta[k] for k in RESOURCES if isinstance(meta.get(k), int)}
    return cls(id=row.key, kernel_key=row.kernel_key, kernel_name=row.kernel_name, target=row.target, emit=row.emit,
               compiler_version=row.compiler_version, size=row.size, sha256=row.sha256, created_at=row.created_at,
               config=_dict(row.config), **resources, **extra)  # fmt: skip


def _result_row(row: Row, models: dict[str, list[str]], cls: type[ResultRowPublic] = ResultRowPublic,
                **extra: Any) -> ResultRowPublic:  # fmt: skip
    return cls(tuning_key=row.tuning_key, kernel_key=row.kernel_key, kernel_name=row.kernel_name, key=row.key_values,
               dtypes=row.dtypes, target=row.target, best_config=_dict(row.best_config), best_time_ms=row.best_time_ms,
               artifact_id=row.artifact_key, trials=row.trials, gpu_models=models.get(row.tuning_key, []),
               updated_at=row.updated_at, decision=_dict(row.decision), **extra)  # fmt: skip


@router.get("/kernels/{key}", response_model=KernelDetailPublic, responses=NOT_FOUND)
async def kernel(key: Key, state: StateDep, _token: TokenDep) -> KernelDetailPublic:
    """One kernel: its source, its tile IR (when built without a specialisation), its artifacts with their
    resources, and its tuning results."""

    def read(conn: Connection) -> KernelDetailPublic | None:
        try:
            row = browse.kernel_detail(conn, key=key)
        except UNREADABLE:
            _hidden(state, "kernels", 1)
            row = None
        if row is None:
            return None
        arts, dropped_a = browse.kernel_artifacts(conn, key=key)
        results, dropped_r = browse.kernel_results(conn, key=key)
        _hidden(state, "artifacts", dropped_a)
        _hidden(state, "tuning_results", dropped_r)
        models = browse.gpu_models(conn, tuning_keys=[r.tuning_key for r in results[: browse.DETAIL_ROWS]])
        ir, ir_from = (row.ir, None) if row.ir else _ir_of_build(state, conn, key)
        info = _dict(row.info) or {}
        counts: dict[str, int] = {}
        for a in arts:
            counts[a.target] = counts.get(a.target, 0) + 1
        return KernelDetailPublic(
            key=row.key, name=row.name, kind=row.kind, created_at=row.created_at, submitted_by=row.submitted_by,
            submitter=row.submitter, artifacts=counts, source=row.source, ir=ir, ir_from=ir_from,
            params=[p for p in info.get("params") or [] if isinstance(p, dict)],
            autotune=info.get("autotune") if isinstance(info.get("autotune"), dict) else None,
            artifact_rows=_each(state, "artifacts", arts[: browse.DETAIL_ROWS], _artifact_row)[0],
            artifacts_more=len(arts) > browse.DETAIL_ROWS,
            results=_each(state, "tuning_results", results[: browse.DETAIL_ROWS], lambda r: _result_row(r, models))[0],
            results_more=len(results) > browse.DETAIL_ROWS,
        )  # fmt: skip

    found = await state.query(read)
    if found is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=key), missing="kernel")
    return found


def _ir_of_build(state: AppState, conn: Connection, key: str) -> tuple[str | None, IrFromPublic | None]:
    """A source kernel's tile IR as the frontend built it for one of its builds (the first of the per-pass dumps
    its compile kept), and that build; (None, the build) when it kept none; (None, None) with no build."""
    try:
        build = browse.ir_build(conn, key=key)
        if build is None:
            return None, None
        spec = stored_spec(_json(build.spec))
        constexprs = {**(spec.get("constexprs") or {}), **(stored_config(_json(build.config)).get("kwargs") or {})}
        ir_from = IrFromPublic(artifact_id=build.key, target=build.target, signature=spec.get("signature") or {},
                               constexprs=constexprs)  # fmt: skip
        dumps = unpack_pass_dumps(build.pass_dumps)
    except UNREADABLE:
        _hidden(state, "artifacts", 1)
        return None, None
    first = dumps[0] if dumps else None
    return (first["ir"] if first and first.get("name") == "input" else None), ir_from


# artifacts


def _artifact_not_found(artifact_id: str) -> E.ApiError:
    return E.ApiError(404, E.NOT_FOUND, E.MSG_ARTIFACT_NOT_FOUND.format(id=artifact_id), missing="artifact")


@router.get("/artifacts/{artifact_id}", response_model=ArtifactDetailPublic, responses=NOT_FOUND)
async def artifact(artifact_id: Key, state: StateDep, _token: TokenDep) -> ArtifactDetailPublic:
    """An artifact's metadata, spec and resources, and which text forms it holds (read them from
    /v1/artifacts/{id}/{form})."""

    def read(conn: Connection) -> Row | None:
        try:
            return browse.artifact_detail(conn, key=artifact_id)
        except UNREADABLE:
            _hidden(state, "artifacts", 1)
            return None

    row = await state.query(read)
    if row is None:
        raise _artifact_not_found(artifact_id)
    forms = [f for f in ("ptx", "llir", "tir") if getattr(row, "has_" + f)]
    public = _artifact_row(
        row, ArtifactDetailPublic, spec=_dict(row.spec), metadata=_dict(row.meta), forms=forms
    )
    assert isinstance(public, ArtifactDetailPublic)
    return public


@router.get("/artifacts/{artifact_id}/passes", response_model=PassDumpsPublic,
            responses={**NOT_FOUND, 422: {"model": ErrorPublic}})  # fmt: skip
async def passes(artifact_id: Key, state: StateDep, token: TokenDep) -> Response:
    """The tile IR of this build as the frontend makes it and after each pass (and, for cuda, after the
    gpu-tir stage), as its compile kept them. A build stored without them (a tune trial's, an older row) has
    them recomputed from the stored kernel, spec and config in the compile pool (its time and memory limits
    apply) at the request of a token with the submit scope (a read token gets a 403: it starts no compile
    work), and kept in the row, so that is done once per artifact."""
    cached = state.blobs.get((artifact_id, "passes"))
    if cached is not None:
        return Response(cached[0], media_type="application/json")

    def load(session: Session) -> tuple[Kernel | None, dict, dict, str, list[dict] | None] | None:
        try:
            build = _build_of(session, artifact_id)
        except UNREADABLE:
            _hidden(state, "artifacts", 1)
            return None
        if build is None:
            return None
        if build[4] is not None:  # kept by the compile: no kernel to read, nothing to recompute
            return None, *build[1:]
        kernel = read_kernel(session, state.metrics, key=build[0])
        return None if kernel is None else (kernel, *build[1:])

    found = await state.read(load)
    if found is None:
        raise _artifact_not_found(artifact_id)
    kernel, spec, config, target, kept = found
    if kept is not None:
        body = PassDumpsPublic(artifact_id=artifact_id, passes=kept).model_dump_json().encode()
        state.blobs.put((artifact_id, "passes"), body, sha256(body))
        return Response(body, media_type="application/json")
    assert kernel is not None
    if "submit" not in token.scopes:
        what = E.MSG_MUST_RECOMPUTE_PASSES.format(id=artifact_id)
        raise E.ApiError(403, E.FORBIDDEN, E.MSG_COMPILE_NEEDS_SUBMIT.format(what=what))
    text = kernel.source if kernel.kind == "source" else kernel.ir
    request = build_request(state, kind=kernel.kind, text=text or "", name=kernel.name, spec=spec, config=config,
                            target=target)  # fmt: skip
    async with state.compiles.hold(token.id):
        dumps, _ = await state.pool.shared("passes:" + artifact_id, lambda: _recompute(state, artifact_id, request))
    body = PassDumpsPublic(artifact_id=artifact_id, passes=dumps).model_dump_json().encode()
    state.blobs.put((artifact_id, "passes"), body, sha256(body))
    return Response(body, media_type="application/json")


async def _recompute(state: AppState, artifact_id: str, request: Any) -> list[dict]:
    """The per-pass dumps of a stored build, computed in the compile pool and kept in its row."""
    dumps = await run_task(state, "passes", {"request": request})
    blob = pack_pass_dumps(dumps)
    await state.write(lambda s: crud.keep_pass_dumps(s, key=artifact_id, blob=blob))
    return dumps


def _build_of(session: Session, artifact_id: str) -> tuple[str, dict, dict, str, list[dict] | None] | None:
    """(kernel key, spec, config, target, the per-pass dumps its compile kept or None) an artifact was built
    from; UNREADABLE errors when it cannot be read."""
    row = crud.get_artifact_build(session, key=artifact_id)
    if row is None:
        return None
    check_target(row.target)
    dumps = unpack_pass_dumps(row.pass_dumps)
    return row.kernel_key, stored_spec(row.spec), stored_config(row.config), row.target, dumps


# tuning results


@router.get("/tuning-results", response_model=ResultPagePublic, dependencies=[OnceEach])
async def tuning_results(
    state: StateDep, _token: TokenDep, query: Annotated[ResultsQuery, Query()]
) -> ResultPagePublic:
    """A page of tuning results, the most recently improved first: by part of the kernel's name, target,
    and/or a GPU model one of its trials ran on."""
    target = _target(query.target)

    def read(conn: Connection) -> ResultPagePublic:
        rows, dropped = browse.results_page(conn, name=query.name, target=target, gpu=query.gpu, limit=query.limit,
                                            offset=query.offset)  # fmt: skip
        page = rows[: query.limit]
        models = browse.gpu_models(conn, tuning_keys=[r.tuning_key for r in page])
        items, bad = _each(state, "tuning_results", page, lambda r: _result_row(r, models))
        return ResultPagePublic(items=items, limit=query.limit, offset=query.offset, more=len(rows) > query.limit,
                                hidden=_hidden(state, "tuning_results", dropped) + bad)  # fmt: skip

    return await state.query(read)


def _trial_row(row: Row, best: dict | None) -> TrialRowPublic:
    config = _dict(row.config)
    return TrialRowPublic(id=row.id, config=config, status=row.status, time_ms=row.time_ms, lo_ms=row.lo_ms,
                          hi_ms=row.hi_ms, reps=row.reps, best=config is not None and config == best,
                          artifact_id=row.artifact_key, gpu_model=row.gpu_model, driver_version=row.driver_version,
                          sm_clock_mhz=row.sm_clock_mhz, mem_clock_mhz=row.mem_clock_mhz, created_at=row.created_at)  # fmt: skip


def _untimed(job_trials: Any) -> list[UntimedPublic]:
    out = []
    for t in job_trials if isinstance(job_trials, list) else []:
        if not isinstance(t, dict) or t.get("status") not in UNTIMED or not isinstance(t.get("config"), dict):
            continue
        time_ms = t.get("time_ms")
        out.append(UntimedPublic(config=t["config"], status=t["status"], reason=t.get("reason"),
                                 time_ms=time_ms if isinstance(time_ms, int | float) else None))  # fmt: skip
    return out


@router.get("/tuning-results/{tuning_key}", response_model=ResultDetailPublic, responses=NOT_FOUND)
async def tuning_result(tuning_key: Key, state: StateDep, _token: TokenDep) -> ResultDetailPublic:
    """One tuning result: its best config, every trial (time, interval, GPU model, driver, clocks), and
    the configs its newest tune job tried without a full timing (failed, pruned, stopped) with why."""

    def read(conn: Connection) -> ResultDetailPublic | None:
        try:
            row = browse.result_detail(conn, tkey=tuning_key)
        except UNREADABLE:
            _hidden(state, "tuning_results", 1)
            row = None
        if row is None:
            return None
        trials, dropped = browse.result_trials(conn, tkey=tuning_key)
        job = browse.last_job_trials(conn, tkey=tuning_key)
        best = _dict(row.best_config)
        rows, bad = _each(state, "trials", trials, lambda t: _trial_row(t, best))
        public = _result_row(row, browse.gpu_models(conn, tuning_keys=[tuning_key]), ResultDetailPublic,
                             trial_rows=rows, job_id=job and job.id, untimed=_untimed(job and _json(job.trials)),
                             hidden=_hidden(state, "trials", dropped) + bad)  # fmt: skip
        assert isinstance(public, ResultDetailPublic)
        return public

    found = await state.query(read)
    if found is None:
        raise E.ApiError(
            404, E.NOT_FOUND, E.MSG_TUNING_RESULT_NOT_FOUND.format(tkey=tuning_key), missing="tuning_result"
        )
    return found


# tune jobs


def _job_row(row: Row, cls: type[JobRowPublic] = JobRowPublic, **extra: Any) -> JobRowPublic:
    return cls(id=row.id, state=row.state, kernel_key=row.kernel_key, kernel_name=row.kernel_name,
               tuning_key=row.tuning_key, key=row.key_values, dtypes=row.dtypes, target=row.target, strategy=row.strategy,
               trials_done=row.trials_done, trials_planned=row.trials_planned, worker=row.worker,
               deliveries=row.deliveries, error=row.error, best_config=_dict(row.best_config),
               best_time_ms=row.best_time_ms, submitted_by=row.submitted_by, created_at=row.created_at,
               started_at=row.started_at, finished_at=row.finished_at, **extra)  # fmt: skip


async def _mark_unserved(state: AppState, jobs: list[JobRowPublic]) -> None:
    """Say of each queued job whose target no live worker serves that it waits for one, and since when none
    was seen: without that it waits "queued" with no word (asked of the executor only when a job waits)."""
    unserved = await unserved_targets(state, {j.target for j in jobs if j.state == "queued"})
    for job in jobs:
        if job.state == "queued" and job.target in unserved:
            job.no_worker, job.worker_last_seen = True, unserved[job.target]


@router.get("/tune-jobs", response_model=JobPagePublic, dependencies=[OnceEach])
async def tune_jobs(state: StateDep, _token: TokenDep, query: Annotated[JobsQuery, Query()]) -> JobPagePublic:
    """A page of tune jobs, newest first, with their progress and the worker holding each (or, for a queued job
    no live worker serves, that none does): by state, target and/or part of the kernel's name. The page polls
    it; cancel is POST /v1/tune-jobs/{id}/cancel."""
    target = _target(query.target)

    def read(conn: Connection) -> JobPagePublic:
        rows, dropped = browse.jobs_page(conn, state=query.state, name=query.name, target=target, limit=query.limit,
                                         offset=query.offset)  # fmt: skip
        items, bad = _each(state, "tune_jobs", rows[: query.limit], _job_row)
        return JobPagePublic(items=items, limit=query.limit, offset=query.offset, more=len(rows) > query.limit,
                             hidden=_hidden(state, "tune_jobs", dropped) + bad)  # fmt: skip

    page = await state.query(read)
    await _mark_unserved(state, page.items)
    return page


def _trials(text: Any) -> list[TuneTrialPublic]:
    out, value = [], _json(text)
    for t in value if isinstance(value, list) else []:
        try:
            out.append(TuneTrialPublic.model_validate(t))
        except ValueError:  # a trial the worker wrote in another shape: left out
            continue
    return out


@router.get("/tune-jobs/{job_id}", response_model=JobDetailPublic, responses=NOT_FOUND)
async def tune_job(
    job_id: Annotated[int, Path(ge=1, le=2**31 - 1)], state: StateDep, _token: TokenDep
) -> JobDetailPublic:
    """One tune job: as a row of the list, with the outcome of every config it tried so far."""

    def read(conn: Connection) -> JobDetailPublic | None:
        try:
            row = browse.job_detail(conn, job_id=job_id)
            if row is None:
                return None
            public = _job_row(row, JobDetailPublic, trials=_trials(row.trials))
        except UNREADABLE:
            _hidden(state, "tune_jobs", 1)
            return None
        assert isinstance(public, JobDetailPublic)
        return public

    found = await state.query(read)
    if found is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_JOB_NOT_FOUND.format(id=job_id), missing="tune_job")
    await _mark_unserved(state, [found])
    return found
