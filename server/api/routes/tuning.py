"""POST /v1/tuning-results (trials for a tuning key; the best trial wins) and GET its trials."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from ... import errors as E
from ...db import crud
from ...schemas import ErrorPublic, TrialPublic, TuningResultCreate, TuningResultPublic
from ...service import check_target, normalize_config
from ..deps import ReadSessionDep, StateDep, SubmitTokenDep, TokenDep
from .lookup import lookup_public

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
        if crud.get_kernel(session, key=body.kernel_key) is None:
            raise E.ApiError(
                404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=body.kernel_key), missing="kernel"
            )
        _check_artifacts(session, kernel_key=body.kernel_key, trials=trials)
        crud.record_trials(
            session, tkey=tkey, kernel_key=body.kernel_key, key=body.key, dtypes=body.dtypes, target=body.target,
            trials=trials,
        )
        found = crud.lookup(session.connection(), tkey=tkey)
        assert found is not None
        return TuningResultPublic(**lookup_public(*found).model_dump(), recorded=len(trials))

    result = await state.write(write)
    state.lookups.drop(tkey)
    return result


def _check_artifacts(session: Session, *, kernel_key: str, trials: list[dict]) -> None:
    """Each trial's artifact exists and is a build of this kernel (422 naming the trial and the artifact)."""
    owners = crud.artifact_kernels(session, keys={t["artifact_key"] for t in trials if t["artifact_key"] is not None})
    for index, trial in enumerate(trials):
        artifact = trial["artifact_key"]
        if artifact is None:
            continue
        owner = owners.get(artifact)
        if owner is None:
            detail = E.MSG_TRIAL_ARTIFACT_NOT_FOUND.format(index=index, id=artifact)
            raise E.ApiError(422, E.UNKNOWN_ARTIFACT, detail, missing="artifact", artifact_id=artifact, trial=index)
        if owner != kernel_key:
            detail = E.MSG_TRIAL_ARTIFACT_OTHER_KERNEL.format(index=index, id=artifact, other=owner, kernel=kernel_key)
            raise E.ApiError(422, E.UNKNOWN_ARTIFACT, detail, artifact_id=artifact, trial=index)


@router.get("/{tuning_key}/trials", response_model=list[TrialPublic])
def trials(tuning_key: str, session: ReadSessionDep, _token: TokenDep) -> list[TrialPublic]:
    return [
        TrialPublic(
            config=t.config,
            time_ms=t.time_ms,
            artifact_id=t.artifact_key,
            gpu_model=t.gpu_model,
            driver_version=t.driver_version,
        )
        for t in crud.get_trials(session, tkey=tuning_key)
    ]
