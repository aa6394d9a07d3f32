"""Database access: small keyword-only functions, idempotent upserts (ON CONFLICT on both dialects).

Monotonic upserts keep concurrent writers correct without locks: a trial's time and a tuning
result's best time only ever go down, so whichever writer commits last, the best trial wins.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, Row, Select, bindparam, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, defer

from tilec.compiler.tune.keys import TuningKey

from .models import Artifact, Kernel, Token, Trial, TuningResult, utcnow

ARTIFACT_TEXT_COLUMNS = (Artifact.binary, Artifact.tir, Artifact.llir, Artifact.ptx)
# the stored sha256 that each form's column is verified against before it is served
FORM_SHA_COLUMN = {"binary": "sha256", "tir": "tir_sha256", "llir": "llir_sha256", "ptx": "ptx_sha256"}


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def tuning_key(*, kernel_key: str, key: str, dtypes: str, target: str) -> str:
    """The stored key of a tuning key's parts (compiler/tune/keys.py TuningKey.digest, the one formula)."""
    return TuningKey(kernel_key, key, dtypes, target).digest


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _insert(session: Session, table):  # noqa: ANN001, ANN202 - a dialect's Insert
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table.__table__)


def ping(conn: Connection) -> None:
    conn.execute(text("SELECT 1"))


# kernels


def get_kernel(session: Session, *, key: str) -> Kernel | None:
    return session.get(Kernel, key)


def kernel_exists(conn: Connection, *, key: str) -> bool:
    kernels = Kernel.__table__
    return conn.execute(select(kernels.c.key).where(kernels.c.key == key)).first() is not None


def find_kernel_by_input(session: Session, *, input_sha256: str) -> Kernel | None:
    return session.scalars(select(Kernel).where(Kernel.input_sha256 == input_sha256).limit(1)).first()


def add_kernel(session: Session, *, values: dict[str, Any]) -> bool:
    """Insert a kernel unless its key is there; True when this call created it."""
    values = {**values, "created_at": utcnow()}
    stmt = _insert(session, Kernel).values(**values).on_conflict_do_nothing(index_elements=["key"])
    return session.execute(stmt.returning(Kernel.__table__.c.key)).first() is not None


def replace_kernel(session: Session, *, values: dict[str, Any]) -> Kernel:
    """Overwrite a stored kernel row that could not be read back with what was just read from its input
    (the key is the hash of its IR, so this is the content the row should have held)."""
    values = {**values, "created_at": utcnow()}
    stmt = _insert(session, Kernel).values(**values)
    update = {k: stmt.excluded[k] for k in values if k not in ("key", "created_at")}
    session.execute(stmt.on_conflict_do_update(index_elements=["key"], set_=update))
    row = session.get(Kernel, values["key"], populate_existing=True)
    assert row is not None
    return row


# artifacts


def artifact_meta_query(key: str) -> Select:
    """The row without its bytes, texts and spec: what artifact_public needs."""
    deferred = (*ARTIFACT_TEXT_COLUMNS, Artifact.spec)
    return select(Artifact).where(Artifact.key == key).options(*(defer(c) for c in deferred))


def get_artifact(session: Session, *, key: str) -> Artifact | None:
    """The whole row, binary and texts included."""
    return session.get(Artifact, key)


def get_artifact_meta(session: Session, *, key: str) -> Artifact | None:
    return session.scalars(artifact_meta_query(key)).first()


def get_artifact_manifest(session: Session, *, key: str) -> Artifact | None:
    """The row without its bytes and texts, but with its spec: what a signed manifest holds."""
    query = select(Artifact).where(Artifact.key == key).options(*(defer(c) for c in ARTIFACT_TEXT_COLUMNS))
    return session.scalars(query).first()


def result_artifact(session: Session, *, tkey: str) -> Row | None:
    """(artifact_key,) of a tuning result (None inside when its best config has no build), or None."""
    results = TuningResult.__table__
    return session.execute(select(results.c.artifact_key).where(results.c.tuning_key == tkey)).first()


def _form_statement(column: str) -> Select:
    artifacts = Artifact.__table__
    sha = artifacts.c[FORM_SHA_COLUMN[column]]
    return select(artifacts.c[column], sha, artifacts.c.target).where(artifacts.c.key == bindparam("key"))


_FORM_QUERIES = {column: _form_statement(column) for column in FORM_SHA_COLUMN}


def get_artifact_form(conn: Connection, *, key: str, column: str) -> tuple[Any, str, str] | None:
    """(the column's value, that column's stored sha256, the target) or None; one prebuilt query."""
    row = conn.execute(_FORM_QUERIES[column], {"key": key}).first()
    return None if row is None else (row[0], row[1], row[2])


