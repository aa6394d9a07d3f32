"""The store's side of a build: a compile's Artifact turned into its artifacts row (text digests, packed
per-pass dumps). The compile route and the tune-job runner both store their builds through artifact_values;
a worker imports this, not the API's compile module (server/service.py).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

TEXT_FORMS = ("ptx", "llir", "tir")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_digests(values: dict[str, Any]) -> dict[str, str]:
    """The stored sha256 of each text form (of its UTF-8 bytes), as columns `<form>_sha256`."""
    return {f"{form}_sha256": sha256(values[form].encode()) for form in TEXT_FORMS}


def artifact_values(
    *, kernel_key: str, key: str, spec: dict, config: dict, target: str, art: dict
) -> dict[str, Any]:
    """The artifacts row of a compile (`art`: the Artifact's fields as a dict), text digests included;
    the compile route and the tune-job runner store their builds through it."""
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
    return values


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
