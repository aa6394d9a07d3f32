"""The client path end to end on a GPU (the device machine; skipped elsewhere): the same flow as
test_client_path.py with the device's cuda target and torch tensors. The server compiles the cubin, a
fresh process launches it from the server, then (a corrupted cached cubin deleted and fetched again)
again, then offline from its local cache; `tilec pull --target cuda:sm_XX` writes a directory whose
kernels launch offline through load_index, and a pulled cubin with a flipped byte is refused before
cuModuleLoadData sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.test_pull import LAUNCH, PLAIN, TUNED, write_project
from tests.cuda.gpu import gpu_reason
from tests.e2e.test_client_path import KERNELS, Server, python, server  # noqa: F401 - server: a fixture

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")

TILEC = [sys.executable, "-c", "from tilec.cli import main; main()"]
JIT = """
import json, sys
import torch
from tilec import client

source = open(sys.argv[1]).read()
k = client.jit(source, "add_kernel")
n = 3000
x = torch.arange(n, dtype=torch.float32, device="cuda")
y = torch.full((n,), 0.5, dtype=torch.float32, device="cuda")
out = torch.zeros(n, dtype=torch.float32, device="cuda")
k[lambda m: (-(-m["n"] // m["BLOCK"]),)](x, y, out, n, BLOCK=256)
torch.cuda.synchronize()
(art,) = k.cache.values()
print(json.dumps({"ok": bool(torch.equal(out, x + y)), "obtained": k.obtained, "target": art.target,
                  "corrupt": k.builds.local.corrupt if k.builds else None}))
"""
INDEX = """
import json, sys
import torch
from tilec import VerificationError, load_index
from tilec.runtime import cuda as _runtime_cuda

idx = load_index(sys.argv[1])
n = 2048
x = torch.arange(n, dtype=torch.float32, device="cuda")
y = torch.full((n,), 0.5, dtype=torch.float32, device="cuda")
grid = lambda m: (-(-m["n"] // m["BLOCK"]),)
a, b = torch.zeros_like(x), torch.zeros_like(x)
try:
    idx["add_kernel"][grid](x, y, a, n)
    idx.vadd[grid](x, y, b, n)
except VerificationError as exc:
    print(json.dumps({"refused": type(exc).__name__, "loaded": len(_runtime_cuda._modules)}))
    raise SystemExit(0)
torch.cuda.synchronize()
print(json.dumps({"add": bool(torch.equal(a, x + y)), "vadd": bool(torch.equal(b, x * 2 + y))}))
"""


def device_target() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"cuda:sm_{10 * major + minor}"


def test_on_a_gpu_compiled_by_the_server_then_launched_offline(server: Server, tmp_path: Path) -> None:  # noqa: F811
    source = tmp_path / "ops.py"
    source.write_text(KERNELS)
    env = {"TILEC_URL": server.url, "TILEC_TOKEN": server.tokens["submit"], "TILEC_CACHE_DIR": str(tmp_path / "cache"),
           "TILEC_TRUSTED_KEYS": server.key}  # fmt: skip
    target = device_target()
    first = python(JIT, str(source), env=env)
    assert first == {"ok": True, "obtained": {"here": 0, "disk": 0, "server": 1}, "target": target, "corrupt": 0}

    (blob,) = (tmp_path / "cache" / "blobs").glob("*/*")
    good = bytearray(blob.read_bytes())
    assert good.startswith(b"\x7fELF")  # a cubin
    bad = good.copy()
    bad[len(bad) // 3] ^= 0x40
    blob.write_bytes(bytes(bad))
    second = python(JIT, str(source), env=env)
    assert second == {"ok": True, "obtained": {"here": 0, "disk": 0, "server": 1}, "target": target, "corrupt": 1}
    assert blob.read_bytes() == good

    server.proc.stop()
    third = python(JIT, str(source), env=env, offline=True)
    assert third == {"ok": True, "obtained": {"here": 0, "disk": 1, "server": 0}, "target": target, "corrupt": 0}


def test_on_a_gpu_pull_then_launch_offline_and_a_flipped_byte_is_refused(server: Server, tmp_path: Path) -> None:  # noqa: F811
    manifest, out = write_project(tmp_path, PLAIN + TUNED, LAUNCH), tmp_path / "pulled"
    env = {**os.environ, "TILEC_URL": server.url, "TILEC_TOKEN": server.tokens["submit"],
           "TILEC_TRUSTED_KEYS": server.key}  # fmt: skip
    cmd = [*TILEC, "pull", "--manifest", str(manifest), "--target", device_target(), "-o", str(out), "--json"]
    r = subprocess.run([*cmd, "--compile-missing"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["downloaded"] == 2

    server.proc.stop()
    launched = python(INDEX, str(out), env={"TILEC_TRUSTED_KEYS": server.key}, offline=True)
    assert launched == {"add": True, "vadd": True}

    for blob in (out / "blobs").iterdir():
        data = bytearray(blob.read_bytes())
        assert data.startswith(b"\x7fELF")
        data[len(data) // 2] ^= 0x01
        blob.write_bytes(bytes(data))
    refused = python(INDEX, str(out), env={"TILEC_TRUSTED_KEYS": server.key}, offline=True)
    assert refused == {"refused": "BinaryMismatchError", "loaded": 0}
