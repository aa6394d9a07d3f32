"""The client path end to end: a real service process and the client in other processes. A kernel is
submitted, compiled for cpu by the server and launched on NumPy arrays; a corrupted cached binary is
detected, deleted and fetched again; with the server stopped, a fresh process launches from its local
cache, and `tilec pull`'s directory launches through load_index, every socket connection refused.
(Tampered pulled builds refused before the loader runs: tests/client/test_pull.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.client.conftest import _make_tokens
from tests.client.test_pull import KERNELS, LAUNCH, PLAIN, TUNED, write_project
from tests.server.conftest import Uvicorn

TILEC = Path(sys.executable).parent / "tilec"
OFFLINE = """
import socket

def refuse(*args):
    raise AssertionError("a network connection")

socket.socket.connect = refuse
"""
JIT = """
import json, sys
import numpy as np
from tilec import client

source = open(sys.argv[1]).read()
k = client.jit(source, "add_kernel")
n = 3000
x, y = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
out = np.zeros(n, np.float32)
k[lambda m: (-(-m["n"] // m["BLOCK"]),)](x, y, out, n, BLOCK=256)
print(json.dumps({"ok": bool(np.array_equal(out, x + y)), "obtained": k.obtained,
                  "corrupt": k.builds.local.corrupt if k.builds else None}))
"""
INDEX = """
import json, sys
import numpy as np
from tilec import load_index

idx = load_index(sys.argv[1])
n = 2048
x, y = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
grid = lambda m: (-(-m["n"] // m["BLOCK"]),)
a, b = np.zeros(n, np.float32), np.zeros(n, np.float32)
idx["add_kernel"][grid](x, y, a, n)
idx.vadd[grid](x, y, b, n)
print(json.dumps({"add": bool(np.array_equal(a, x + y)), "vadd": bool(np.array_equal(b, x * 2 + y))}))
"""


@dataclass
class Server:
    proc: Uvicorn
    tokens: dict[str, str]
    key: str  # the base64 public key it signs with

    @property
    def url(self) -> str:
        return self.proc.url


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    url = f"sqlite:///{tmp_path / 'tilec.db'}"
    tokens = _make_tokens(url)
    proc = Uvicorn({"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(tmp_path), "TILEC_AUTH": "true"}).start()
    (key,) = httpx.get(proc.url + "/v1/keys", headers={"Authorization": f"Bearer {tokens['read']}"}).json()
    yield Server(proc, tokens, key["public_key"])
    proc.stop()


def python(code: str, *args: str, env: dict[str, str], offline: bool = False) -> dict:
    """Run `code` in a fresh interpreter (warnings are errors); its last stdout line, as JSON."""
    script = (OFFLINE if offline else "") + code
    r = subprocess.run([sys.executable, "-W", "error", "-c", script, *args], env={**os.environ, **env},
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_compiled_by_the_server_then_launched_offline_from_the_local_cache(
    server: Server, tmp_path: Path
) -> None:
    source = tmp_path / "ops.py"
    source.write_text(KERNELS)
    env = {"TILEC_URL": server.url, "TILEC_TOKEN": server.tokens["submit"], "TILEC_CACHE_DIR": str(tmp_path / "cache"),
           "TILEC_TRUSTED_KEYS": server.key}  # fmt: skip
    first = python(JIT, str(source), env=env)
    assert first == {"ok": True, "obtained": {"here": 0, "disk": 0, "server": 1}, "corrupt": 0}

    (blob,) = (tmp_path / "cache" / "blobs").glob("*/*")
    good = bytearray(blob.read_bytes())
    bad = good.copy()
    bad[len(bad) // 3] ^= 0x40
    blob.write_bytes(bytes(bad))
    second = python(JIT, str(source), env=env)  # detected, deleted and fetched again
    assert second == {"ok": True, "obtained": {"here": 0, "disk": 0, "server": 1}, "corrupt": 1}
    assert blob.read_bytes() == good

    server.proc.stop()
    third = python(JIT, str(source), env=env, offline=True)  # the server stopped, no connection at all
    assert third == {"ok": True, "obtained": {"here": 0, "disk": 1, "server": 0}, "corrupt": 0}


def test_pull_then_launch_from_the_directory_with_the_server_stopped(server: Server, tmp_path: Path) -> None:
    manifest, out = write_project(tmp_path, PLAIN + TUNED, LAUNCH), tmp_path / "pulled"
    env = {**os.environ, "TILEC_URL": server.url, "TILEC_TOKEN": server.tokens["submit"],
           "TILEC_TRUSTED_KEYS": server.key}  # fmt: skip
    cmd = [str(TILEC), "pull", "--manifest", str(manifest), "--target", "cpu", "-o", str(out), "--json"]
    r = subprocess.run([*cmd, "--compile-missing"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["downloaded"] == 2

    env["TILEC_TOKEN"] = server.tokens["read"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["downloaded"] == 0, r.stderr

    server.proc.stop()
    launched = python(INDEX, str(out), env={"TILEC_TRUSTED_KEYS": server.key}, offline=True)
    assert launched == {"add": True, "vadd": True}
