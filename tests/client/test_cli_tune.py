"""`tilec tune`: in-process without a server (the table lists every config, best first; --json's `best` is
the fastest timed trial), bad input exits 2 without a traceback (a launch error names its field, a compile
error its file:line:col), and --server runs a job on a real uvicorn whose result a jit kernel then shares."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import typer
from typer.testing import CliRunner, Result

from tests.server.conftest import make_settings
from tilec import client
from tilec.client.cli import register
from tilec.compiler.tune.launch import LaunchDescription
from tilec.server.app import create_app
from tilec.server.db.migrate import upgrade
from tilec.wire import TuneJobCreate

from .conftest import Service
from .test_jit_shared import VADD, grid

app = typer.Typer()
register(app)  # every client command, tune among them, as tilec/cli.py registers them
runner = CliRunner()
SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
LAUNCH = """
grid = ["cdiv(n, BLOCK)"]
[args]
x_ptr = "randn(n)"
y_ptr = "randn(n)"
out_ptr = "empty(n)"
n = 2048
"""


@pytest.fixture
def files(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    def write(source: str = VADD, launch: str = LAUNCH) -> tuple[Path, Path]:
        (tmp_path / "vadd.py").write_text(source)
        (tmp_path / "launch.toml").write_text(launch)
        return tmp_path / "vadd.py", tmp_path / "launch.toml"

    return write


def tune(kernel: Path, launch: Path, *extra: str, env: dict | None = None) -> Result:
    args = ["tune", str(kernel), "--signature", SIG, "--launch", str(launch), *extra]
    return runner.invoke(app, args, env={"TILEC_URL": None, "TILEC_TOKEN": None, **(env or {})})


def no_traceback(r: Result) -> None:
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output + r.stderr


def test_in_process_table_lists_every_config_best_first(files: Callable[..., tuple[Path, Path]]) -> None:
    r = tune(*files())
    assert r.exit_code == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "BLOCK=" in line]
    assert len(rows) == 2 and all("ok" in row for row in rows)
    times = [float(row.split("│")[2]) for row in rows]
    assert times == sorted(times), "the fastest config comes first"
    assert '{"n":2048}' in r.stdout and "median ms" in r.stdout


def test_in_process_json(files: Callable[..., tuple[Path, Path]]) -> None:
    r = tune(*files(), "--json", "--strategy", "exhaustive")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert {t["config"]["kwargs"]["BLOCK"] for t in out["trials"]} == {64, 256}
    timed = [t for t in out["trials"] if t["status"] == "ok"]
    fastest = min(timed, key=lambda t: t["time_ms"])
    assert out["best"] == fastest["config"] and out["best_time_ms"] == fastest["time_ms"]
    assert out["trials"][0] == fastest
    assert out["job"]["state"] == "done" and out["job"]["strategy"] == "exhaustive"
    assert out["job"]["key"] == '{"n":2048}' and out["job"]["dtypes"] == SIG.replace("=", ":")


@pytest.mark.parametrize(
    ("launch", "message"),
    [
        (LAUNCH.replace('out_ptr = "empty(n)"\n', ""), "args.out_ptr: missing"),
        (LAUNCH.replace('"randn(n)"', '{init = "randn", shape = ["n"], dtype = 3}', 1), "args.x_ptr.dtype"),
        (LAUNCH.replace('grid = ["cdiv(n, BLOCK)"]', 'grid = ["cdiv(n, BLOCK"]'), "grid[0]: syntax error"),
        (LAUNCH.replace("]\n[args]", "\n[args]"), "toml: "),
    ],
)
def test_bad_launch_exits_2_naming_the_field(
    files: Callable[..., tuple[Path, Path]], launch: str, message: str
) -> None:
    kernel, path = files(launch=launch)
    r = tune(kernel, path)
    assert r.exit_code == 2 and message in r.stderr and str(path) in r.stderr, r.stderr
    assert r.stdout == ""
    no_traceback(r)


def test_compile_error_exits_2_with_line_and_col(files: Callable[..., tuple[Path, Path]]) -> None:
    kernel, launch = files(source=VADD.replace("tl.load(x_ptr + offs", "tl.lod(x_ptr + offs"))
    r = tune(kernel, launch)
    assert r.exit_code == 2, r.stderr
    line = VADD.splitlines().index(next(s for s in VADD.splitlines() if "tl.load(x_ptr" in s)) + 1
    col = next(s for s in VADD.splitlines() if "tl.load(x_ptr" in s).index("tl.load(x_ptr") + 1
    assert r.stderr.startswith(f"{kernel}:{line}:{col}: tl.lod is not supported"), r.stderr
    no_traceback(r)


def test_other_bad_input_exits_2(files: Callable[..., tuple[Path, Path]], tmp_path: Path) -> None:
    kernel, launch = files()
    for extra, message in [
        (["--strategy", "greedy"], "--strategy must be one of"),
        (["--target", "gpu"], "--target: unknown target 'gpu'"),
    ]:
        r = tune(kernel, launch, *extra)
        assert r.exit_code == 2 and message in r.stderr, r.stderr
    r = tune(kernel, tmp_path / "missing.toml")
    assert r.exit_code == 2 and "cannot read" in r.stderr
    r = runner.invoke(app, ["tune", str(kernel), "--signature", "x_ptr=*fp32", "--launch", str(launch)],
                      env={"TILEC_URL": None})  # fmt: skip
    assert r.exit_code == 2 and "--signature: no type for y_ptr, out_ptr, n of vadd" in r.stderr
    no_traceback(r)


def test_on_the_server(service: Callable[..., Service], files: Callable[..., tuple[Path, Path]], tmp_path: Path) -> None:
    svc = service()
    kernel, launch = files()
    r = tune(kernel, launch, "--json", "--token", svc.tokens["submit"], env={"TILEC_URL": svc.url})
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    job = out["job"]
    assert job["state"] == "done" and job["id"] >= 1 and "trials" not in job
    assert job["trials_done"] == job["trials_planned"] == 2
    assert job["key"] == '{"n":2048}' and job["dtypes"] == SIG.replace("=", ":")
    timed = [t for t in out["trials"] if t["status"] in ("ok", "cached")]
    assert out["best"] == min(timed, key=lambda t: t["time_ms"])["config"] == job["best_config"]

    # a jit kernel on the same server launches the job's config without timing any (the server's key pinned)
    with client.Client(svc.url) as c:
        (key,) = c.keys()
    k = client.jit(kernel, server=client.Client(svc.url, svc.tokens["read"]), trusted_keys=key.public_key,
                   cache=tmp_path / "cache")
    x, y, o = np.ones(2048, np.float32), np.ones(2048, np.float32), np.zeros(2048, np.float32)
    k[grid](x, y, o, 2048)
    np.testing.assert_array_equal(o, 2)
    assert k.trials == {} and k.compile_count == 1
    (cfg,) = k.best_configs.values()
    assert {"kwargs": cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages} == out["best"]
    k.shared.client().close()

    r = tune(kernel, launch, "--server", svc.url, "--token", svc.tokens["read"])
    assert r.exit_code == 1 and "403" in r.stderr and "submit" in r.stderr, r.stderr
    no_traceback(r)


def test_ctrl_c_leaves_the_job_running(
    service: Callable[..., Service], files: Callable[..., tuple[Path, Path]]
) -> None:
    svc = service()
    kernel, launch = files(launch=LAUNCH.replace("n = 2048", "n = 4194304"))  # a job of some seconds
    tilec = Path(sys.executable).parent / "tilec"
    cmd = [
        str(tilec),
        "tune",
        str(kernel),
        "--signature",
        SIG,
        "--launch",
        str(launch),
        "--strategy",
        "exhaustive",
    ]
    env = {**os.environ, "TILEC_URL": svc.url, "TILEC_TOKEN": svc.tokens["submit"]}
    # the command as a terminal starts it: Ctrl-C on. A suite started in the background (`nohup make test &`)
    # hands its children SIGINT ignored, and a Python started so never raises KeyboardInterrupt
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    # the event: the command prints the job's id once it follows it (no sleep, no guess at how long the
    # submit takes on a loaded machine); the job (two configs of 4M elements, compiled first) outlasts that
    assert proc.stderr is not None
    first = proc.stderr.readline()  # blocks until the line comes, or the command ends (then "")
    assert first.startswith("tilec: job ") and " on " in first, (first, proc.poll())
    job_id = int(first.split()[2])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, first + err
    assert f"job {job_id} keeps running" in err and f"tilec jobs cancel {job_id}" in err
    assert "Traceback" not in err
    with client.Client(svc.url, svc.tokens["read"]) as c:
        assert c.tune_job(job_id).state in ("queued", "running", "done")


async def test_async_client_tune_jobs(tmp_path: Path, files: Callable[..., tuple[Path, Path]]) -> None:
    """AsyncClient's tune-job methods against the app in this process (ASGI transport): submit, list
    by state and kernel, read one, cancel."""
    url = f"sqlite:///{tmp_path / 'tilec.db'}"
    upgrade(url)
    app = create_app(make_settings(url, tmp_path))
    body = TuneJobCreate(source=VADD, signature=dict(p.split("=") for p in SIG.split(",")),
                         launch=LaunchDescription.from_toml(LAUNCH).to_json(), strategy="exhaustive")  # fmt: skip
    try:
        async with client.AsyncClient("http://tilec.test", transport=httpx.ASGITransport(app=app)) as c:
            job = await c.submit_tune(body)
            assert job.id >= 1 and job.key == '{"n":2048}' and not job.attached
            assert [j.id for j in await c.tune_jobs(kernel=job.kernel_key)] == [job.id]
            assert await c.tune_jobs(kernel="0" * 64) == []
            assert (await c.tune_job(job.id)).tuning_key == job.tuning_key
            cancelled = await c.cancel_tune(job.id)
            assert cancelled.id == job.id and cancelled.state in ("cancelled", "done")
            assert [j.id for j in await c.tune_jobs(state=cancelled.state)] == [job.id]
            with pytest.raises(client.NotFoundError):
                await c.tune_job(job.id + 1000)
    finally:
        app.state.tilec.close()


INDUCTOR_LAUNCH = """
grid = ["cdiv(xnumel, XBLOCK)"]
[args]
in_ptr0 = "randn(xnumel)"
in_ptr1 = "randn(xnumel)"
out_ptr0 = "empty(xnumel)"
xnumel = 4773
"""


def test_an_inductor_module_tunes_with_no_signature(files: Callable[..., tuple[Path, Path]]) -> None:
    """The decorator's triton_meta types the arguments and its size hints give the configs (XBLOCK)."""
    corpus = Path(__file__).resolve().parents[1] / "inductor" / "corpus" / "kernels"
    source = (corpus / "add_relu.triton_poi_fused_add_relu_0.py").read_text()
    kernel, launch = files(source, INDUCTOR_LAUNCH)
    args = ["tune", str(kernel), "--launch", str(launch), "--json", "--strategy", "exhaustive"]
    r = runner.invoke(app, args, env={"TILEC_URL": None, "TILEC_TOKEN": None})
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["job"]["dtypes"] == "in_ptr0:*fp32,in_ptr1:*fp32,out_ptr0:*fp32,xnumel:i32"
    assert len(out["trials"]) >= 2 and all("XBLOCK" in t["config"]["kwargs"] for t in out["trials"])
    assert out["best"] is not None

    plain, _ = files()
    r = runner.invoke(app, ["tune", str(plain), "--launch", str(launch)], env={"TILEC_URL": None})
    assert r.exit_code == 2 and "--signature is needed" in r.output + r.stderr
    no_traceback(r)
