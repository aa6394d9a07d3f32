"""Shared database fixtures: `database_url` is a fresh, migrated database per test session, once for
SQLite and once for PostgreSQL (localhost:5432; required when CI=true, skipped locally when down).
Tables are emptied after each test that used it, so real uvicorn processes can share the database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

# CI runs the property tests on a fixed seed and without per-example deadlines (2 busy cores): a red
# CI then means a real regression, never a new random draw or a slow neighbour.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
hypothesis_settings.register_profile("dev", deadline=None, print_blob=True)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")

PG_USERS = ("postgres", "root")
TABLES = ("tune_jobs", "trials", "tuning_pins", "tuning_history", "tuning_results", "artifacts", "kernels", "tokens",
          "misses", "server_facts")


def _pg_admin_url() -> str | None:
    for user in PG_USERS:
        url = f"postgresql+psycopg://{user}@localhost:5432/test"
        engine = create_engine(url, connect_args={"connect_timeout": 2})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return url
        except Exception:  # noqa: BLE001 - any failure means "not this user"
            continue
        finally:
            engine.dispose()
    return None


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    url = _pg_admin_url()
    if url is None:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL on localhost:5432 (database test) is unreachable, and CI=true needs it")
        pytest.skip("PostgreSQL on localhost:5432 is not running")
    return url


def make_pg_database(admin_url: str) -> str:
    name = f"tilec_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(admin_url: str, url: str) -> None:
    name = make_url(url).database
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def migrated_database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tilec.server.db.migrate import upgrade

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'tilec.db'}"
        upgrade(url)
        yield url
        return
    admin = request.getfixturevalue("pg_admin_url")
    url = make_pg_database(admin)
    upgrade(url)
    yield url
    drop_pg_database(admin, url)


@pytest.fixture
def database_url(migrated_database: str) -> Iterator[str]:
    """The session's migrated database (sqlite, then postgresql), emptied after the test."""
    yield migrated_database
    engine = create_engine(migrated_database)
    with engine.begin() as conn:
        for table in TABLES:
            conn.execute(text(f"DELETE FROM {table}"))
    engine.dispose()


@pytest.fixture(autouse=True)
def _own_client_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's client disk cache is its own (never the user's ~/.cache/tilec); a test that shares one
    between processes passes TILEC_CACHE_DIR or cache= itself."""
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path_factory.mktemp("client-cache")))
