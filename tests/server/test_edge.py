"""The HTTP edge under attack (issue 20), on SQLite and PostgreSQL: DNS rebinding (a foreign Host),
stalled bodies and headers, connection caps, tokens in query strings, revocation across workers, read
tokens that would start compiles, and per-token limits on compiles and tune jobs."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, update
from sqlalchemy.orm import Session

from tilec.server import errors as E
from tilec.server.db import crud
from tilec.server.db.models import Artifact
from tilec.server.edge import HostPolicy, redact_target
from tilec.server.settings import Settings

from .conftest import ADD_IR, Uvicorn, free_port
from .edge_attacks import revocation_delay, stall_bodies
from .test_first_run import Serve

# What uvicorn and the HTTP layer do (hosts, stalled bodies, timeouts, connection caps, the access log) does
# not depend on the database: those tests run on SQLite only (the suite's time on 2 cores)
ONE_DB = pytest.mark.parametrize("migrated_database", ["sqlite"], indirect=True)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
TUNE_BODY = {"source": "x", "signature": {}, "launch": {"grid": ["1"], "args": {}}, "target": "cpu"}


def _tokens(database_url: str, *scopes: str) -> list[tuple[int, str]]:
    """One token per scope, made in the database: (id, plain token)."""
    engine = create_engine(database_url)
    made = []
    with Session(engine) as session, session.begin():
        for scope in scopes:
            plain, row = crud.create_token(session, scopes=[scope])
            made.append((row.id, plain))
    engine.dispose()
    return made


@pytest.fixture
def tilec_serve() -> Iterator[Callable[..., Serve]]:
    """`tilec serve` processes (test_first_run's Serve), stopped after the test."""
    started: list[Serve] = []

    def start(args: list[str], env: dict[str, str]) -> Serve:
        started.append(Serve(args, env))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def _serve(
    serve: Callable[..., Serve], database_url: str, tmp_path: Path, args: list[str] = (), **env: str
) -> Serve:
    base = {
        "TILEC_DATABASE_URL": database_url,
        "TILEC_DATA_DIR": str(tmp_path),
        "TILEC_MIGRATE_ON_START": "false",
    }
    server = serve(list(args), {**base, **env})
    server.wait_healthy(f"http://127.0.0.1:{server.port}", timeout=120)  # 2 busy cores: workers start slowly
    return server


# DNS rebinding


def test_host_policy() -> None:
    loop = HostPolicy(Settings(host="127.0.0.1"))
    assert all(
        loop.allows(h) for h in ("127.0.0.1", "127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST.")
    )
    assert not any(
        loop.allows(h) for h in ("attacker.example", "attacker.example:8000", "10.0.0.5", "127.0.0.2")
    )
    wild = HostPolicy(Settings(host="0.0.0.0", allowed_hosts="tilec.corp, *.gpu.corp"))
    assert all(
        wild.allows(h) for h in ("10.1.2.3:8000", "[fe80::1]", "localhost", "tilec.corp", "a.gpu.corp:80")
    )
    assert not any(wild.allows(h) for h in ("attacker.example", "gpu.corp.attacker.example", "xgpu.corp"))
    assert HostPolicy(Settings(host="10.0.0.5", allowed_hosts="*")).allows("anything.example")
    assert not HostPolicy(Settings(host="10.0.0.5")).allows("127.0.0.1")


async def test_rebinding_host_is_refused(make_client: Callable[..., httpx.AsyncClient]) -> None:
    """A loopback, auth-off server (the local dev setup a rebinding web page aims at) refuses a request
    whose Host is the page's own name, before reading it; its own names still work."""
    async with make_client(allowed_hosts="") as c:
        r = await c.post("/v1/tune-jobs", json=TUNE_BODY, headers={"Host": "attacker.example"})
        assert r.status_code == 421 and r.json()["error"] == E.HOST_NOT_ALLOWED, r.text
        assert "attacker.example" in r.json()["detail"]
        assert (await c.get("/healthz", headers={"Host": "attacker.example:8000"})).status_code == 421
        for host in ("127.0.0.1:8000", "localhost:8000"):
            assert (await c.get("/healthz", headers={"Host": host})).status_code == 200
    async with make_client(allowed_hosts="", auth=True) as c:  # auth on or off alike
        r = await c.get("/healthz", headers={"Host": "attacker.example"})
        assert r.status_code == 421


@ONE_DB
def test_rebinding_against_uvicorn(uvicorn_server: Callable[..., Uvicorn]) -> None:
    server = uvicorn_server()
    r = httpx.post(
        server.url + "/v1/tune-jobs", json=TUNE_BODY, headers={"Host": "attacker.example"}, timeout=10
    )
    assert r.status_code == 421 and r.json()["error"] == E.HOST_NOT_ALLOWED
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


# bodies and headers


@linux_only
@ONE_DB
def test_stalled_bodies_leave_memory_flat(
    tilec_serve: Callable[..., Serve], database_url: str, tmp_path: Path
) -> None:
    """300 connections each send 1 MB of a body without a token and stall (the report: 1500 took the
    server from 166 MB to 1.6 GB). The token is checked before the body is read, so the server's RSS
    stays within tens of MB (the connections themselves and, on PostgreSQL, the pool's connections that the
    token checks open); before, it grew by the bodies' size (485 MB for these 300)."""
    server = _serve(tilec_serve, database_url, tmp_path, TILEC_AUTH="true")
    for _ in range(20):  # warm up the routes and the token check's database path
        httpx.post(f"http://127.0.0.1:{server.port}/v1/tune-jobs", json=TUNE_BODY, timeout=10)
    got = stall_bodies(server.port, server.proc.pid, connections=300, body_bytes=1_000_000, seconds=6)
    print(f"stalled bodies: {got}")
    assert got.peak_mb - got.before_mb < 100, got
    assert got.bytes_sent > 100_000_000, got  # the server took (and dropped) the bodies it did not want


@ONE_DB
def test_body_and_header_timeouts(
    tilec_serve: Callable[..., Serve], database_url: str, tmp_path: Path
) -> None:
    """A token holder's stalled body is answered 408 after TILEC_BODY_TIMEOUT_S; a connection whose
    headers never end (slowloris) or that sends nothing is closed after TILEC_HEADER_TIMEOUT_S."""
    ((_, token),) = _tokens(database_url, "submit")
    server = _serve(tilec_serve, database_url, tmp_path, TILEC_AUTH="true", TILEC_BODY_TIMEOUT_S="1",
                    TILEC_HEADER_TIMEOUT_S="1")  # fmt: skip
    port = server.port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"POST /v1/compile HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode())  # fmt: skip
        start = time.monotonic()
        answer = _read_all(s)
        assert answer.startswith(b"HTTP/1.1 408") and E.BODY_TIMEOUT.encode() in answer, answer
        # the 1 s set, not the 30 s default: the bound leaves a loaded machine 19 s of slack
        assert 0.8 < time.monotonic() - start < 20
    for sent in (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b""):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(sent)
            start = time.monotonic()
            answer = _read_all(s)
            assert answer.startswith(b"HTTP/1.1 408") or answer == b"", answer
            assert 0.8 < time.monotonic() - start < HEADER_BOUND_S
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:  # a kept-alive connection, too
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        start = time.monotonic()
        assert b"HTTP/1.1 408" in _read_all(s)  # (after what is left of the first answer)
        assert time.monotonic() - start < HEADER_BOUND_S


@pytest.mark.parametrize("protocol", ["h11", "httptools"])
def test_header_timeout_with_each_http_protocol(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's two HTTP implementations with the header timeout, each in a uvicorn server of its own."""
    import threading

    import uvicorn

    from tilec.server import edge

    cls = edge.H11TimeoutProtocol if protocol == "h11" else getattr(edge, "HttpToolsTimeoutProtocol", None)
    if cls is None:
        pytest.skip("httptools is not installed")
    monkeypatch.setenv("TILEC_HEADER_TIMEOUT_S", "2")  # the 0.2 s pause below stays well inside it under load
    edge._settings.cache_clear()

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, http=cls, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.2)
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # a second request in time: answered
            assert b"HTTP/1.1 200" in s.recv(65536)
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            start = time.monotonic()
            assert _read_all(s).endswith(edge.TIMEOUT_408)
            assert time.monotonic() - start < HEADER_BOUND_S
    finally:
        server.should_exit = True
        thread.join(10)
        edge._settings.cache_clear()


# a header timeout set to 1 or 2 s must not look like the 10 s default; the rest is slack for a loaded machine
HEADER_BOUND_S = 8


def _until(condition: Callable[[], bool], timeout_s: float = 60) -> bool:
    """Whether `condition` came true within timeout_s (asked every 0.1 s)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _read_all(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


@ONE_DB
def test_connections_are_capped(tilec_serve: Callable[..., Serve], database_url: str, tmp_path: Path) -> None:
    server = _serve(
        tilec_serve, database_url, tmp_path, TILEC_MAX_CONNECTIONS="4", TILEC_HEADER_TIMEOUT_S="30"
    )
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
    health = f"http://127.0.0.1:{server.port}/healthz"
    try:  # once the server has taken the four (a condition: how soon it does depends on the machine's load)
        assert _until(lambda: httpx.get(health, timeout=10).status_code == 503), (
            "a fifth connection is refused"
        )
    finally:
        for s in idle:
            s.close()
    assert _until(lambda: httpx.get(health, timeout=10).status_code == 200), "served again once they close"


# the access log


def test_redact_target() -> None:
    assert redact_target("/v1/lookup?kernel=abc&token=tlc_x") == "/v1/lookup?kernel=***&token=***"
    assert redact_target("/v1/kernels/abc") == "/v1/kernels/abc"
    assert redact_target("/x?tlc_secret&a=1") == "/x?tlc_secret=***&a=***"
    assert redact_target("/x?%20p%40ss=1") == "/x?***"


@ONE_DB
def test_access_log_never_prints_a_query(
    tilec_serve: Callable[..., Serve], database_url: str, tmp_path: Path
) -> None:
    server = _serve(tilec_serve, database_url, tmp_path, ["--access-log"])
    url = f"http://127.0.0.1:{server.port}"
    secret = "tlc_s3cretTOKENvalue"
    lookup_url = f"{url}/v1/lookup?kernel={'0' * 64}&target=cpu&token={secret}"
    assert httpx.get(lookup_url, timeout=10).status_code == 404
    assert httpx.get(f"{url}/v1/kernels/{'0' * 64}", timeout=10).status_code == 404  # a marker after it
    lines: list[str] = []
    deadline = time.monotonic() + 10
    while not any(f"/v1/kernels/{'0' * 64}" in line for line in lines):
        assert time.monotonic() < deadline, lines
        lines += server.read(1, timeout=10)
    lookup = [line for line in lines if "/v1/lookup" in line]
    assert lookup and all(secret not in line and "0" * 64 not in line for line in lookup), lookup
    assert "/v1/lookup?kernel=***&target=***&token=***" in lookup[0]


# revocation


def test_revocation_reaches_every_worker(
    tilec_serve: Callable[..., Serve], database_url: str, tmp_path: Path
) -> None:
    """`tilec serve --workers 2`: after a revoke through one worker, no worker accepts the token for
    more than about TILEC_REVOCATION_POLL_S (0.5 s; before, each kept it for TILEC_TOKEN_CACHE_TTL_S, 30 s)."""
    (_, admin), (victim_id, victim) = _tokens(database_url, "admin", "read")
    server = _serve(tilec_serve, database_url, tmp_path, ["--workers", "2"], TILEC_AUTH="true")
    url = f"http://127.0.0.1:{server.port}"
    delay = revocation_delay(url, admin=admin, victim=victim, victim_id=victim_id, probe_s=4)
    print(f"revocation delay: {delay:.3f} s")
    assert delay < 2.0


# read tokens start no compile


@pytest.fixture
async def auth_client(make_client: Callable[..., httpx.AsyncClient], database_url: str) -> httpx.AsyncClient:
    async with make_client(auth=True) as c:
        (_, c.read), (_, c.submit) = _tokens(database_url, "read", "submit")  # type: ignore[attr-defined]
        yield c


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _artifact(c: httpx.AsyncClient) -> str:
    r = await c.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"}, headers=_bearer(c.submit))
    assert r.status_code == 200, r.text
    return r.json()["id"]


async def test_read_token_cannot_recompute_pass_dumps(
    auth_client: httpx.AsyncClient, database_url: str
) -> None:
    """An artifact stored without per-pass dumps: a read token's GET is a 403 (before: a compile in the
    pool on every GET whose answer was too large for the byte cache); a submit token's GET computes them
    once and keeps them in the row, after which a read token is served from the row."""
    c = auth_client
    art = await _artifact(c)
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(update(Artifact).where(Artifact.key == art).values(pass_dumps=None))
    r = await c.get(f"/v1/ui/artifacts/{art}/passes", headers=_bearer(c.read))
    assert r.status_code == 403 and "submit" in r.json()["detail"], r.text
    assert "per-pass IR" in r.json()["detail"]
    r = await c.get(f"/v1/ui/artifacts/{art}/passes", headers=_bearer(c.submit))
    assert r.status_code == 200 and r.json()["passes"], r.text
    with engine.begin() as conn:
        kept = conn.execute(Artifact.__table__.select().where(Artifact.key == art)).first()
    assert kept is not None and kept.pass_dumps
    c.app.state.tilec.blobs.drop((art, "passes"))  # type: ignore[attr-defined]
    r = await c.get(f"/v1/ui/artifacts/{art}/passes", headers=_bearer(c.read))
    assert r.status_code == 200 and r.json()["passes"], r.text
    engine.dispose()


async def test_read_token_cannot_trigger_a_rebuild(auth_client: httpx.AsyncClient, database_url: str) -> None:
    """A stored form that no longer matches its sha256 is rebuilt before it is served: a compile, so a
    read token gets a 403 and the row stays as it is; a submit token's GET rebuilds it."""
    c = auth_client
    art = await _artifact(c)
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(update(Artifact).where(Artifact.key == art).values(tir="tampered"))
    r = await c.get(f"/v1/artifacts/{art}/tir", headers=_bearer(c.read))
    assert r.status_code == 403 and "must be rebuilt" in r.json()["detail"], r.text
    with engine.begin() as conn:
        assert conn.execute(Artifact.__table__.select().where(Artifact.key == art)).first().tir == "tampered"
    r = await c.get(f"/v1/artifacts/{art}/tir", headers=_bearer(c.submit))
    assert r.status_code == 200 and r.text != "tampered"
    engine.dispose()


