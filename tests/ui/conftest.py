"""Fixtures for the web page's tests: Debian's chromium and chromedriver (installed here with apt-get when
they are missing and we are root: no browser download step), a headless Chromium driven by Selenium
through /usr/bin/chromedriver (Selenium Manager is never asked for anything), and a real `tilec serve`
with auth on, stocked through its own API: a cpu and a cuda build, and a cpu tune job run to the end.
In CI (CI=true) a browser that cannot be had fails the run; elsewhere it skips."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import client, free_port, make_client  # noqa: F401 - fixtures for test_api
from tests.server.jobs_fixtures import FAST, FINISHED, Proc

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
TILEC = Path(sys.executable).parent / "tilec"
KERNELS = ROOT / "tests" / "kernels"
VADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
# a tuned kernel whose BLOCK=512 config fails to compile: its tuning result has a failed config to list
TUNED = """
import triton
import triton.language as tl


@triton.autotune(configs=[{configs}], key=["n"])
@triton.jit
def {name}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 256)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""


def tuned_source(name: str, blocks: tuple[int, ...]) -> str:
    configs = ", ".join(f'triton.Config({{"BLOCK": {b}}})' for b in blocks)
    return TUNED.format(name=name, configs=configs)


def job_body(source: str, n: int, **extra: Any) -> dict:
    launch = {
        "grid": ["cdiv(n, BLOCK)"],
        "args": {"x_ptr": "randn(n)", "y_ptr": "randn(n)", "out_ptr": "empty(n)", "n": n},
    }
    return {"source": source, "signature": SIG, "launch": launch, "target": "cpu", **extra}


# the browser


def _install_chromium() -> str:
    """apt-get install chromium chromium-driver, as root; what went wrong, or ''."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root (or no apt-get): install them with `apt-get install -y chromium chromium-driver`"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # a stale package list: refresh it once
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    return "" if done.returncode == 0 else f"apt-get failed: {done.stderr[-2000:]}"


@pytest.fixture(scope="session")
def chromium() -> Path:
    """/usr/bin/chromedriver, with Debian's chromium beside it (installed first when missing)."""
    why = ""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        why = _install_chromium()
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        message = f"Debian's chromium and chromium-driver are needed for the web page's tests ({why})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return CHROMEDRIVER


@pytest.fixture(scope="module")
def browser(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium, its console and network logged (the tests read both)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--password-store=basic",
                "--force-device-scale-factor=1", f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=ChromeService(executable_path=str(chromium)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the views' screenshots go: TILEC_UI_SCREENSHOTS (e.g. docs/screenshots) or a temporary folder."""
    wanted = os.environ.get("TILEC_UI_SCREENSHOTS")
    if wanted:
        path = Path(wanted)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("screenshots")


# the service


@dataclass
class Stocked:
    """A running `tilec serve` (auth on) with tokens of each scope and what the tests put in it."""

    url: str
    proc: Proc
    tokens: dict[str, str]
    kernels: dict[str, str]  # name -> key
    artifacts: dict[str, str]  # target -> id (of add_kernel)
    tuned: dict  # the finished tune job of `vadd_tuned`
    database_url: str  # the service's SQLite file (a test writes a row the API cannot make here)

    def http(self, scope: str | None = "submit") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[scope]}"} if scope else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def wait_job(self, job_id: int, until: Callable[[dict], bool] = lambda j: j["state"] in FINISHED,
                 timeout: float = 60) -> dict:  # fmt: skip
        deadline = time.monotonic() + timeout
        with self.http("read") as http:
            while time.monotonic() < deadline:
                job = http.get(f"/v1/tune-jobs/{job_id}").json()
                if until(job):
                    return job
                time.sleep(0.1)
        raise AssertionError(f"job {job_id} not there in {timeout} s: {job}\n{self.proc.log()[-3000:]}")


def _tokens(url: str) -> dict[str, str]:
    from sqlalchemy.orm import Session

    from tilec.server.db import crud
    from tilec.server.db.engine import make_engine
    from tilec.server.db.migrate import upgrade

    upgrade(url)
    engine = make_engine(url)
    try:
        with Session(engine) as session, session.begin():
            return {
                s: crud.create_token(session, scopes=[s], description=f"ui {s}")[0]
                for s in ("read", "submit")
            }
    finally:
        engine.dispose()


def _start(env: dict[str, str], port: int) -> tuple[Proc, str]:
    proc = Proc([str(TILEC), "serve", "--port", str(port)], env, "tilec serve")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"tilec serve exited: {proc.log()[-3000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.stop()
    raise RuntimeError(f"tilec serve did not become healthy in 30 s: {proc.log()[-3000:]}")


def _stock(url: str, tokens: dict[str, str]) -> tuple[dict, dict, dict]:
    """Through the API, as a team would: add_kernel built for cpu and cuda:sm_90, and a cpu tune job of
    vadd_tuned (halving over four configs, one of which fails to compile) run to the end."""
    headers = {"Authorization": f"Bearer {tokens['submit']}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        source = (KERNELS / "vector_add.py").read_text()
        artifacts = {}
        for target in ("cpu", "cuda:sm_90"):
            body = {"source": source, "name": "add_kernel", "signature": VADD_SIG, "constexprs": {"BLOCK_SIZE": 1024},
                    "target": target}  # fmt: skip
            r = http.post("/v1/compile", json=body)
            assert r.status_code == 200, r.text
            artifacts[target] = r.json()["id"]
        add_key = r.json()["kernel_key"]
        r = http.post(
            "/v1/tune-jobs", json=job_body(tuned_source("vadd_tuned", (64, 128, 256, 512)), 1 << 16)
        )
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 90
        while (job := http.get(f"/v1/tune-jobs/{job_id}").json())["state"] not in FINISHED:
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
    assert job["state"] == "done", job
    return {"add_kernel": add_key, "vadd_tuned": job["kernel_key"]}, artifacts, job


@pytest.fixture(scope="module")
def stocked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stocked]:
    tmp = tmp_path_factory.mktemp("ui-service")
    url = f"sqlite:///{tmp / 'tilec.db'}"
    tokens = _tokens(url)
    port = free_port()
    env = {**FAST, "TILEC_AUTH": "true", "TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(tmp),
           "TILEC_COMPILE_WORKERS": "2"}  # fmt: skip
    proc, base = _start(env, port)
    try:
        kernels, artifacts, tuned = _stock(base, tokens)
        yield Stocked(base, proc, tokens, kernels, artifacts, tuned, url)
    finally:
        proc.stop()
        proc.log_file.close()
