"""Strangers cannot replace each other's builds (issue 20), on SQLite and PostgreSQL, through the app:
the poisoning pair (FACTOR = SCALE * 2 with only SCALE changed) gets another kernel key and the victim's
binary and signature stay as they were; a build that gives other bytes for a stored key is a conflict
(logged, counted) and the stored build stands; a row changed behind the service's back (binary and sha256
together, or launch metadata) fails a pinned client's check, with or without a tuning key; a tune job
never builds one kernel's artifacts under another's key."""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import typer
from sqlalchemy import create_engine
from typer.testing import CliRunner, Result

from tilec.client import BadSignatureError, UnsignedManifestError
from tilec.client._client import Client
from tilec.client._index import load_index
from tilec.client._verify import TrustedKeys, verify
from tilec.compiler.frontend import read_kernel
from tilec.server import service
from tilec.server.db import crud
from tilec.server.db.models import Artifact, TuneJob
from tilec.server.jobs.runner import WorkerContext, run_job

from .conftest import Uvicorn

VICTIM = """
import triton
import triton.language as tl

SCALE = 1
FACTOR = SCALE * 2


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)
"""
ATTACKER = VICTIM.replace("SCALE = 1\n", "SCALE = 1000\n")
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
BODY = {"signature": SIGNATURE, "target": "cpu", "config": {"kwargs": {"BLOCK": 64}}}


async def _compile(client: httpx.AsyncClient, source: str) -> dict:
    r = await client.post("/v1/compile", json={"source": source, **BODY})
    assert r.status_code == 200, r.text
    return r.json()


async def _served(client: httpx.AsyncClient, artifact_id: str) -> tuple[bytes, dict]:
    binary = await client.get(f"/v1/artifacts/{artifact_id}/object")
    manifest = await client.get(f"/v1/artifacts/{artifact_id}/manifest")
    assert binary.status_code == manifest.status_code == 200, manifest.text
    return binary.content, manifest.json()


async def _pinned(client: httpx.AsyncClient) -> TrustedKeys:
    (key,) = (await client.get("/v1/keys")).json()
    return TrustedKeys.parse(key["public_key"])


def _change_row(database_url: str, key: str, **values: object) -> None:
    """Change an artifacts row behind the service's back (another connection, the column types' own binds)."""
    artifacts = Artifact.__table__
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(artifacts.update().where(artifacts.c.key == key).values(**values))
    engine.dispose()


def _metric(client: httpx.AsyncClient, name: str) -> float:
    registry = client.app.state.tilec.metrics.registry  # type: ignore[attr-defined]
    return registry.get_sample_value(name) or 0.0


async def test_the_poisoning_pair_gets_another_key_and_the_victims_build_stands(
    client: httpx.AsyncClient,
) -> None:
    victim = await _compile(client, VICTIM)
    before = await _served(client, victim["id"])
    attack = await _compile(client, ATTACKER)  # the victim's spec, config and target, read from its manifest
    assert attack["kernel_key"] != victim["kernel_key"] and attack["id"] != victim["id"]
    assert attack["sha256"] != victim["sha256"]  # x*2000 is another binary than x*2
    assert await _served(client, victim["id"]) == before
    verify(before[1], before[0], target="cpu", trusted=await _pinned(client))
    # the victim compiling again (its own source, reformatted) is served its own build, not the attacker's
    again = await _compile(client, "# again\n" + VICTIM.replace("SCALE * 2", "(SCALE) * 2"))
    assert (again["kernel_key"], again["id"], again["sha256"]) == (
        victim["kernel_key"],
        victim["id"],
        victim["sha256"],
    )


async def test_a_build_with_other_bytes_for_a_stored_key_is_a_conflict(
    client: httpx.AsyncClient, database_url: str
) -> None:
    victim = await _compile(client, VICTIM)
    before = await _served(client, victim["id"])
    state = client.app.state.tilec  # type: ignore[attr-defined]
    row = state.read_sync(lambda s: crud.get_artifact(s, key=victim["id"]))
    other = b"\x7fELF" + b"\0" * 60  # a build of the same key that came out different
    art = {"binary": other, "kernel_name": row.kernel_name, "compiler_version": row.compiler_version,
           "tir": row.tir, "llir": row.llir, "ptx": row.ptx, "metadata": row.meta}  # fmt: skip
    public = await service._store_artifact(state, kernel_key=row.kernel_key, key=row.key, spec=row.spec,
                                           config=row.config, target=row.target, art=art)  # fmt: skip
    assert public.sha256 == victim["sha256"]  # answered with the stored build
    assert _metric(client, "tilec_artifact_conflicts_total") == 1.0
    assert await _served(client, victim["id"]) == before
    stored = state.read_sync(lambda s: crud.get_artifact(s, key=victim["id"]))
    assert stored.binary == before[0] and stored.signature == before[1]["signature"]


