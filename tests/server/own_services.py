"""A Redis and a PostgreSQL of a test's own, on free loopback ports, that it may kill and restart (the machine's
shared servers on 6379 and 5432 are never touched). PostgreSQL refuses to run as root, so as root (CI) initdb
and postgres run as the `postgres` user, exec'd directly with Popen(user=...); otherwise as the caller.
Where the binaries are missing the tests skip, or fail when CI=true (CI must run them)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.server.conftest import free_port

PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is not installed, and CI=true needs it")
    pytest.skip(f"{what} is not installed")


class _Server:
    """A server process in a session of its own, whose log goes to a file."""

    proc: subprocess.Popen | None = None
    name = "server"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"tilec-{self.name}-"))
        self.port = free_port()
        self.log_path = self.dir / "log"

    def _spawn(self, cmd: list[str], **kw: object) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kw
            )  # type: ignore[call-overload]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL it (and what it started): a crash, as the tests drill it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(_Server):
    """redis-server with no persistence: a kill loses every message in it, as a crash within the fsync window,
    a FLUSHDB or a failover would."""

    name = "redis"

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(self.binary).exists():
            _missing("redis-server")
        super().__init__()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(self.dir), "--protected-mode", "no"]  # fmt: skip
        self._spawn(cmd)
        import redis

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
            try:
                if client.ping():
                    return self
            except redis.RedisError:
                time.sleep(0.05)
            finally:
                client.close()
        raise RuntimeError(f"redis-server did not start:\n{self.log()}")


class PostgresServer(_Server):
    """A cluster made by initdb in a temporary directory (trust auth, fsync off: a test database), served by
    `postgres` on a free port; restartable on the same port and data."""

    name = "pg"

    def __init__(self) -> None:
        if not PG_BINS:
            _missing("PostgreSQL (/usr/lib/postgresql/*/bin)")
        self.bin = PG_BINS[0]
        super().__init__()
        self.as_user: dict[str, object] = {}
        if os.geteuid() == 0:  # initdb and postgres refuse root
            who = pwd.getpwnam("postgres")
            os.chown(self.dir, who.pw_uid, who.pw_gid)
            self.as_user = {"user": who.pw_uid, "group": who.pw_gid, "extra_groups": [],
                            "env": {"PATH": os.environ.get("PATH", ""), "HOME": str(self.dir), "LC_ALL": "C"}}  # fmt: skip
        self.data = self.dir / "data"
        cmd = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
               "--locale=C", "--no-sync"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **self.as_user)  # type: ignore[call-overload]
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        cmd = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.dir),
               "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
               "-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB"]  # fmt: skip
        self._spawn(cmd, **self.as_user)
        import psycopg

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"postgres exited:\n{self.log()}")
            try:
                psycopg.connect(
                    f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", connect_timeout=1
                ).close()
                return self
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not start:\n{self.log()}")

    def stop(self) -> None:
        """A fast shutdown (SIGINT: roll back, close, exit)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def close(self) -> None:
        self.stop()
        super().close()

    def new_database(self) -> str:
        """A fresh migrated database on this server: its URL."""
        from tests.conftest import make_pg_database
        from tilec.server.db.migrate import upgrade

        url = make_pg_database(self.url())
        upgrade(url)
        return url
