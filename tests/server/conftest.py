"""Service fixtures: an app on the session's database (sqlite and postgresql), an httpx client over
ASGITransport, kernels to send, and a real uvicorn process for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tilec.server.app import create_app
from tilec.server.settings import Settings

DATA = Path(__file__).parent / "data"
ADD_IR = (DATA / "add.tir").read_text()


def make_settings(database_url: str, tmp_path: Path, **kw: object) -> Settings:
    base = {"database_url": database_url, "data_dir": tmp_path, "auth": False, "migrate_on_start": False,
            "allowed_hosts": "tilec.test"}  # the ASGI clients' base URL  # fmt: skip
    return Settings(**{**base, **kw})


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return make_settings(database_url, tmp_path)


@pytest.fixture
def make_client(database_url: str, tmp_path: Path) -> Iterator[Callable[..., httpx.AsyncClient]]:
    """make_client(**settings) -> an AsyncClient over a new app with those settings."""
    apps = []

    def make(**kw: object) -> httpx.AsyncClient:
        url = str(kw.pop("database_url", database_url))
        app = create_app(make_settings(url, tmp_path, **kw))
        apps.append(app)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://tilec.test", timeout=60)
        client.app = app  # type: ignore[attr-defined]
        return client

    yield make
    for app in apps:
        app.state.tilec.close()


@pytest.fixture
async def client(make_client: Callable[..., httpx.AsyncClient]) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Uvicorn:
    """A real `python -m uvicorn server.main:app` process on a free loopback port."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "TILEC_PORT": str(self.port)}
        self.proc: subprocess.Popen | None = None
        # stderr goes to a file: a pipe nobody reads fills up (64 KiB of tracebacks) and stalls the server
        self.stderr = tempfile.TemporaryFile()

    def log(self) -> str:
        """What the server has written to stderr so far (tracebacks included)."""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def start(self) -> Uvicorn:
        cmd = [sys.executable, "-m", "uvicorn", "tilec.server.main:app", "--port", str(self.port), "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=self.stderr)
        # generous: on a loaded 2-core machine the imports and `alembic upgrade head` alone took over 30 s
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited: {self.log()[-2000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("uvicorn did not become healthy in 180 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


@pytest.fixture
def uvicorn_server(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Uvicorn]]:
    started: list[Uvicorn] = []

    def start(**env: str) -> Uvicorn:
        base = {"TILEC_DATABASE_URL": database_url, "TILEC_DATA_DIR": str(tmp_path), "TILEC_AUTH": "false"}
        server = Uvicorn({**base, **env}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
