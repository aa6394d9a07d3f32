"""`alembic upgrade head` (and downgrade) under a lock, so replicas starting together migrate once.

PostgreSQL: a session-level advisory lock; SQLite: a file lock beside the database file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic import command
from alembic.config import Config
from filelock import FileLock
from sqlalchemy import text

from .engine import is_sqlite, make_engine, sqlite_path

ADVISORY_LOCK_ID = 0x7469_6C65  # "tile"


def alembic_config(url: str) -> Config:
    from tilec import migrations

    cfg = Config()
    cfg.set_main_option("script_location", next(iter(migrations.__path__)))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["quiet"] = True
    return cfg


@contextmanager
def migration_lock(url: str) -> Iterator[None]:
    if is_sqlite(url):
        path = sqlite_path(url)
        if path is None:
            yield
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".migrate.lock"):
            yield
        return
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": ADVISORY_LOCK_ID})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": ADVISORY_LOCK_ID})
                conn.commit()
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    with migration_lock(url):
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    with migration_lock(url):
        command.downgrade(alembic_config(url), revision)