def get_artifact_build(session: Session, *, key: str) -> Row | None:
    """What an artifact was built from (kernel_key, target, spec, config) and the per-pass dumps its compile
    kept (or None), without its bytes."""
    artifacts = Artifact.__table__
    columns = (artifacts.c.kernel_key, artifacts.c.target, artifacts.c.spec, artifacts.c.config,
               artifacts.c.pass_dumps)  # fmt: skip
    return session.execute(select(*columns).where(artifacts.c.key == key)).first()


def keep_pass_dumps(session: Session, *, key: str, blob: bytes | None) -> None:
    """Keep the per-pass dumps recomputed for a stored build (derived data beside its immutable bytes)."""
    artifacts = Artifact.__table__
    session.execute(artifacts.update().where(artifacts.c.key == key).values(pass_dumps=blob))


def get_artifact_builds(session: Session, *, keys: list[str]) -> dict[str, Row]:
    """get_artifact_build of several artifacts in one query, by key (missing ones absent)."""
    artifacts = Artifact.__table__
    columns = (artifacts.c.key, artifacts.c.kernel_key, artifacts.c.target, artifacts.c.spec, artifacts.c.config)
    return {row.key: row for row in session.execute(select(*columns).where(artifacts.c.key.in_(sorted(set(keys))))).all()}


def put_artifact(
    session: Session, *, values: dict[str, Any], authentic: Callable[[Artifact], bool] | None = None
) -> str:
    """Store a build under its key; a row the service signed is never given other bytes. What happened:
    "stored": a new row. "same": the row holds these very bytes (sha256): its columns are written again
    from this build, which restores a damaged form and re-signs. "conflict": a row that `authentic` vouches
    for holds other bytes: it stands, this build is dropped (the caller logs and counts it). "replaced": the
    row's stored signature does not verify (changed behind the service's back, signed by another key, or
    stored before signatures), so it is not the service's build: this build takes its place. Without
    `authentic`, every stored row is vouched for."""
    values = {**values, "created_at": utcnow()}
    stmt = _insert(session, Artifact).values(**values).on_conflict_do_nothing(index_elements=["key"])
    if session.execute(stmt.returning(Artifact.__table__.c.key)).first() is not None:
        return "stored"
    try:
        row = session.get(Artifact, values["key"], with_for_update=True, populate_existing=True)
        if row is None:  # deleted in between (a kernel's cascade): store it again
            session.execute(stmt)
            return "stored"
        vouched = authentic is None or authentic(row)
        stored_sha = row.sha256
    except (ValueError, TypeError, LookupError, AttributeError):  # a column that cannot be read back
        vouched, stored_sha = False, None
    if vouched and stored_sha != values["sha256"]:
        return "conflict"
    artifacts = Artifact.__table__
    update = {k: v for k, v in values.items() if k not in ("key", "created_at")}
    session.execute(artifacts.update().where(artifacts.c.key == values["key"]).values(**update))
    session.expire_all()
    return "same" if vouched else "replaced"


# tuning results


def record_trials(
    session: Session, *, tkey: str, kernel_key: str, key: str, dtypes: str, target: str, trials: list[dict]
) -> None:
    """The trials of one publish as one statement executed over all of them (a row per config, whose time only
    goes down), after the tuning result's upsert: a publish holds its connection for a batch, not a round trip per
    trial, and the statement compiles once (it is cached), whatever the number of trials."""
    from tilec.compiler.artifact import compiler_version

    from . import decisions

    best = min(trials, key=lambda t: t["time_ms"])
    _put_result(session, tkey=tkey, kernel_key=kernel_key, key=key, dtypes=dtypes, target=target, best=best,
                replace=False)
    decisions.add_history(session, tkey=tkey, gpu_model=best.get("gpu_model"), compiler_version=compiler_version(),
                          best=best)  # fmt: skip
    rows = [{"tuning_key": tkey, "created_at": utcnow(), **t} for t in fastest_per_config(trials)]
    stmt = _insert(session, Trial)
    cols = ("time_ms", "artifact_key", "gpu_model", "driver_version", "sm_clock_mhz", "mem_clock_mhz")
    upsert = stmt.on_conflict_do_update(
        index_elements=["tuning_key", "config_hash"],
        set_={c: stmt.excluded[c] for c in cols},
        where=Trial.time_ms > stmt.excluded.time_ms,
    )
    session.execute(upsert, rows)  # one statement, executed for every row at once (psycopg pipelines them)


def fastest_per_config(trials: list[dict]) -> list[dict]:
    """One trial per config_hash, the fastest (the first of equals): one batch need not upsert a row twice."""
    kept: dict[str, dict] = {}
    for t in trials:
        seen = kept.get(t["config_hash"])
        if seen is None or t["time_ms"] < seen["time_ms"]:
            kept[t["config_hash"]] = t
    return list(kept.values())


