"""Side by side on one GPU: the same Triton-language kernel sources run under real Triton and under tilec.

Each kernel's outputs are checked (tilec against Triton and against torch), then both are timed the
same way (triton.testing.do_bench: warm-up, repetitions, L2 flush, CUDA events, median). Also the
launch overhead of `k[grid](...)` with a warm cache, and the cold compile of softmax in a fresh process.
Usage (on the GPU machine, from the repo root): PYTHONPATH=$PWD python3 bench/vs_triton.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton

from tilec import client

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {
    "vector_add": ROOT / "tests/kernels/vector_add.py",
    "fused_softmax": ROOT / "tests/kernels/fused_softmax.py",
    "layer_norm": ROOT / "tests/kernels/layer_norm.py",
    "transpose": ROOT / "tests/kernels/transpose.py",
    "gather": ROOT / "tests/kernels/gather.py",
    "bench": ROOT / "bench/kernels_bench.py",
}


def triton_module(stem: str):
    spec = importlib.util.spec_from_file_location(f"bench_{stem}", SOURCES[stem])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tilec_kernel(stem: str, name: str):
    return client.jit(SOURCES[stem].read_text(), name)


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")  # ms


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(b.norm(), 1e-30))


def case_vector_add(q):
    n = 1 << (22 if q else 26)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    outs = {}

    def make(k, out):
        return lambda: k[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024, num_warps=4)

    tri, til = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    outs = {"triton": (make(triton_module("vector_add").add_kernel, tri), tri),
            "tilec": (make(tilec_kernel("vector_add", "add_kernel"), til), til)}  # fmt: skip
    return outs, x + y, 3 * n * 4, 0


def case_softmax(q):
    m, n = (1024 if q else 8192), 4096
    x = torch.randn(m, n, device="cuda")

    def make(k, out):
        return lambda: k[(m,)](out, x, n, n, n, BLOCK_SIZE=4096, num_warps=8)

    tri, til = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    outs = {"triton": (make(triton_module("fused_softmax").softmax_kernel, tri), tri),
            "tilec": (make(tilec_kernel("fused_softmax", "softmax_kernel"), til), til)}  # fmt: skip
    return outs, torch.softmax(x, dim=1), 2 * m * n * 4, 0


def case_layer_norm(q):
    m, n = (1024 if q else 8192), 4096
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w, b = torch.rand(n, device="cuda", dtype=torch.float16), torch.randn(n, device="cuda", dtype=torch.float16)
    mean, rstd = torch.empty(m, device="cuda"), torch.empty(m, device="cuda")

    def make(k, out):
        return lambda: k[(m,)](x, out, w, b, mean, rstd, n, n, 1e-5, BLOCK_SIZE=4096, num_warps=8)

    tri, til = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    outs = {"triton": (make(triton_module("layer_norm")._layer_norm_fwd_fused, tri), tri),
            "tilec": (make(tilec_kernel("layer_norm", "_layer_norm_fwd_fused"), til), til)}  # fmt: skip
    return outs, ref, 2 * m * n * 2 + 2 * n * 2, 0


def case_transpose(q):
    m = n = 1024 if q else 4096
    x = torch.randn(m, n, device="cuda")

    def make(k, out):
        return lambda: k[(m // 32, n // 32)](x, out, m, n, n, m, BLOCK_M=32, BLOCK_N=32, num_warps=4)

    tri, til = torch.full((n, m), float("nan"), device="cuda"), torch.full((n, m), float("nan"), device="cuda")
    outs = {"triton": (make(triton_module("transpose").transpose_kernel, tri), tri),
            "tilec": (make(tilec_kernel("transpose", "transpose_kernel"), til), til)}  # fmt: skip
    return outs, x.t(), 2 * m * n * 4, 0


def case_gather(q):
    n = 1 << (20 if q else 24)
    src = torch.randn(n, device="cuda")
    idx = torch.randint(0, n, (n,), device="cuda", dtype=torch.int32)

    def make(k, out):
        return lambda: k[(triton.cdiv(n, 1024),)](src, idx, out, n, BLOCK=1024, num_warps=4)

    tri, til = torch.full_like(src, float("nan")), torch.full_like(src, float("nan"))
    outs = {"triton": (make(triton_module("gather").gather_kernel, tri), tri),
            "tilec": (make(tilec_kernel("gather", "gather_kernel"), til), til)}  # fmt: skip
    return outs, src[idx.long()], n * (4 + 4 + 4), 0


def case_row_sum(q):
    m, n = (1024 if q else 8192), 4096
    x = torch.randn(m, n, device="cuda")

    def make(k, out):
        return lambda: k[(m // 4,)](x, out, m, n, BLOCK_M=4, BLOCK_N=1024, num_warps=4)

    tri, til = torch.full((m,), float("nan"), device="cuda"), torch.full((m,), float("nan"), device="cuda")
    outs = {"triton": (make(triton_module("bench").row_sum_kernel, tri), tri),
            "tilec": (make(tilec_kernel("bench", "row_sum_kernel"), til), til)}  # fmt: skip
    return outs, x.sum(dim=1), m * n * 4 + m * 4, 0


def case_matmul(q, bm=64, bn=64, bk=32, warps=4, size=2048, stages=3):
    s = 1024 if q else size
    a, b = torch.randn(s, s, device="cuda", dtype=torch.float16), torch.randn(s, s, device="cuda", dtype=torch.float16)

    def make(k, out):
        return lambda: k[(s // bm, s // bn)](a, b, out, s, s, s, BM=bm, BN=bn, BK=bk, num_warps=warps, num_stages=stages)

    tri = torch.full((s, s), float("nan"), device="cuda", dtype=torch.float16)
    til = tri.clone()
    outs = {"triton": (make(triton_module("bench").matmul_plain, tri), tri),
            "tilec": (make(tilec_kernel("bench", "matmul_plain"), til), til)}  # fmt: skip
    return outs, a.float() @ b.float(), 3 * s * s * 2, 2 * s**3


CASES = {"vector_add fp32": case_vector_add, "softmax fp32": case_softmax, "layer_norm fp16": case_layer_norm,
         "transpose fp32": case_transpose, "gather fp32": case_gather, "row_sum axis1 fp32": case_row_sum,
         "matmul fp16 2048 64x64x32 w4 s3": case_matmul,
         "matmul fp16 2048 128x128x32 w8 s3": lambda q: case_matmul(q, 128, 128, 32, 8),
         "matmul fp16 4096 64x64x32 w4 s3": lambda q: case_matmul(q, size=4096),
         "matmul fp16 4096 128x128x32 w8 s3": lambda q: case_matmul(q, 128, 128, 32, 8, size=4096),
         "matmul fp16 4096 128x128x32 w8 s1 (tilec unpipelined)": lambda q: case_matmul(q, 128, 128, 32, 8, 4096, 1)}  # fmt: skip


def run_case(name: str, make, q: bool) -> dict:
    outs, ref, nbytes, flops = make(q)
    row = {"kernel": name}
    for side, (fn, out) in outs.items():
        try:
            fn()
            torch.cuda.synchronize()
            row[f"{side}_err"] = rel_err(out.float(), ref.float())
            row[f"{side}_nan"] = bool(torch.isnan(out.float()).any())
            ms = bench(fn)
            row[f"{side}_ms"] = ms
            row[f"{side}_rate"] = (flops / ms / 1e9) if flops else (nbytes / ms / 1e6)
        except Exception as exc:  # noqa: BLE001 - report the failure in the table, keep benchmarking
            row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    row["unit"] = "TFLOP/s" if flops else "GB/s"
    if "tilec_ms" in row and "triton_ms" in row:
        row["tilec_vs_triton"] = row["triton_ms"] / row["tilec_ms"]
    return row


def _per_launch_us(fn, reps: int = 5000, rounds: int = 5) -> list[float]:
    """Host time per call of `fn` over `reps` calls, `rounds` times (the device is synchronised between)."""
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps * 1e6)
        torch.cuda.synchronize()
    return sorted(out)


def launch_overhead() -> dict:
    """Warm `k[(1,)](x, y, o, n, BLOCK_SIZE=1024)` for Triton and tilec, and the driver call alone
    (tilec's prepared cuLaunchKernelEx through ctypes, the floor of any Python launcher here)."""
    n = 1024
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    out = {}
    tk = tilec_kernel("vector_add", "add_kernel")
    for side, k in (("triton", triton_module("vector_add").add_kernel), ("tilec", tk)):
        k[(1,)](x, y, o, n, BLOCK_SIZE=1024)
        torch.cuda.synchronize()
        times = _per_launch_us(lambda k=k: k[(1,)](x, y, o, n, BLOCK_SIZE=1024))
        out[f"{side}_us_per_launch"] = times[len(times) // 2]
        out[f"{side}_us_rounds"] = times
    entry = next(iter(tk._cuda_fast.table.values()))
    lau = entry[0]  # the Launcher (FastPath table entries start with it)
    times = _per_launch_us(lambda: lau.fn(*lau.argv))
    out["driver_call_us"] = times[len(times) // 2]
    torch.testing.assert_close(o, x + y)
    return out


COLD_TILEC = """
import time; t0 = time.perf_counter()
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.artifact import CompileOptions
t1 = time.perf_counter()
src = open({src!r}).read()
art = compile_kernel(src, "softmax_kernel", signature={{"output_ptr": "*fp32", "input_ptr": "*fp32",
    "input_row_stride": "i32", "output_row_stride": "i32", "n_cols": "i32"}}, constexprs={{"BLOCK_SIZE": 4096}},
    hints={{"output_ptr": {{"divisibility": 16}}, "input_ptr": {{"divisibility": 16}}, "input_row_stride": {{"divisibility": 16}},
    "output_row_stride": {{"divisibility": 16}}, "n_cols": {{"divisibility": 16}}}},
    options=CompileOptions(target="cuda:sm_90", num_warps=8), emit="cubin")
t2 = time.perf_counter()
print({{"import_ms": (t1 - t0) * 1e3, "compile_ms": (t2 - t1) * 1e3, "cubin_bytes": len(art.binary)}})
"""

COLD_TRITON = """
import time, torch, importlib.util
x = torch.randn(64, 4096, device="cuda"); o = torch.empty_like(x); torch.cuda.synchronize()
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("sm", {src!r}); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
m.softmax_kernel[(64,)](o, x, 4096, 4096, 4096, BLOCK_SIZE=4096, num_warps=8); torch.cuda.synchronize()
t1 = time.perf_counter()
print({{"first_launch_ms": (t1 - t0) * 1e3}})
"""


def cold_compile() -> dict:
    out = {}
    src = str(SOURCES["fused_softmax"])
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for side, code in (("tilec", COLD_TILEC), ("triton", COLD_TRITON)):
        with tempfile.TemporaryDirectory() as cache:
            env["TRITON_CACHE_DIR"] = cache
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", code.format(src=src)], capture_output=True, text=True, env=env, timeout=300)
            wall = (time.perf_counter() - t0) * 1e3
        out[side] = {"process_wall_ms": wall, "stdout": proc.stdout.strip()[-400:], "stderr": proc.stderr.strip()[-400:]}
    return out


def fmt(v, spec=".3f") -> str:
    return format(v, spec) if isinstance(v, float) else ("-" if v is None else str(v))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    rows = []
    for name, make in CASES.items():
        if args.only and args.only not in name:
            continue
        rows.append(run_case(name, make, args.quick))
        print(json.dumps(rows[-1]), flush=True)
    lo = launch_overhead()
    cold = cold_compile()
    print(json.dumps({"launch_overhead": lo, "cold_compile": cold}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "launch": lo, "cold": cold, "gpu": torch.cuda.get_device_name()}, indent=1))
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'kernel':24} {'triton ms':>10} {'tilec ms':>10} {'triton':>9} {'tilec':>9} {'unit':>8} {'tilec/triton':>12} {'err tilec':>10}")
    for r in rows:
        print(f"{r['kernel']:24} {fmt(r.get('triton_ms')):>10} {fmt(r.get('tilec_ms')):>10} {fmt(r.get('triton_rate'), '.1f'):>9} "
              f"{fmt(r.get('tilec_rate'), '.1f'):>9} {r['unit']:>8} {fmt(r.get('tilec_vs_triton'), '.2f'):>12} {fmt(r.get('tilec_err'), '.1e'):>10}"
              + (f"  ERROR {r.get('tilec_error', '')}{r.get('triton_error', '')}" if "tilec_error" in r or "triton_error" in r else ""))
    print(f"launch overhead (us/launch, warm, median of 5x5000): triton {lo['triton_us_per_launch']:.2f}  "
          f"tilec {lo['tilec_us_per_launch']:.2f}  driver call alone {lo['driver_call_us']:.2f}")
    print(f"cold compile softmax: tilec {cold['tilec']['stdout']} (process {cold['tilec']['process_wall_ms']:.0f} ms); "
          f"triton {cold['triton']['stdout']} (process {cold['triton']['process_wall_ms']:.0f} ms)")


if __name__ == "__main__":
    main()
