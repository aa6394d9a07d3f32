"""The service's signing key (generated once per data dir, or given by setting), GET /v1/keys, the signed
manifest route (its signature checked with the served key over the canonical bytes; tuning_key echoed
only for the result's own build), and `tilec key show`."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from typer.testing import CliRunner

from tilec.cli import _register_all, app
from tilec.client import AsyncClient, UntrustedKeyError
from tilec.client._verify import TrustedKeys, verify
from tilec.server import errors as E
from tilec.server.settings import Settings
from tilec.server.signing import KEY_FILE, SigningKeyError, create_key_file, key_id, load_signing_key
from tilec.wire import canonical_json

from .conftest import ADD_IR

Client = Callable[..., httpx.AsyncClient]


def _pem(key: object) -> str:
    return key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _raw_id(private: Ed25519PrivateKey) -> str:
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key_id(raw)


# the key


def test_key_generated_once_with_mode_0600(tmp_path: Path) -> None:
    first = load_signing_key(Settings(data_dir=tmp_path / "data"))
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_signing_key(Settings(data_dir=tmp_path / "data"))
    assert again.key_id == first.key_id and again.public_raw == first.public_raw
    assert len(first.key_id) == 16 and len(first.public_raw) == 32
    assert sorted(p.name for p in path.parent.iterdir()) == [KEY_FILE]  # no temp file left behind


def test_creating_over_an_existing_key_keeps_it(tmp_path: Path) -> None:
    """The loser of a race (it saw no file, then another process linked one) reads the winner's key."""
    path = tmp_path / KEY_FILE
    winner = Ed25519PrivateKey.generate()
    path.write_text(_pem(winner))
    create_key_file(path)
    assert load_signing_key(Settings(data_dir=tmp_path)).key_id == _raw_id(winner)
    assert sorted(p.name for p in tmp_path.iterdir()) == [KEY_FILE]


RACER = """
import sys, time
from pathlib import Path
from tilec.server.signing import generate_once
go = Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
print(generate_once(Path(sys.argv[1])).key_id)
"""


def test_concurrent_first_starts_agree_on_one_key(tmp_path: Path) -> None:
    path, go = tmp_path / "data" / KEY_FILE, tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, str(path), str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    # the event, not a pause: every process has imported and waits for the go (each says so), so they race
    assert all(p.stdout is not None and p.stdout.readline() == "ready\n" for p in procs)
    go.touch()
    ids = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert ids == {load_signing_key(Settings(data_dir=tmp_path / "data")).key_id}
    assert sorted(p.name for p in path.parent.iterdir()) == [KEY_FILE]


def test_key_given_as_pem_text_or_path(tmp_path: Path) -> None:
    private = Ed25519PrivateKey.generate()
    pem = _pem(private)
    (tmp_path / "given.pem").write_text(pem)
    data = tmp_path / "data"
    for given in (pem, pem.replace("\n", "\\n"), str(tmp_path / "given.pem")):
        assert load_signing_key(Settings(data_dir=data, signing_key=given)).key_id == _raw_id(private)
    assert not data.exists()  # a given key makes no file


def test_bad_key_settings_are_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "ec.pem").write_text(_pem(ec.generate_private_key(ec.SECP256R1())))
    (tmp_path / "junk.pem").write_text("not a key")
    cases = {
        str(tmp_path / "ec.pem"): "not an Ed25519 private key",
        str(tmp_path / "junk.pem"): "not a PEM private key",
        str(tmp_path / "missing.pem"): "cannot read",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n": "TILEC_SIGNING_KEY: not a PEM private key",
    }
    for given, message in cases.items():
        with pytest.raises(SigningKeyError, match=message):
            load_signing_key(Settings(data_dir=tmp_path, signing_key=given))
    encrypted = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(SigningKeyError, match="encrypted"):
        load_signing_key(Settings(data_dir=tmp_path, signing_key=encrypted.decode()))


# the routes


async def test_key_stable_across_app_restarts_and_served_without_token(make_client: Client) -> None:
    async with make_client(auth=True) as c:
        first = await c.get("/v1/keys")
    async with make_client(auth=True) as c:
        second = await c.get("/v1/keys")
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    (key,) = first.json()
    assert key["algorithm"] == "ed25519" and len(base64.b64decode(key["public_key"])) == 32
    assert key["key_id"] == key_id(base64.b64decode(key["public_key"]))


async def test_key_given_by_setting_is_served(make_client: Client, tmp_path: Path) -> None:
    private = Ed25519PrivateKey.generate()
    async with make_client(signing_key=_pem(private)) as c:
        (key,) = (await c.get("/v1/keys")).json()
    assert key["key_id"] == _raw_id(private)
    assert not (tmp_path / KEY_FILE).exists()


async def _compile(c: httpx.AsyncClient, block: int) -> dict:
    r = await c.post(
        "/v1/compile", json={"ir": ADD_IR, "target": "cpu", "config": {"kwargs": {"BLOCK": block}}}
    )
    assert r.status_code == 200, r.text
    return r.json()


async def test_manifest_signature_verifies_with_the_served_key(client: httpx.AsyncClient) -> None:
    art = await _compile(client, 1024)
    r = await client.get(f"/v1/artifacts/{art['id']}/manifest")
    assert r.status_code == 200, r.text
    signed = r.json()
    (key,) = (await client.get("/v1/keys")).json()
    assert signed["key_id"] == key["key_id"]
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(key["public_key"]))
    # over the canonical bytes of the manifest exactly as received: raises InvalidSignature otherwise
    public.verify(base64.b64decode(signed["signature"]), canonical_json(signed["manifest"]))
    m = signed["manifest"]
    assert m["format"] == "tilec-manifest/1" and m["tuning_key"] is None
    for field in (
        "kernel_key",
        "kernel_name",
        "target",
        "compiler_version",
        "sha256",
        "size",
        "config",
        "metadata",
    ):
        assert m[field] == art[field], field
    assert m["artifact_id"] == art["id"] and m["spec"]["emit"] == "object"
    binary = (await client.get(f"/v1/artifacts/{art['id']}/object")).content
    body = verify(signed, binary, target="cpu", trusted=TrustedKeys.parse(key["public_key"]))
    assert body.sha256 == art["sha256"]


