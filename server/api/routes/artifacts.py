"""GET|HEAD /v1/artifacts/{id} and /v1/artifacts/{id}/{form}: immutable, ETag = sha256 of the body.
GET /v1/artifacts: a page of artifacts (metadata), newest first, by kernel and target.
GET /v1/artifacts/{id}/manifest: the artifact as the service vouched for it when it built it: the
signature stored with the row (tuning_key=...: that statement signed now, over a row that still verifies).

A form (binary or text) whose bytes no longer match its own stored sha256, or a row that cannot be read
back, is never served: it is rebuilt first (a compile: only for a token with the submit scope), or is a
miss when it cannot be.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.orm import Session

from tilec.wire import ArtifactForm, ArtifactPublic, ErrorPublic, ManifestPublic, Text

from ... import errors as E
from ...db import crud
from ...db.models import Artifact
from ...metrics import Metrics
from ...reads import FORM_READ, read_form
from ...service import UNREADABLE, artifact_public, check_target, rebuild, sha256, unreadable
from ...signing import manifest_body, stored_manifest
from ...state import AppState
from ..deps import FilteredPageDep, OnceEach, ReadSessionDep, StateDep, TokenDep, TokenInfo

router = APIRouter(prefix="/artifacts", tags=["artifacts"])
log = logging.getLogger("tilec.artifacts")
IMMUTABLE = "public, max-age=31536000, immutable"
NOT_FOUND = {404: {"model": ErrorPublic}}


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
async def get_artifact(artifact_id: Text, request: Request, state: StateDep, token: TokenDep) -> Response:
    def load(session: Session) -> ArtifactPublic | str | None:
        try:
            row = crud.get_artifact_meta(session, key=artifact_id)
            return None if row is None else artifact_public(row, cached=True)
        except UNREADABLE:
            return "unreadable"

    for _attempt in range(2):
        public = await state.read(load)
        if public is None:
            raise _not_found(artifact_id)
        if isinstance(public, ArtifactPublic):
            body = public.model_dump_json().encode()
            return _respond(request, body, sha256(body), "application/json")
        unreadable(state.metrics, "artifacts")
        if not await rebuild(state, artifact_id, token):
            raise _not_found(artifact_id)
    raise _rebuild_failed(artifact_id)


def _rebuild_failed(artifact_id: str) -> E.ApiError:
    return E.ApiError(503, E.COMPILE_FAILED, E.MSG_REBUILD_FAILED.format(id=artifact_id), headers={"Retry-After": "5"})


async def _load_form(
    state: AppState, artifact_id: str, form: str, first: tuple[str, bytes, str] | None, token: TokenInfo
) -> tuple[bytes, str]:
    """The form's bytes and their sha256; a form that no longer matches its sha256, or that cannot be
    read, is rebuilt first. `first` is the fast path's read of this form, when it made one."""
    for attempt in range(2):
        status, body, digest = first if attempt == 0 and first is not None else await read_form(state, artifact_id, form)
        if status == "ok":
            return body, digest
        if status == "missing":
            raise _not_found(artifact_id)
        if status == "no_form":
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_FORM_NOT_FOUND.format(id=artifact_id, form=form), missing=form)
        if status == "mismatch":
            state.metrics.sha_mismatches.inc()
        else:
            unreadable(state.metrics, "artifacts")
        if not await rebuild(state, artifact_id, token):
            raise _not_found(artifact_id)
    raise _rebuild_failed(artifact_id)


def _check_tuning_key(session: Session, artifact_id: str, tkey: str) -> None:
    """The manifest names a tuning key only when that result's best config is this very artifact."""
    found = crud.result_artifact(session, tkey=tkey)
    if found is None:
        detail = E.MSG_MANIFEST_NO_RESULT.format(tkey=tkey, id=artifact_id)
    elif found[0] is None:
        detail = E.MSG_MANIFEST_NO_BUILD.format(tkey=tkey, id=artifact_id)
    elif found[0] != artifact_id:
        detail = E.MSG_MANIFEST_OTHER_ARTIFACT.format(tkey=tkey, linked=found[0], id=artifact_id)
    else:
        return
    raise E.ApiError(422, E.TUNING_KEY_MISMATCH, detail)


MANIFEST_RESPONSES = {**NOT_FOUND, 422: {"model": ErrorPublic}}


