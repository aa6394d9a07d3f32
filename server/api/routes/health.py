"""GET /healthz: liveness and database reachability; no token needed."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from tilec.compiler.artifact import compiler_version
from tilec.wire import HealthPublic

from ...db import crud
from ..deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic, responses={503: {"model": HealthPublic}})
async def healthz(state: StateDep) -> JSONResponse:
    try:
        await state.query(crud.ping)
        db, status = "ok", 200
    except SQLAlchemyError:
        db, status = "unavailable", 503
    body = HealthPublic(status="ok" if status == 200 else "degraded", database=db, compiler_version=compiler_version())
    return JSONResponse(body.model_dump(), status_code=status)