async def test_a_row_changed_behind_the_service_fails_the_pinned_check(
    client: httpx.AsyncClient, database_url: str
) -> None:
    victim = await _compile(client, VICTIM)
    binary, signed = await _served(client, victim["id"])
    trusted = await _pinned(client)
    verify(signed, binary, target="cpu", trusted=trusted)
    evil = binary + b"\0" * 16  # what the attacker wants loaded, with its own sha256 and size beside it
    tampered = {
        "binary and sha256": (
            {"binary": evil, "sha256": hashlib.sha256(evil).hexdigest(), "size": len(evil)},
            evil,
        ),
        "launch metadata": ({"meta": {**signed["manifest"]["metadata"], "num_threads": 1}}, binary),
    }
    for what, (change, served_binary) in tampered.items():
        _change_row(database_url, victim["id"], **change)
        r = await client.get(f"/v1/artifacts/{victim['id']}/manifest")
        assert r.status_code == 200, r.text
        served = r.json()
        assert served["signature"] == signed["signature"], what  # the build-time signature, never a new one
        with pytest.raises(BadSignatureError, match="changed after signing"):
            verify(served, served_binary, target="cpu", trusted=trusted)
        _change_row(database_url, victim["id"], binary=binary, sha256=signed["manifest"]["sha256"], size=len(binary),
                    meta=signed["manifest"]["metadata"])  # fmt: skip
    assert _metric(client, "tilec_signature_mismatches_total") == 2.0
    verify(
        (await client.get(f"/v1/artifacts/{victim['id']}/manifest")).json(),
        binary,
        target="cpu",
        trusted=trusted,
    )


async def test_a_row_stored_before_signatures_is_served_unsigned(
    client: httpx.AsyncClient, database_url: str
) -> None:
    """Rows from before migration 0007 have no build-time signature: the service never signs them after
    the fact (it cannot tell whether they were changed), so a client that pins keys refuses them."""
    victim = await _compile(client, VICTIM)
    binary, _ = await _served(client, victim["id"])
    _change_row(database_url, victim["id"], signature=None, signing_key_id=None)
    served = (await client.get(f"/v1/artifacts/{victim['id']}/manifest")).json()
    assert served["signature"] is None and served["key_id"] is None
    with pytest.raises(UnsignedManifestError):
        verify(served, binary, target="cpu", trusted=await _pinned(client))


async def test_a_tuning_key_is_vouched_for_only_over_a_row_that_still_verifies(
    client: httpx.AsyncClient, database_url: str
) -> None:
    victim = await _compile(client, VICTIM)
    binary, signed = await _served(client, victim["id"])
    trusted = await _pinned(client)
    result = await client.post("/v1/tuning-results", json={
        "kernel_key": victim["kernel_key"], "key": "", "dtypes": "x_ptr:*fp32,out_ptr:*fp32,n:i32", "target": "cpu",
        "trials": [{"config": BODY["config"], "time_ms": 1.0, "artifact_id": victim["id"]}]})  # fmt: skip
    assert result.status_code == 200, result.text
    tkey = result.json()["tuning_key"]
    url = f"/v1/artifacts/{victim['id']}/manifest"
    good = (await client.get(url, params={"tuning_key": tkey})).json()
    assert good["manifest"]["tuning_key"] == tkey
    verify(good, binary, target="cpu", trusted=trusted)
    _change_row(database_url, victim["id"], meta={**signed["manifest"]["metadata"], "num_threads": 1})
    served = (await client.get(url, params={"tuning_key": tkey})).json()
    assert served["manifest"]["tuning_key"] is None  # not vouched for: the stored manifest, unchanged
    assert served["signature"] == signed["signature"]
    with pytest.raises(BadSignatureError):
        verify(served, binary, target="cpu", trusted=trusted)


