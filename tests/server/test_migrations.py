"""Migrations are the only way the schema is made: every one walks up and down on an empty database,
the models agree with head (autogenerate finds no diff), and replicas migrating at once apply each
migration once — on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from tests.conftest import drop_pg_database, make_pg_database
from tilec.server.db.base import Base
from tilec.server.db.engine import make_engine
from tilec.server.db.migrate import alembic_config, downgrade, upgrade


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    admin = request.getfixturevalue("pg_admin_url")
    url = make_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_walk_every_migration_up_and_down(empty_url: str) -> None:
    script = ScriptDirectory.from_config(alembic_config(empty_url))
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    assert revisions, "no migrations found"
    for rev in revisions:
        upgrade(empty_url, rev)
    assert tables(empty_url) == set(Base.metadata.tables)
    for rev in reversed(revisions):
        down = script.get_revision(rev).down_revision
        downgrade(empty_url, down or "base")
    assert tables(empty_url) == set()
    upgrade(empty_url)
    assert tables(empty_url) == set(Base.metadata.tables)


def test_models_match_migrations(empty_url: str) -> None:
    upgrade(empty_url)
    engine = create_engine(empty_url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    engine.dispose()
    assert diff == []


def _upgrade_in_child(url: str) -> None:
    upgrade(url)


def test_concurrent_upgrades_apply_once(empty_url: str) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_upgrade_in_child, args=(empty_url,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    engine = create_engine(empty_url)
    with engine.connect() as conn:
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    engine.dispose()
    head = ScriptDirectory.from_config(alembic_config(empty_url)).get_current_head()
    assert versions == [head]


def _seed_0001(conn: Connection) -> None:
    t = Base.metadata.tables
    now = datetime.now(UTC)
    conn.execute(t["kernels"].insert().values(key="k", name="add", kind="ir", input_sha256="i", info={}, created_at=now))
    conn.execute(t["artifacts"].insert().values(
        key="a", kernel_key="k", kernel_name="add", target="cpu", emit="object", compiler_version="v", spec={},
        config={}, binary=b"", tir="", llir="", ptx="", meta={}, sha256="s", size=0, created_at=now,
    ))
    for tkey, artifact in (("t-kept", "a"), ("t-dangling", "gone")):
        conn.execute(t["tuning_results"].insert().values(
            tuning_key=tkey, kernel_key="k", key_values="", dtypes="", target="cpu", best_config={}, best_time_ms=1.0,
            artifact_key=artifact, updated_at=now,
        ))
        # the trials table as 0001 made it (the model's later columns have defaults Core would insert)
        trials = sa.table("trials", sa.column("config", sa.JSON), *(sa.column(c) for c in ("tuning_key", "config_hash", "time_ms",
                                                             "artifact_key", "created_at")))
        conn.execute(trials.insert().values(
            tuning_key=tkey, config_hash="c", config={}, time_ms=1.0, artifact_key=artifact, created_at=now,
        ))


def test_artifact_foreign_keys_keep_the_trials(empty_url: str) -> None:
    """0002 on a database written before it: dangling artifact keys become NULL, every trial stays (the
    SQLite table rebuild must not cascade), and afterwards an unknown artifact key is refused."""
    upgrade(empty_url, "0001")
    engine = make_engine(empty_url, pool_size=1)  # foreign keys on, as the service runs
    try:
        with engine.begin() as conn:
            _seed_0001(conn)
        upgrade(empty_url)
        with engine.begin() as conn:
            trials = dict(conn.execute(text("SELECT tuning_key, artifact_key FROM trials")).all())
            results = dict(conn.execute(text("SELECT tuning_key, artifact_key FROM tuning_results")).all())
        assert trials == results == {"t-kept": "a", "t-dangling": None}
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(text("UPDATE trials SET artifact_key = 'nope'"))
        downgrade(empty_url, "0001")
        with engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM trials")).scalar_one() == 2
    finally:
        engine.dispose()


def test_text_sha256_columns_are_filled_for_existing_rows(empty_url: str) -> None:
    """0003 on a database written before it: each text form's sha256 is computed from the stored text, so
    what was there verifies; downgrade drops the columns and keeps the rows."""
    upgrade(empty_url, "0002")
    engine = make_engine(empty_url, pool_size=1)
    texts = {"tir": "module {}\n", "llir": "define void @add() {\n  ret void\n}\n", "ptx": ""}
    t = Base.metadata.tables
    now = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            conn.execute(t["kernels"].insert().values(key="k", name="add", kind="ir", input_sha256="i", info={},
                                                      created_at=now))
            conn.execute(text(
                "INSERT INTO artifacts (key, kernel_key, kernel_name, target, emit, compiler_version, spec, config, "
                "\"binary\", tir, llir, ptx, meta, sha256, size, created_at) VALUES ('a', 'k', 'add', 'cpu', 'object', "
                "'v', '{}', '{}', :binary, :tir, :llir, :ptx, '{}', 's', 0, :now)"
            ), {**texts, "binary": b"", "now": now})
        upgrade(empty_url)
        with engine.begin() as conn:
            row = conn.execute(text("SELECT tir_sha256, llir_sha256, ptx_sha256 FROM artifacts")).one()
        assert list(row) == [hashlib.sha256(texts[f].encode()).hexdigest() for f in ("tir", "llir", "ptx")]
        downgrade(empty_url, "0002")
        with engine.begin() as conn:
            assert conn.execute(text("SELECT tir, llir, ptx FROM artifacts")).one() == tuple(texts.values())
            columns = {c["name"] for c in inspect(conn).get_columns("artifacts")}
        assert not {"tir_sha256", "llir_sha256", "ptx_sha256"} & columns
    finally:
        engine.dispose()


def test_signature_columns_leave_existing_rows_unsigned(empty_url: str) -> None:
    """0007 on a database written at 0006: the rows stay, unsigned (their manifests go out without a
    signature, which clients that pin keys refuse); downgrade drops the columns and keeps the rows."""
    upgrade(empty_url, "0006")
    engine = make_engine(empty_url, pool_size=1)
    t = Base.metadata.tables
    now = datetime.now(UTC)
    try:
        with engine.begin() as conn:
            conn.execute(t["kernels"].insert().values(key="k", name="add", kind="ir", input_sha256="i", info={},
                                                      created_at=now))  # fmt: skip
            conn.execute(text(
                "INSERT INTO artifacts (key, kernel_key, kernel_name, target, emit, compiler_version, spec, config, "
                "\"binary\", tir, llir, ptx, meta, sha256, size, tir_sha256, llir_sha256, ptx_sha256, created_at) "
                "VALUES ('a', 'k', 'add', 'cpu', 'object', 'v', '{}', '{}', :binary, '', '', '', '{}', 's', 0, "
                "'t', 'l', 'p', :now)"
            ), {"binary": b"\x7fELF", "now": now})  # fmt: skip
        upgrade(empty_url)
        with engine.begin() as conn:
            row = conn.execute(text("SELECT key, signature, signing_key_id FROM artifacts")).one()
        assert tuple(row) == ("a", None, None)
        downgrade(empty_url, "0006")
        with engine.begin() as conn:
            assert conn.execute(text("SELECT key FROM artifacts")).scalar_one() == "a"
            columns = {c["name"] for c in inspect(conn).get_columns("artifacts")}
        assert not {"signature", "signing_key_id"} & columns
    finally:
        engine.dispose()
