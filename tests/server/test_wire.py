"""Bad input at the wire boundary, on SQLite and on PostgreSQL: text with NUL or a lone surrogate,
integers past their column, values the database itself refuses. Each is a 4xx naming the field or
the reason, never a 500 or a 503, and a keep-alive connection carries on after it."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, event

from tilec.server import errors as E

from .conftest import ADD_IR, Uvicorn
from .test_refusals import big_ir

EVIL = {"nul": ("a\x00b", E.MSG_TEXT_NUL), "surrogate": ("a\ud800b", E.MSG_TEXT_SURROGATE)}
TRIAL = {"config": {}, "time_ms": 1.0}


def _body(path: list[Any], value: Any, base: dict) -> dict:
    """base with `value` put at `path`; a path ending in ("key",) renames the dict key instead."""
    body = json.loads(json.dumps(base))
    node = body
    for part in path[:-1]:
        node = node[part]
    last = path[-1]
    if isinstance(last, tuple):  # a dict key
        node[value] = node.pop(last[0])
    else:
        node[last] = value
    return body


async def post_json(client: httpx.AsyncClient, url: str, body: Any) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \ud800, valid JSON; httpx's own encoder would fail on it
    return await client.post(url, content=json.dumps(body), headers={"content-type": "application/json"})


COMPILE = {
    "ir": ADD_IR,
    "name": "add",
    "target": "cpu",
    "signature": {"n": "i32"},
    "constexprs": {"B": 1, "S": "s"},
    "hints": {"n": {"divisibility": 16}},
    "config": {"kwargs": {"K": "v"}},
}
TUNING = {
    "kernel_key": "k",
    "key": "1024",
    "dtypes": "fp32",
    "target": "cpu",
    "trials": [
        {
            "config": {"kwargs": {"K": "v"}},
            "time_ms": 1.0,
            "artifact_id": "a",
            "gpu_model": "g",
            "driver_version": "d",
        }
    ],
}
# (url, a valid body, where to put the bad text, the field named in the 422)
BODY_FIELDS = [
    ("/v1/kernels", {"ir": ADD_IR}, ["ir"], "body.ir"),
    ("/v1/kernels", {"source": "x = 1"}, ["source"], "body.source"),
    ("/v1/kernels", {"ir": ADD_IR, "name": "add"}, ["name"], "body.name"),
    ("/v1/kernels", {"source": "x", "signature": {"n": "i32"}}, ["signature", "n"], "body.signature"),
    ("/v1/kernels", {"source": "x", "signature": {"n": "i32"}}, ["signature", ("n",)], "body.signature"),
    ("/v1/compile", COMPILE, ["ir"], "body.ir"),
    ("/v1/compile", {"source": "x = 1"}, ["source"], "body.source"),
    ("/v1/compile", {"kernel_key": "k"}, ["kernel_key"], "body.kernel_key"),
    ("/v1/compile", COMPILE, ["name"], "body.name"),
    ("/v1/compile", COMPILE, ["target"], "body.target"),
    ("/v1/compile", COMPILE, ["signature", "n"], "body.signature"),
    ("/v1/compile", COMPILE, ["constexprs", ("B",)], "body.constexprs"),
    ("/v1/compile", COMPILE, ["constexprs", "S"], "body.constexprs"),
    ("/v1/compile", COMPILE, ["hints", "n", ("divisibility",)], "body.hints"),
    ("/v1/compile", COMPILE, ["config", "kwargs", "K"], "body.config.kwargs"),
    ("/v1/tuning-results", TUNING, ["kernel_key"], "body.kernel_key"),
    ("/v1/tuning-results", TUNING, ["key"], "body.key"),
    ("/v1/tuning-results", TUNING, ["dtypes"], "body.dtypes"),
    ("/v1/tuning-results", TUNING, ["target"], "body.target"),
    ("/v1/tuning-results", TUNING, ["trials", 0, "artifact_id"], "body.trials.0.artifact_id"),
    ("/v1/tuning-results", TUNING, ["trials", 0, "gpu_model"], "body.trials.0.gpu_model"),
    ("/v1/tuning-results", TUNING, ["trials", 0, "driver_version"], "body.trials.0.driver_version"),
    ("/v1/tuning-results", TUNING, ["trials", 0, "config", "kwargs", ("K",)], "body.trials.0.config.kwargs"),
    ("/v1/tokens", {"scopes": ["read"], "description": "ci"}, ["description"], "body.description"),
]


@pytest.mark.parametrize("evil", sorted(EVIL))
@pytest.mark.parametrize(
    ("url", "base", "path", "field"), BODY_FIELDS, ids=[f"{b[0]}:{b[3]}" for b in BODY_FIELDS]
)
async def test_text_in_a_body_refuses_nul_and_surrogates(
    client: httpx.AsyncClient, evil: str, url: str, base: dict, path: list, field: str
) -> None:
    value, message = EVIL[evil]
    r = await post_json(client, url, _body(path, value, base))
    assert r.status_code == 422, r.text
    assert r.json()["error"] == E.INVALID_REQUEST and r.json()["detail"] == f"{field}: {message}"


# path and query parameters: a URL has no lone surrogates (invalid UTF-8 decodes to U+FFFD), but %00 is a NUL
PARAMS = [
    ("/v1/kernels/a%00b", "path.key"),
    ("/v1/artifacts/a%00b", "path.artifact_id"),
    ("/v1/artifacts/a%00b/tir", "path.artifact_id"),
    ("/v1/tuning-results/a%00b/trials", "path.tuning_key"),
    ("/v1/lookup?kernel=a%00b&target=cpu", "query.kernel"),
    ("/v1/lookup?kernel=k&target=cpu%00", "query.target"),
    ("/v1/lookup?kernel=k&target=cpu&key=%00", "query.key"),
    ("/v1/lookup?kernel=k&target=cpu&dtypes=fp32%00", "query.dtypes"),
]


@pytest.mark.parametrize(("url", "field"), PARAMS)
async def test_text_in_a_url_refuses_nul(client: httpx.AsyncClient, url: str, field: str) -> None:
    for _ in range(
        2
    ):  # the second time the fast path has the kernel's miss cached; it must not skip validation
        r = await client.get(url)
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == f"{field}: {E.MSG_TEXT_NUL}"


@pytest.mark.parametrize(
    "raw",
    [b'{"ir": "\xff\xfe"}', b"[" * 100_000 + b"]" * 100_000, b'{"ir": 1' + b"0" * 5000 + b"}"],
    ids=["not-utf8", "nested-past-the-recursion-limit", "int-past-4300-digits"],
)
async def test_a_body_that_is_not_json_is_a_422(client: httpx.AsyncClient, raw: bytes) -> None:
    """Python's json gives up on these with other errors than JSONDecodeError (FastAPI then says 400)."""
    r = await client.post("/v1/kernels", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == E.INVALID_REQUEST
    assert r.json()["detail"].startswith(E.MSG_BODY_NOT_JSON.format(reason=""))


async def _kernel_and_artifact(client: httpx.AsyncClient) -> tuple[str, str]:
    r = await client.post("/v1/compile", json={"ir": ADD_IR, "emit": "tir"})
    assert r.status_code == 200, r.text
    return r.json()["kernel_key"], r.json()["id"]


@pytest.mark.parametrize("clock", ["sm_clock_mhz", "mem_clock_mhz"])
async def test_an_int_column_takes_32_bits(client: httpx.AsyncClient, clock: str) -> None:
    kernel, _ = await _kernel_and_artifact(client)
    for value in (2**31, 2**63, 2**64, -1):
        body = {"kernel_key": kernel, "target": "cpu", "trials": [{**TRIAL, clock: value}]}
        r = await client.post("/v1/tuning-results", json=body)
        assert r.status_code == 422, (value, r.text)
        assert r.json()["detail"].startswith(f"body.trials.0.{clock}: ")
    body = {"kernel_key": kernel, "target": "cpu", "trials": [{**TRIAL, clock: 2**31 - 1}]}
    assert (await client.post("/v1/tuning-results", json=body)).status_code == 200


async def test_ints_in_json_columns_fit_64_bits(client: httpx.AsyncClient) -> None:
    kernel, _ = await _kernel_and_artifact(client)
    for value in (2**64, -(2**63) - 1, 2**200):
        for body, field in [
            ({"ir": ADD_IR, "constexprs": {"X": value}}, "body.constexprs.X"),
            ({"ir": ADD_IR, "hints": {"n": {"divisibility": value}}}, "body.hints.n.divisibility"),
            ({"ir": ADD_IR, "config": {"kwargs": {"X": value}}}, "body.config.kwargs.X"),
        ]:
            r = await client.post("/v1/compile", json=body)
            assert r.status_code == 422 and r.json()["detail"].startswith(field), (value, r.text)
        trials = [{"config": {"kwargs": {"B": value}}, "time_ms": 1.0}]
        r = await client.post(
            "/v1/tuning-results", json={"kernel_key": kernel, "target": "cpu", "trials": trials}
        )
        assert r.status_code == 422 and r.json()["detail"].startswith("body.trials.0.config.kwargs.B"), r.text
    # the edges themselves are taken (a u64 constexpr is one Triton accepts) and come back unchanged
    trials = [{"config": {"kwargs": {"B": 2**64 - 1, "C": -(2**63)}}, "time_ms": 1.0}]
    r = await client.post(
        "/v1/tuning-results", json={"kernel_key": kernel, "target": "cpu", "trials": trials}
    )
    assert r.status_code == 200, r.text
    assert r.json()["config"]["kwargs"] == {"B": 2**64 - 1, "C": -(2**63)}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_numbers_are_refused(client: httpx.AsyncClient, number: str) -> None:
    """Python's json reads NaN and Infinity; neither is JSON, and PostgreSQL's json type refuses them."""
    kernel, _ = await _kernel_and_artifact(client)
    raw = f'{{"kernel_key": "{kernel}", "target": "cpu", "trials": [{{"config": {{"kwargs": {{"B": {number}}}}}, "time_ms": 1.0}}]}}'
    r = await client.post("/v1/tuning-results", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    raw = f'{{"ir": {json.dumps(ADD_IR)}, "constexprs": {{"X": {number}}}}}'
    r = await client.post("/v1/compile", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text


# values the database itself refuses (made real with a trigger, or SQLite's length limit): 422, not 503/500

PG_REFUSE = """
CREATE FUNCTION tilec_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF starts_with(NEW.description, 'refuse:') THEN
    RAISE EXCEPTION 'refused by the test' USING ERRCODE = substr(NEW.description, 8);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER tilec_test_refuse BEFORE INSERT ON tokens FOR EACH ROW EXECUTE FUNCTION tilec_test_refuse();
"""
PG_UNDO = "DROP TRIGGER IF EXISTS tilec_test_refuse ON tokens; DROP FUNCTION IF EXISTS tilec_test_refuse();"
SQLITE_REFUSE = """CREATE TRIGGER tilec_test_refuse BEFORE INSERT ON tokens WHEN NEW.description LIKE 'refuse:%'
BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"""
SQLITE_UNDO = "DROP TRIGGER IF EXISTS tilec_test_refuse"


async def test_a_value_the_database_refuses_is_a_422(database_url: str, client: httpx.AsyncClient) -> None:
    pg = database_url.startswith("postgresql")
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(PG_REFUSE if pg else SQLITE_REFUSE)
        # data exception, check violation, program limit exceeded (an OperationalError in psycopg's tree)
        for code in ("22023", "23514", "54000") if pg else ("any",):
            r = await client.post("/v1/tokens", json={"scopes": ["read"], "description": f"refuse:{code}"})
            assert r.status_code == 422, (code, r.text)
            assert r.json() == {
                "error": E.VALUE_REFUSED,
                "detail": E.MSG_VALUE_REFUSED.format(reason="refused by the test"),
            }
        if pg:  # the same trigger raising a connection failure is an outage: the split is by SQLSTATE
            r = await client.post("/v1/tokens", json={"scopes": ["read"], "description": "refuse:08006"})
            assert r.status_code == 503 and r.json()["error"] == E.DB_UNAVAILABLE
        # nothing stays broken: the next request is served
        assert (
            await client.post("/v1/tokens", json={"scopes": ["read"], "description": "ok"})
        ).status_code == 201
        assert (await client.get("/healthz")).status_code == 200
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(PG_UNDO if pg else SQLITE_UNDO)
        engine.dispose()


async def test_sqlite_too_big_is_a_422(
    database_url: str, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    """sqlite3 raises DataError ("string or blob too big") past SQLITE_LIMIT_LENGTH, here made small."""
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's length limit; PostgreSQL's refusals are the trigger test's")
    async with make_client() as client:
        engine = client.app.state.tilec.engine  # type: ignore[attr-defined]
        engine.dispose()

        @event.listens_for(engine, "connect")
        def _small(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            dbapi_conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 2000)

        try:
            r = await client.post("/v1/tokens", json={"scopes": ["read"], "description": "é" * 200})
            assert r.status_code == 201, r.text  # 400 bytes: under the limit
            r = await client.post("/v1/kernels", json={"ir": big_ir(100)})
            assert r.status_code == 422, r.text
            assert r.json()["error"] == E.VALUE_REFUSED and "too big" in r.json()["detail"]
            assert (await client.get("/healthz")).status_code == 200
        finally:
            event.remove(engine, "connect", _small)
            engine.dispose()


# a real uvicorn and one raw keep-alive connection: a refused request, then a normal one on the same socket


def _exchange(sock: socket.socket, request: bytes) -> tuple[int, dict[str, str], bytes]:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response; got {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _post(path: str, raw: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    ).encode() + raw


async def test_keep_alive_survives_bad_text(uvicorn_server: Callable[..., Uvicorn]) -> None:
    server = uvicorn_server()
    probes = [
        (_post("/v1/kernels", b'{"ir": "\\ud800"}'), 422),
        (_post("/v1/compile", b'{"source": "def k():\\n    pass\\udfff"}'), 422),
        (_post("/v1/tokens", b'{"scopes": ["read"], "description": "a\\u0000"}'), 422),
        (b"GET /v1/kernels/a%00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 422),
        (
            _post(
                "/v1/tuning-results",
                json.dumps({**TUNING, "trials": [{**TRIAL, "sm_clock_mhz": 2**63}]}).encode(),
            ),
            422,
        ),
    ]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        for request, status in probes:
            got, headers, body = _exchange(sock, request)
            assert got == status, body
            assert headers.get("connection", "").lower() != "close"
            got, _, body = _exchange(sock, _post("/v1/kernels", json.dumps({"ir": ADD_IR}).encode()))
            assert got == 200, body


async def test_an_exception_no_handler_took_is_a_json_500_not_a_dropped_connection() -> None:
    """The last resort: whatever slips past, the client gets a JSON 500 and uvicorn never sees the
    exception (which would make it close the connection)."""
    from tilec.server.middleware import InternalErrorMiddleware

    async def broken(scope: dict, receive: Any, send: Any) -> None:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    transport = httpx.ASGITransport(app=InternalErrorMiddleware(broken))
    async with httpx.AsyncClient(transport=transport, base_url="http://tilec.test") as client:
        r = await client.get("/v1/anything")
    assert r.status_code == 500
    assert r.json() == {"error": E.INTERNAL, "detail": E.MSG_INTERNAL}
