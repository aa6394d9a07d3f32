"""Cache integrity, on SQLite and on PostgreSQL: a trial's artifact must be a build of the result's
kernel, target and config; every stored form is verified against its own sha256 before it is served;
a stored row that cannot be decoded is a counted miss (or a rebuild), never a 500 or a lasting 503."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, create_engine, select, text, update

from tilec.server import errors as E
from tilec.server.db import crud
from tilec.server.db.models import Artifact, Kernel, Token, Trial, TuningResult

from .conftest import ADD_IR
from .test_cache import metric

CORRUPT = 'tilec_corrupt_rows_total{{table="{table}"}}'


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


def sqlite_only(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip(
            "PostgreSQL refuses to store this value (json type, UTF-8 text), so it cannot be corrupted so"
        )


async def compile_(client: httpx.AsyncClient, **body: object) -> dict:
    r = await client.post("/v1/compile", json={"ir": ADD_IR, **body})
    assert r.status_code == 200, r.text
    return r.json()


async def post_result(client: httpx.AsyncClient, kernel: str, target: str, *trials: dict) -> httpx.Response:
    return await client.post(
        "/v1/tuning-results", json={"kernel_key": kernel, "target": target, "trials": list(trials)}
    )


async def metrics(client: httpx.AsyncClient) -> str:
    return (await client.get("/metrics")).text


# a trial's artifact matches the result


async def test_trial_artifact_built_for_another_target_is_refused(client: httpx.AsyncClient) -> None:
    cpu = await compile_(client, target="cpu")
    sm80 = await compile_(client, target="cuda:sm_80", emit="ptx")
    kernel = cpu["kernel_key"]
    for art, target in ((cpu, "cuda:sm_90"), (sm80, "cuda:sm_90"), (sm80, "cpu")):
        r = await post_result(
            client, kernel, target, {"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}
        )
        assert r.status_code == 422, r.text
        detail = E.MSG_TRIAL_ARTIFACT_OTHER_TARGET.format(
            index=0, id=art["id"], other=art["target"], target=target
        )
        assert r.json() == {
            "error": E.ARTIFACT_MISMATCH,
            "detail": detail,
            "mismatch": "target",
            "artifact_id": art["id"],
            "trial": 0,
        }
        # nothing was recorded: the lookup never serves the other target's binary
        assert (
            await client.get("/v1/lookup", params={"kernel": kernel, "target": target})
        ).status_code == 404
    ok = await post_result(
        client, kernel, "cuda:sm_80", {"config": {}, "time_ms": 1.0, "artifact_id": sm80["id"]}
    )
    assert ok.status_code == 200 and ok.json()["artifact"]["target"] == "cuda:sm_80"


async def test_trial_artifact_built_with_another_config_is_refused(client: httpx.AsyncClient) -> None:
    tuned = await compile_(client, config={"kwargs": {"BLOCK": 64}, "num_warps": 2})
    bound = await compile_(client, constexprs={"BLOCK": 64}, config={"num_warps": 2})
    kernel = tuned["kernel_key"]
    wrong = [
        ({"kwargs": {"BLOCK": 128}, "num_warps": 2}, "BLOCK", "64", "128"),
        ({"kwargs": {"BLOCK": 64.0}, "num_warps": 2}, "BLOCK", "64", "64.0"),
        ({"kwargs": {"BLOCK": 64}, "num_warps": 4}, "num_warps", "2", "4"),
        ({"kwargs": {"BLOCK": 64}}, "num_warps", "2", "4"),  # unnamed means the default, as stored
        ({"kwargs": {"BLOCK": 64}, "num_warps": 2, "num_stages": 1}, "num_stages", "3", "1"),
        ({"num_warps": 2}, "BLOCK", "64", "unset"),  # the artifact's tuned parameter must be in the config
        ({"kwargs": {"BLOCK": 64, "X": 1}, "num_warps": 2}, "X", "unset", "1"),
    ]
    for config, param, built, wanted in wrong:
        good = {
            "config": {"kwargs": {"BLOCK": 64}, "num_warps": 2},
            "time_ms": 2.0,
            "artifact_id": tuned["id"],
        }
        r = await post_result(
            client, kernel, "cpu", good, {"config": config, "time_ms": 1.0, "artifact_id": tuned["id"]}
        )
        assert r.status_code == 422, (config, r.text)
        detail = E.MSG_TRIAL_ARTIFACT_OTHER_CONFIG.format(
            index=1, id=tuned["id"], param=param, built=built, wanted=wanted
        )
        assert r.json() == {
            "error": E.ARTIFACT_MISMATCH,
            "detail": detail,
            "mismatch": "config",
            "artifact_id": tuned["id"],
            "trial": 1,
        }, config
    assert (await client.get("/v1/lookup", params={"kernel": kernel, "target": "cpu"})).status_code == 404
    # a constexpr bound at compile time counts as the config's parameter
    for art in (tuned, bound):
        trial = {
            "config": {"kwargs": {"BLOCK": 64}, "num_warps": 2},
            "time_ms": 1.0,
            "artifact_id": art["id"],
        }
        r = await client.post(
            "/v1/tuning-results",
            json={"kernel_key": kernel, "key": art["id"], "target": "cpu", "trials": [trial]},
        )
        assert r.status_code == 200 and r.json()["artifact"]["id"] == art["id"], r.text


async def test_other_kernel_is_a_mismatch_too(client: httpx.AsyncClient) -> None:
    art = await compile_(client)
    other = (await client.post("/v1/kernels", json={"ir": ADD_IR.replace("@add", "@add2")})).json()
    r = await post_result(
        client, other["key"], "cpu", {"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}
    )
    detail = E.MSG_TRIAL_ARTIFACT_OTHER_KERNEL.format(
        index=0, id=art["id"], other=art["kernel_key"], kernel=other["key"]
    )
    assert r.status_code == 422
    assert r.json() == {
        "error": E.ARTIFACT_MISMATCH,
        "detail": detail,
        "mismatch": "kernel",
        "artifact_id": art["id"],
        "trial": 0,
    }


async def test_lookup_does_not_serve_a_stored_link_to_another_build(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    """Rows written before the check (or by another writer): the config is served, the artifact is not."""
    cpu = await compile_(client, target="cpu")
    kernel = cpu["kernel_key"]
    state = client.app.state.tilec  # type: ignore[attr-defined]
    config = {"kwargs": {}, "num_warps": 4, "num_stages": 3}
    cases = (("cuda:sm_90", config), ("cpu", {**config, "num_warps": 8}))
    for target, trial_config in cases:
        tkey = crud.tuning_key(kernel_key=kernel, key="", dtypes="", target=target)
        trial = {
            "config": trial_config,
            "config_hash": crud.stable_hash(trial_config),
            "time_ms": 1.0,
            "artifact_key": cpu["id"],
        }
        state.write_sync(
            lambda s, tkey=tkey, target=target, trial=trial: crud.record_trials(
                s, tkey=tkey, kernel_key=kernel, key="", dtypes="", target=target, trials=[trial]
            )
        )
        for _ in range(2):  # the second answer comes from the lookup cache
            r = await client.get("/v1/lookup", params={"kernel": kernel, "target": target})
            assert (
                r.status_code == 200 and r.json()["config"] == trial_config and r.json()["artifact"] is None
            ), r.text
    assert metric(await metrics(client), CORRUPT.format(table="tuning_results")) == 2


# every stored form carries its own sha256


@pytest.mark.parametrize(
    ("target", "emit", "form"), [("cpu", None, "llir"), ("cpu", None, "tir"), ("cuda:sm_90", "ptx", "ptx")]
)
async def test_corrupted_text_form_is_rebuilt_not_served(
    client: httpx.AsyncClient, engine: Engine, target: str, emit: str | None, form: str
) -> None:
    art = await compile_(client, target=target, **({"emit": emit} if emit else {}))
    column = getattr(Artifact, form)
    with engine.begin() as conn:
        good = conn.execute(select(column).where(Artifact.key == art["id"])).scalar_one()
    digest = hashlib.sha256(good.encode()).hexdigest()
    for bad in (good.replace("add", "sub", 1), ""):
        with engine.begin() as conn:
            conn.execute(update(Artifact).where(Artifact.key == art["id"]).values({form: bad}))
        r = await client.get(f"/v1/artifacts/{art['id']}/{form}")
        assert r.status_code == 200 and r.text == good, r.text[:200]
        assert r.headers["x-tilec-sha256"] == digest and r.headers["etag"] == f'"{digest}"'
        with engine.begin() as conn:
            assert conn.execute(select(column).where(Artifact.key == art["id"])).scalar_one() == good
        client.app.state.tilec.blobs.drop((art["id"], form))  # type: ignore[attr-defined]
    # a compile treats a corrupted text as a miss too
    with engine.begin() as conn:
        conn.execute(update(Artifact).where(Artifact.key == art["id"]).values({form: "garbage"}))
    again = await compile_(client, target=target, **({"emit": emit} if emit else {}))
    assert again["cached"] is False and again["id"] == art["id"]
    with engine.begin() as conn:
        assert conn.execute(select(column).where(Artifact.key == art["id"])).scalar_one() == good
    assert metric(await metrics(client), "tilec_sha_mismatches_total") == 3


async def test_text_form_sha256_is_stored(client: httpx.AsyncClient, engine: Engine) -> None:
    art = await compile_(client, target="cuda:sm_90", emit="ptx")
    forms = ("ptx", "llir", "tir")
    columns = [getattr(Artifact, f) for f in forms] + [getattr(Artifact, f + "_sha256") for f in forms]
    with engine.begin() as conn:
        row = conn.execute(select(*columns).where(Artifact.key == art["id"])).one()
    for i, _form in enumerate(forms):
        assert row[i] and row[i + 3] == hashlib.sha256(row[i].encode()).hexdigest()


# a stored row that cannot be decoded


def _json_garbage(engine: Engine) -> list[tuple[str, object]]:
    """Values a JSON column may hold that are not what the service wrote: the wrong shape on both
    backends; on SQLite (JSON is text there) also text that is not JSON, or not even UTF-8."""
    values: list[tuple[str, object]] = [("shape", "garbage"), ("shape", [1, 2])]
    if engine.dialect.name == "sqlite":
        values += [("sql", "'{not json'"), ("sql", "CAST(X'7bff7d' AS TEXT)")]
    return values


def _corrupt(engine: Engine, table: type, column: str, how: str, value: object, **where: str) -> None:
    with engine.begin() as conn:
        if how == "shape":
            stmt = update(table).values({column: value})
            for name, want in where.items():
                stmt = stmt.where(getattr(table, name) == want)
            conn.execute(stmt)
            return
        clause = " AND ".join(f"{name} = :{name}" for name in where)
        conn.execute(text(f"UPDATE {table.__tablename__} SET {column} = {value} WHERE {clause}"), where)


async def test_undecodable_tuning_result_is_a_miss_then_replaced(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    art = await compile_(client)
    kernel = art["kernel_key"]
    garbage = _json_garbage(engine)
    for n, (how, value) in enumerate(garbage):
        key = f"k{n}"
        trial = {"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}
        body = {"kernel_key": kernel, "key": key, "target": "cpu", "trials": [trial]}
        assert (await client.post("/v1/tuning-results", json=body)).status_code == 200
        tkey = crud.tuning_key(kernel_key=kernel, key=key, dtypes="", target="cpu")
        _corrupt(engine, TuningResult, "best_config", how, value, tuning_key=tkey)
        client.app.state.tilec.lookups.drop(tkey)  # type: ignore[attr-defined]
        query = {"kernel": kernel, "key": key, "target": "cpu"}
        for _ in range(2):
            r = await client.get("/v1/lookup", params=query)
            assert r.status_code == 404 and r.json()["missing"] == "tuning_result", (value, r.text)
        # a slower trial still replaces a result that cannot be read
        slower = {**body, "trials": [{"config": {"num_stages": 2}, "time_ms": 5.0}]}
        r = await client.post("/v1/tuning-results", json=slower)
        assert r.status_code == 200 and r.json()["config"]["num_stages"] == 2, r.text
        assert (await client.get("/v1/lookup", params=query)).json()["time_ms"] == 5.0
    assert metric(await metrics(client), CORRUPT.format(table="tuning_results")) >= len(garbage)


async def test_undecodable_utf8_text_is_a_miss_not_a_503(client: httpx.AsyncClient, engine: Engine) -> None:
    sqlite_only(engine)
    art = await compile_(client)
    kernel = art["kernel_key"]
    trial = {"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}
    assert (
        await client.post(
            "/v1/tuning-results", json={"kernel_key": kernel, "target": "cpu", "trials": [trial]}
        )
    ).status_code == 200
    bad = "CAST(X'6bff' AS TEXT)"
    _corrupt(engine, TuningResult, "dtypes", "sql", bad, kernel_key=kernel)
    for _ in range(2):
        r = await client.get("/v1/lookup", params={"kernel": kernel, "target": "cpu"})
        assert r.status_code == 404, r.text
    # a text form that is not UTF-8 is rebuilt
    _corrupt(engine, Artifact, "llir", "sql", bad, key=art["id"])
    r = await client.get(f"/v1/artifacts/{art['id']}/llir")
    assert r.status_code == 200 and "define" in r.text
    assert metric(await metrics(client), CORRUPT.format(table="tuning_results")) == 2
    assert metric(await metrics(client), "tilec_db_unavailable_total") == 0


@pytest.mark.parametrize("column", ["meta", "config", "spec"])
async def test_undecodable_artifact_row_is_rebuilt(
    client: httpx.AsyncClient, engine: Engine, column: str
) -> None:
    """The metadata route rebuilds a row it cannot read where it can (a row without its config cannot be:
    that is a miss); a compile always can, from its request; a download needs only the verified bytes."""
    art = await compile_(client)
    for how, value in _json_garbage(engine):
        _corrupt(engine, Artifact, column, how, value, key=art["id"])
        meta = await client.get(f"/v1/artifacts/{art['id']}")
        if column == "config":
            assert meta.status_code == 404 and meta.json()["missing"] == "artifact", (value, meta.text)
        else:
            assert meta.status_code == 200 and meta.json()["sha256"] == art["sha256"], (value, meta.text)
        _corrupt(engine, Artifact, column, how, value, key=art["id"])
        obj = await client.get(f"/v1/artifacts/{art['id']}/object")
        assert obj.status_code == 200 and hashlib.sha256(obj.content).hexdigest() == art["sha256"]
        again = await client.post("/v1/compile", json={"ir": ADD_IR})
        assert again.status_code == 200 and again.json()["cached"] is False, (value, again.text)
        with engine.begin() as conn:
            row = conn.execute(
                select(Artifact.meta, Artifact.config, Artifact.spec).where(Artifact.key == art["id"])
            ).one()
        assert row.meta == art["metadata"] and row.config == art["config"] and row.spec["emit"] == "object"
        served = (await client.get(f"/v1/artifacts/{art['id']}")).json()
        assert (served["metadata"], served["config"]) == (art["metadata"], art["config"])
    assert metric(await metrics(client), CORRUPT.format(table="artifacts")) >= 2


async def test_result_linked_to_an_undecodable_artifact(client: httpx.AsyncClient, engine: Engine) -> None:
    """The lookup serves the config without the artifact it cannot read; publishing against an artifact
    whose build cannot be read is refused until a compile has rebuilt it."""
    art = await compile_(client)
    trial = {"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}
    body = {"kernel_key": art["kernel_key"], "target": "cpu", "trials": [trial]}
    query = {"kernel": art["kernel_key"], "target": "cpu"}
    assert (await client.post("/v1/tuning-results", json=body)).status_code == 200
    _corrupt(engine, Artifact, "meta", "shape", "garbage", key=art["id"])
    client.app.state.tilec.lookups.clear()  # type: ignore[attr-defined]
    r = await client.get("/v1/lookup", params=query)
    assert r.status_code == 200 and r.json()["artifact"] is None and r.json()["time_ms"] == 1.0, r.text
    _corrupt(engine, Artifact, "config", "shape", "garbage", key=art["id"])
    refused = await client.post("/v1/tuning-results", json=body)
    assert refused.status_code == 422, refused.text
    detail = E.MSG_TRIAL_ARTIFACT_UNREADABLE.format(index=0, id=art["id"])
    assert refused.json() == {
        "error": E.UNKNOWN_ARTIFACT,
        "detail": detail,
        "artifact_id": art["id"],
        "trial": 0,
    }
    assert (await client.post("/v1/compile", json={"ir": ADD_IR})).json()["cached"] is False
    assert (await client.post("/v1/tuning-results", json=body)).status_code == 200
    assert (await client.get("/v1/lookup", params=query)).json()["artifact"]["id"] == art["id"]


async def test_unrebuildable_artifact_is_a_miss(client: httpx.AsyncClient, engine: Engine) -> None:
    """A row whose target or spec cannot be read cannot be rebuilt: a 404 miss, never a 500 or a 503."""
    art = await compile_(client)
    with engine.begin() as conn:
        conn.execute(
            update(Artifact).where(Artifact.key == art["id"]).values(target="gpu", binary=b"flipped")
        )
    for path in ("", "/object"):
        r = await client.get(f"/v1/artifacts/{art['id']}{path}")
        assert r.status_code == 404 and r.json()["missing"] == "artifact", (path, r.text)
    # a text form verified by its own sha256 does not need the row's target
    assert (await client.get(f"/v1/artifacts/{art['id']}/llir")).status_code == 200
    assert metric(await metrics(client), CORRUPT.format(table="artifacts")) >= 1


async def test_undecodable_kernel_row_is_read_again(client: httpx.AsyncClient, engine: Engine) -> None:
    first = (await client.post("/v1/kernels", json={"ir": ADD_IR})).json()
    for how, value in _json_garbage(engine):
        _corrupt(engine, Kernel, "info", how, value, key=first["key"])
        got = await client.get(f"/v1/kernels/{first['key']}")
        assert got.status_code == 404 and got.json()["missing"] == "kernel", got.text
        again = await client.post("/v1/kernels", json={"ir": ADD_IR})
        assert again.status_code == 200 and again.json()["params"] == first["params"], again.text
        assert (await client.get(f"/v1/kernels/{first['key']}")).json()["params"] == first["params"]
    assert metric(await metrics(client), CORRUPT.format(table="kernels")) >= 2


async def test_undecodable_trial_is_left_out_of_the_listing(
    client: httpx.AsyncClient, engine: Engine
) -> None:
    art = await compile_(client)
    trials = [{"config": {"num_stages": n}, "time_ms": float(n)} for n in (1, 2, 3)]
    r = await client.post(
        "/v1/tuning-results", json={"kernel_key": art["kernel_key"], "target": "cpu", "trials": trials}
    )
    tkey = r.json()["tuning_key"]
    with engine.begin() as conn:
        middle = conn.execute(select(Trial.id).where(Trial.time_ms == 2.0)).scalar_one()
    for how, value in _json_garbage(engine):
        _corrupt(engine, Trial, "config", how, value, id=middle)
        listed = await client.get(f"/v1/tuning-results/{tkey}/trials")
        assert listed.status_code == 200 and [t["time_ms"] for t in listed.json()] == [1.0, 3.0], listed.text
    assert metric(await metrics(client), CORRUPT.format(table="trials")) >= 2


async def test_undecodable_token_row_grants_nothing(make_client, engine: Engine) -> None:  # noqa: ANN001 - factory
    async with make_client(auth=True) as client:
        state = client.app.state.tilec  # type: ignore[attr-defined]
        admin = {
            "Authorization": f"Bearer {state.write_sync(lambda s: crud.create_token(s, scopes=['admin'])[0])}"
        }
        garbage = [("shape", 5), ("shape", [["admin"]])] + [g for g in _json_garbage(engine) if g[0] == "sql"]
        for how, value in garbage:
            plain, row = state.write_sync(lambda s: crud.create_token(s, scopes=["admin"]))
            _corrupt(engine, Token, "scopes", how, value, id=row.id)
            r = await client.get("/v1/kernels/" + "0" * 64, headers={"Authorization": f"Bearer {plain}"})
            assert r.status_code == 401 and r.json()["detail"] == E.MSG_BAD_TOKEN, (value, r.text)
            # the admin listing shows it with no scopes (it grants none), never a 500
            listed = await client.get("/v1/tokens", headers=admin)
            assert listed.status_code == 200, listed.text
            assert next(t for t in listed.json() if t["id"] == row.id)["scopes"] == []
        m = (await client.get("/metrics", headers=admin)).text
    assert metric(m, CORRUPT.format(table="tokens")) >= 2 * len(garbage)