def replace_result(
    session: Session, *, tkey: str, kernel_key: str, key: str, dtypes: str, target: str, best: dict
) -> None:
    """Overwrite a tuning result that could not be read back with this best trial, whatever its time:
    the monotonic upsert would otherwise keep an unreadable row until a faster trial came."""
    _put_result(session, tkey=tkey, kernel_key=kernel_key, key=key, dtypes=dtypes, target=target, best=best,
                replace=True)


def _put_result(
    session: Session, *, tkey: str, kernel_key: str, key: str, dtypes: str, target: str, best: dict, replace: bool
) -> None:
    head = _insert(session, TuningResult).values(
        tuning_key=tkey,
        kernel_key=kernel_key,
        key_values=key,
        dtypes=dtypes,
        target=target,
        best_config=best["config"],
        best_time_ms=best["time_ms"],
        artifact_key=best.get("artifact_key"),
        updated_at=utcnow(),
    )
    columns = ("best_config", "best_time_ms", "artifact_key", "updated_at")
    if replace:
        columns = (*columns, "kernel_key", "key_values", "dtypes", "target")
    session.execute(
        head.on_conflict_do_update(
            index_elements=["tuning_key"],
            set_={c: head.excluded[c] for c in columns},
            # a measured best replaces a slower one, never a pinned config (server/db/decisions.py)
            where=None if replace else (TuningResult.best_time_ms > head.excluded.best_time_ms) & ~_pinned(),
        )
    )


def _pinned() -> Any:
    from .decisions import pinned_clause

    return pinned_clause()


def _result_statement() -> Select:
    """The tuning result, its trial count and its artifact's metadata (columns prefixed `artifact_`),
    outer-joined; plain Core columns, so no ORM objects are made."""
    results, artifacts, trials = TuningResult.__table__, Artifact.__table__, Trial.__table__
    count = select(func.count()).where(trials.c.tuning_key == results.c.tuning_key).scalar_subquery()
    meta = [artifacts.c[name].label("artifact_" + name) for name in ARTIFACT_META]
    return select(*(results.c[name] for name in LOOKUP_RESULT), count.label("trials"), *meta).select_from(
        results.outerjoin(artifacts, artifacts.c.key == results.c.artifact_key)
    )


def _lookup_statement() -> Select:
    """Built once: _result_statement by primary key."""
    return _result_statement().where(TuningResult.__table__.c.tuning_key == bindparam("tkey"))


LOOKUP_RESULT = ("tuning_key", "kernel_key", "key_values", "dtypes", "target", "best_config", "best_time_ms",
                 "decision")
ARTIFACT_META = ("key", "kernel_key", "kernel_name", "target", "emit", "compiler_version", "sha256", "size", "meta",
                 "config", "spec")
_LOOKUP = _lookup_statement()


def lookup(conn: Connection, *, tkey: str) -> tuple[Row, SimpleNamespace | None] | None:
    """The best config of a tuning key with its trial count, and its artifact's metadata (attributes
    named as on Artifact) or None: one query over two primary keys and the trials' unique index."""
    row = conn.execute(_LOOKUP, {"tkey": tkey}).first()
    return None if row is None else _with_artifact(row)


def _with_artifact(row: Row) -> tuple[Row, SimpleNamespace | None]:
    m = row._mapping
    if m["artifact_key"] is None:
        return row, None
    return row, SimpleNamespace(**{name: m["artifact_" + name] for name in ARTIFACT_META})


def get_trials(session: Session, *, tkey: str) -> list[Trial]:
    return list(session.scalars(select(Trial).where(Trial.tuning_key == tkey).order_by(Trial.time_ms)).all())


def get_trial_ids(session: Session, *, tkey: str) -> list[int]:
    """The ids only, best first: to read the trials one by one when one of them cannot be read back."""
    return list(session.scalars(select(Trial.id).where(Trial.tuning_key == tkey).order_by(Trial.time_ms)).all())


def get_trial(session: Session, *, trial_id: int) -> Trial | None:
    return session.get(Trial, trial_id)


# tokens


def create_token(session: Session, *, scopes: list[str], description: str = "") -> tuple[str, Token]:
    plain = "tlc_" + secrets.token_urlsafe(32)
    row = Token(token_hash=hash_token(plain), scopes=sorted(set(scopes)), description=description)
    session.add(row)
    session.flush()
    return plain, row


def list_tokens(session: Session) -> list[Token]:
    return list(session.scalars(select(Token).order_by(Token.id)).all())


