"""POST /v1/misses (a client's launch found no build and would compile or tune: counted per specialisation;
a read token reports), GET a page of them, and POST /v1/misses/{id}/queue (submit scope): the server builds
(a compile miss) or tunes (a tune miss, from the launch description its client wrote) what the miss lacked.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import Field, ValidationError
from sqlalchemy.orm import Session

from tilec.compiler.tune.launch import LaunchDescription
from tilec.wire import (
    CompileCreate,
    ConfigSpec,
    ErrorPublic,
    MissCreate,
    MissPublic,
    MissQueuedPublic,
    Text,
    TuneJobCreate,
)

from ... import errors as E
from ...db import crud, decisions
from ...db.models import Miss, utcnow
from ...jobs.service import submit
from ...service import check_source_size, check_target, compile_request
from ..deps import OnceEach, PageQuery, ReadSessionDep, StateDep, SubmitTokenDep, TokenDep

router = APIRouter(prefix="/misses", tags=["misses"])
MissId = Annotated[int, Path(ge=1, le=2**31 - 1)]
KEY_FORM = re.compile(r"[0-9a-f]{64}")
MAX_SPEC_BYTES = 16_384  # a specialisation's JSON: names, types, a few values


def miss_public(m: Miss) -> MissPublic:
    has_config = isinstance((m.specialisation or {}).get("config"), dict)
    tunable = has_config if m.what == "compile" else m.launch is not None
    return MissPublic(id=m.id, kernel_key=m.kernel_key, name=m.name, what=m.what, target=m.target,
                      specialisation=m.specialisation, tunable=tunable, count=m.count, first_seen=m.first_seen,
                      last_seen=m.last_seen)  # fmt: skip


def _spec(body: MissCreate) -> dict[str, Any]:
    """The specialisation, checked to be the shape clients write (a 422 naming what is wrong)."""
    spec = body.specialisation
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_MISS_BAD_SPEC.format(reason=f"over {MAX_SPEC_BYTES} bytes"))
    shapes = {"signature": dict, "constexprs": dict, "hints": dict, "config": dict, "tuning": dict}
    for name, value in spec.items():
        want = shapes.get(name)
        if want is None:
            raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_MISS_BAD_SPEC.format(reason=f"unknown field {name!r}"))
        if value is not None and not isinstance(value, want):
            raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_MISS_BAD_SPEC.format(reason=f"{name!r} is not an object"))
    if not isinstance(spec.get("signature"), dict) or not all(isinstance(v, str) for v in spec["signature"].values()):
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_MISS_BAD_SPEC.format(reason="'signature' maps names to types"))
    if body.what == "tune" and not isinstance(spec.get("tuning"), dict):
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_MISS_BAD_SPEC.format(reason="a tune miss names its 'tuning' key"))
    return spec


def _text(body: MissCreate, state: Any) -> tuple[str, str]:
    given = [k for k in ("source", "bundle") if getattr(body, k) is not None]
    if len(given) != 1:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_ONE_INPUT)
    limit = state.settings.max_source_bytes
    if given[0] == "bundle":
        text = json.dumps(body.bundle, sort_keys=True, separators=(",", ":"))
        if len(text.encode()) > limit * 4:
            raise E.ApiError(413, E.SOURCE_TOO_LARGE, E.MSG_SOURCE_TOO_LARGE.format(limit=limit * 4))
        return "bundle", text
    check_source_size(body.source or "", limit)
    return "source", body.source or ""


@router.post("", response_model=MissPublic, responses={422: {"model": ErrorPublic}, 429: {"model": ErrorPublic}})
async def report(body: MissCreate, state: StateDep, _token: TokenDep) -> MissPublic:
    """Count a miss (a read token suffices: production reports what it lacked, it builds nothing)."""
    check_target(body.target)
    if not KEY_FORM.fullmatch(body.kernel_key):
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_KERNEL_KEY_FORM)
    spec = _spec(body)
    kind, text = _text(body, state)
    if body.launch is not None:
        try:
            LaunchDescription.model_validate(body.launch)
        except ValidationError as exc:
            raise E.ApiError(422, E.BAD_LAUNCH, f"launch: {exc.errors()[0].get('msg')}") from None
    miss_key = crud.stable_hash({"kernel": body.kernel_key, "what": body.what, "target": body.target, "spec": spec})
    values = {"miss_key": miss_key, "kernel_key": body.kernel_key, "name": body.name, "what": body.what,
              "target": body.target, "specialisation": spec, "kind": kind, "text": text, "launch": body.launch}  # fmt: skip
    limit = state.settings.max_misses

    def write(session: Session) -> MissPublic:
        if decisions.find_miss(session, miss_key=miss_key) is None and decisions.count_misses(session) >= limit:
            raise E.ApiError(429, E.TOO_MANY_MISSES, E.MSG_TOO_MANY_MISSES.format(limit=limit))
        return miss_public(decisions.note_miss(session, values=values, seen=utcnow()))

    return await state.write(write)


class MissesQuery(PageQuery):
    target: Text | None = Field(default=None, max_length=32, description="cpu or cuda:sm_XX")


@router.get("", response_model=list[MissPublic], dependencies=[OnceEach])
def list_misses(session: ReadSessionDep, _token: TokenDep, query: Annotated[MissesQuery, Query()]) -> list[MissPublic]:
    """The most recently seen misses first."""
    rows = decisions.list_misses(session, target=query.target, limit=query.limit, offset=query.offset)
    return [miss_public(m) for m in rows]


@router.post("/{miss_id}/queue", response_model=MissQueuedPublic,
             responses={404: {"model": ErrorPublic}, 422: {"model": ErrorPublic}})  # fmt: skip
async def queue(miss_id: MissId, state: StateDep, token: SubmitTokenDep) -> MissQueuedPublic:
    """Build (a compile miss: the artifact, made now) or tune (a tune miss: the job, queued) what it lacked."""
    miss = await state.read(lambda s: decisions.get_miss(s, miss_id=miss_id))
    if miss is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_MISS_NOT_FOUND.format(id=miss_id), missing="miss")
    spec = miss.specialisation or {}
    kernel = {"bundle": json.loads(miss.text)} if miss.kind == "bundle" else {"source": miss.text}
    try:
        if miss.what == "compile":
            config = spec.get("config")
            if not isinstance(config, dict):
                raise E.ApiError(422, E.NOT_QUEUEABLE, E.MSG_MISS_BAD_SPEC.format(reason="no config: a constexpr has no wire form"))
            body = CompileCreate(**kernel, name=miss.name, signature=spec.get("signature") or {},
                                 constexprs=spec.get("constexprs") or {}, hints=spec.get("hints") or {},
                                 config=ConfigSpec(**config), target=miss.target)  # fmt: skip
            return MissQueuedPublic(miss=miss_public(miss), artifact=await compile_request(state, body, token.id))
        if miss.launch is None:
            raise E.ApiError(422, E.NOT_QUEUEABLE, E.MSG_MISS_NO_LAUNCH.format(id=miss_id))
        tune = TuneJobCreate(**kernel, name=miss.name, signature=spec.get("signature") or {},
                             constexprs=spec.get("constexprs") or {}, launch=miss.launch, target=miss.target)  # fmt: skip
    except ValidationError as exc:  # a stored specialisation the wire models refuse (reported by an old client)
        raise E.ApiError(422, E.NOT_QUEUEABLE, E.MSG_MISS_BAD_SPEC.format(reason=exc.errors()[0].get("msg"))) from None
    job, _ = await submit(state, tune, token.id)
    return MissQueuedPublic(miss=miss_public(miss), job=job)
