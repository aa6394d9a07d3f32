"""POST /v1/retune (submit scope): tune jobs for the inventory, every tuning key the server holds for a
target, narrowed by GPU model, kernel, the compiler version that built the best, or one key (re-time a
decision). Each job times every config anew (server/jobs/retune.py)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from tilec.wire import ErrorPublic, RetuneCreate, RetuneItemPublic, RetunePublic

from ...jobs.retune import queue_inventory, send
from ...service import check_target
from ..deps import StateDep, SubmitTokenDep

router = APIRouter(tags=["tune jobs"])


@router.post("/retune", response_model=RetunePublic, responses={422: {"model": ErrorPublic}})
async def retune(body: RetuneCreate, state: StateDep, token: SubmitTokenDep) -> RetunePublic:
    check_target(body.target)

    def write(session: Session) -> tuple[list[dict], list[dict]]:
        return queue_inventory(session, target=body.target, gpu_model=body.gpu_model, kernel=body.kernel,
                               since=body.since_compiler_version, tkey=body.tuning_key, token_id=token.id)  # fmt: skip

    queued, skipped = await state.write(write)
    await run_in_threadpool(send, state.executor, [q for q in queued if q["new"]])
    fields = set(RetuneItemPublic.model_fields)
    return RetunePublic(queued=[RetuneItemPublic(**{k: v for k, v in q.items() if k in fields}) for q in queued],
                        skipped=[RetuneItemPublic(**s) for s in skipped])  # fmt: skip
