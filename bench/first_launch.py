"""The first launch of a kernel in a fresh Python process whose binary is already cached on disk: tilec
(`tilec.jit` with a server configured but stopped, its cubin in the local cache, the server's key pinned)
against Triton (its own warm disk cache), side by side on one GPU.

tilec's first launch is split into imports (torch, tilec), the CUDA context (torch's first allocation),
cache read (index, blob, manifest files), verify (signature and sha256), module load (cuModuleLoadData)
and launch (to the end of a synchronize); the split comes from timing wrappers around the functions the
jit path calls. Each side runs `--runs` fresh processes; medians are printed.

    python3 bench/first_launch.py [--runs 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "tests/kernels/vector_add.py"
N = 1 << 20

TILEC_RUN = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t_torch = time.perf_counter()
import tilec
from tilec.client import _cache, _fetch, _jit, _verify
from tilec.runtime import cuda as _runtime_cuda
from tilec.runtime import libcuda as _libcuda  # what the first call imports
from cryptography.hazmat.primitives.asymmetric import ed25519  # the signature check's
t_tilec = time.perf_counter()
phases = {"cache_read": 0.0, "verify": 0.0, "module_load": 0.0}

def timed(owner, name, phase):
    fn = getattr(owner, name)
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            phases[phase] += time.perf_counter() - s
    setattr(owner, name, wrapper)

for name in ("get_index", "get_blob", "get_manifest"):
    timed(_cache.LocalCache, name, "cache_read")
timed(_verify, "verify", "verify")
timed(_runtime_cuda, "load", "module_load")
url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
modules = set(sys.modules)
t_ctx = time.perf_counter()
k = tilec.jit(path, server=url)
k[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024)
torch.cuda.synchronize()
t_end = time.perf_counter()
assert torch.equal(out, x + y)
own = t_end - t_ctx
late = sorted(m for m in set(sys.modules) - modules if m.split(".")[0] in ("tilec", "cuda", "cryptography", "pydantic"))
print(json.dumps({"imports_torch_ms": (t_torch - t0) * 1e3, "imports_tilec_ms": (t_tilec - t_torch) * 1e3,
                  "cuda_context_ms": (t_ctx - t_tilec) * 1e3, "cache_read_ms": phases["cache_read"] * 1e3,
                  "verify_ms": phases["verify"] * 1e3, "module_load_ms": phases["module_load"] * 1e3,
                  "launch_ms": (own - sum(phases.values())) * 1e3, "tilec_part_ms": own * 1e3,
                  "first_launch_ms": (t_end - t0) * 1e3, "imported_in_call": len(late), "late": late,
                  "from_disk": k.obtained == {"here": 0, "disk": 1, "server": 0}}))
"""

TRITON_RUN = r"""
import importlib.util, json, sys, time
t0 = time.perf_counter()
import torch
t_torch = time.perf_counter()
import triton
t_imports = time.perf_counter()
t_triton = t_imports - t_torch
path, n = sys.argv[1], int(sys.argv[2])
spec = importlib.util.spec_from_file_location("vector_add", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
torch.cuda.synchronize()
t_ctx = time.perf_counter()
mod.add_kernel[(n // 1024,)](x, y, out, n, BLOCK_SIZE=1024)
torch.cuda.synchronize()
t_end = time.perf_counter()
assert torch.equal(out, x + y)
print(json.dumps({"imports_ms": (t_imports - t0) * 1e3, "imports_triton_ms": t_triton * 1e3, "cuda_context_ms": (t_ctx - t_imports) * 1e3,
                  "triton_part_ms": (t_end - t_ctx) * 1e3, "first_launch_ms": (t_end - t0) * 1e3}))
"""


def run(script: str, args: list[str], env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians(rows: list[dict]) -> dict:
    return {k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0] if k not in ("late", "from_disk")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    import httpx
    from tune import free_port, start_server  # the same `tilec serve` start as bench/tune.py

    data = tempfile.mkdtemp(prefix="tilec-serve-")
    cache = tempfile.mkdtemp(prefix="tilec-cache-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port, data)
    try:
        key = httpx.get(f"{url}/v1/keys", timeout=10).json()[0]["public_key"]
        env = {**os.environ, "TILEC_CACHE_DIR": cache, "TILEC_TRUSTED_KEYS": key}
        warm = run(TILEC_RUN, [url, str(KERNEL), str(N)], env)  # compiled by the server, cached here
    finally:
        server.terminate()
        server.wait(30)
    tilec_rows = [run(TILEC_RUN, [url, str(KERNEL), str(N)], env) for _ in range(args.runs)]  # server stopped
    assert all(row["from_disk"] for row in tilec_rows), "a measured launch did not read its cubin from the disk cache"
    tenv = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="triton-cache-")}
    triton_warm = run(TRITON_RUN, [str(KERNEL), str(N)], tenv)
    triton_rows = [run(TRITON_RUN, [str(KERNEL), str(N)], tenv) for _ in range(args.runs)]
    t, r = medians(tilec_rows), medians(triton_rows)
    print(f"first launch in a fresh process, binary cached on disk, median of {args.runs} (ms):")
    print(f"  tilec : {t}")
    print(f"  triton: {r}")
    print(f"  tilec's own part (cache read + verify + module load + launch): {t['tilec_part_ms']:.2f} ms")
    # torch's import and CUDA context are the same on both sides; the first launch is what each library adds
    ours = t["imports_tilec_ms"] + t["tilec_part_ms"]
    theirs = r["imports_triton_ms"] + r["triton_part_ms"]
    print(f"  first launch (library import + first call): tilec {ours:.1f} ms, triton {theirs:.1f} ms, "
          f"ratio {ours / theirs:.3f}")  # fmt: skip
    print(f"  whole processes: tilec {t['first_launch_ms']:.1f} ms, triton {r['first_launch_ms']:.1f} ms")
    print(f"  modules imported during tilec's first call: {tilec_rows[-1]['late']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"tilec": tilec_rows, "triton": triton_rows, "warm": [warm, triton_warm],
                                               "medians": {"tilec": t, "triton": r}}, indent=1))  # fmt: skip


if __name__ == "__main__":
    t_start = time.perf_counter()
    main()
    print(f"(bench took {time.perf_counter() - t_start:.1f} s)")
