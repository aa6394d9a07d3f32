"""client/_verify.py: a manifest signed here with a key of the test's own (as the spec says: Ed25519 over
canonical_json of the body) passes; a flipped byte, another signer, no signature, a field changed after
signing, another target are each refused with their own exception; no pin warns once; TILEC_TRUSTED_KEYS
from a file and from a list. The end-to-end case (a real service's key and manifest) is the last test."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import tilec
from tilec.client import (
    BadSignatureError,
    BinaryMismatchError,
    Client,
    TargetMismatchError,
    TilecError,
    UnsignedManifestError,
    UntrustedKeyError,
    VerificationError,
    _verify,
)
from tilec.client._verify import TrustedKeys, key_id, verify
from tilec.wire import CompileCreate, ManifestBody, ManifestPublic, canonical_json

BINARY = bytes(range(256)) * 8
TARGET = "cuda:sm_90"


def _raw(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _b64(private: Ed25519PrivateKey) -> str:
    return base64.b64encode(_raw(private)).decode()


def _body(**changes: object) -> ManifestBody:
    fields = {
        "artifact_id": "a" * 64,
        "kernel_key": "k" * 64,
        "kernel_name": "vadd",
        "config": {"kwargs": {"BLOCK": 256}, "num_warps": 4, "num_stages": 3},
        "spec": {"signature": {"n": "i32"}, "constexprs": {}, "hints": {}, "emit": "cubin"},
        "metadata": {"shared": 0, "num_warps": 4, "name": "vadd_kernel"},
        "target": TARGET,
        "compiler_version": "c" * 32,
        "sha256": hashlib.sha256(BINARY).hexdigest(),
        "size": len(BINARY),
    }
    return ManifestBody(**{**fields, **changes})


def _sign(body: ManifestBody, private: Ed25519PrivateKey) -> ManifestPublic:
    signature = private.sign(canonical_json(body.model_dump(mode="json")))
    return ManifestPublic(
        manifest=body, key_id=key_id(_raw(private)), signature=base64.b64encode(signature).decode()
    )


@pytest.fixture
def server_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def pinned(server_key: Ed25519PrivateKey) -> TrustedKeys:
    return TrustedKeys.parse(_b64(server_key))


@pytest.fixture
def unwarned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_verify, "_warned", False)


def test_a_good_manifest_passes(server_key: Ed25519PrivateKey, pinned: TrustedKeys) -> None:
    signed = _sign(_body(), server_key)
    assert verify(signed, BINARY, target=TARGET, trusted=pinned) == signed.manifest
    as_json = signed.model_dump(mode="json")  # as read from a file or the wire
    assert verify(as_json, BINARY, target=TARGET, trusted=pinned).artifact_id == "a" * 64


def test_a_flipped_byte_is_refused(server_key: Ed25519PrivateKey, pinned: TrustedKeys) -> None:
    signed = _sign(_body(), server_key)
    flipped = bytearray(BINARY)
    flipped[100] ^= 1
    with pytest.raises(
        BinaryMismatchError, match=f"artifact {'a' * 64} \\({TARGET}\\): the binary's sha256 is"
    ):
        verify(signed, bytes(flipped), target=TARGET, trusted=pinned)
    with pytest.raises(BinaryMismatchError):
        verify(signed, BINARY[:-1], target=TARGET, trusted=pinned)  # truncated


def test_a_wrong_size_is_refused(server_key: Ed25519PrivateKey, pinned: TrustedKeys) -> None:
    signed = _sign(_body(size=len(BINARY) + 1), server_key)
    with pytest.raises(BinaryMismatchError, match=f"the binary is {len(BINARY)} bytes"):
        verify(signed, BINARY, target=TARGET, trusted=pinned)


def test_a_manifest_resigned_with_another_key_is_refused(
    pinned: TrustedKeys, server_key: Ed25519PrivateKey
) -> None:
    intruder = Ed25519PrivateKey.generate()
    signed = _sign(_body(), intruder)
    with pytest.raises(UntrustedKeyError) as caught:
        verify(signed, BINARY, target=TARGET, trusted=pinned)
    message = str(caught.value)
    assert key_id(_raw(intruder)) in message and key_id(_raw(server_key)) in message and "a" * 64 in message
    # claiming the pinned key's id does not help: the signature is checked with the pinned key itself
    forged = signed.model_copy(update={"key_id": key_id(_raw(server_key))})
    with pytest.raises(BadSignatureError):
        verify(forged, BINARY, target=TARGET, trusted=pinned)


def test_an_unsigned_manifest_is_refused(pinned: TrustedKeys) -> None:
    with pytest.raises(UnsignedManifestError, match="unsigned"):
        verify(ManifestPublic(manifest=_body()), BINARY, target=TARGET, trusted=pinned)
    signed_half = ManifestPublic(manifest=_body(), key_id=pinned.key_ids[0])
    with pytest.raises(UnsignedManifestError):
        verify(signed_half, BINARY, target=TARGET, trusted=pinned)


def test_a_field_changed_after_signing_is_refused(server_key: Ed25519PrivateKey, pinned: TrustedKeys) -> None:
    signed = _sign(_body(), server_key).model_dump(mode="json")
    changes = {"metadata": {**signed["manifest"]["metadata"], "shared": 49152}, "kernel_name": "other",
               "config": {"kwargs": {"BLOCK": 128}}}  # fmt: skip
    for field, value in changes.items():
        changed = {**signed, "manifest": {**signed["manifest"], field: value}}
        with pytest.raises(BadSignatureError, match="does not match the manifest"):
            verify(changed, BINARY, target=TARGET, trusted=pinned)
    # a new binary with its own sha256 written into the manifest: the signature no longer covers it
    other = b"\x00" * 64
    swapped = {
        **signed,
        "manifest": {**signed["manifest"], "sha256": hashlib.sha256(other).hexdigest(), "size": 64},
    }
    with pytest.raises(BadSignatureError):
        verify(swapped, other, target=TARGET, trusted=pinned)
    for garbage in ("not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(BadSignatureError, match="not a base64 Ed25519 signature"):
            verify({**signed, "signature": garbage}, BINARY, target=TARGET, trusted=pinned)


def test_a_manifest_for_another_target_is_refused(server_key: Ed25519PrivateKey, pinned: TrustedKeys) -> None:
    signed = _sign(_body(target="cuda:sm_80"), server_key)
    with pytest.raises(TargetMismatchError) as caught:
        verify(signed, BINARY, target="cuda:sm_90", trusted=pinned)
    assert str(caught.value) == f"artifact {'a' * 64} is for cuda:sm_80, this device runs cuda:sm_90"


def test_an_unreadable_manifest_is_refused(pinned: TrustedKeys) -> None:
    good = ManifestPublic(manifest=_body()).model_dump(mode="json")
    missing = {**good, "manifest": {k: v for k, v in good["manifest"].items() if k != "sha256"}}
    with pytest.raises(
        VerificationError, match=f"artifact {'a' * 64}: the manifest cannot be read \\(manifest.sha256"
    ):
        verify(missing, BINARY, target=TARGET, trusted=pinned)
    newer = {**good, "manifest": {**good["manifest"], "format": "tilec-manifest/2"}}
    with pytest.raises(VerificationError, match="manifest.format"):
        verify(newer, BINARY, target=TARGET, trusted=pinned)
    with pytest.raises(VerificationError, match="artifact \\?"):
        verify({"manifest": "x"}, BINARY, target=TARGET, trusted=pinned)


@pytest.mark.usefixtures("unwarned")
def test_no_pin_warns_once_and_still_checks_target_and_sha256() -> None:
    unsigned = ManifestPublic(manifest=_body())
    with pytest.warns(UserWarning, match="no TILEC_TRUSTED_KEYS pinned"):
        verify(unsigned, BINARY, target=TARGET, trusted=None)
    verify(unsigned, BINARY, target=TARGET, trusted=None)  # no second warning (warnings are errors here)
    with pytest.raises(TargetMismatchError):
        verify(unsigned, BINARY, target="cuda:sm_80", trusted=None)
    with pytest.raises(BinaryMismatchError, match="the unsigned manifest says"):
        verify(unsigned, BINARY + b"\x00", target=TARGET, trusted=None)


def test_exception_tree() -> None:
    for exc in (
        UnsignedManifestError,
        UntrustedKeyError,
        BadSignatureError,
        TargetMismatchError,
        BinaryMismatchError,
    ):
        assert issubclass(exc, VerificationError) and issubclass(exc, TilecError)
        assert getattr(tilec, exc.__name__) is exc


# TILEC_TRUSTED_KEYS


def test_trusted_keys_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    path = tmp_path / "trusted_keys"
    path.write_text(
        f"# the team's server\n{_b64(one)}\n\n   # old key, kept while clients move\n"
        f"{key_id(_raw(two))}\ted25519\t{_b64(two)}  # as `tilec key show` prints it\n"
    )
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", str(path))
    keys = TrustedKeys.from_env()
    assert keys is not None and keys.key_ids == sorted([key_id(_raw(one)), key_id(_raw(two))])
    assert keys.get(key_id(_raw(one))) is not None and keys.get("0" * 16) is None
    assert keys.source == f"TILEC_TRUSTED_KEYS file {path}"
    verify(_sign(_body(), two), BINARY, target=TARGET, trusted=keys)


def test_trusted_keys_from_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", f" {_b64(one)} , {_b64(two)} ")
    keys = TrustedKeys.from_env()
    assert keys is not None and len(keys) == 2
    verify(_sign(_body(), one), BINARY, target=TARGET, trusted=keys)


def test_trusted_keys_unset_or_empty_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILEC_TRUSTED_KEYS", raising=False)
    assert TrustedKeys.from_env() is None
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", "  ")
    assert TrustedKeys.from_env() is None


def test_bad_trusted_keys_are_refused_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _b64(Ed25519PrivateKey.generate())
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", str(tmp_path / "no_such_file"))
    with pytest.raises(VerificationError, match="is not base64 \\(nor is it a file\\)"):
        TrustedKeys.from_env()
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", f"{good},{base64.b64encode(b'x' * 31).decode()}")
    with pytest.raises(VerificationError, match="a key is 32 bytes, this one 31"):
        TrustedKeys.from_env()
    path = tmp_path / "keys"
    path.write_text(f"{good}\n0000000000000000 ed25519 {good}\n")
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", str(path))
    with pytest.raises(
        VerificationError, match=f"file {path}, line 2: key id 0000000000000000 does not match"
    ):
        TrustedKeys.from_env()


def test_an_empty_pin_file_trusts_nothing(tmp_path: Path, server_key: Ed25519PrivateKey) -> None:
    keys = TrustedKeys.parse("# nothing yet\n", source="keys")
    with pytest.raises(UntrustedKeyError, match="pinned: none"):
        verify(_sign(_body(), server_key), BINARY, target=TARGET, trusted=keys)


# end to end: a real service


def test_a_real_services_manifest_verifies(service: Callable[..., object]) -> None:
    from tests.server.conftest import ADD_IR

    svc = service(auth=True)
    with Client(svc.url, svc.tokens["submit"]) as api:
        art = api.compile(CompileCreate(ir=ADD_IR, target="cpu"))
        (key,) = api.keys()
        signed = api.manifest(art.id)
        binary = api.download(art.id, "object")
    with Client(svc.url) as anonymous:
        assert anonymous.keys() == [key]  # no token needed to read the public key
    body = verify(signed, binary, target="cpu", trusted=TrustedKeys.parse(key.public_key))
    assert body.artifact_id == art.id and body.sha256 == art.sha256
    with pytest.raises(TargetMismatchError):
        verify(signed, binary, target="cuda:sm_90", trusted=TrustedKeys.parse(key.public_key))
