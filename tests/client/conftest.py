"""A real tilec service for the client's tests: uvicorn on a SQLite database in a tmp dir, with auth on
and tokens of each scope made in its database (tests/server/conftest.py's Uvicorn runs the process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.server.conftest import Uvicorn


@dataclass
class Service:
    url: str
    tokens: dict[str, str] = field(default_factory=dict)  # scope -> a token of that scope
    server: Uvicorn | None = None


def _make_tokens(database_url: str) -> dict[str, str]:
    from tilec.server.db import crud
    from tilec.server.db.engine import make_engine, session_factories
    from tilec.server.db.migrate import upgrade

    upgrade(database_url)
    engine = make_engine(database_url, pool_size=1)
    try:
        rw, _ = session_factories(engine)
        with rw() as session, session.begin():
            return {
                scope: crud.create_token(session, scopes=[scope])[0] for scope in ("read", "submit", "admin")
            }
    finally:
        engine.dispose()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    """service(auth=True) -> a started Service; stopped after the test."""
    started: list[Uvicorn] = []

    def start(auth: bool = True, **env: str) -> Service:
        url = f"sqlite:///{tmp_path / 'tilec.db'}"
        tokens = _make_tokens(url)
        base = {"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(tmp_path), "TILEC_AUTH": str(auth).lower()}
        server = Uvicorn({**base, **env}).start()
        started.append(server)
        return Service(server.url, tokens, server)

    yield start
    for server in started:
        server.stop()