def list_tokens_without_scopes(session: Session) -> list[Row]:
    """Every token's id, description and times, for when a scopes value cannot be read back."""
    stmt = select(Token.id, Token.description, Token.created_at, Token.revoked_at).order_by(Token.id)
    return list(session.execute(stmt).all())


def token_scopes(session: Session, *, token_id: int) -> Any:
    return session.execute(select(Token.scopes).where(Token.id == token_id)).scalar_one()


def revoke_token(session: Session, *, token_id: int) -> Token | None:
    """Mark a token revoked (once: a second revoke keeps the first time); None if there is no such token."""
    row = session.get(Token, token_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        session.flush()
    return row


def revoked_tokens(conn: Connection) -> int:
    """How many tokens are revoked: it only grows, so each API process polls it to learn of a revoke
    made by another process (tokens are few; one small count)."""
    return int(conn.execute(select(func.count(Token.revoked_at))).scalar_one())


def find_token(session: Session, *, token: str) -> Token | None:
    row = session.scalars(select(Token).where(Token.token_hash == hash_token(token))).first()
    return None if row is None or row.revoked_at is not None else row


# listings: newest first, a page at a time; each has a keys-only twin, to read a page row by row when
# one of its rows cannot be read back (a bad value breaks the whole fetch on SQLite)

KERNEL_SUMMARY = ("key", "name", "kind", "info")  # no source, no IR: a listing stays small


def _page(stmt: Select, *, limit: int, offset: int) -> Select:
    return stmt.limit(limit).offset(offset)


def _kernels_select(*columns: Any) -> Select:
    kernels = Kernel.__table__
    return select(*columns).order_by(kernels.c.created_at.desc(), kernels.c.key)


def list_kernels(session: Session, *, limit: int, offset: int) -> list[Row]:
    """(key, name, kind, info) of a page of kernels, newest first."""
    columns = [Kernel.__table__.c[name] for name in KERNEL_SUMMARY]
    return list(session.execute(_page(_kernels_select(*columns), limit=limit, offset=offset)).all())


def list_kernel_keys(session: Session, *, limit: int, offset: int) -> list[str]:
    stmt = _page(_kernels_select(Kernel.__table__.c.key), limit=limit, offset=offset)
    return list(session.scalars(stmt).all())


def get_kernel_summary(session: Session, *, key: str) -> Row | None:
    kernels = Kernel.__table__
    columns = [kernels.c[name] for name in KERNEL_SUMMARY]
    return session.execute(select(*columns).where(kernels.c.key == key)).first()


def _artifacts_where(stmt: Select, *, kernel: str | None, target: str | None) -> Select:
    if kernel is not None:
        stmt = stmt.where(Artifact.kernel_key == kernel)
    if target is not None:
        stmt = stmt.where(Artifact.target == target)
    return stmt.order_by(Artifact.created_at.desc(), Artifact.key)


def list_artifacts(
    session: Session, *, kernel: str | None, target: str | None, limit: int, offset: int
) -> list[Artifact]:
    """A page of artifacts without their bytes, texts and spec (what artifact_public needs), newest first."""
    deferred = (*ARTIFACT_TEXT_COLUMNS, Artifact.spec)
    stmt = select(Artifact).options(*(defer(c) for c in deferred))
    stmt = _page(_artifacts_where(stmt, kernel=kernel, target=target), limit=limit, offset=offset)
    return list(session.scalars(stmt).all())


def list_artifact_keys(
    session: Session, *, kernel: str | None, target: str | None, limit: int, offset: int
) -> list[str]:
    stmt = _artifacts_where(select(Artifact.key), kernel=kernel, target=target)
    return list(session.scalars(_page(stmt, limit=limit, offset=offset)).all())


def _results_where(stmt: Select, *, kernel: str | None, target: str | None) -> Select:
    results = TuningResult.__table__
    if kernel is not None:
        stmt = stmt.where(results.c.kernel_key == kernel)
    if target is not None:
        stmt = stmt.where(results.c.target == target)
    return stmt.order_by(results.c.updated_at.desc(), results.c.tuning_key)


def list_tuning_results(
    conn: Connection, *, kernel: str | None, target: str | None, limit: int, offset: int
) -> list[tuple[Row, SimpleNamespace | None]]:
    """A page of tuning results, most recently improved first, each as crud.lookup answers it."""
    stmt = _results_where(_result_statement(), kernel=kernel, target=target)
    return [_with_artifact(row) for row in conn.execute(_page(stmt, limit=limit, offset=offset)).all()]


def list_tuning_keys(
    conn: Connection, *, kernel: str | None, target: str | None, limit: int, offset: int
) -> list[str]:
    stmt = _results_where(select(TuningResult.__table__.c.tuning_key), kernel=kernel, target=target)
    return list(conn.execute(_page(stmt, limit=limit, offset=offset)).scalars().all())