async def test_a_job_whose_source_reads_as_another_kernel_builds_nothing(
    make_client: Callable[..., httpx.AsyncClient], database_url: str
) -> None:
    """The runner compiles the source a job was sent with, and only under that source's own kernel key: a
    job row naming the victim's kernel with the attacker's source (as "first source wins" made) fails."""
    async with make_client() as client:
        victim = await _compile(client, VICTIM)
        state = client.app.state.tilec  # type: ignore[attr-defined]
        launch = {"grid": ["cdiv(n, BLOCK)"], "args": {"x_ptr": "randn(n)", "out_ptr": "empty(n)", "n": 256}}
        r = await client.post("/v1/tune-jobs", json={"source": VICTIM, "name": "scale_kernel", "signature": SIGNATURE,
                                                     "launch": launch, "target": "cpu", "configs": [BODY["config"]]})  # fmt: skip
        assert r.status_code in (200, 202), r.text
        await client.post(f"/v1/tune-jobs/{r.json()['id']}/cancel")  # only its row is looked at here
        job = state.read_sync(lambda s: s.get(TuneJob, r.json()["id"]))
        assert job.request["source"] == VICTIM  # the job keeps the source it was sent
        values = {"kernel_key": victim["kernel_key"], "tuning_key": "e" * 64, "key_values": "", "dtypes": "",
                  "target": "cpu", "strategy": "exhaustive", "trials_planned": 1,
                  "request": {**job.request, "source": ATTACKER}}  # fmt: skip

        def add(session):  # noqa: ANN001, ANN202
            row = TuneJob(**values)
            session.add(row)
            session.flush()
            return row.id

        job_id = state.write_sync(add)
        ctx = WorkerContext(settings=state.settings, rw=state.rw)
        assert run_job(ctx, job_id) == "failed"
        failed = state.read_sync(lambda s: s.get(TuneJob, job_id))
        assert "reads as kernel" in failed.error and victim["kernel_key"] in failed.error
        assert state.read_sync(lambda s: crud.get_artifact(s, key=victim["id"])).sha256 == victim["sha256"]


def test_signatures_are_base64_ed25519() -> None:
    """The stored column holds what the wire carries (88 characters of base64 for 64 bytes)."""
    assert len(base64.b64encode(b"\0" * 64)) == 88 <= 100


PULL_MANIFEST = """
[[kernel]]
file = "kernels/ops.py"
name = "scale_kernel"
signature = "x_ptr=*fp32,out_ptr=*fp32,n=i32"
constexpr = { BLOCK = 64 }
"""


def test_a_pinned_pull_refuses_a_row_changed_behind_the_service(
    uvicorn_server: Callable[..., Uvicorn], database_url: str, tmp_path: Path
) -> None:
    """End to end (a real server on this database, `tilec pull` with the server's key pinned): the first pull
    builds and verifies; after the row's launch metadata, or its binary with its sha256, is changed in the
    database, a pull refuses it before writing anything."""
    server = uvicorn_server()
    with Client(server.url) as api:
        (key,) = api.keys()
    root = tmp_path / "project"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "ops.py").write_text(VICTIM)
    (root / "tilec.toml").write_text(PULL_MANIFEST)
    env = {"TILEC_URL": server.url, "TILEC_TOKEN": None, "TILEC_TRUSTED_KEYS": key.public_key}

    def pull(out: Path) -> Result:
        args = [
            "pull",
            "--manifest",
            str(root / "tilec.toml"),
            "--target",
            "cpu",
            "-o",
            str(out),
            "--compile-missing",
        ]
        return CliRunner().invoke(_cli(), args, env=env)

    first = pull(tmp_path / "first")
    assert first.exit_code == 0, first.output
    (entry,) = json.loads((tmp_path / "first" / "index.json").read_text())["entries"]
    binary = (tmp_path / "first" / "blobs" / entry["sha256"]).read_bytes()
    evil = binary + b"\0" * 16
    with Client(server.url) as api:
        meta = api.manifest(entry["artifact_id"]).manifest.metadata
    changes = [{"meta": {**meta, "num_threads": 1}},
               {"binary": evil, "sha256": hashlib.sha256(evil).hexdigest(), "size": len(evil)}]  # fmt: skip
    for i, change in enumerate(changes):
        _change_row(database_url, entry["artifact_id"], **change)
        r = pull(tmp_path / f"after{i}")
        assert r.exit_code != 0 and "changed after signing" in r.output, r.output
        assert not (tmp_path / f"after{i}" / "blobs").exists()
    # a pull that pins nothing takes the changed row (its binary matches the sha256 beside it), but the
    # build-time signature travels into the index: load_index with the key pinned refuses it before loading
    # (the binary put back: the server's memory still holds the one it served, only the metadata is changed)
    _change_row(database_url, entry["artifact_id"], binary=binary, sha256=entry["sha256"], size=len(binary))
    env["TILEC_TRUSTED_KEYS"] = None
    with warnings.catch_warnings():  # the no-pin warning, given once per process
        warnings.simplefilter("ignore", UserWarning)
        r = pull(tmp_path / "unpinned")
    assert r.exit_code == 0, r.output
    idx = load_index(tmp_path / "unpinned", trusted_keys=TrustedKeys.parse(key.public_key, "trusted_keys"))
    x = np.ones(256, np.float32)
    with pytest.raises(BadSignatureError, match="changed after signing"):
        idx["scale_kernel"][(4,)](x, x.copy(), 256)


