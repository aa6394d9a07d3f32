"""GET /v1/lookup: the best config and its artifact for a tuning key — every client launch's hot path.

One indexed query (tuning_results by primary key, outer-joined to the artifact's metadata) on a bare
connection, with the serialised answer kept in a small TTL cache; during a database outage stale
entries still answer. Hits are usually answered by server.fastpath through `answer`, before routing.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import Connection, Row
from sqlalchemy.exc import OperationalError

from ... import errors as E
from ...db import crud
from ...schemas import ErrorPublic, LookupPublic
from ...service import artifact_public, check_target
from ...state import AppState
from ..deps import StateDep, TokenDep

router = APIRouter(tags=["lookup"])
JSON = "application/json"
MISSED = "tilec.lookup_missed"  # scope key: the tuning key the fast path found no result for


def lookup_public(result: Row, artifact: Any) -> LookupPublic:
    """From crud.lookup's answer: the result row and its artifact's metadata (or None)."""
    return LookupPublic(
        tuning_key=result.tuning_key,
        kernel_key=result.kernel_key,
        key=result.key_values,
        dtypes=result.dtypes,
        target=result.target,
        config=result.best_config,
        time_ms=result.best_time_ms,
        artifact=None if artifact is None else artifact_public(artifact, cached=True),
        trials=result.trials,
    )


def _find(conn: Connection, tkey: str) -> bytes | None:
    found = crud.lookup(conn, tkey=tkey)
    if found is None:
        return None
    return lookup_public(*found).model_dump_json().encode()


async def answer(state: AppState, tkey: str) -> bytes | None:
    """The serialised answer for a tuning key, from the cache or else one query (then cached); None when
    there is no such result. Shared by the route and the fast path; neither validates here: a row can
    only exist for parameters that the tuning-results route accepted."""
    body = state.lookups.get(tkey)
    if body is not None:
        state.metrics.cache_hits.labels("lookup").inc()
        return body
    body = await state.query(lambda c: _find(c, tkey))
    state.metrics.cache_misses.labels("lookup").inc()
    if body is not None:
        state.lookups.put(tkey, body)
    return body


@router.get("/lookup", response_model=LookupPublic, responses={404: {"model": ErrorPublic}})
async def lookup(
    request: Request,
    state: StateDep,
    _token: TokenDep,
    kernel: str = Query(min_length=1, max_length=128),
    target: str = Query(max_length=32),
    key: str = Query(default="", max_length=1000),
    dtypes: str = Query(default="", max_length=1000),
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
