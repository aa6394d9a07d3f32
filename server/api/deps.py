"""Annotated dependencies: the app state, settings, a database session, and token checks by scope."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from tilec.wire import INT32_MAX, Text

from .. import errors as E
from ..db import crud
from ..service import UNREADABLE, unreadable
from ..settings import Settings
from ..state import AppState

# each scope includes the ones after it: admin > submit > read
SCOPE_IMPLIES = {"admin": {"admin", "submit", "read"}, "submit": {"submit", "read"}, "read": {"read"}}
_bearer = HTTPBearer(auto_error=False, description="a tilec token (tilec token create --scope read)")


async def get_state(request: Request) -> AppState:
    return request.app.state.tilec


StateDep = Annotated[AppState, Depends(get_state)]


async def get_settings(request: Request) -> Settings:
    return request.app.state.tilec.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_session(request: Request) -> Iterator[Session]:
    """A session whose transaction commits when the route returns (rolled back if it raises)."""
    with request.app.state.tilec.rw() as session, session.begin():
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_read_session(request: Request) -> Iterator[Session]:
    """A read-only session (on SQLite a deferred BEGIN, so reads never wait for the write lock)."""
    with request.app.state.tilec.ro() as session, session.begin():
        yield session


ReadSessionDep = Annotated[Session, Depends(get_read_session)]


@dataclass(frozen=True)
class TokenInfo:
    id: int | None
    scopes: frozenset[str]


ANONYMOUS = TokenInfo(id=None, scopes=frozenset(SCOPE_IMPLIES["admin"]))


def _unauthorized(detail: str) -> E.ApiError:
    return E.ApiError(401, E.UNAUTHORIZED, detail, headers={"WWW-Authenticate": "Bearer"})


async def _token_info(state: AppState, token: str) -> TokenInfo | None:
    cached = state.tokens.get(token)
    if cached is not None:
        return cached
    epoch = state.token_epoch

    def find(session: Session) -> TokenInfo | None:
        try:
            row = crud.find_token(session, token=token)
            if row is None:
                return None
            granted: set[str] = set()
            for scope in row.scopes:
                granted |= SCOPE_IMPLIES.get(scope, set())
        except UNREADABLE:  # a token row that cannot be read back grants nothing: a 401, not a 500
            unreadable(state.metrics, "tokens")
            return None
        return TokenInfo(id=row.id, scopes=frozenset(granted))

    info = await state.read(find)
    if info is not None and state.token_epoch == epoch:  # no revoke committed while we read
        state.tokens.put(token, info)
    return info


async def authorize(state: AppState, credentials: str | None, scope: str) -> TokenInfo:
    """The token's grants when it has `scope`; else a 401 (none, or not a live token) or 403 ApiError."""
    if not state.settings.auth_enabled:
        return ANONYMOUS
    if not credentials:
        raise _unauthorized(E.MSG_MISSING_TOKEN)
    if len(credentials) > 200:
        raise _unauthorized(E.MSG_BAD_TOKEN)
    info = await _token_info(state, credentials)
    if info is None:
        raise _unauthorized(E.MSG_BAD_TOKEN)
    if scope not in info.scopes:
        raise E.ApiError(403, E.FORBIDDEN, E.MSG_MISSING_SCOPE.format(scope=scope))
    return info


def bearer_credentials(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an `Authorization: Bearer ...` header (as HTTPBearer reads it), else None."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").strip().partition(" ")
            return credentials.strip() if scheme.lower() == "bearer" else None
    return None


def require(scope: str) -> Any:
    async def check(
        request: Request, cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
    ) -> TokenInfo:
        return await authorize(request.app.state.tilec, cred.credentials if cred is not None else None, scope)

    return Depends(check)


TokenDep = Annotated[TokenInfo, require("read")]
SubmitTokenDep = Annotated[TokenInfo, require("submit")]
AdminTokenDep = Annotated[TokenInfo, require("admin")]


class PageQuery(BaseModel):
    """The query of a listing (newest first): `limit` rows after skipping `offset`; an unknown query
    parameter is refused (a 422), as an unknown body field is."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=100, ge=1, le=1000, description="rows per page (1..1000)")
    offset: int = Field(default=0, ge=0, le=INT32_MAX, description="rows to skip")


class FilteredPageQuery(PageQuery):
    """A page of one kernel's and/or one target's rows."""

    kernel: Text | None = Field(default=None, min_length=1, max_length=128, description="a kernel key")
    target: Text | None = Field(default=None, max_length=32, description="cpu or cuda:sm_XX")


PageDep = Annotated[PageQuery, Query()]
FilteredPageDep = Annotated[FilteredPageQuery, Query()]


def _once_each(request: Request) -> None:
    """Refuse a query parameter given more than once (?kernel=a&kernel=b): a listing would otherwise
    filter by whichever came last."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name in seen:
            shown = name.encode("utf-8", "backslashreplace").decode()[:100]
            raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_QUERY_REPEATED.format(name=shown))
        seen.add(name)


OnceEach = Depends(_once_each)
