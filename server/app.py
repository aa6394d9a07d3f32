"""The FastAPI app factory: state (database migrated, pool, caches), routers under /v1, error handlers.

Every refusal is JSON `{"error": code, "detail": message, ...}`; a database outage is a 503 with
Retry-After, decided here and nowhere else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException

from . import errors as E
from .api.routes import artifacts, compile, docs, health, kernels, lookup, metrics, tokens, tuning
from .fastpath import FastPathMiddleware
from .middleware import BodyLimitMiddleware, MetricsMiddleware
from .schemas import ErrorPublic
from .settings import Settings
from .state import AppState

ERROR_RESPONSES: dict[int | str, dict] = {
    code: {"model": ErrorPublic} for code in (401, 403, 413, 422, 503)
}
HTTP_CODES = {404: E.NOT_FOUND, 405: E.METHOD_NOT_ALLOWED, 401: E.UNAUTHORIZED, 403: E.FORBIDDEN}


def create_app(settings: Settings | None = None, *, state: AppState | None = None) -> FastAPI:
    settings = settings or Settings()
    state = state or AppState.open(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
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
    for router in (kernels.router, compile.router, artifacts.router, lookup.router, tuning.router, tokens.router):
        app.include_router(router, prefix="/v1", responses=ERROR_RESPONSES)
    app.include_router(health.router)
    app.include_router(docs.router)
    app.include_router(metrics.router, responses=ERROR_RESPONSES)
    _add_handlers(app, state)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(FastPathMiddleware, state=state)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app


def _add_handlers(app: FastAPI, state: AppState) -> None:
    @app.exception_handler(E.ApiError)
    async def api_error(_request: Request, exc: E.ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        detail = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        return JSONResponse({"error": E.INVALID_REQUEST, "detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, E.BAD_REQUEST)
        return JSONResponse(
            {"error": code, "detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )

    async def db_down(_request: Request, _exc: Exception) -> JSONResponse:
        state.metrics.db_errors.inc()
        body = {"error": E.DB_UNAVAILABLE, "detail": E.MSG_DB_UNAVAILABLE}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})

    for exc_type in (OperationalError, InterfaceError, PoolTimeoutError):
        app.add_exception_handler(exc_type, db_down)
