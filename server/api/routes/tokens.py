"""/v1/tokens (admin): create a bearer token (the plain token is shown once, stored hashed), list
them, revoke one.

A revoked token is refused at once by the process that revoked it (its in-process token cache is
invalidated); every other worker and replica forgets its cached tokens within TILEC_REVOCATION_POLL_S
(server/revocation.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Path
from sqlalchemy.orm import Session

from tilec.wire import INT32_MAX, ErrorPublic, TokenCreate, TokenPublic

from ... import errors as E
from ...db import crud
from ...service import UNREADABLE, unreadable
from ...state import AppState
from ..deps import AdminTokenDep, StateDep

router = APIRouter(prefix="/tokens", tags=["tokens"])
TOKEN_ID = Path(ge=1, le=INT32_MAX)  # the column is an Integer


@router.post("", response_model=TokenPublic, status_code=201)
async def create_token(body: TokenCreate, state: StateDep, _token: AdminTokenDep) -> TokenPublic:
    plain, row = await state.write(
        lambda s: crud.create_token(s, scopes=list(body.scopes), description=body.description)
    )
    return TokenPublic.model_validate(row, from_attributes=True).model_copy(update={"token": plain})


@router.get("", response_model=list[TokenPublic])
async def list_tokens(state: StateDep, _token: AdminTokenDep) -> list[TokenPublic]:
    return await state.read(lambda s: _list(s, state))


def _list(session: Session, state: AppState) -> list[TokenPublic]:
    """Every token. One whose scopes cannot be read back is listed with none (it grants none: see deps),
    so an admin still sees and can revoke it; it is counted in tilec_corrupt_rows."""
    try:
        return [TokenPublic.model_validate(row, from_attributes=True) for row in crud.list_tokens(session)]
    except UNREADABLE:  # a decoding error in Python: the transaction itself is fine
        pass
    listed = []
    for row in crud.list_tokens_without_scopes(session):
        try:
            scopes = list(crud.token_scopes(session, token_id=row.id))
            listed.append(TokenPublic.model_validate({**row._asdict(), "scopes": scopes}))
            continue
        except UNREADABLE:
            unreadable(state.metrics, "tokens")
        listed.append(TokenPublic.model_validate({**row._asdict(), "scopes": []}))
    return listed


@router.delete("/{token_id}", response_model=TokenPublic, responses={404: {"model": ErrorPublic}})
async def revoke_token(state: StateDep, _token: AdminTokenDep, token_id: int = TOKEN_ID) -> TokenPublic:
    """Revoke a token (revoking it again keeps the first revoked_at)."""
    row = await state.write(lambda s: crud.revoke_token(s, token_id=token_id))
    if row is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_TOKEN_NOT_FOUND.format(id=token_id), missing="token")
    state.forget_token(token_id)
    return TokenPublic.model_validate(row, from_attributes=True)