# per-token limits


async def test_compiles_per_token_are_limited(
    make_client: Callable[..., httpx.AsyncClient], database_url: str
) -> None:
    """With TILEC_MAX_COMPILES_PER_TOKEN=1, a compile while the token holds its one slot (a compile of
    its in flight) is a 429 with Retry-After, before any work; another token's compile goes ahead, and
    the token's own once its slot is free. A cached artifact takes no slot."""
    (one_id, one), (_, two) = _tokens(database_url, "submit", "submit")
    async with make_client(auth=True, max_compiles_per_token=1) as c:
        slots = c.app.state.tilec.compiles  # type: ignore[attr-defined]
        cached = await c.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"}, headers=_bearer(one))
        assert cached.status_code == 200
        other = {"ir": ADD_IR.replace("@add", "@add2"), "target": "cpu"}
        async with slots.hold(one_id):  # the token's compile in flight
            r = await c.post("/v1/compile", json=other, headers=_bearer(one))
            assert r.status_code == 429 and r.json()["error"] == E.TOO_MANY_COMPILES, r.text
            assert int(r.headers["retry-after"]) > 0
            r = await c.post("/v1/kernels", json={"ir": other["ir"]}, headers=_bearer(one))
            assert r.status_code == 429, r.text
            r = await c.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"}, headers=_bearer(one))
            assert r.status_code == 200 and r.json()["cached"], r.text
            assert (await c.post("/v1/compile", json=other, headers=_bearer(two))).status_code == 200
        other["ir"] = other["ir"].replace("@add2", "@add3")
        assert (await c.post("/v1/compile", json=other, headers=_bearer(one))).status_code == 200
        assert slots.held == {}


