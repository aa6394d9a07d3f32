"""PUT/GET/DELETE /v1/tuning-results/{tuning_key}/pin: a team's config for a tuning key (admin scope to set
or remove). A pinned config beats any measured one: lookups and pulls serve it, marked `source: "pinned"`,
until the pin is removed and the decision over the trials stands again.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Response
from sqlalchemy.orm import Session

from tilec.compiler.tune.space import config_hash
from tilec.wire import ErrorPublic, PinCreate, PinPublic

from ... import errors as E
from ...db import decisions
from ...db.models import TuningPin
from ...service import normalize_config
from ..deps import AdminTokenDep, ReadSessionDep, StateDep, TokenDep

router = APIRouter(prefix="/tuning-results", tags=["tuning"])
TuningKey = Annotated[str, Path(min_length=64, max_length=64, description="a tuning key (64 hex digits)")]
_HEX = re.compile(r"[0-9a-f]{64}")


def _key(tuning_key: str) -> str:
    if not _HEX.fullmatch(tuning_key):
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_TUNING_KEY_FORM)
    return tuning_key


def pin_public(p: TuningPin) -> PinPublic:
    return PinPublic(tuning_key=p.tuning_key, config=p.config, reason=p.reason, pinned_by=p.pinned_by,
                     pinned_at=p.pinned_at)  # fmt: skip


@router.put("/{tuning_key}/pin", response_model=PinPublic, responses={404: {"model": ErrorPublic}})
async def set_pin(tuning_key: TuningKey, body: PinCreate, state: StateDep, token: AdminTokenDep) -> PinPublic:
    tkey = _key(tuning_key)
    config = normalize_config(body.config)

    def write(session: Session) -> PinPublic:
        row = decisions.pin(session, tkey=tkey, config=config, config_hash=config_hash(config), reason=body.reason,
                            token_id=token.id)  # fmt: skip
        if row is None:
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_NO_RESULT_TO_PIN.format(key=tkey), missing="tuning_result")
        return pin_public(row)

    async with state.lookup_lock(tkey):  # no lookup reads and caches across the commit and the drop
        public = await state.write(write)
        state.lookups.drop(tkey)
    return public


@router.get("/{tuning_key}/pin", response_model=PinPublic, responses={404: {"model": ErrorPublic}})
def get_pin(tuning_key: TuningKey, session: ReadSessionDep, _token: TokenDep) -> PinPublic:
    row = decisions.get_pin(session, tkey=_key(tuning_key))
    if row is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_NO_PIN.format(key=tuning_key), missing="pin")
    return pin_public(row)


@router.delete("/{tuning_key}/pin", status_code=204, responses={404: {"model": ErrorPublic}})
async def remove_pin(tuning_key: TuningKey, state: StateDep, _token: AdminTokenDep) -> Response:
    tkey = _key(tuning_key)

    def write(session: Session) -> None:
        if not decisions.unpin(session, tkey=tkey):
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_NO_PIN.format(key=tkey), missing="pin")

    async with state.lookup_lock(tkey):
        await state.write(write)
        state.lookups.drop(tkey)
    return Response(status_code=204)