# before /{artifact_id}/{form}, which would otherwise take "manifest" for a form
@router.get("/{artifact_id}/manifest", response_model=ManifestPublic, responses=MANIFEST_RESPONSES)
async def get_manifest(
    artifact_id: Text,
    state: StateDep,
    token: TokenDep,
    tuning_key: Annotated[Text | None, Query(min_length=1, max_length=128)] = None,
) -> ManifestPublic:
    def load(session: Session) -> tuple[ManifestPublic, Artifact] | str | None:
        try:
            row = crud.get_artifact_manifest(session, key=artifact_id)
            if row is None:
                return None
            signed = stored_manifest(row)
        except UNREADABLE:
            return "unreadable"
        if tuning_key is not None:
            _check_tuning_key(session, artifact_id, tuning_key)
        return signed, row

    for _attempt in range(2):
        found = await state.read(load)
        if found is None:
            raise _not_found(artifact_id)
        if isinstance(found, tuple):
            return _vouch(state, *found, tuning_key)
        unreadable(state.metrics, "artifacts")
        if not await rebuild(state, artifact_id, token):
            raise _not_found(artifact_id)
    raise _rebuild_failed(artifact_id)


def _vouch(state: AppState, signed: ManifestPublic, row: Artifact, tuning_key: str | None) -> ManifestPublic:
    """The manifest as signed when the artifact was built, served as stored: a row changed since then fails
    every pinned client's check. Naming a tuning key is a statement made now, so it is signed now, but only
    over a row whose stored signature this key verifies; otherwise the stored manifest goes out unchanged
    (without the tuning key, which clients asking for one refuse too)."""
    signer = state.signing_key()
    if signed.signature is None:  # a row stored before signatures: unsigned, refused where keys are pinned
        return signed
    good = signer.verifies(signed)
    if not good and signed.key_id == signer.key_id:
        state.metrics.signature_mismatches.inc()
        log.warning("artifact %s: the stored row no longer matches its build-time signature", row.key)
    if tuning_key is None or not good:
        return signed
    return signer.sign(manifest_body(row, tuning_key))


FORM_RESPONSES = {200: {"content": {"application/octet-stream": {}, "text/plain": {}}}, **NOT_FOUND}


@router.get("/{artifact_id}/{form}", response_class=Response, responses=FORM_RESPONSES)
@router.head("/{artifact_id}/{form}", operation_id="head_artifact_form", response_class=Response, responses=NOT_FOUND)
async def get_artifact_form(
    artifact_id: Text, form: ArtifactForm, request: Request, state: StateDep, token: TokenDep
) -> Response:
    read = request.scope.get(FORM_READ)
    first = read[1] if read is not None and read[0] == (artifact_id, form) else None
    body, digest = await _load_form(state, artifact_id, form, first, token)
    media = "application/octet-stream" if form in ("cubin", "object") else "text/plain; charset=utf-8"
    return _respond(request, body, digest, media)


@router.get("", response_model=list[ArtifactPublic], responses={422: {"model": ErrorPublic}}, dependencies=[OnceEach])
def list_artifacts(
    session: ReadSessionDep,
    state: StateDep,
    _token: TokenDep,
    query: FilteredPageDep,
) -> list[ArtifactPublic]:
    """A page of artifacts (metadata, no bytes), newest first, of one kernel and/or target when asked;
    a row that cannot be read back is left out (and counted): GET it by id to have it rebuilt."""
    if query.target is not None:
        check_target(query.target)
    page = query.model_dump()
    try:
        rows: list[Artifact | None] = list(crud.list_artifacts(session, **page))
    except UNREADABLE:  # one row broke the whole fetch: read the page row by row
        rows = [_read_meta(session, state.metrics, key) for key in crud.list_artifact_keys(session, **page)]
    listed = [_listed_artifact(state.metrics, row) for row in rows if row is not None]
    return [a for a in listed if a is not None]


def _read_meta(session: Session, metrics: Metrics, key: str) -> Artifact | None:
    try:
        return crud.get_artifact_meta(session, key=key)
    except UNREADABLE:
        unreadable(metrics, "artifacts")
        return None


def _listed_artifact(metrics: Metrics, row: Artifact) -> ArtifactPublic | None:
    try:
        return artifact_public(row, cached=True)
    except UNREADABLE:
        unreadable(metrics, "artifacts")
        return None
