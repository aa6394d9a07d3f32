"""`tilec jobs ls|show|cancel` against a real uvicorn with auth on: a job tuned by `tilec tune --server`
is listed (by state and kernel), shown with its trials, and a second, slow job is cancelled; a job that
does not exist exits 1, bad input exits 2, never a traceback."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tilec import client
from tilec.compiler.tune.launch import LaunchDescription
from tilec.wire import TuneJobCreate

from .conftest import Service
from .test_cli_ls import fails, ok, tilec
from .test_cli_tune import LAUNCH, SIG, files, tune  # noqa: F401 - files: fixture
from .test_jit_shared import VADD


def test_jobs_ls_show_cancel(
    service: Callable[..., Service],
    files: Callable[..., tuple[Path, Path]],  # noqa: F811
) -> None:
    svc = service()
    kernel, launch = files()
    tuned = tune(kernel, launch, "--json", env={"TILEC_URL": svc.url, "TILEC_TOKEN": svc.tokens["submit"]})
    assert tuned.exit_code == 0, tuned.stderr
    done = json.loads(tuned.stdout)["job"]
    assert f"tilec: job {done['id']} " in tuned.stderr  # the id, as soon as the job is queued

    listed = json.loads(ok(tilec("jobs", "ls", "--json", svc=svc)).stdout)
    assert [j["id"] for j in listed] == [done["id"]] and listed[0]["state"] == "done"
    table = ok(tilec("jobs", "ls", svc=svc)).stdout
    assert str(done["id"]) in table and "2/2" in table and '{"n":2048}' in table
    assert json.loads(ok(tilec("jobs", "ls", "--state", "queued", "--json", svc=svc)).stdout) == []
    by_kernel = ok(tilec("jobs", "ls", "--kernel", done["kernel_key"], "--json", svc=svc)).stdout
    assert [j["id"] for j in json.loads(by_kernel)] == [done["id"]]

    shown = ok(tilec("jobs", "show", str(done["id"]), svc=svc)).stdout
    assert f"tune job {done['id']}" in shown and done["tuning_key"] in shown and "BLOCK=" in shown
    assert "2 of 2" in shown and f"tilec show {done['tuning_key'][:16]}" in shown
    as_json = json.loads(ok(tilec("jobs", "show", str(done["id"]), "--json", svc=svc)).stdout)
    assert as_json["id"] == done["id"] and len(as_json["trials"]) == 2
    said = ok(tilec("jobs", "cancel", str(done["id"]), svc=svc, token="submit")).stdout
    assert said.strip() == f"tilec: job {done['id']} had already ended: done"

    # a slow job on purpose (4M elements, both configs timed in full), cancelled while queued or running
    slow = TuneJobCreate(source=VADD, signature=dict(p.split("=") for p in SIG.split(",")),
                         launch=LaunchDescription.from_toml(LAUNCH.replace("n = 2048", "n = 4194304")).to_json(),
                         strategy="exhaustive")  # fmt: skip
    with client.Client(svc.url, svc.tokens["submit"]) as c:
        job = c.submit_tune(slow)
        said = ok(tilec("jobs", "cancel", str(job.id), svc=svc, token="submit")).stdout
        assert said.startswith(f"tilec: job {job.id} cancelled (it was "), said
        deadline = time.monotonic() + 120  # a running job stops at its next trial: wait for that, generously
        while (state := c.tune_job(job.id).state) not in ("cancelled", "done", "failed"):
            assert time.monotonic() < deadline, state
            time.sleep(0.1)
        assert state == "cancelled"

    fails(tilec("jobs", "show", "4242", svc=svc), 1, "has no tune job 4242")
    fails(tilec("jobs", "cancel", "4242", svc=svc, token="submit"), 1, "has no tune job 4242")
    fails(tilec("jobs", "cancel", str(done["id"]), svc=svc, token="read"), 1, "refused (403")
    fails(tilec("jobs", "ls", "--state", "finished", svc=svc), 2, "--state: expected one of")
    fails(tilec("jobs", "ls", "--kernel", "a/b", svc=svc), 2, "not a kernel key")
    fails(tilec("jobs", "show", "0", svc=svc), 2)
    fails(tilec("jobs", "ls"), 2, "no server")
