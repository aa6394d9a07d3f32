"""Service benchmark: cache-hit lookups + cubin downloads against a real uvicorn process on loopback,
with concurrent keep-alive clients (requests/s, p50/p99), and one cold compile of softmax for
cuda:sm_90, on SQLite and PostgreSQL.

    .venv/bin/python bench/service.py [--backend sqlite|postgresql|both] [--clients 32] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = (ROOT / "tests/server/data/softmax.py").read_text()
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32"}
PG_ADMIN = "postgresql+psycopg://{user}@localhost:5432/test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_database() -> tuple[str, str] | None:
    from sqlalchemy import create_engine, text

    for user in ("postgres", "root"):
        admin = PG_ADMIN.format(user=user)
        try:
            engine = create_engine(admin, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 2})
            name = f"tilec_bench_{uuid.uuid4().hex[:8]}"
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            engine.dispose()
            return admin, admin.rsplit("/", 1)[0] + "/" + name
        except Exception:  # noqa: BLE001 - try the next user
            continue
    return None


def drop_pg(admin: str, url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    engine.dispose()


def start_server(url: str, data_dir: str, port: int, **extra: str) -> subprocess.Popen:
    env = {**os.environ, "TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": data_dir, "TILEC_AUTH": "true",
           "TILEC_COMPILE_WORKERS": "2", **extra}
    cmd = [sys.executable, "-m", "uvicorn", "tilec.server.main:app", "--port", str(port), "--log-level", "warning",
           "--no-access-log", "--loop", "auto", "--http", "auto"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def admin_token(url: str) -> str:
    from tilec.server.db import crud
    from tilec.server.db.engine import make_engine, session_factories

    engine = make_engine(url)
    rw, _ = session_factories(engine)
    with rw() as session, session.begin():
        token = crud.create_token(session, scopes=["admin"], description="bench")[0]
    engine.dispose()
    return token


def seed(base: str, token: str) -> tuple[dict, str, float]:
    """Cold-compile softmax for cuda:sm_90 (timed), record it as the tuned config; (lookup params, cubin path, s)."""
    headers = {"Authorization": f"Bearer {token}"}
    body = {"source": SOFTMAX, "signature": SIGNATURE, "config": {"kwargs": {"BLOCK": 256}, "num_warps": 8},
            "target": "cuda:sm_90"}
    start = time.perf_counter()
    r = httpx.post(base + "/v1/compile", json=body, headers=headers, timeout=120)
    cold = time.perf_counter() - start
    if r.status_code != 200:
        raise RuntimeError(f"compile failed: {r.status_code} {r.text[:500]}")
    art = r.json()
    trial = {"config": {"kwargs": {"BLOCK": 256}, "num_warps": 8}, "time_ms": 0.01, "artifact_id": art["id"]}
    tuning = {"kernel_key": art["kernel_key"], "key": "4096", "dtypes": "fp32,fp32", "target": "cuda:sm_90",
              "trials": [trial]}
    httpx.post(base + "/v1/tuning-results", json=tuning, headers=headers, timeout=30).raise_for_status()
    params = {"kernel": art["kernel_key"], "key": "4096", "dtypes": "fp32,fp32", "target": "cuda:sm_90"}
    return params, art["links"]["cubin"], cold


async def _request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> tuple[int, int]:
    writer.write(raw)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status, length


async def _client(port: int, requests: list[bytes], until: float, lat: dict[str, list[float]]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    names = ["lookup", "cubin"][: len(requests)]
    try:
        while time.perf_counter() < until:
            for name, raw in zip(names, requests, strict=True):
                t = time.perf_counter()
                status, _ = await _request(reader, writer, raw)
                if status != 200:
                    raise RuntimeError(f"{name}: HTTP {status}")
                lat[name].append(time.perf_counter() - t)
    finally:
        writer.close()


def load(port: int, params: dict, cubin: str | None, token: str, clients: int, seconds: float) -> dict:
    """Each client: a lookup then (when cubin is given) the cubin download, over one keep-alive connection."""
    query = str(httpx.QueryParams(params))
    auth = f"Authorization: Bearer {token}\r\n"
    requests = [f"GET /v1/lookup?{query} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n".encode()]
    if cubin is not None:
        requests.append(f"GET {cubin} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n".encode())
    lat: dict[str, list[float]] = {"lookup": [], "cubin": []} if cubin else {"lookup": []}

    async def run() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(_client(port, requests, start + seconds, lat) for _ in range(clients)))
        return time.perf_counter() - start

    try:
        import uvloop

        elapsed = uvloop.run(run())
    except ImportError:
        elapsed = asyncio.run(run())
    out = {}
    for name, xs in lat.items():
        xs.sort()
        out[name] = {
            "requests_per_s": round(len(xs) / elapsed, 1),
            "p50_ms": round(statistics.median(xs) * 1000, 2),
            "p99_ms": round(xs[int(len(xs) * 0.99)] * 1000, 2),
        }
    out["total_requests_per_s"] = round(sum(len(x) for x in lat.values()) / elapsed, 1)
    return out


def bench_backend(backend: str, clients: int, seconds: float) -> dict:
    data_dir = tempfile.mkdtemp(prefix="tilec-bench-")
    pg = None
    if backend == "sqlite":
        url = f"sqlite:///{data_dir}/tilec.db"
    else:
        pg = pg_database()
        if pg is None:
            return {"backend": backend, "skipped": "PostgreSQL on localhost:5432 is not reachable"}
        url = pg[1]
    from tilec.server.db.migrate import upgrade

    upgrade(url)
    token = admin_token(url)
    port = free_port()
    proc = start_server(url, data_dir, port)
    try:
        params, cubin, cold = seed(f"http://127.0.0.1:{port}", token)
        lookups = load(port, params, None, token, clients, seconds)
        mixed = load(port, params, cubin, token, clients, seconds)
    finally:
        proc.terminate()
        proc.wait(10)
    # the same with the in-process caches off: every lookup and download is a database query
    proc = start_server(url, data_dir, port, TILEC_LOOKUP_CACHE_TTL_S="0", TILEC_BINARY_CACHE_BYTES="0")
    try:
        uncached_lookups = load(port, params, None, token, clients, seconds)
        uncached = load(port, params, cubin, token, clients, seconds)
    finally:
        proc.terminate()
        proc.wait(10)
        if pg is not None:
            drop_pg(*pg)
    return {"backend": backend, "clients": clients, "cold_compile_softmax_sm90_s": round(cold, 3),
            "lookups_only": lookups, "lookup_then_cubin": mixed, "lookups_only_no_memory_cache": uncached_lookups,
            "lookup_then_cubin_no_memory_cache": uncached}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    for backend in backends:
        print(json.dumps(bench_backend(backend, args.clients, args.seconds)))


if __name__ == "__main__":
    main()
