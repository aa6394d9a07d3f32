"""A whole tune through `tilec serve` against Triton's own @triton.autotune, in one run on one GPU: the
tutorial matmul with its 8 configs at M=N=K=4096 fp16.

- Triton: the first call of the autotuned kernel (fresh TRITON_CACHE_DIR: every config compiles, then
  each is benchmarked by do_bench), timed to the end of the launch it then makes.
- tilec: POST /v1/tune-jobs to a `tilec serve` (in-process executor, SQLite in a temporary directory)
  and poll until done, timed from the POST to the done state (the kernel's registration included).
- Then a second client process looks the result up and launches the stored cubin without compiling
  (the compiler's entry point is replaced by one that raises), checked against torch.matmul.

    python3 bench/tune.py [--strategy halving|exhaustive] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
M = N = K = 4096
CONFIGS = [  # the tutorial's 8 configs for CUDA: (BM, BN, BK, GROUP_M, stages, warps)
    (128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 32, 8, 4, 4),
    (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4), (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2),
]  # fmt: skip
SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{n: "i32" for n in (
    "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")}}  # fmt: skip
LAUNCH = f"""
grid = ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"]
[args]
a_ptr = "randn(M, K)"
b_ptr = "randn(K, N)"
c_ptr = "empty(M, N)"
M = {M}
N = {N}
K = {K}
stride_am = "K"
stride_ak = 1
stride_bk = "N"
stride_bn = 1
stride_cm = "N"
stride_cn = 1
"""


def kernel_source() -> str:
    """tests/kernels/matmul.py with the tutorial's 8 configs in place of its 4."""
    text = (ROOT / "tests/kernels/matmul.py").read_text()
    configs = ",\n".join(
        f"        triton.Config({{'BLOCK_SIZE_M': {bm}, 'BLOCK_SIZE_N': {bn}, 'BLOCK_SIZE_K': {bk}, "
        f"'GROUP_SIZE_M': {g}}}, num_stages={s}, num_warps={w})"
        for bm, bn, bk, g, s, w in CONFIGS
    )
    new, n = re.subn(r"(def get_autotune_config\(\):\n    return \[\n)(.*?)(\n    \])", lambda m: m[1] + configs + m[3],
                     text, flags=re.S)  # fmt: skip
    assert n == 1, "tests/kernels/matmul.py changed shape"
    return new


def triton_tune(source: str) -> dict:
    """Triton's autotune of the same kernel and configs: the first call, cold cache."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
    import importlib.util

    import torch

    path = Path(tempfile.mkdtemp()) / "tutorial_matmul.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("tutorial_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # our own benchmark kernel, run by real Triton (the anchor)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    kernel = mod.matmul_kernel
    grid = lambda meta: (triton_cdiv(M, meta["BLOCK_SIZE_M"]) * triton_cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    ref = torch.matmul(a, b)
    err = (c.float() - ref.float()).abs().max().item()
    timings = {str(cfg): min(v) if isinstance(v, list) else v for cfg, v in getattr(kernel, "configs_timings", {}).items()}
    return {"seconds": seconds, "best": str(kernel.best_config), "timings_ms": timings, "max_abs_err": err}


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, data: str) -> subprocess.Popen:
    env = {**os.environ, "TILEC_DATA_DIR": data, "TILEC_PORT": str(port), "TILEC_HOST": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, "-c", "from tilec.cli import main; main()", "serve"], env=env, stdout=open(Path(data) / "serve.log", "w"), stderr=subprocess.STDOUT)  # fmt: skip
    import httpx

    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("tilec serve did not start:\n" + (Path(data) / "serve.log").read_text()[-3000:])


def tilec_tune(url: str, source: str, strategy: str, target: str) -> dict:
    from tilec import Client
    from tilec.compiler.tune.launch import LaunchDescription
    from tilec.wire import TuneJobCreate

    launch = LaunchDescription.from_toml(LAUNCH)
    body = TuneJobCreate(source=source, name="matmul_kernel", signature=SIGNATURE, launch=launch.to_json(),
                         target=target, strategy=strategy)  # fmt: skip
    with Client(url) as client:
        t0 = time.perf_counter()
        job = client.submit_tune(body)
        while job.state not in ("done", "failed", "cancelled"):
            time.sleep(0.05)
            job = client.tune_job(job.id)
        seconds = time.perf_counter() - t0
    return {"seconds": seconds, "job": job.model_dump(mode="json")}


SECOND_CLIENT = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import tilec.compiler.pipeline as pipeline
def refuse(*a, **k):
    raise AssertionError("the second client compiled")
pipeline.compile_request = pipeline.compile_kernel = refuse
from tilec import Client
from tilec.compiler.artifact import Artifact
from tilec.runtime.cuda import launch
url, kernel, target, key, dtypes, M, N, K = sys.argv[1:9]
M, N, K = int(M), int(N), int(K)
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t1 = time.perf_counter()
with Client(url) as client:
    found = client.lookup(kernel, target, key=key, dtypes=dtypes)
    binary = client.download(found.artifact.id, "cubin")
art = Artifact(target=target, kernel_name=found.artifact.kernel_name, binary=binary,
               metadata=found.artifact.metadata, compiler_version=found.artifact.compiler_version)
kw = found.config["kwargs"]
grid = (-(-M // kw["BLOCK_SIZE_M"]) * -(-N // kw["BLOCK_SIZE_N"]), 1, 1)
launch(art, [a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)], grid)
torch.cuda.synchronize()
t2 = time.perf_counter()
err = (c.float() - torch.matmul(a, b).float()).abs().max().item()
print(json.dumps({"config": found.config, "lookup_download_launch_ms": (t2 - t1) * 1e3,
                  "process_ms": (t2 - t0) * 1e3, "max_abs_err": err, "compiled": False}))
"""


