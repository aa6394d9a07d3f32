"""Everything one app instance holds: settings, the engine and sessions, the compile pool, caches, metrics."""

from __future__ import annotations

import asyncio
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from .cache import BytesLRU, TTLCache
from .db.engine import make_engine, probe_engine, reader_engine, session_factories
from .db.migrate import upgrade
from .limits import CompileSlots
from .metrics import Metrics
from .pool import CompilePool
from .settings import Settings
from .signing import SigningKey, load_signing_key

T = TypeVar("T")
LOOKUP_LOCKS = 256  # stripes: the lookups of one tuning key share a lock with those of 1/256 of the others


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    rw: sessionmaker[Session]
    ro: sessionmaker[Session]
    pool: CompilePool
    metrics: Metrics = field(default_factory=Metrics)
    lookups: TTLCache = field(init=False)
    tokens: TTLCache = field(init=False)
    blobs: BytesLRU = field(init=False)
    compiles: CompileSlots = field(init=False)  # per-token compile slots (TILEC_MAX_COMPILES_PER_TOKEN)
    token_epoch: int = field(default=0, init=False)  # bumped by each revoke seen (see forget_token)
    revoked_seen: int | None = field(default=None, init=False)  # the database's revoked-token count, last read
    reader: Engine = field(init=False)
    executor: Any = None  # jobs.executor.Executor (set by the app factory): in-process unless a broker is set
    signer: SigningKey | None = None  # loaded by open(), or on first use by signing_key()
    probe: Engine | None = None  # /healthz's own one-connection engine (made on first use)
    _lookup_locks: list[asyncio.Lock] = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.lookups = TTLCache(s.lookup_cache_size, s.lookup_cache_ttl_s)
        self._lookup_locks = [asyncio.Lock() for _ in range(LOOKUP_LOCKS)]
        self.tokens = TTLCache(1024, s.token_cache_ttl_s)
        self.blobs = BytesLRU(s.binary_cache_bytes)
        self.compiles = CompileSlots(s.max_compiles_per_token)
        self.reader = reader_engine(self.engine)
        self.pool.on_waiting = self.metrics.compiles_waiting.set

    @classmethod
    def open(cls, settings: Settings) -> AppState:
        signer = load_signing_key(settings)  # first: a bad TILEC_SIGNING_KEY stops the start, not a manifest
        url = settings.resolved_database_url
        if settings.migrate_on_start:
            upgrade(url)
        engine = make_engine(url, connect_timeout_s=settings.db_connect_timeout_s, pool_size=settings.db_pool_size,
                             max_overflow=settings.db_pool_overflow, pool_timeout_s=settings.db_pool_timeout_s)  # fmt: skip
        rw, ro = session_factories(engine)
        pool = CompilePool(
            workers=settings.compile_workers,
            timeout_s=settings.compile_timeout_s,
            memory_mb=settings.compile_memory_mb,
        )
        pool.warm()
        return cls(settings=settings, engine=engine, rw=rw, ro=ro, pool=pool, signer=signer)

    def signing_key(self) -> SigningKey:
        if self.signer is None:
            self.signer = load_signing_key(self.settings)
        return self.signer

    def forget_token(self, token_id: int) -> None:
        """After a revoke has committed: drop the token from this process's cache and bump the epoch, so
        that a lookup which read the row before the commit does not cache it again. Other processes
        (uvicorn workers, replicas) see the revoke through note_revocations within revocation_poll_s."""
        self.token_epoch += 1
        self.tokens.drop_where(lambda info: info.id == token_id)

    def note_revocations(self, revoked: int) -> None:
        """The database's count of revoked tokens, as the revocation watch read it: when it moved (or on
        the first read), every cached token is forgotten and the epoch bumped, as forget_token does."""
        if revoked != self.revoked_seen:
            self.token_epoch += 1
            self.tokens.clear()
        self.revoked_seen = revoked

    def budgets(self) -> dict[str, int]:
        s = self.settings
        return {
            "max_source_bytes": s.max_source_bytes,
            "max_ast_nodes": s.max_ast_nodes,
            "max_ast_depth": s.max_ast_depth,
            "max_unroll": s.max_unroll,
            "max_tile_elements": s.max_tile_elements,
        }

    def lookup_lock(self, tkey: str) -> asyncio.Lock:
        """The lock a lookup that misses the cache holds from its query to its put, and a writer of the
        tuning key from before its write until it has dropped the cached answer: so no answer read before a
        commit is cached after it (a reader would see the best get worse), and a burst of misses for one
        key waits for one query instead of sending one each."""
        return self._lookup_locks[zlib.crc32(tkey.encode()) % LOOKUP_LOCKS]

    def retry_after(self) -> int:
        """Seconds a client refused for overload should wait: 1 plus the requests in flight (the refused one
        included) per connection the pool can open, up to a minute: it grows with the load."""
        s = self.settings
        capacity = max(1, s.db_pool_size + s.db_pool_overflow)
        return min(60, 1 + math.ceil(self.metrics.active / capacity))

    def write_sync(self, fn: Callable[[Session], T]) -> T:
        with self.rw() as session, session.begin():
            return fn(session)

    def read_sync(self, fn: Callable[[Session], T]) -> T:
        with self.ro() as session, session.begin():
            return fn(session)

    async def write(self, fn: Callable[[Session], T]) -> T:
        """One transaction in a worker thread: committed when fn returns, rolled back if it raises."""
        return await run_in_threadpool(self.write_sync, fn)

    async def read(self, fn: Callable[[Session], T]) -> T:
        return await run_in_threadpool(self.read_sync, fn)

    def query_sync(self, fn: Callable[[Connection], T]) -> T:
        with self.reader.connect() as conn:
            return fn(conn)

    def probe_engine(self) -> Engine:
        if self.probe is None:
            self.probe = probe_engine(self.settings.resolved_database_url, timeout_s=self.settings.health_timeout_s)
        return self.probe

    async def query(self, fn: Callable[[Connection], T]) -> T:
        """A read on a bare connection, in a worker thread: no Session, no ORM objects, and on
        PostgreSQL no BEGIN/ROLLBACK round trips (one statement is one snapshot). For the hot reads."""
        return await run_in_threadpool(self.query_sync, fn)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
        self.pool.close()
        self.engine.dispose()
        if self.probe is not None:
            self.probe.dispose()
