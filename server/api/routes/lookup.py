"""GET /v1/lookup: the best config and its artifact for a tuning key — every client launch's hot path.

One indexed query (tuning_results by primary key, outer-joined to the artifact's metadata) on a bare
connection, with the serialised answer kept in a small TTL cache; during a database outage stale
entries still answer. Hits are usually answered by server.fastpath through `answer`, before routing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy import Connection, Row
from sqlalchemy.exc import OperationalError

from ... import errors as E
from ...db import crud
from ...metrics import Metrics
from ...schemas import ErrorPublic, LookupPublic, Text
from ...service import UNREADABLE, artifact_public, check_target, link_mismatch, stored_config, unreadable
from ...state import AppState
from ..deps import StateDep, TokenDep

router = APIRouter(tags=["lookup"])
JSON = "application/json"
MISSED = "tilec.lookup_missed"  # scope key: the tuning key the fast path found no result for


def lookup_public(metrics: Metrics, result: Row, artifact: Any) -> LookupPublic:
    """From crud.lookup's answer: the result row and its artifact's metadata (or None). Raises an
    UNREADABLE error when the result row cannot be read back; an artifact that cannot be, or that is not
    a build of the result's kernel, target and config, is left out (counted), the config still served."""
    config = stored_config(result.best_config)
    identity = crud.tuning_key(kernel_key=result.kernel_key, key=result.key_values, dtypes=result.dtypes,
                               target=result.target)
    if identity != result.tuning_key:
        raise ValueError(f"tuning result {result.tuning_key} is stored under another key")
    public = LookupPublic(
        tuning_key=result.tuning_key,
        kernel_key=result.kernel_key,
        key=result.key_values,
        dtypes=result.dtypes,
        target=result.target,
        config=config,
        time_ms=result.best_time_ms,
        trials=result.trials,
    )
    if artifact is None:
        return public
    try:
        served = artifact_public(artifact, cached=True)
        mismatch = link_mismatch(kernel_key=result.kernel_key, target=result.target, config=config, build=artifact)
    except UNREADABLE:
        unreadable(metrics, "artifacts")
        return public
    if mismatch is not None:  # written before the tuning-results route checked links, or by another writer
        unreadable(metrics, "tuning_results")
        return public
    public.artifact = served
    return public


def _find(conn: Connection, tkey: str, metrics: Metrics) -> bytes | None:
    try:
        found = crud.lookup(conn, tkey=tkey)
        return None if found is None else lookup_public(metrics, *found).model_dump_json().encode()
    except UNREADABLE:  # a miss: a new tuning result for this key replaces the row
        unreadable(metrics, "tuning_results")
        return None


async def answer(state: AppState, tkey: str) -> bytes | None:
    """The serialised answer for a tuning key, from the cache or else one query (then cached); None when
    there is no such result, or its row cannot be read back. Shared by the route and the fast path;
    neither validates the parameters here: a row can only exist for those the tuning-results route accepted."""
    body = state.lookups.get(tkey)
    if body is not None:
        state.metrics.cache_hits.labels("lookup").inc()
        return body
    body = await state.query(lambda c: _find(c, tkey, state.metrics))
    state.metrics.cache_misses.labels("lookup").inc()
    if body is not None:
        state.lookups.put(tkey, body)
    return body


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
