"""The FastAPI app factory: state (database migrated, pool, caches), routers under /v1, error handlers.

Every refusal is JSON `{"error": code, "detail": message, ...}`; a database outage is a 503 with
Retry-After, and a value the database refuses a 422, both decided here and nowhere else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException

from tilec.wire import ErrorPublic

from . import errors as E
from .api.routes import (
    artifacts,
    compile,
    docs,
    health,
    history,
    kernels,
    keys,
    lookup,
    metrics,
    misses,
    pins,
    retune,
    tokens,
    tune_jobs,
    tuning,
    ui_data,
    ui_pages,
)
from .edge import HostCheckMiddleware, redact_access_log
from .fastpath import FastPathMiddleware
from .jobs.executor import make_executor
from .jobs.reaper import reap
from .jobs.retune import note_compiler_version as _note_version
from .jobs.retune import send as _send_jobs
from .middleware import BodyLimitMiddleware, InternalErrorMiddleware, MetricsMiddleware
from .revocation import watch_revocations
from .settings import Settings
from .state import AppState

ERROR_RESPONSES: dict[int | str, dict] = {
    code: {"model": ErrorPublic} for code in (401, 403, 413, 422, 429, 503)
}
HTTP_CODES = {404: E.NOT_FOUND, 405: E.METHOD_NOT_ALLOWED, 401: E.UNAUTHORIZED, 403: E.FORBIDDEN}
# SQLSTATE classes that blame the data, not the database: data exception, integrity constraint
# violation, program limit exceeded (e.g. an index row too large; psycopg raises it as OperationalError)
REFUSAL_SQLSTATES = ("22", "23", "54")


async def note_compiler_version(state: AppState) -> None:
    """Remember the compiler version; with TILEC_RETUNE_ON_CHANGE, a new one queues the inventory's retunes.
    A database that is away at start is not this check's to report (the health route says so)."""
    from sqlalchemy.exc import IntegrityError, OperationalError
    from starlette.concurrency import run_in_threadpool

    enabled = state.settings.retune_on_change
    try:
        jobs = await state.write(lambda s: _note_version(s, enabled=enabled))
    except (OperationalError, IntegrityError):  # away, or another API process noted it at the same moment
        return
    await run_in_threadpool(_send_jobs, state.executor, jobs)


def create_app(settings: Settings | None = None, *, state: AppState | None = None) -> FastAPI:
    settings = settings or Settings()
    state = state or AppState.open(settings)
    if state.executor is None:
        state.executor = make_executor(state.settings, state.rw)
    if getattr(state.executor, "ctx", None) is not None:  # in-process jobs count their artifact conflicts here
        state.executor.ctx.metrics = state.metrics

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(reap(state)), asyncio.create_task(watch_revocations(state)),
                 asyncio.create_task(note_compiler_version(state))]  # off the start: it hashes the compiler  # fmt: skip
        yield
        for task in tasks:
            task.cancel()
        state.close()

    app = FastAPI(
        title="tilec",
        version="1",
        summary="A tile compiler as a service with a shared autotune cache",
        docs_url=None,  # /docs and /redoc come from routes/docs.py, with assets served locally
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.tilec = state
    routers = (kernels.router, compile.router, artifacts.router, lookup.router, tuning.router, pins.router,
               history.router, tune_jobs.router, retune.router, misses.router, tokens.router, ui_data.router)  # fmt: skip
    for router in routers:
        app.include_router(router, prefix="/v1", responses=ERROR_RESPONSES)
    app.include_router(keys.router, prefix="/v1")  # no token, no database: none of those refusals
    app.include_router(health.router)
    app.include_router(docs.router)
    app.include_router(ui_pages.router)  # the shells and static files: no data, no token
    app.include_router(metrics.router, responses=ERROR_RESPONSES)
    _add_handlers(app, state)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, state=state)
    app.add_middleware(FastPathMiddleware, state=state)
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(HostCheckMiddleware, settings=settings)  # before anything reads the request
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    redact_access_log()
    return app


def _add_handlers(app: FastAPI, state: AppState) -> None:
    @app.exception_handler(E.ApiError)
    async def api_error(_request: Request, exc: E.ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # a location can be a dict key the client sent, lone surrogates and all: escape before echoing
        errors = [
            {"loc": [_printable(p) for p in e.get("loc", ())], "msg": _printable(e.get("msg", "")), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        detail = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        return JSONResponse({"error": E.INVALID_REQUEST, "detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI's "error parsing the body"
            detail = E.MSG_BODY_NOT_JSON.format(reason=_printable(str(exc.__cause__))[:300])
            return JSONResponse({"error": E.INVALID_REQUEST, "detail": detail}, status_code=422)
        code = HTTP_CODES.get(exc.status_code, E.BAD_REQUEST)
        return JSONResponse(
            {"error": code, "detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )

    async def db_error(_request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, PoolTimeoutError):  # every connection is busy: the database is up, the service is loaded
            state.metrics.overloads.inc()
            detail = E.MSG_OVERLOADED.format(wait=state.settings.db_pool_timeout_s)
            return JSONResponse({"error": E.OVERLOADED, "detail": detail}, status_code=503,
                                headers={"Retry-After": str(state.retry_after())})  # fmt: skip
        if isinstance(exc, DBAPIError) and _refused_value(exc):
            detail = E.MSG_VALUE_REFUSED.format(reason=_reason(exc))
            return JSONResponse({"error": E.VALUE_REFUSED, "detail": detail}, status_code=422)
        state.metrics.db_errors.inc()
        body = {"error": E.DB_UNAVAILABLE, "detail": E.MSG_DB_UNAVAILABLE}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})

    for exc_type in (OperationalError, InterfaceError, PoolTimeoutError, DataError, IntegrityError):
        app.add_exception_handler(exc_type, db_error)


def _refused_value(exc: DBAPIError) -> bool:
    """The database said no to a value (it is up): never a 503, which would have the client retry forever."""
    if isinstance(exc, DataError | IntegrityError):
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)  # psycopg's; sqlite3 maps its codes to the classes above
    return isinstance(sqlstate, str) and sqlstate[:2] in REFUSAL_SQLSTATES


def _reason(exc: DBAPIError) -> str:
    diag = getattr(exc.orig, "diag", None)
    text = getattr(diag, "message_primary", None) or str(exc.orig) or type(exc.orig).__name__
    return _printable(text.splitlines()[0])[:300]


def _printable(value: object) -> object:
    return value.encode("utf-8", "backslashreplace").decode() if isinstance(value, str) else value
