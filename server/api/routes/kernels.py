"""POST /v1/kernels (source or IR -> kernel key, params, IR when it can be built); GET /v1/kernels/{key}."""

from __future__ import annotations

from fastapi import APIRouter

from tilec.wire import ErrorPublic, KernelCreate, KernelPublic, Text

from ... import errors as E
from ...service import check_input, kernel_public, read_kernel, register_kernel
from ..deps import ReadSessionDep, StateDep, SubmitTokenDep, TokenDep

router = APIRouter(prefix="/kernels", tags=["kernels"])


@router.post("", response_model=KernelPublic, responses={413: {"model": ErrorPublic}, 422: {"model": ErrorPublic}})
async def create_kernel(body: KernelCreate, state: StateDep, token: SubmitTokenDep) -> KernelPublic:
    """Read a kernel. For source, `ir` is built when a signature is given and every constexpr has a
    default; otherwise the params (constexprs with their defaults) and autotune configs say what a
    compile needs. The same kernel twice gives the same key."""
    kind, text = check_input(body, state)
    row, created = await register_kernel(
        state, kind=kind, text=text, name=body.name, signature=body.signature, token_id=token.id
    )
    return kernel_public(row, created=created)


@router.get("/{key}", response_model=KernelPublic, responses={404: {"model": ErrorPublic}})
def get_kernel(key: Text, session: ReadSessionDep, state: StateDep, _token: TokenDep) -> KernelPublic:
    row = read_kernel(session, state.metrics, key=key)  # a row that cannot be read back is a miss
    if row is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=key), missing="kernel")
    return kernel_public(row)
