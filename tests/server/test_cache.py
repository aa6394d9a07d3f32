"""The cache under concurrency and corruption: single-flight compiles, idempotent upserts, the best
trial winning among concurrent writers, and a corrupted binary rebuilt instead of served."""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy import create_engine, func, select, text, update

from tilec.server.db import crud
from tilec.server.db.models import Artifact, Trial, TuningResult

from .conftest import ADD_IR


def metric(text_: str, line: str) -> float:
    for row in text_.splitlines():
        if row.startswith(line + " "):
            return float(row.rsplit(" ", 1)[1])
    return 0.0


async def test_concurrent_identical_compiles_share_one(client: httpx.AsyncClient) -> None:
    kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
    body = {"kernel_key": kernel["key"], "target": "cpu", "constexprs": {"unused": 1}}
    answers = await asyncio.gather(*(client.post("/v1/compile", json=body) for _ in range(8)))
    assert all(r.status_code == 200 for r in answers)
    assert len({r.json()["id"] for r in answers}) == 1 and len({r.json()["sha256"] for r in answers}) == 1
    m = (await client.get("/metrics")).text
    assert metric(m, 'tilec_compiles_total{outcome="ok",task="compile"}') == 1
    assert metric(m, "tilec_compiles_shared_total") == 7


async def test_corrupted_binary_is_rebuilt_not_served(client: httpx.AsyncClient, database_url: str) -> None:
    art = (await client.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"})).json()
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(update(Artifact).where(Artifact.key == art["id"]).values(binary=b"corrupted"))
    # a download verifies the bytes, rebuilds, replaces the row and serves the right binary
    obj = await client.get(f"/v1/artifacts/{art['id']}/object")
    assert obj.status_code == 200 and hashlib.sha256(obj.content).hexdigest() == art["sha256"]
    with engine.begin() as conn:
        stored = conn.execute(select(Artifact.binary).where(Artifact.key == art["id"])).scalar_one()
        assert hashlib.sha256(stored).hexdigest() == art["sha256"]
        conn.execute(update(Artifact).where(Artifact.key == art["id"]).values(binary=b"corrupted again"))
    # a compile request treats it as a miss too
    again = await client.post("/v1/compile", json={"ir": ADD_IR, "target": "cpu"})
    assert again.json()["cached"] is False and again.json()["sha256"] == art["sha256"]
    engine.dispose()
    m = (await client.get("/metrics")).text
    assert metric(m, "tilec_sha_mismatches_total") == 2


async def test_concurrent_tuning_writers_best_wins(client: httpx.AsyncClient, database_url: str) -> None:
    kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
    state = client.app.state.tilec  # type: ignore[attr-defined]
    tkey = crud.tuning_key(kernel_key=kernel["key"], key="k", dtypes="d", target="cpu")
    times = [float(t) for t in (9, 3, 7, 1, 5, 2, 8, 4, 6, 10)]

    def writer(i: int) -> None:
        config = {"kwargs": {"BLOCK": 64 * (i % 5)}, "num_warps": 4, "num_stages": 3}
        trial = {"config": config, "config_hash": crud.stable_hash(config), "time_ms": times[i]}
        state.write_sync(
            lambda s: crud.record_trials(
                s, tkey=tkey, kernel_key=kernel["key"], key="k", dtypes="d", target="cpu", trials=[trial]
            )
        )

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(writer, range(len(times))))
    engine = create_engine(database_url)
    with engine.begin() as conn:
        assert conn.execute(select(func.count()).select_from(TuningResult)).scalar_one() == 1
        assert conn.execute(select(TuningResult.best_time_ms)).scalar_one() == 1.0
        # five configs, each keeping its best time
        rows = dict(conn.execute(select(Trial.config_hash, Trial.time_ms)).all())
        assert sorted(rows.values()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    engine.dispose()


async def test_two_writers_of_one_artifact_leave_one_row(client: httpx.AsyncClient, database_url: str) -> None:
    kernel = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
    state = client.app.state.tilec  # type: ignore[attr-defined]
    values = {
        "key": "c" * 64, "kernel_key": kernel["key"], "kernel_name": "add", "target": "cpu", "emit": "object",
        "compiler_version": "v", "spec": {}, "config": {}, "binary": b"\x7fELF", "tir": "", "llir": "", "ptx": "",
        "meta": {}, "sha256": hashlib.sha256(b"\x7fELF").hexdigest(), "size": 4,
        **{f"{form}_sha256": hashlib.sha256(b"").hexdigest() for form in ("tir", "llir", "ptx")},
    }
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: state.write_sync(lambda s: crud.put_artifact(s, values=values)), range(8)))
    engine = create_engine(database_url)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM artifacts")).scalar_one() == 1
    engine.dispose()