def _cli() -> typer.Typer:
    from tilec.client.cli import register

    app = typer.Typer()
    register(app)
    return app


async def test_a_kernel_row_keyed_by_an_older_frontend_is_not_found_for_new_input(
    client: httpx.AsyncClient,
) -> None:
    """A row stored under the old key (the closure not yet in it) is never the row of a source sent now:
    the lookup by input includes the frontend version, so the source is read again into its own key."""
    state = client.app.state.tilec  # type: ignore[attr-defined]
    legacy = {"key": "f" * 64, "name": "scale_kernel", "kind": "source", "source": ATTACKER, "ir": None,
              "input_sha256": crud.stable_hash({"kind": "source", "name": None, "text": VICTIM}), "info": {}}  # fmt: skip
    state.write_sync(lambda s: crud.add_kernel(s, values=legacy))
    r = await client.post("/v1/kernels", json={"source": VICTIM})
    assert r.status_code == 200, r.text
    assert r.json()["key"] != "f" * 64


def test_a_tune_job_building_other_bytes_for_a_stored_key_counts_a_conflict(
    make_client: Callable[..., httpx.AsyncClient],
) -> None:
    """The runner stores its builds through the same rule: a signed row with other bytes under the key a job
    builds stands (as if an earlier, different build had made it), and the conflict is counted."""
    client = make_client(tune_full_seconds=0.05, tune_brief_seconds=0.02, tune_compile_workers=1)
    state = client.app.state.tilec  # type: ignore[attr-defined]
    launch = {"grid": ["cdiv(n, BLOCK)"], "args": {"x_ptr": "randn(n)", "out_ptr": "empty(n)", "n": 256}}
    request = {"source": VICTIM, "name": "scale_kernel", "signature": SIGNATURE, "constexprs": {}, "launch": launch,
               "params": list(SIGNATURE),
               "configs": [{"kwargs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3}], "budget": None, "seed": 0,
               "cuda_graph": False, "budgets": state.budgets()}  # fmt: skip
    kernel_key = read_kernel(VICTIM).key
    state.write_sync(lambda s: crud.add_kernel(s, values={
        "key": kernel_key, "name": "scale_kernel", "kind": "source", "source": VICTIM, "ir": None,
        "input_sha256": "0" * 64, "info": {}}))  # fmt: skip
    ctx = WorkerContext(settings=state.settings, rw=state.rw, metrics=state.metrics)

    def job(tkey: str) -> int:
        values = {"kernel_key": kernel_key, "tuning_key": tkey, "key_values": "", "dtypes": "", "target": "cpu",
                  "strategy": "exhaustive", "trials_planned": 1, "request": request}  # fmt: skip

        def add(session):  # noqa: ANN001, ANN202
            row = TuneJob(**values)
            session.add(row)
            session.flush()
            return row.id

        return state.write_sync(add)

    assert run_job(ctx, job("1" * 64)) == "done"
    (key,) = state.read_sync(lambda s: [a.key for a in s.query(Artifact).all()])
    row = state.read_sync(lambda s: crud.get_artifact(s, key=key))
    other = row.binary + b"\0" * 8  # signed by the service: an authentic build that came out different
    art = {"binary": other, "kernel_name": row.kernel_name, "compiler_version": row.compiler_version,
           "tir": row.tir, "llir": row.llir, "ptx": row.ptx, "metadata": row.meta}  # fmt: skip
    values = service.artifact_values(kernel_key=row.kernel_key, key=key, spec=row.spec, config=row.config,
                                     target=row.target, art=art, signer=state.signing_key())  # fmt: skip
    _change_row(state.settings.resolved_database_url, key, **{k: v for k, v in values.items() if k != "key"})
    assert run_job(ctx, job("2" * 64)) == "done"
    assert state.read_sync(lambda s: crud.get_artifact(s, key=key)).binary == other  # the stored build stands
    assert _metric(client, "tilec_artifact_conflicts_total") == 1.0
