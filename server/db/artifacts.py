"""The store's side of a build: a compile's Artifact turned into its artifacts row (text digests, packed
per-pass dumps). The compile route and the tune-job runner both store their builds through artifact_values;
a worker imports this, not the API's compile module (server/service.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from types import SimpleNamespace
from typing import Any

from sqlalchemy.orm import Session

from ..signing import SigningKey, manifest_body, stored_manifest
from . import crud

log = logging.getLogger("tilec.service")

TEXT_FORMS = ("ptx", "llir", "tir")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_digests(values: dict[str, Any]) -> dict[str, str]:
    """The stored sha256 of each text form (of its UTF-8 bytes), as columns `<form>_sha256`."""
    return {f"{form}_sha256": sha256(values[form].encode()) for form in TEXT_FORMS}


def artifact_values(
    *, kernel_key: str, key: str, spec: dict, config: dict, target: str, art: dict, signer: SigningKey | None = None
) -> dict[str, Any]:
    """The artifacts row of a compile (`art`: the Artifact's fields as a dict), text digests included, and,
    given the service's key, the signature of its manifest made now, as it is built; the compile route and
    the tune-job runner store their builds through it (and store_build)."""
    binary = art["binary"] or b""
    values = {
        "key": key,
        "kernel_key": kernel_key,
        "kernel_name": art["kernel_name"],
        "target": target,
        "emit": spec["emit"],
        "compiler_version": art["compiler_version"],
        "spec": spec,
        "config": config,
        "binary": binary,
        "tir": art["tir"] or "",
        "llir": art["llir"] or "",
        "ptx": art["ptx"] or "",
        "meta": art["metadata"] or {},
        "sha256": sha256(binary),
        "size": len(binary),
        "pass_dumps": pack_pass_dumps(art.get("pass_dumps")),
    }
    values.update(text_digests(values))
    if signer is not None:
        signed = signer.sign(manifest_body(SimpleNamespace(**values)))
        values.update(signature=signed.signature, signing_key_id=signed.key_id)
    return values


def store_build(session: Session, *, values: dict[str, Any], signer: SigningKey) -> str:
    """Store a signed build: never over a row this key signed that holds other bytes (crud.put_artifact
    says what happened; a "conflict" is logged here, the caller counts it where it has metrics)."""
    outcome = crud.put_artifact(session, values=values, authentic=lambda row: signer.verifies(stored_manifest(row)))
    if outcome == "conflict":
        log.warning("artifact %s: a build gave other bytes (sha256 %s) than the stored row; the stored row stands",
                    values["key"], values["sha256"])  # fmt: skip
    elif outcome == "replaced":
        log.warning("artifact %s: the stored row's signature did not verify; replaced by a new build", values["key"])
    return outcome


def pack_pass_dumps(dumps: list[dict] | None) -> bytes | None:
    """A compile's per-pass dumps as the artifacts row keeps them: zlib-compressed JSON (the passes repeat
    most of the module, which compresses to a few KB)."""
    return None if not dumps else zlib.compress(json.dumps(dumps, separators=(",", ":")).encode(), 6)


def unpack_pass_dumps(blob: bytes | None) -> list[dict] | None:
    """The dumps of pack_pass_dumps, or None when there are none or they cannot be read back (a damaged
    value is then recomputed, never served)."""
    if not blob:
        return None
    try:
        dumps = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError):
        return None
    ok = isinstance(dumps, list) and all(
        isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("ir"), str) for d in dumps
    )
    return dumps if ok else None
