"""GET /v1/keys: the public keys the service signs manifests with, for clients to pin
(TILEC_TRUSTED_KEYS). No token needed, as for /healthz: a public key is no secret, and pinning it is
only worth anything when it is compared with one got another way (`tilec key show` on the server)."""

from __future__ import annotations

from fastapi import APIRouter

from tilec.wire import KeyPublic

from ..deps import StateDep

router = APIRouter(prefix="/keys", tags=["keys"])


@router.get("", response_model=list[KeyPublic])
async def list_keys(state: StateDep) -> list[KeyPublic]:
    return [state.signing_key().public()]
