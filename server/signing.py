"""The service's Ed25519 signing key: it signs one manifest per artifact, which clients check against the
keys they pin before a binary reaches their loader. Given by setting (PEM text or a path), or generated
once into the data dir; every process starting on that data dir at once ends up with the same key.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tilec.wire import KeyPublic, ManifestBody, ManifestPublic, canonical_json

from .settings import Settings

KEY_FILE = "signing_key.pem"
PEM_HEADER = "-----BEGIN"


class SigningKeyError(ValueError):
    """The configured key cannot be used (not PEM, not Ed25519, encrypted, unreadable); names the source."""


def key_id(public_raw: bytes) -> str:
    """The id clients know a key by: sha256 of the 32 raw public bytes, first 16 hex digits."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey
    key_id: str
    public_raw: bytes
    source: str  # where it came from, for messages: a path or "TILEC_SIGNING_KEY"

    @classmethod
    def from_private(cls, private: Ed25519PrivateKey, source: str) -> SigningKey:
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(private=private, key_id=key_id(raw), public_raw=raw, source=source)

    def public(self) -> KeyPublic:
        return KeyPublic(key_id=self.key_id, public_key=base64.b64encode(self.public_raw).decode())

    def sign(self, manifest: ManifestBody) -> ManifestPublic:
        signature = self.private.sign(canonical_json(manifest.model_dump(mode="json")))
        return ManifestPublic(
            manifest=manifest, key_id=self.key_id, signature=base64.b64encode(signature).decode()
        )

    def verifies(self, signed: ManifestPublic) -> bool:
        """Whether this key made `signed`'s signature over its manifest as it reads now (False for another
        key's signature: this key cannot vouch for it)."""
        if signed.key_id != self.key_id or signed.signature is None:
            return False
        try:
            raw = base64.b64decode(signed.signature, validate=True)
            self.private.public_key().verify(raw, canonical_json(signed.manifest.model_dump(mode="json")))
        except (InvalidSignature, ValueError):
            return False
        return True


def manifest_body(row: Any, tuning_key: str | None = None) -> ManifestBody:
    """The manifest of an artifact (a row, or anything with the row's attributes): what the builder signs
    when it stores the row, and what the manifest route rebuilds from the row to serve with that stored
    signature. Every field a loader uses is here: binary sha256 and size, target, kernel (grid) symbol,
    launch metadata (argument layout, threads, shared memory), spec and config. Raises ValueError (a
    pydantic ValidationError) when a stored column is not what a manifest holds."""
    return ManifestBody(
        artifact_id=row.key,
        kernel_key=row.kernel_key,
        kernel_name=row.kernel_name,
        tuning_key=tuning_key,
        config=row.config,
        spec=row.spec,
        metadata=row.meta if row.meta is not None else {},
        target=row.target,
        compiler_version=row.compiler_version,
        sha256=row.sha256,
        size=row.size,
    )


def stored_manifest(row: Any) -> ManifestPublic:
    """The build manifest of a row with the signature stored beside it at build time (unsigned for rows
    stored before signatures were: clients that pin keys refuse those)."""
    return ManifestPublic(manifest=manifest_body(row), key_id=row.signing_key_id, signature=row.signature)


def parse_pem(pem: bytes, source: str) -> SigningKey:
    try:
        private = serialization.load_pem_private_key(pem, password=None)
    except TypeError as exc:  # encrypted: we have no password to give
        raise SigningKeyError(f"{source}: the private key is encrypted; give an unencrypted PEM") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningKeyError(f"{source}: not a PEM private key ({exc})") from exc
    if not isinstance(private, Ed25519PrivateKey):
        raise SigningKeyError(f"{source}: a {type(private).__name__}, not an Ed25519 private key")
    return SigningKey.from_private(private, source)


def _read_key_file(path: Path, source: str) -> SigningKey:
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"{source}: cannot read {path} ({exc.strerror or exc})") from exc
    return parse_pem(pem, str(path))


def _pem_of(private: Ed25519PrivateKey) -> bytes:
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def generate_once(path: Path) -> SigningKey:
    """The key in `path`, generated there first if missing."""
    if not path.exists():
        create_key_file(path)
    return _read_key_file(path, str(path))


def create_key_file(path: Path) -> None:
    """A new key written whole to a temp file (0600) and hard-linked into place, which never overwrites:
    of processes racing to create it, every loser's link fails and all of them read the winner's key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".signing_key.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_pem_of(Ed25519PrivateKey.generate()))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process got there first: its key is the one
        except OSError as exc:
            raise SigningKeyError(
                f"cannot create {path} ({exc.strerror or exc}); set TILEC_SIGNING_KEY to a PEM key or its path"
            ) from exc
    finally:
        os.unlink(tmp)


def load_signing_key(settings: Settings) -> SigningKey:
    """The key of TILEC_SIGNING_KEY (PEM text or a path), else data_dir/signing_key.pem (made if missing)."""
    given = settings.signing_key.strip()
    if not given:
        return generate_once(Path(settings.data_dir) / KEY_FILE)
    if given.startswith(PEM_HEADER):
        if "\n" not in given:  # one line, as an env file or compose file often holds it: \n written out
            given = given.replace("\\n", "\n")
        return parse_pem(given.encode(), "TILEC_SIGNING_KEY")
    return _read_key_file(Path(given).expanduser(), "TILEC_SIGNING_KEY")
