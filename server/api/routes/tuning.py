"""POST /v1/tuning-results (trials for a tuning key; the best trial wins), GET its trials, and GET a page of
the results (each as /v1/lookup answers it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import Connection, Row
from sqlalchemy.orm import Session

from tilec.wire import ErrorPublic, LookupPublic, Text, TrialPublic, TuningResultCreate, TuningResultPublic

from ... import errors as E
from ...db import crud
from ...db.models import Trial
from ...metrics import Metrics
from ...reads import lookup_public
from ...service import UNREADABLE, check_target, link_mismatch, normalize_config, stored_config, unreadable
from ..deps import FilteredPageDep, OnceEach, ReadSessionDep, StateDep, SubmitTokenDep, TokenDep

router = APIRouter(prefix="/tuning-results", tags=["tuning"])


@router.post(
    "", response_model=TuningResultPublic, responses={404: {"model": ErrorPublic}, 422: {"model": ErrorPublic}}
)
async def record(body: TuningResultCreate, state: StateDep, _token: SubmitTokenDep) -> TuningResultPublic:
    limit = state.settings.max_trials
    if len(body.trials) > limit:
        raise E.ApiError(422, E.TOO_MANY_TRIALS, E.MSG_TOO_MANY_TRIALS.format(n=len(body.trials), limit=limit))
    check_target(body.target)
    tkey = crud.tuning_key(kernel_key=body.kernel_key, key=body.key, dtypes=body.dtypes, target=body.target)
    trials = []
    for t in body.trials:
        config = normalize_config(t.config)
        extra = t.model_dump(exclude={"config", "artifact_id"})
        trials.append({"config": config, "config_hash": crud.stable_hash(config), "artifact_key": t.artifact_id, **extra})

    def write(session: Session) -> TuningResultPublic:
        if not crud.kernel_exists(session.connection(), key=body.kernel_key):
            raise E.ApiError(
                404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=body.kernel_key), missing="kernel"
            )
        _check_artifacts(session, state.metrics, result=body, trials=trials)
        where = {"tkey": tkey, "kernel_key": body.kernel_key, "key": body.key, "dtypes": body.dtypes,
                 "target": body.target}
        crud.record_trials(session, **where, trials=trials)
        try:
            public = _read_result(session, state.metrics, tkey)
        except UNREADABLE:  # the stored best cannot be read back: this request's best replaces it
            unreadable(state.metrics, "tuning_results")
            crud.replace_result(session, **where, best=min(trials, key=lambda t: t["time_ms"]))
            public = _read_result(session, state.metrics, tkey)
        return TuningResultPublic(**public.model_dump(), recorded=len(trials))

    async with state.lookup_lock(tkey):  # no lookup of the key reads and caches across the commit and the drop
        result = await state.write(write)
        state.lookups.drop(tkey)
    return result


def _read_result(session: Session, metrics: Metrics, tkey: str) -> LookupPublic:
    found = crud.lookup(session.connection(), tkey=tkey)
    assert found is not None
    return lookup_public(metrics, *found)


MISMATCH_MESSAGES = {
    "kernel": E.MSG_TRIAL_ARTIFACT_OTHER_KERNEL,
    "target": E.MSG_TRIAL_ARTIFACT_OTHER_TARGET,
    "config": E.MSG_TRIAL_ARTIFACT_OTHER_CONFIG,
}


def _check_artifacts(session: Session, metrics: Metrics, *, result: TuningResultCreate, trials: list[dict]) -> None:
    """Each trial's artifact exists and is a build of the result's kernel and target and of the trial's
    config: else a 422 naming the trial, the artifact and what differs. The lookup serves that artifact
    as the binary of the config, so a build of anything else must never be linked."""
    linked = [t["artifact_key"] for t in trials if t["artifact_key"] is not None]
    try:  # one query for them all; a row that cannot be read back breaks it: then one query each
        builds: dict | None = crud.get_artifact_builds(session, keys=linked) if linked else {}
    except UNREADABLE:
        builds = None
    for index, trial in enumerate(trials):
        artifact = trial["artifact_key"]
        if artifact is None:
            continue
        try:
            build = crud.get_artifact_build(session, key=artifact) if builds is None else builds.get(artifact)
            mismatch = None if build is None else link_mismatch(
                kernel_key=result.kernel_key, target=result.target, config=trial["config"], build=build
            )
        except UNREADABLE:
            unreadable(metrics, "artifacts")
            detail = E.MSG_TRIAL_ARTIFACT_UNREADABLE.format(index=index, id=artifact)
            raise E.ApiError(422, E.UNKNOWN_ARTIFACT, detail, artifact_id=artifact, trial=index) from None
        if build is None:
            detail = E.MSG_TRIAL_ARTIFACT_NOT_FOUND.format(index=index, id=artifact)
            raise E.ApiError(422, E.UNKNOWN_ARTIFACT, detail, missing="artifact", artifact_id=artifact, trial=index)
        if mismatch is not None:
            which, args = mismatch
            detail = MISMATCH_MESSAGES[which].format(index=index, id=artifact, **args)
            raise E.ApiError(422, E.ARTIFACT_MISMATCH, detail, mismatch=which, artifact_id=artifact, trial=index)


@router.get("/{tuning_key}/trials", response_model=list[TrialPublic])
def trials(tuning_key: Text, session: ReadSessionDep, state: StateDep, _token: TokenDep) -> list[TrialPublic]:
    """Every trial, best first; one that cannot be read back is left out (and counted)."""
    try:
        rows: list[Trial | None] = list(crud.get_trials(session, tkey=tuning_key))
    except UNREADABLE:  # one row broke the whole fetch: read them one by one
        rows = [_read_trial(session, state.metrics, i) for i in crud.get_trial_ids(session, tkey=tuning_key)]
    listed = [_trial_public(state.metrics, row) for row in rows if row is not None]
    return [t for t in listed if t is not None]


def _read_trial(session: Session, metrics: Metrics, trial_id: int) -> Trial | None:
    try:
        return crud.get_trial(session, trial_id=trial_id)
    except UNREADABLE:
        unreadable(metrics, "trials")
        return None


def _trial_public(metrics: Metrics, t: Trial) -> TrialPublic | None:
    try:
        return TrialPublic(
            config=stored_config(t.config),
            time_ms=t.time_ms,
            artifact_id=t.artifact_key,
            gpu_model=t.gpu_model,
            driver_version=t.driver_version,
        )
    except UNREADABLE:
        unreadable(metrics, "trials")
        return None


@router.get("", response_model=list[LookupPublic], responses={422: {"model": ErrorPublic}}, dependencies=[OnceEach])
def list_results(
    session: ReadSessionDep,
    state: StateDep,
    _token: TokenDep,
    query: FilteredPageDep,
) -> list[LookupPublic]:
    """A page of tuning results, the most recently improved first, of one kernel and/or target when
    asked; each with its best artifact as /v1/lookup serves it. One that cannot be read back is left out
    (and counted)."""
    if query.target is not None:
        check_target(query.target)
    conn = session.connection()
    page = query.model_dump()
    try:
        found = crud.list_tuning_results(conn, **page)
    except UNREADABLE:  # one row broke the whole fetch: read the page row by row
        keys = crud.list_tuning_keys(conn, **page)
        found = [r for key in keys if (r := _read_lookup(conn, state.metrics, key)) is not None]
    listed = [_listed_result(state.metrics, *row) for row in found]
    return [r for r in listed if r is not None]


def _read_lookup(conn: Connection, metrics: Metrics, tkey: str) -> tuple | None:
    try:
        return crud.lookup(conn, tkey=tkey)
    except UNREADABLE:
        unreadable(metrics, "tuning_results")
        return None


def _listed_result(metrics: Metrics, result: Row, artifact: Any) -> LookupPublic | None:
    try:
        return lookup_public(metrics, result, artifact)
    except UNREADABLE:
        unreadable(metrics, "tuning_results")
        return None
