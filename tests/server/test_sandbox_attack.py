"""Issue 20's attacks on a real service, on SQLite and PostgreSQL: an API process (uvicorn, in-process executor)
holding canary secrets (a database URL with a password, TILEC_SIGNING_KEY as PEM, a cloud key) runs a cpu tune
job whose kernel reads memory past its buffer and reports through device asserts; while it runs, the bench
child is searched as the strongest such kernel would search it (its environment and every readable byte of its
memory): no canary anywhere, and none in any trial reason or job error. A kernel that spins forever is stopped
by the bench limits and fails its trial while the job and the API go on; a 279-byte source that once cost the
API process 2.3 GB is refused at no cost; a grid of 2^31-1 programs is a 422 at submit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import make_url

from tilec.server import errors as E

from ..client.test_sandbox import _memory_holds
from ..tune.test_limited_compile import HOSTILE
from .jobs_fixtures import FAST, FINISHED, Service, _database

DB_PASSWORD = "pw-canary-7d41c0e2b9"
CLOUD_KEY = "AKIACANARY3f9e2d1c0b"
STEAL = """
import triton
import triton.language as tl


@triton.autotune(configs=[{configs}], key=["n"])
@triton.jit
def steal(x_ptr, n, OFF: tl.constexpr, BIT: tl.constexpr, SPIN: tl.constexpr):
    acc = tl.load(x_ptr).to(tl.float32)
    for i in range(0, n * SPIN):  # SPIN=1: 2^62 iterations, forever
        acc = acc * 1.0000001 + 0.5
    tl.store(x_ptr + 1, acc.to(tl.uint8))
    byte = tl.load(x_ptr + OFF)  # past the 64-byte buffer: whatever the heap holds there
    tl.device_assert(((byte >> BIT) & 1) == 0, "bit set")
"""
# one bit per config read past the buffer, a config that never ends, and one that reads in bounds
CONFIGS = [(off, bit, 0) for off in (100, 4000, -3000) for bit in (0, 5)] + [(0, 7, 1), (2, 7, 0)]


def _source() -> str:
    configs = ", ".join(f'triton.Config({{"OFF": {o}, "BIT": {b}, "SPIN": {s}}})' for o, b, s in CONFIGS)
    return STEAL.format(configs=configs)


def _canary_key() -> tuple[str, bytes]:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode(), pem.splitlines()[1]  # the base64 line is the key


def _bench_children(api_pid: int) -> list[int]:
    """Descendants of the API process that run a bench: the sandboxed child (or, before it, the
    multiprocessing spawn child that ran the bench)."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == api_pid:
                return True
        return False

    return [
        p
        for p, cmd in commands.items()
        if descends(p) and (b"sandboxed_bench" in cmd or b"spawn_main" in cmd)
    ]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hostile_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple]:
    tmp = tmp_path_factory.mktemp(f"attack-{request.param}")
    url, drop = _database(request, request.param, tmp)
    if request.param == "postgresql":  # trust auth: the password is carried, never asked for
        url = make_url(url).set(password=DB_PASSWORD).render_as_string(hide_password=False)
    pem, key_line = _canary_key()
    env = {**FAST, "TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(tmp), "TILEC_MIGRATE_ON_START": "false",
           "TILEC_SIGNING_KEY": pem, "AWS_SECRET_ACCESS_KEY": CLOUD_KEY, "TILEC_BENCH_TIMEOUT_S": "4"}  # fmt: skip
    service = Service("inprocess", url, env)
    needles = [key_line, CLOUD_KEY.encode()] + (
        [DB_PASSWORD.encode()] if request.param == "postgresql" else []
    )
    try:
        service.start_api()
        yield service, needles
    finally:
        service.stop()
        drop()


def test_a_secret_reading_kernel_finds_nothing(hostile_service: tuple) -> None:
    service, needles = hostile_service
    assert service.api is not None
    assert _memory_holds(service.api.pid, needles) == sorted(needles), "the API process holds every canary"
    body = {"source": _source(), "signature": {"x_ptr": "*u8", "n": "i64"}, "target": "cpu",
            "strategy": "exhaustive", "launch": {"grid": ["1"], "args": {"x_ptr": "zeros(64)", "n": 1 << 62}}}  # fmt: skip
    r = service.submit(body)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    searched = set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        for pid in set(_bench_children(service.api.pid)) - searched:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read()
                found = _memory_holds(pid, needles)
            except (FileNotFoundError, ProcessLookupError):
                continue  # replaced before it could be searched
            searched.add(pid)
            assert not any(n in environ for n in needles), f"bench child {pid}'s environment holds a canary"
            assert found == [], f"bench child {pid}'s memory holds {found}"
        if service.job(job_id)["state"] in FINISHED:
            break
        time.sleep(0.05)
    job = service.job(job_id)
    assert searched, "a bench child was found and searched"
    assert job["state"] == "done", job
    text = repr(job).encode()
    assert not any(n in text for n in needles)
    by_config = {(t["config"]["kwargs"]["OFF"], t["config"]["kwargs"]["BIT"], t["config"]["kwargs"]["SPIN"]): t
                 for t in job["trials"]}  # fmt: skip
    spin = by_config[(0, 7, 1)]
    assert spin["status"] == "failed" and spin["reason"].startswith("timeout: no answer in 4 s"), spin
    assert by_config[(2, 7, 0)]["status"] == "ok", (
        "a config after the stopped one is timed (the worker lives)"
    )
    for t in job["trials"]:
        assert t["status"] == "ok" or (t["reason"] or "").isprintable(), t
    assert service.http.get(service.url + "/healthz").status_code == 200


def test_a_hostile_source_costs_the_api_nothing(hostile_service: tuple) -> None:
    service, _ = hostile_service
    assert service.api is not None
    before = _hwm_mb(service.api.pid)
    r = service.http.post(service.url + "/v1/kernels", json={"source": HOSTILE, "name": "k"})
    assert 400 <= r.status_code < 500, r.text
    r = service.submit({"source": HOSTILE, "name": "k", "signature": {"x_ptr": "*i32"}, "target": "cpu",
                        "launch": {"grid": ["1"], "args": {"x_ptr": "zeros(1)"}}})  # fmt: skip
    assert 400 <= r.status_code < 500, r.text
    assert _hwm_mb(service.api.pid) - before < 100, "the API process's peak memory did not move"


def test_a_grid_past_the_limit_is_refused_at_submit(hostile_service: tuple) -> None:
    service, _ = hostile_service
    source = _source().replace("tl.load(x_ptr + OFF)", "tl.load(x_ptr + OFF + tl.program_id(0) * 0)")
    body = {"source": source, "signature": {"x_ptr": "*u8", "n": "i64"}, "target": "cpu",
            "launch": {"grid": ["2**31 - 1"], "args": {"x_ptr": "zeros(64)", "n": 0}}}  # fmt: skip
    r = service.submit(body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == E.BAD_LAUNCH and "2147483647 programs" in r.json()["detail"], r.text
    body["launch"]["grid"] = ["4096", "4096", "2"]  # every axis in range, 2^25 programs in all
    r = service.submit(body)
    assert r.status_code == 422 and "33554432 programs" in r.json()["detail"], r.text


def _hwm_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) >> 10
