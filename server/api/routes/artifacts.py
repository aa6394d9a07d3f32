"""GET|HEAD /v1/artifacts/{id} and /v1/artifacts/{id}/{form}: immutable, ETag = sha256 of the body.

A binary whose bytes no longer match the stored sha256 is never served: it is rebuilt first.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import Connection

from ... import errors as E
from ...db import crud
from ...schemas import ArtifactForm, ArtifactPublic, ErrorPublic
from ...service import BINARY_FORM, FORM_COLUMN, artifact_public, rebuild, sha256
from ...state import AppState
from ..deps import StateDep, TokenDep

router = APIRouter(prefix="/artifacts", tags=["artifacts"])
IMMUTABLE = "public, max-age=31536000, immutable"
NOT_FOUND = {404: {"model": ErrorPublic}}
FORM_READ = "tilec.form_read"  # scope key: ((artifact id, form), what the fast path's read_form found)


def _not_found(artifact_id: str) -> E.ApiError:
    return E.ApiError(404, E.NOT_FOUND, E.MSG_ARTIFACT_NOT_FOUND.format(id=artifact_id), missing="artifact")


def _respond(request: Request, body: bytes, digest: str, media_type: str) -> Response:
    headers = {"ETag": f'"{digest}"', "X-Tilec-SHA256": digest, "Cache-Control": IMMUTABLE}
    tags = request.headers.get("if-none-match", "")
    if f'"{digest}"' in tags or tags.strip() == "*":
        return Response(status_code=304, headers=headers)
    if request.method == "HEAD":
        headers["Content-Length"] = str(len(body))
        return Response(status_code=200, headers=headers, media_type=media_type)
    return Response(body, headers=headers, media_type=media_type)


@router.get("/{artifact_id}", response_model=ArtifactPublic, responses=NOT_FOUND)
@router.head("/{artifact_id}", operation_id="head_artifact", responses=NOT_FOUND)
async def get_artifact(artifact_id: str, request: Request, state: StateDep, _token: TokenDep) -> Response:
    def load(session: object) -> ArtifactPublic | None:
        row = crud.get_artifact_meta(session, key=artifact_id)  # type: ignore[arg-type]
        return None if row is None else artifact_public(row, cached=True)

    public = await state.read(load)
    if public is None:
        raise _not_found(artifact_id)
    body = public.model_dump_json().encode()
    return _respond(request, body, sha256(body), "application/json")


async def read_form(state: AppState, artifact_id: str, form: str) -> tuple[str, bytes, str]:
    """One read of a form, shared with the fast path: ("ok", body, sha256) from the byte cache or one
    query (a binary only when it matches its stored sha256; then cached), else ("missing" | "no_form" |
    "mismatch", b"", "") for the route to act on."""
    cached = state.blobs.get((artifact_id, form))
    if cached is not None:
        state.metrics.cache_hits.labels("download").inc()
        return "ok", *cached
    state.metrics.cache_misses.labels("download").inc()
    status, body, digest = await state.query(lambda c: _read_and_hash(c, artifact_id, form))
    if status == "ok":
        state.blobs.put((artifact_id, form), body, digest)
    return status, body, digest


def _read_and_hash(conn: Connection, artifact_id: str, form: str) -> tuple[str, bytes, str]:
    """In the worker thread: the query and the sha256 of a body that may be megabytes."""
    column = FORM_COLUMN[form]
    found = crud.get_artifact_form(conn, key=artifact_id, column=column)
    if found is None:
        return "missing", b"", ""
    value, stored_sha, target = found
    if form in ("cubin", "object") and BINARY_FORM[target.split(":")[0]] != form or not value:
        return "no_form", b"", ""
    body = value if isinstance(value, bytes) else value.encode()
    digest = sha256(body)
    if column == "binary" and digest != stored_sha:
        return "mismatch", b"", ""
    return "ok", body, digest


async def _load_form(
    state: AppState, artifact_id: str, form: str, first: tuple[str, bytes, str] | None
) -> tuple[bytes, str]:
    """The form's bytes and their sha256; a binary that no longer matches its sha256 is rebuilt first.
    `first` is the fast path's read of this form, when it made one."""
    for attempt in range(2):
        status, body, digest = first if attempt == 0 and first is not None else await read_form(state, artifact_id, form)
        if status == "ok":
            return body, digest
        if status == "missing":
            raise _not_found(artifact_id)
        if status == "no_form":
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_FORM_NOT_FOUND.format(id=artifact_id, form=form), missing=form)
        state.metrics.sha_mismatches.inc()
        if not await rebuild(state, artifact_id):
            raise _not_found(artifact_id)
    raise E.ApiError(503, E.COMPILE_FAILED, E.MSG_REBUILD_FAILED.format(id=artifact_id), headers={"Retry-After": "5"})


FORM_RESPONSES = {200: {"content": {"application/octet-stream": {}, "text/plain": {}}}, **NOT_FOUND}


@router.get("/{artifact_id}/{form}", response_class=Response, responses=FORM_RESPONSES)
@router.head("/{artifact_id}/{form}", operation_id="head_artifact_form", response_class=Response, responses=NOT_FOUND)
async def get_artifact_form(
    artifact_id: str, form: ArtifactForm, request: Request, state: StateDep, _token: TokenDep
) -> Response:
    read = request.scope.get(FORM_READ)
    first = read[1] if read is not None and read[0] == (artifact_id, form) else None
    body, digest = await _load_form(state, artifact_id, form, first)
    media = "application/octet-stream" if form in ("cubin", "object") else "text/plain; charset=utf-8"
    return _respond(request, body, digest, media)
