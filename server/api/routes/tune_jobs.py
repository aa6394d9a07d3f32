"""POST /v1/tune-jobs (202 with the job), GET one (with its trials so far) or a list, POST .../cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import Field
from sqlalchemy.orm import Session

from tilec.wire import ErrorPublic, JobState, Text, TuneJobCreate, TuneJobPublic

from ... import errors as E
from ...jobs import store
from ...jobs.service import job_public, submit
from ..deps import OnceEach, PageQuery, ReadSessionDep, StateDep, SubmitTokenDep, TokenDep

router = APIRouter(prefix="/tune-jobs", tags=["tune jobs"])
JobId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.post(
    "", status_code=202, response_model=TuneJobPublic,
    responses={200: {"model": TuneJobPublic, "description": "every config is tuned already: the job is done"},
               404: {"model": ErrorPublic}, 422: {"model": ErrorPublic}, 503: {"model": ErrorPublic}},
)  # fmt: skip
async def create(body: TuneJobCreate, state: StateDep, token: SubmitTokenDep, response: Response) -> TuneJobPublic:
    job, status = await submit(state, body, token.id)
    response.status_code = status
    return job


class JobsQuery(PageQuery):
    """A page of jobs, of one state and/or one kernel (an unknown query parameter is a 422)."""

    state: JobState | None = None
    kernel: Text | None = Field(default=None, min_length=1, max_length=128, description="a kernel key")


@router.get("", response_model=list[TuneJobPublic], dependencies=[OnceEach])
def list_jobs(session: ReadSessionDep, _token: TokenDep, query: Annotated[JobsQuery, Query()]) -> list[TuneJobPublic]:
    """The newest jobs first, without their trials."""
    jobs = store.list_jobs(session, state=query.state, kernel=query.kernel, limit=query.limit, offset=query.offset)
    return [job_public(j, trials=False) for j in jobs]


@router.get("/{job_id}", response_model=TuneJobPublic, responses={404: {"model": ErrorPublic}})
def get(job_id: JobId, session: ReadSessionDep, _token: TokenDep) -> TuneJobPublic:
    job = store.get_job(session, job_id)
    if job is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_JOB_NOT_FOUND.format(id=job_id), missing="tune_job")
    return job_public(job)


@router.post("/{job_id}/cancel", response_model=TuneJobPublic, responses={404: {"model": ErrorPublic}})
async def cancel(job_id: JobId, state: StateDep, _token: SubmitTokenDep) -> TuneJobPublic:
    """Cancel a queued or running job (a running one stops at its next trial); a finished job is returned as it is."""

    def write(session: Session) -> TuneJobPublic:
        job = store.cancel(session, job_id)
        if job is None:
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_JOB_NOT_FOUND.format(id=job_id), missing="tune_job")
        return job_public(job)

    return await state.write(write)
