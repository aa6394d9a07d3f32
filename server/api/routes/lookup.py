"""GET /v1/lookup: the best config and its artifact for a tuning key — every client launch's hot path.

One indexed query (tuning_results by primary key, outer-joined to the artifact's metadata) on a bare
connection, with the serialised answer kept in a small TTL cache; during a database outage stale
entries still answer. Hits are usually answered by server.fastpath through reads.answer, before routing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.exc import OperationalError

from tilec.wire import ErrorPublic, LookupPublic, Text

from ... import errors as E
from ...db import crud
from ...reads import MISSED, answer
from ...service import check_target
from ..deps import StateDep, TokenDep

router = APIRouter(tags=["lookup"])
JSON = "application/json"


@router.get("/lookup", response_model=LookupPublic, responses={404: {"model": ErrorPublic}})
async def lookup(
    request: Request,
    state: StateDep,
    _token: TokenDep,
    kernel: Annotated[Text, Query(min_length=1, max_length=128)],
    target: Annotated[Text, Query(max_length=32)],
    key: Annotated[Text, Query(max_length=1000)] = "",
    dtypes: Annotated[Text, Query(max_length=1000)] = "",
) -> Response:
    check_target(target)
    tkey = crud.tuning_key(kernel_key=kernel, key=key, dtypes=dtypes, target=target)
    try:
        # the fast path has just looked this key up and found nothing: do not ask again
        body = None if request.scope.get(MISSED) == tkey else await answer(state, tkey)
    except OperationalError:
        stale = state.lookups.get(tkey, allow_stale=True)
        if stale is None:
            raise
        state.metrics.cache_hits.labels("lookup_stale").inc()
        return Response(stale, media_type=JSON)
    if body is None:
        kernel_known = await state.query(lambda c: crud.kernel_exists(c, key=kernel))
        missing = "tuning_result" if kernel_known else "kernel"
        detail = E.MSG_NO_TUNING_RESULT.format(kernel=kernel, key=key, dtypes=dtypes, target=target)
        raise E.ApiError(404, E.NOT_FOUND, detail, missing=missing, tuning_key=tkey)
    return Response(body, media_type=JSON)
