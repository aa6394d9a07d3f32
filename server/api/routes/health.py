"""GET /healthz: liveness, with the database and the broker each checked on a connection of its own (never the
requests' pool, never the request thread pool) under its own short timeout, and reported each; no token needed.

503 (with Retry-After) only when the database cannot be reached (the service can answer nothing); a busy pool is
not an outage, and a broker that is down leaves lookups and downloads working (`status: degraded`,
`broker: unavailable`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from tilec.compiler.artifact import compiler_version
from tilec.wire import HealthPublic

from ...db import crud
from ...state import AppState
from ..deps import StateDep

router = APIRouter(tags=["health"])
# the probes' own threads: under load every thread of the request pool may be waiting for a connection
PROBES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tilec-health")


async def _probe(fn: Callable[[], object], timeout_s: float) -> str:
    try:
        await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(PROBES, fn), timeout_s)
        return "ok"
    except Exception:  # noqa: BLE001 - unreachable, refused, timed out: all are "unavailable" here
        return "unavailable"


def _ping_database(state: AppState) -> None:
    with state.probe_engine().connect() as conn:
        crud.ping(conn)


@router.get("/healthz", response_model=HealthPublic, responses={503: {"model": HealthPublic}})
async def healthz(state: StateDep) -> JSONResponse:
    timeout = state.settings.health_timeout_s
    ping_broker = getattr(state.executor, "ping", None)
    checks = [_probe(lambda: _ping_database(state), timeout)]
    if ping_broker is not None:
        checks.append(_probe(lambda: ping_broker(timeout), timeout))
    db, *rest = await asyncio.gather(*checks)
    broker = rest[0] if rest else None
    status = 200 if db == "ok" else 503
    ok = db == "ok" and broker in (None, "ok")
    body = HealthPublic(status="ok" if ok else "degraded", database=db, broker=broker, compiler_version=compiler_version())
    # a 503 says when to look again, as every other 503 of the service does (a load balancer's or a client's retry)
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)
