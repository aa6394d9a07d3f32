"""POST /v1/kernels (source or IR -> kernel key, params, IR when it can be built); GET /v1/kernels/{key};
GET /v1/kernels (a page of them, newest first, without their IR)."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi import APIRouter
from sqlalchemy import Row
from sqlalchemy.orm import Session

from tilec.wire import ErrorPublic, KernelCreate, KernelPublic, Text

from ... import errors as E
from ...db import crud
from ...metrics import Metrics
from ...service import UNREADABLE, check_input, kernel_public, read_kernel, register_kernel, unreadable
from ..deps import OnceEach, PageDep, ReadSessionDep, StateDep, SubmitTokenDep, TokenDep

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


@router.get("", response_model=list[KernelPublic], dependencies=[OnceEach])
def list_kernels(session: ReadSessionDep, state: StateDep, _token: TokenDep, page: PageDep) -> list[KernelPublic]:
    """A page of kernels, newest first, without their IR; a row that cannot be read back is left out
    (and counted)."""
    try:
        rows: list[Row | None] = list(crud.list_kernels(session, **page.model_dump()))
    except UNREADABLE:  # one row broke the whole fetch: read the page row by row
        keys = crud.list_kernel_keys(session, **page.model_dump())
        rows = [_read_summary(session, state.metrics, key) for key in keys]
    listed = [_summary(state.metrics, row) for row in rows if row is not None]
    return [k for k in listed if k is not None]


def _read_summary(session: Session, metrics: Metrics, key: str) -> Row | None:
    try:
        return crud.get_kernel_summary(session, key=key)
    except UNREADABLE:
        unreadable(metrics, "kernels")
        return None


def _summary(metrics: Metrics, row: Row) -> KernelPublic | None:
    try:
        return kernel_public(SimpleNamespace(**row._mapping, ir=None))  # type: ignore[arg-type]
    except UNREADABLE:
        unreadable(metrics, "kernels")
        return None
