"""POST /v1/compile: a kernel (key, source or IR) + specialisation + config + target -> an artifact."""

from __future__ import annotations

from fastapi import APIRouter

from tilec.wire import ArtifactPublic, CompileCreate, ErrorPublic

from ...service import compile_request
from ..deps import StateDep, SubmitTokenDep

router = APIRouter(prefix="/compile", tags=["compile"])

ERRORS = {code: {"model": ErrorPublic} for code in (404, 413, 422, 503)}


@router.post("", response_model=ArtifactPublic, responses=ERRORS)
async def compile_kernel(body: CompileCreate, state: StateDep, token: SubmitTokenDep) -> ArtifactPublic:
    """Compiles run in a child process with a time and memory limit; identical concurrent requests
    share one compile; a cached artifact comes back at once (`cached: true`)."""
    return await compile_request(state, body, token.id)
