"""The supply-chain check a binary passes before it reaches the loader (cuModuleLoadData or the cpu
loader): its manifest is for this device's target, signed by a key the user pins (TILEC_TRUSTED_KEYS),
and the binary is the one the manifest vouches for. cryptography loads only when keys are pinned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tilec.wire import ManifestBody, ManifestPublic, canonical_json

from ._exceptions import (
    BadSignatureError,
    BinaryMismatchError,
    TargetMismatchError,
    UnsignedManifestError,
    UntrustedKeyError,
    VerificationError,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TRUSTED_KEYS_ENV = "TILEC_TRUSTED_KEYS"
KEY_BYTES = 32  # a raw Ed25519 public key
SIGNATURE_BYTES = 64
NO_PIN_WARNING = (
    f"no {TRUSTED_KEYS_ENV} pinned, trusting the server: manifest signatures are not checked (target and "
    "sha256 still are); pin the key `tilec key show` prints to have them checked"
)
_warned = False  # the no-pin warning is given once per process


def key_id(public_raw: bytes) -> str:
    """sha256 of the 32 raw public bytes, first 16 hex digits (as the server names its key)."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


class TrustedKeys:
    """The public keys a user pins; a manifest must be signed by one of them."""

    def __init__(self, keys: Mapping[str, Ed25519PublicKey], source: str = TRUSTED_KEYS_ENV) -> None:
        self._keys = dict(keys)
        self.source = source

    @classmethod
    def from_env(cls) -> TrustedKeys | None:
        """TILEC_TRUSTED_KEYS: a file (one key a line, '#' comments) or a comma-separated list; None if unset."""
        value = os.environ.get(TRUSTED_KEYS_ENV, "").strip()
        if not value:
            return None
        path = Path(value).expanduser()
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise VerificationError(f"{TRUSTED_KEYS_ENV}: cannot read {path} ({exc})") from exc
            return cls.parse(text, source=f"{TRUSTED_KEYS_ENV} file {path}")
        try:
            return cls.parse(value)
        except VerificationError as exc:
            raise VerificationError(f"{exc} (nor is it a file)") from None

    @classmethod
    def parse(cls, text: str, source: str = TRUSTED_KEYS_ENV) -> TrustedKeys:
        """Keys separated by commas or new lines, '#' starting a comment. Each is the base64 raw public key,
        or a line of `tilec key show` (key id, ed25519, key), whose key id is then checked."""
        keys: dict[str, Ed25519PublicKey] = {}
        lines = text.splitlines()
        for number, line in enumerate(lines, start=1):
            where = f"{source}, line {number}" if len(lines) > 1 else source
            for entry in line.split("#", 1)[0].split(","):
                if entry.strip():
                    found = _parse_entry(entry.split(), where)
                    keys[found[0]] = found[1]
        return cls(keys, source)

    def get(self, key_id: str) -> Ed25519PublicKey | None:
        return self._keys.get(key_id)

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def _parse_entry(fields: list[str], where: str) -> tuple[str, Ed25519PublicKey]:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    named = None
    if len(fields) == 3 and fields[1] == "ed25519":
        named, fields = fields[0], fields[2:]
    if len(fields) != 1:
        raise VerificationError(
            f"{where}: expected a base64 Ed25519 public key, got {' '.join(fields)[:100]!r}"
        )
    try:
        raw = base64.b64decode(fields[0], validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError(f"{where}: {fields[0][:100]!r} is not base64") from None
    if len(raw) != KEY_BYTES:
        raise VerificationError(f"{where}: a key is {KEY_BYTES} bytes, this one {len(raw)}")
    kid = key_id(raw)
    if named is not None and named != kid:
        raise VerificationError(f"{where}: key id {named} does not match its key (whose id is {kid})")
    return kid, Ed25519PublicKey.from_public_bytes(raw)


def _parse_manifest(manifest: ManifestPublic | dict[str, Any]) -> ManifestPublic:
    if isinstance(manifest, ManifestPublic):
        return manifest
    named = manifest.get("manifest") if isinstance(manifest, dict) else None
    artifact = named.get("artifact_id", "?") if isinstance(named, dict) else "?"
    try:
        return ManifestPublic.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise VerificationError(
            f"artifact {artifact}: the manifest cannot be read ({where}: {first['msg']})"
        ) from None


def _warn_unpinned() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(NO_PIN_WARNING, UserWarning, stacklevel=3)


def _check_signature(public: ManifestPublic, trusted: TrustedKeys) -> None:
    from cryptography.exceptions import InvalidSignature

    body = public.manifest
    what = f"artifact {body.artifact_id} ({body.target})"
    if public.signature is None or public.key_id is None:
        raise UnsignedManifestError(f"{what}: the manifest is unsigned, and {trusted.source} pins keys")
    key = trusted.get(public.key_id)
    if key is None:
        pinned = ", ".join(trusted.key_ids) or "none"
        raise UntrustedKeyError(
            f"{what}: signed by key {public.key_id}, which {trusted.source} does not pin (pinned: {pinned})"
        )
    try:
        signature = base64.b64decode(public.signature, validate=True)
    except (binascii.Error, ValueError):
        signature = b""
    if len(signature) != SIGNATURE_BYTES:
        raise BadSignatureError(
            f"{what}: the signature of key {public.key_id} is not a base64 Ed25519 signature"
        )
    try:
        key.verify(signature, canonical_json(body.model_dump(mode="json")))
    except InvalidSignature:
        raise BadSignatureError(
            f"{what}: the signature of key {public.key_id} does not match the manifest (changed after signing)"
        ) from None


def verify(
    manifest: ManifestPublic | dict[str, Any], binary: bytes, *, target: str, trusted: TrustedKeys | None
) -> ManifestBody:
    """The manifest's body once every check passed, in this order: it parses, it is for `target`, it is
    signed by a pinned key (skipped, with a warning once, when `trusted` is None), and `binary` has its
    sha256 and size. Raises the VerificationError subclass naming the check that failed."""
    public = _parse_manifest(manifest)
    body = public.manifest
    if body.target != target:
        raise TargetMismatchError(
            f"artifact {body.artifact_id} is for {body.target}, this device runs {target}"
        )
    if trusted is None:
        _warn_unpinned()
    else:
        _check_signature(public, trusted)
    by = f"the manifest (key {public.key_id})" if public.key_id else "the unsigned manifest"
    digest = hashlib.sha256(binary).hexdigest()
    if digest != body.sha256:
        raise BinaryMismatchError(
            f"artifact {body.artifact_id} ({target}): the binary's sha256 is {digest}, {by} says {body.sha256}"
        )
    if len(binary) != body.size:
        raise BinaryMismatchError(
            f"artifact {body.artifact_id} ({target}): the binary is {len(binary)} bytes, {by} says {body.size}"
        )
    return body