def second_client(url: str, job: dict) -> dict:
    args = [url, job["kernel_key"], job["target"], job["key"], job["dtypes"], str(M), str(N), str(K)]
    out = subprocess.run([sys.executable, "-c", SECOND_CLIENT, *args], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return {"error": out.stderr[-3000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(job: dict) -> list[str]:
    order = {"ok": 0, "cached": 0, "stopped": 1, "pruned": 2, "failed": 3}
    rows = sorted(job["trials"], key=lambda t: (order[t["status"]], t["time_ms"] or 1e9))
    lines = [f"{'config':58} {'median ms':>10} {'spread':>7} {'reps':>5}  status"]
    for t in rows:
        c = t["config"]
        kw = c["kwargs"]
        name = (f"BM{kw['BLOCK_SIZE_M']} BN{kw['BLOCK_SIZE_N']} BK{kw['BLOCK_SIZE_K']} G{kw['GROUP_SIZE_M']} "
                f"w{c['num_warps']} s{c['num_stages']}")  # fmt: skip
        spread = f"{(t['hi_ms'] - t['lo_ms']) / 2 / t['time_ms'] * 100:.1f}%" if t["time_ms"] and t["hi_ms"] else "-"
        ms = f"{t['time_ms']:.3f}" if t["time_ms"] else "-"
        lines.append(f"{name:58} {ms:>10} {spread:>7} {t['reps'] or '-':>5}  {t['status']} {t['reason'] or ''}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", default="halving")
    ap.add_argument("--json")
    args = ap.parse_args()
    from tilec.runtime.cuda import device_sm

    target = f"cuda:sm_{device_sm(0)}"
    source = kernel_source()
    data = tempfile.mkdtemp(prefix="tilec-serve-")
    port = free_port()
    server = start_server(port, data)
    url = f"http://127.0.0.1:{port}"
    try:
        tilec = tilec_tune(url, source, args.strategy, target)
        second = second_client(url, tilec["job"])
    finally:
        server.terminate()
        server.wait(30)
    triton = triton_tune(source)
    job = tilec["job"]
    print(f"tilec tune ({args.strategy}, {target}): {tilec['seconds']:.2f} s, state {job['state']} {job['error'] or ''}")
    from datetime import datetime

    stamp = {k: datetime.fromisoformat(job[k]) for k in ("created_at", "started_at", "finished_at") if job[k]}
    if len(stamp) == 3:
        print(f"  submit -> job row {tilec['seconds'] - (stamp['finished_at'] - stamp['created_at']).total_seconds():.2f} s"
              f" (registration: the kernel read in a compile child), row -> worker took it "
              f"{(stamp['started_at'] - stamp['created_at']).total_seconds():.2f} s, "
              f"tune {(stamp['finished_at'] - stamp['started_at']).total_seconds():.2f} s")  # fmt: skip
    print("\n".join(table(job)))
    print(f"tilec best: {job['best_config']} {job['best_time_ms']}")
    print(f"triton autotune (first call, cold cache): {triton['seconds']:.2f} s, best {triton['best']}")
    for cfg, ms in sorted(triton["timings_ms"].items(), key=lambda kv: kv[1]):
        print(f"  triton {ms:.3f} ms  {cfg}")
    print(f"ratio tilec/triton: {tilec['seconds'] / triton['seconds']:.3f}")
    print(f"second client: {second}")
    if args.json:
        Path(args.json).write_text(json.dumps({"tilec": tilec, "triton": triton, "second": second}, indent=1))


if __name__ == "__main__":
    main()
