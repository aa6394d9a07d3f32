"""Engines for the two backends.

SQLite: WAL, a busy timeout, and write transactions begun IMMEDIATE (so concurrent writers wait for
the lock instead of failing with "database is locked"); read-only sessions begin deferred.
PostgreSQL: a short connect timeout and pre-ping, so an outage is noticed within a second or two.
"""

from __future__ import annotations

import math
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

READONLY = "tilec_readonly"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> Path | None:
    db = make_url(url).database
    return Path(db) if db and db != ":memory:" else None


def make_engine(
    url: str,
    *,
    connect_timeout_s: float = 1.0,
    pool_size: int = 8,
    max_overflow: int | None = None,
    pool_timeout_s: float | None = None,
) -> Engine:
    """pool_size connections kept, max_overflow more under load (default: pool_size), and pool_timeout_s the
    wait for a free one (default: connect_timeout_s, at least 1 s) before sqlalchemy's TimeoutError, which
    the app answers as overload (a busy pool is not a database outage)."""
    if is_sqlite(url):
        return _sqlite_engine(url, pool_size=pool_size)
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_timeout=max(connect_timeout_s, 1.0) if pool_timeout_s is None else pool_timeout_s,
        connect_args={"connect_timeout": max(1, math.ceil(connect_timeout_s))},
    )


def probe_engine(url: str, *, timeout_s: float) -> Engine:
    """A one-connection engine for /healthz: its own connection (never waits behind the requests' pool), a
    connect timeout and, on PostgreSQL, a statement timeout of timeout_s."""
    if is_sqlite(url):
        return create_engine(url, poolclass=NullPool, connect_args={"check_same_thread": False, "timeout": timeout_s})
    ms = max(1, int(timeout_s * 1000))
    return create_engine(
        url,
        pool_size=1,
        max_overflow=0,
        pool_timeout=timeout_s,
        pool_pre_ping=False,
        pool_recycle=300,
        connect_args={"connect_timeout": max(1, math.ceil(timeout_s)), "options": f"-c statement_timeout={ms}"},
    )


def _sqlite_engine(url: str, *, pool_size: int) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        connect_args={"check_same_thread": False, "timeout": 30},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001 - DBAPI connection
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        # sqlite3's own decoding turns a stored text that is not UTF-8 into an OperationalError, which
        # reads as a database outage (a 503 for as long as the row is there); a UnicodeDecodeError is
        # what it is: a row that cannot be read back (server.service.UNREADABLE)
        dbapi_conn.text_factory = _utf8
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001 - sqlalchemy Connection
        readonly = conn.get_execution_options().get(READONLY, False)
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def _utf8(value: bytes) -> str:
    return str(value, "utf-8")


def reader_engine(engine: Engine) -> Engine:
    """The engine for single-statement reads: autocommit on PostgreSQL; on SQLite a deferred BEGIN
    (our begin hook sends it; autocommit there would leave that transaction open)."""
    if engine.dialect.name == "sqlite":
        return engine.execution_options(**{READONLY: True})
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def session_factories(engine: Engine) -> tuple[sessionmaker[Session], sessionmaker[Session]]:
    """(read-write, read-only) session makers over one engine and one pool."""
    rw = sessionmaker(engine, expire_on_commit=False)
    ro = sessionmaker(engine.execution_options(**{READONLY: True}), expire_on_commit=False)
    return rw, ro
