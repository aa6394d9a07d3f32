"""Alembic environment: tilec's one metadata, compare_type on, batch mode for SQLite."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from tilec.server.db import models  # noqa: F401 - registers the tables on Base.metadata
from tilec.server.db.base import Base
from tilec.server.db.engine import make_engine

config = context.config
if config.config_file_name is not None and not config.attributes.get("quiet"):
    fileConfig(config.config_file_name)

target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from tilec.server.settings import Settings

    return Settings().resolved_database_url


def _configure(**kw) -> None:  # noqa: ANN003 - passed through to alembic
    url = _url()
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=url.startswith("sqlite"),
        **kw,
    )


def run_offline() -> None:
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = make_engine(_url(), pool_size=1)
    try:
        with engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:
                _sqlite_foreign_keys(conn, on=False)
            _configure(connection=conn)
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    _check_sqlite_foreign_keys(conn)
            if sqlite:
                _sqlite_foreign_keys(conn, on=True)
    finally:
        engine.dispose()


def _sqlite_foreign_keys(conn: Connection, *, on: bool) -> None:
    """Batch mode rebuilds a SQLite table by copy, drop and rename; with foreign keys on, dropping
    tuning_results would cascade into trials. The pragma is a no-op inside a transaction, so it is
    sent on the raw connection before Alembic begins one."""
    conn.connection.driver_connection.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


def _check_sqlite_foreign_keys(conn: Connection) -> None:
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:5]}")


if context.is_offline_mode():
    run_offline()
else:
    run_online()