async def test_jobs_per_token_are_limited(
    make_client: Callable[..., httpx.AsyncClient], database_url: str
) -> None:
    """With TILEC_MAX_JOBS_PER_TOKEN=1, a token's second tune job while its first is queued (a Celery
    broker, no worker) is a 429 with Retry-After; joining the job already active for the same tuning
    key adds no job and is accepted; another token's job is too."""
    from .jobs_fixtures import redis_url
    from .test_tune_jobs import job_body, vadd

    (_, one), (_, two) = _tokens(database_url, "submit", "submit")
    async with make_client(auth=True, max_jobs_per_token=1, broker_url=redis_url()) as c:
        r = await c.post("/v1/tune-jobs", json=job_body(vadd(), 1024), headers=_bearer(one))
        assert r.status_code == 202 and r.json()["state"] == "queued", r.text
        r = await c.post("/v1/tune-jobs", json=job_body(vadd(), 1024), headers=_bearer(one))
        assert r.status_code == 202 and r.json()["attached"], r.text
        r = await c.post("/v1/tune-jobs", json=job_body(vadd(), 2048), headers=_bearer(one))
        assert r.status_code == 429 and r.json()["error"] == E.TOO_MANY_JOBS, r.text
        assert int(r.headers["retry-after"]) > 0
        r = await c.post("/v1/tune-jobs", json=job_body(vadd(), 2048), headers=_bearer(two))
        assert r.status_code == 202, r.text
