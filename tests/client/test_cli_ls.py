"""`tilec ls`, `tilec show` and `tilec lookup` against a real uvicorn with auth on: tables and --json,
a kernel tuned by `tilec tune --server` found again by lookup (the same tuning key), misses and refusals
exit 1, bad input exits 2, never a traceback. Also the Client's listing methods, sync and async."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import Result

from tests.server.conftest import ADD_IR, Uvicorn, free_port, make_settings
from tilec import client
from tilec.server.app import create_app
from tilec.server.db.migrate import upgrade
from tilec.wire import CompileCreate, ConfigSpec, KernelCreate

from .conftest import Service, _make_tokens
from .test_cli_tune import LAUNCH, SIG, app, files, no_traceback, runner, tune  # noqa: F401 - files: fixture


def tilec(*args: str, svc: Service | None = None, token: str | None = "read") -> Result:
    """Run a command with TILEC_URL/TILEC_TOKEN set from the service (a token of the given scope)."""
    env = {"TILEC_URL": svc.url if svc else None, "TILEC_TOKEN": svc.tokens[token] if svc and token else None}
    return runner.invoke(app, list(args), env=env)


def ok(r: Result) -> Result:
    assert r.exit_code == 0, r.stderr
    no_traceback(r)
    return r


def fails(r: Result, code: int, *words: str) -> None:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    for word in words:
        assert word in r.stderr, r.stderr
    no_traceback(r)


@pytest.fixture(scope="module")
def stocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, dict]]:
    """A service holding one IR kernel and its cpu and tir builds, shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("stocked")
    url = f"sqlite:///{root / 'tilec.db'}"
    tokens = _make_tokens(url)
    server = Uvicorn({"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(root), "TILEC_AUTH": "true"}).start()
    try:
        svc = Service(server.url, tokens, server)
        with client.Client(svc.url, svc.tokens["submit"]) as c:
            kernel = c.submit_kernel(KernelCreate(ir=ADD_IR))
            obj = c.compile(CompileCreate(kernel_key=kernel.key, target="cpu"))
            tir = c.compile(CompileCreate(kernel_key=kernel.key, target="cpu", emit="tir"))
        yield svc, {"kernel": kernel.key, "object": obj.id, "tir": tir.id}
    finally:
        server.stop()


def test_ls_tables_and_json(stocked: tuple[Service, dict]) -> None:
    svc, keys = stocked
    table = ok(tilec("ls", "kernels", svc=svc)).stdout
    assert keys["kernel"] in table and "add" in table and "x, y, out, n" in table
    listed = json.loads(ok(tilec("ls", "kernels", "--json", svc=svc)).stdout)
    assert [k["key"] for k in listed] == [keys["kernel"]] and listed[0]["ir"] is None

    table = ok(tilec("ls", "artifacts", svc=svc)).stdout
    assert keys["object"] in table and keys["tir"] in table and "object" in table
    listed = json.loads(ok(tilec("ls", "artifacts", "--kernel", keys["kernel"], "--target", "cpu", "--json",
                                 svc=svc)).stdout)  # fmt: skip
    assert [a["id"] for a in listed] == [keys["tir"], keys["object"]]
    assert json.loads(ok(tilec("ls", "artifacts", "--target", "cuda:sm_90", "--json", svc=svc)).stdout) == []
    assert json.loads(ok(tilec("ls", "tuning", "--json", svc=svc)).stdout) == []

    paged = ok(tilec("ls", "artifacts", "--limit", "1", "--offset", "1", "--json", svc=svc))
    assert [a["id"] for a in json.loads(paged.stdout)] == [keys["object"]]
    more = ok(tilec("ls", "artifacts", "--limit", "1", svc=svc))
    assert "--offset 1" in more.stderr and keys["tir"] in more.stdout


def test_show_kernel_and_artifact(stocked: tuple[Service, dict]) -> None:
    svc, keys = stocked
    out = json.loads(ok(tilec("show", keys["kernel"], "--json", svc=svc)).stdout)
    assert out["what"] == "kernel" and out["kernel"]["key"] == keys["kernel"]
    assert out["kernel"]["ir"].startswith("module {")
    shown = ok(tilec("show", keys["kernel"], svc=svc)).stdout
    assert "kernel add" in shown and "tile IR:" in shown and "kernel @add" in shown

    out = json.loads(ok(tilec("show", keys["object"], "--json", svc=svc)).stdout)
    assert out["what"] == "artifact" and out["artifact"]["id"] == keys["object"]
    shown = ok(tilec("show", keys["object"], svc=svc)).stdout
    assert "artifact of add for cpu" in shown and out["artifact"]["sha256"] in shown

    fails(tilec("show", "f" * 64, svc=svc), 1, "has no kernel, artifact or tuning key " + "f" * 64)


def test_tuned_kernel_is_looked_up_and_shown(
    service: Callable[..., Service], files: Callable[..., tuple[Path, Path]]  # noqa: F811
) -> None:
    svc = service()
    kernel, launch = files()
    lookup = ("lookup", str(kernel), "--signature", SIG, "--launch", str(launch))
    missing = tilec(*lookup, svc=svc)
    fails(missing, 1, "does not know kernel vadd", "tilec tune --server")

    tuned = tune(kernel, launch, "--json", "--strategy", "exhaustive",
                 env={"TILEC_URL": svc.url, "TILEC_TOKEN": svc.tokens["submit"]})  # fmt: skip
    assert tuned.exit_code == 0, tuned.stderr
    job = json.loads(tuned.stdout)["job"]

    found = json.loads(ok(tilec(*lookup, "--json", svc=svc)).stdout)
    assert found["tuning_key"] == job["tuning_key"] and found["config"] == job["best_config"]
    assert found["key"] == '{"n":2048}' and found["trials"] == 2 and found["artifact"]["target"] == "cpu"
    table = ok(tilec(*lookup, "--kernel", "vadd", "--target", "cpu", svc=svc)).stdout
    assert "best config of vadd on cpu" in table and job["tuning_key"] in table
    assert f"BLOCK={job['best_config']['kwargs']['BLOCK']}" in table

    # another shape is another tuning key: none yet
    other = launch.parent / "other.toml"
    other.write_text(LAUNCH.replace("n = 2048", "n = 4096"))
    fails(tilec("lookup", str(kernel), "--signature", SIG, "--launch", str(other), svc=svc), 1,
          "has no tuning result for vadd", '{"n":4096}')  # fmt: skip

    results = json.loads(ok(tilec("ls", "tuning", "--kernel", job["kernel_key"], "--json", svc=svc)).stdout)
    assert [r["tuning_key"] for r in results] == [job["tuning_key"]]
    assert job["tuning_key"] in ok(tilec("ls", "tuning", svc=svc)).stdout

    shown = json.loads(ok(tilec("show", job["tuning_key"], "--json", svc=svc)).stdout)
    assert shown["what"] == "tuning_key" and len(shown["trials"]) == 2
    assert shown["trials"][0]["config"] == job["best_config"]
    table = ok(tilec("show", job["tuning_key"], svc=svc)).stdout
    assert f"tuning key {job['tuning_key']}: 2 trials, best first" in table and "BLOCK=64" in table


def test_bad_input_exits_2(stocked: tuple[Service, dict], tmp_path: Path) -> None:
    svc, keys = stocked
    fails(tilec("ls", "everything", svc=svc), 2, "kernels, artifacts, tuning")
    fails(tilec("ls", "kernels", "--target", "cpu", svc=svc), 2, "not kernels")
    fails(tilec("ls", "artifacts", "--target", "sm_90", svc=svc), 2, "--target", "unknown target")
    fails(tilec("ls", "artifacts", "--kernel", "a/b", svc=svc), 2, "not a kernel key")
    fails(tilec("ls", "kernels", "--limit", "0", svc=svc), 2)
    fails(tilec("ls", "kernels", "--limit", "1001", svc=svc), 2)
    fails(tilec("show", "../tokens", svc=svc), 2, "not a key")
    fails(tilec("ls", "kernels"), 2, "no server")
    fails(tilec("ls", "kernels", "--server", "ftp://x", svc=svc), 2, "http://")

    source = tmp_path / "k.py"
    source.write_text("import triton\n\n@triton.jit\ndef k(x_ptr, n):\n    tl.store(x_ptr, nope)\n")
    launch = tmp_path / "l.toml"
    launch.write_text('grid = [1]\n[args]\nx_ptr = "zeros(n)"\nn = 4\n')
    lookup = ("lookup", str(source), "--signature", "x_ptr=*fp32,n=i32", "--launch", str(launch))
    fails(tilec(*lookup), 2, "no server")
    fails(tilec(*lookup, "--target", "gpu", svc=svc), 2, "--target")
    fails(tilec(*lookup, "--kernel", "other", svc=svc), 2, "other")
    launch.write_text('grid = [1]\n[args]\nx_ptr = "zeros(m)"\nn = 4\n')
    fails(tilec(*lookup, svc=svc), 2, f"{launch}: ", "args.x_ptr")
    launch.write_text("grid = [")
    fails(tilec(*lookup, svc=svc), 2, "toml")
    fails(tilec(*lookup[:-1], str(tmp_path / "none.toml"), svc=svc), 2, "cannot read")
    fails(tilec("lookup", str(tmp_path / "none.py"), *lookup[2:], svc=svc), 2, "cannot read")


def test_refusals_exit_1(stocked: tuple[Service, dict]) -> None:
    svc, keys = stocked
    fails(tilec("ls", "kernels", svc=svc, token=None), 1, "refused (401", "bearer token is required")
    fails(tilec("ls", "kernels", "--token", "wrong", svc=svc), 1, "refused (401")
    fails(tilec("show", keys["kernel"], "--token", "wrong", svc=svc), 1, "refused (401")
    closed = f"http://127.0.0.1:{free_port()}"
    fails(tilec("ls", "kernels", "--server", closed, svc=svc), 1, f"cannot reach {closed}")
    fails(tilec("show", keys["kernel"], "--server", closed, svc=svc), 1, "cannot reach")


async def test_async_client_listings(tmp_path: Path) -> None:
    """AsyncClient's listing methods against the app in this process (ASGI transport)."""
    url = f"sqlite:///{tmp_path / 'tilec.db'}"
    upgrade(url)
    service = create_app(make_settings(url, tmp_path))
    try:
        async with client.AsyncClient("http://tilec.test", transport=httpx.ASGITransport(app=service)) as c:
            kernel = await c.submit_kernel(KernelCreate(ir=ADD_IR))
            assert [k.key for k in await c.kernels()] == [kernel.key]
            assert (await c.kernel(kernel.key)).ir is not None
            art = await c.compile(CompileCreate(kernel_key=kernel.key, target="cpu"))
            assert [a.id for a in await c.artifacts(kernel=kernel.key, target="cpu")] == [art.id]
            assert await c.artifacts(target="cuda:sm_90") == [] and await c.kernels(offset=1) == []
            assert await c.tuning_results() == [] and await c.trials("0" * 64) == []
            with pytest.raises(client.ServiceError) as refused:
                await c.artifacts(limit=0)
            assert refused.value.status == 422
            from tilec.wire import TrialCreate, TuningResultCreate

            trial = TrialCreate(config=ConfigSpec(), time_ms=1.0, artifact_id=art.id)
            recorded = await c.record_tuning(TuningResultCreate(kernel_key=kernel.key, target="cpu", trials=[trial]))
            (listed,) = await c.tuning_results(kernel=kernel.key, limit=1)
            assert listed.tuning_key == recorded.tuning_key and listed.artifact and listed.artifact.id == art.id
            assert [t.time_ms for t in await c.trials(recorded.tuning_key)] == [1.0]
    finally:
        service.state.tilec.close()


def test_show_takes_a_unique_prefix_and_names_an_ambiguous_one(service: Callable[..., Service]) -> None:
    """`tilec ls` prints 16 characters of a key: `tilec show` takes those (any unique prefix); a prefix
    that begins several keys is bad input naming them. 17 kernels: two share a first hex digit."""
    svc = service()
    with client.Client(svc.url, svc.tokens["submit"]) as c:
        keys = [c.submit_kernel(KernelCreate(ir=ADD_IR.replace("@add(", f"@add{i}("))).key for i in range(17)]
    assert len(set(keys)) == 17
    for key in keys[:3]:
        out = json.loads(ok(tilec("show", key[:16], "--json", svc=svc)).stdout)
        assert out["what"] == "kernel" and out["kernel"]["key"] == key
    first = [k[0] for k in keys]
    shared = next(ch for ch in first if first.count(ch) > 1)
    both = [k for k in keys if k.startswith(shared)]
    fails(tilec("show", shared, svc=svc), 2, f"{shared} is ambiguous", f"kernel {both[0]}", "give more of it")
    unused = next(ch for ch in "0123456789abcdef" if ch not in first)
    fails(tilec("show", unused * 3, svc=svc), 1, "has no kernel, artifact or tuning key")
