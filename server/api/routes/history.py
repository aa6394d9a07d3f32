"""GET /v1/tuning-history/{tuning_key}: each tune's best for a key, by GPU model and compiler version (the
page's chart), and GET /v1/tuning-history/slower: the keys whose newest best got slower than under the
compiler version before, on the same GPU model."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from tilec.wire import HistoryPointPublic, SlowerKeyPublic, Text

from ... import errors as E
from ...db import decisions
from ..deps import OnceEach, ReadSessionDep, TokenDep

_HEX = re.compile(r"[0-9a-f]{64}")


def _key(tuning_key: str) -> str:
    """A tuning key as the path gives it: 64 hex digits, else the same 422 as the pins' routes."""
    if not _HEX.fullmatch(tuning_key):
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_TUNING_KEY_FORM)
    return tuning_key

router = APIRouter(prefix="/tuning-history", tags=["tuning"])


class SlowerQuery(BaseModel):
    """An unknown query parameter is a 422, as on every listing."""

    model_config = ConfigDict(extra="forbid")
    target: Text | None = Field(default=None, max_length=32, description="cpu or cuda:sm_XX")


class HistoryQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=500, ge=1, le=500, description="points, oldest first")


@router.get("/slower", response_model=list[SlowerKeyPublic], dependencies=[OnceEach])
def slower(session: ReadSessionDep, _token: TokenDep, query: Annotated[SlowerQuery, Query()]) -> list[SlowerKeyPublic]:
    return [SlowerKeyPublic(**d) for d in decisions.slower_keys(session, target=query.target)]


@router.get("/{tuning_key}", response_model=list[HistoryPointPublic], dependencies=[OnceEach])
def history(tuning_key: Annotated[str, Path(min_length=64, max_length=64)], session: ReadSessionDep,
            _token: TokenDep, query: Annotated[HistoryQuery, Query()]) -> list[HistoryPointPublic]:  # fmt: skip
    rows = decisions.history(session, tkey=_key(tuning_key), limit=query.limit)
    return [HistoryPointPublic(gpu_model=h.gpu_model, compiler_version=h.compiler_version, best_time_ms=h.best_time_ms,
                               config=h.config, recorded_at=h.recorded_at) for h in rows]  # fmt: skip