async def test_manifest_through_the_client_refused_under_another_pin(client: httpx.AsyncClient) -> None:
    art = await _compile(client, 1024)
    async with AsyncClient("http://tilec.test", transport=httpx.ASGITransport(app=client.app)) as api:
        (key,) = await api.keys()
        signed = await api.manifest(art["id"])
        binary = await api.download(art["id"], "object")
    assert signed.key_id == key.key_id
    verify(signed, binary, target="cpu", trusted=TrustedKeys.parse(key.public_key))
    other = base64.b64encode(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ).decode()
    with pytest.raises(UntrustedKeyError, match=key.key_id):
        verify(signed, binary, target="cpu", trusted=TrustedKeys.parse(other))


async def test_manifest_echoes_the_tuning_key_of_its_own_build_only(client: httpx.AsyncClient) -> None:
    best, other = await _compile(client, 1024), await _compile(client, 256)
    assert best["id"] != other["id"]
    base = {"kernel_key": best["kernel_key"], "dtypes": "fp32,fp32,fp32,i32", "target": "cpu"}
    trials = [{"config": {"kwargs": {"BLOCK": 1024}}, "time_ms": 1.0, "artifact_id": best["id"]},
              {"config": {"kwargs": {"BLOCK": 256}}, "time_ms": 2.0, "artifact_id": other["id"]}]  # fmt: skip
    result = (await client.post("/v1/tuning-results", json={**base, "key": "1024", "trials": trials})).json()
    tkey = result["tuning_key"]
    unbuilt = {**base, "key": "2048", "trials": [{"config": {"kwargs": {"BLOCK": 64}}, "time_ms": 1.0}]}
    no_build = (await client.post("/v1/tuning-results", json=unbuilt)).json()["tuning_key"]

    r = await client.get(f"/v1/artifacts/{best['id']}/manifest", params={"tuning_key": tkey})
    assert r.status_code == 200, r.text
    (key,) = (await client.get("/v1/keys")).json()
    assert r.json()["manifest"]["tuning_key"] == tkey
    verify(r.json(), (await client.get(f"/v1/artifacts/{best['id']}/object")).content, target="cpu",
           trusted=TrustedKeys.parse(key["public_key"]))  # fmt: skip

    refusals = {
        (other["id"], tkey): E.MSG_MANIFEST_OTHER_ARTIFACT.format(
            tkey=tkey, linked=best["id"], id=other["id"]
        ),
        (best["id"], "f" * 64): E.MSG_MANIFEST_NO_RESULT.format(tkey="f" * 64, id=best["id"]),
        (best["id"], no_build): E.MSG_MANIFEST_NO_BUILD.format(tkey=no_build, id=best["id"]),
    }
    for (artifact, tuning_key), detail in refusals.items():
        r = await client.get(f"/v1/artifacts/{artifact}/manifest", params={"tuning_key": tuning_key})
        assert r.status_code == 422 and r.json() == {"error": E.TUNING_KEY_MISMATCH, "detail": detail}


async def test_manifest_of_unknown_artifact_is_404(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/artifacts/nope/manifest")
    assert r.status_code == 404
    assert r.json() == {
        "error": E.NOT_FOUND,
        "detail": E.MSG_ARTIFACT_NOT_FOUND.format(id="nope"),
        "missing": "artifact",
    }
    r = await client.get("/v1/artifacts/nope/manifest", params={"tuning_key": "x"})
    assert r.status_code == 404


async def test_manifest_needs_a_read_token_when_auth_is_on(make_client: Client) -> None:
    async with make_client(auth=True) as c:
        r = await c.get("/v1/artifacts/nope/manifest")
    assert r.status_code == 401


# tilec key show


def test_key_show_prints_the_data_dirs_key(tmp_path: Path) -> None:
    _register_all()
    env = {"TILEC_DATA_DIR": str(tmp_path), "TILEC_SIGNING_KEY": ""}
    first = CliRunner().invoke(app, ["key", "show"], env=env)
    assert first.exit_code == 0, first.output
    key = load_signing_key(Settings(data_dir=tmp_path)).public()
    assert first.output == f"{key.key_id}\ted25519\t{key.public_key}\n"
    assert CliRunner().invoke(app, ["key", "show"], env=env).output == first.output
    # the line pins the key as it is
    assert TrustedKeys.parse(first.output).key_ids == [key.key_id]
    bad = CliRunner().invoke(
        app, ["key", "show"], env={**env, "TILEC_SIGNING_KEY": str(tmp_path / "none.pem")}
    )
    assert bad.exit_code == 1 and "cannot read" in bad.output


def test_key_show_url_asks_the_server(uvicorn_server: Callable[..., object], tmp_path: Path) -> None:
    _register_all()
    server = uvicorn_server()
    env = {"TILEC_DATA_DIR": str(tmp_path), "TILEC_SIGNING_KEY": ""}
    local = CliRunner().invoke(app, ["key", "show"], env=env).output
    remote = CliRunner().invoke(
        app, ["key", "show", "--url", server.url], env={**env, "TILEC_DATA_DIR": os.devnull}
    )
    assert remote.exit_code == 0, remote.output
    assert remote.output == local  # the server runs on the same data dir: the same key
