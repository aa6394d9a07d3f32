"""Where the time of a tutorial's own benchmark call goes, under plain Triton and under the drop-in: Triton's
tutorials 02 (fused softmax, `softmax(x)`), 03 (matmul, `matmul(a, b)`, autotuned by Triton's own
Autotuner over the routed kernel) and 05 (layer norm's backward, `y.backward(dy)`) as published, each side in a
process of its own. Per point:

- blocks: the host time of one call made while the GPU is busy (a 20 ms torch.cuda._sleep queued first). A
  call that waits for the GPU takes the sleep's time; one that does not, its own.
- host: the host time of one call, best of three loops of 100 (no synchronisation inside a loop).
- do_bench: min, median and mean of the per-call times (`return_mode="all"`), L2 cleared before each call, as
  the tutorials' benchmarks take them.
- graph: the call captured 20 times in a CUDA graph, replayed: the kernels alone, no host time (L2 warm).

DROPIN_ABLATE=1 adds tutorial 02's softmax(x) with one step left out at a time (_ablate); DROPIN_MODES=tilec
runs one side only.

Usage (GPU machine, repo root): python3 bench/dropin_host.py [TUTORIALS_DIR] [--only 02,03]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_time  # noqa: E402
from tutorials import load_head  # noqa: E402

POINTS = {"02": [("fp32", 256), ("fp32", 1024), ("fp32", 1280)], "05": [("fp16", 1024), ("fp16", 4096), ("fp16", 7168)],
          "03": [("fp16", 256), ("fp16", 768), ("fp16", 1792), ("fp8", 256), ("fp8", 768), ("fp8", 1280)]}  # fmt: skip
FILES = {"02": "02-fused-softmax.py", "03": "03-matrix-multiplication.py", "05": "05-layer-norm.py"}


def _call(mod, which: str, dtype: str, n: int):  # type: ignore[no-untyped-def]
    import torch

    if which == "02":
        x = torch.randn(4096, n, device="cuda")
        return lambda: mod.softmax(x)
    if which == "05":  # the layer-norm tutorial's backward benchmark: y.backward(dy) through its two kernels
        w = torch.rand(n, dtype=torch.float16, device="cuda", requires_grad=True)
        b = torch.rand(n, dtype=torch.float16, device="cuda", requires_grad=True)
        x = (-2.3 + 0.5 * torch.randn(4096, n, dtype=torch.float16, device="cuda")).requires_grad_(True)
        dy = 0.1 * torch.randn_like(x)
        y = mod.layer_norm(x, (n,), w, b, 1e-5)
        fn = lambda: y.backward(dy, retain_graph=True)  # noqa: E731
        fn.grad_to_none = [x]  # as the tutorial's benchmark gives do_bench
        return fn
    a, b = _matrices(dtype, n)
    return lambda: mod.matmul(a, b)


def _matrices(dtype: str, n: int):  # type: ignore[no-untyped-def]
    """Tutorial 03's benchmark inputs: fp16, or fp8 with b transposed as its fp8 rows take it."""
    import torch

    a = torch.randn((n, n), device="cuda", dtype=torch.float16)
    b = torch.randn((n, n), device="cuda", dtype=torch.float16)
    if dtype == "fp8":
        a, b = a.to(torch.float8_e5m2), b.T.to(torch.float8_e5m2)
    return a, b


def args03(a, b, c, n: int) -> tuple:  # type: ignore[no-untyped-def]
    """Tutorial 03's kernel arguments for n x n matrices a @ b -> c."""
    return (a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def _parts(mod, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Tutorial 02's softmax(x) at N=256 taken apart: each step's host time alone (best of 5 loops of 200)."""
    import torch

    x = torch.randn(4096, 256, device="cuda")
    y = torch.empty_like(x)
    mod.softmax(x)
    k = mod.softmax_kernel
    handle = k.warmup(y, x, x.stride(0), y.stride(0), 4096, 256, BLOCK_SIZE=256, num_stages=4, num_warps=8, grid=(1,))
    steps = {
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "is_hip()": mod.is_hip,
        "kernel.warmup(...)": lambda: k.warmup(y, x, x.stride(0), y.stride(0), 4096, 256, BLOCK_SIZE=256,
                                               num_stages=4, num_warps=8, grid=(1,)),  # fmt: skip
        "handle[grid](...)": lambda: handle[(1056, 1, 1)](y, x, x.stride(0), y.stride(0), 4096, 256, 256, 4),
        "softmax(x)": lambda: mod.softmax(x),
    }
    for name, fn in steps.items():
        print(f"02 {mode:6s} part {name:22s} {_host_us(fn, 5, 200):7.2f} us", flush=True)


def _ablate(mod, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Tutorial 02's softmax(x) at N=256 with one step left out at a time: the tutorial's body rewritten here
    with switches (is_hip(), torch.empty_like, the warmup, the launch, the garbage collector), each variant's
    host time (best of 5 loops of 200) and do_bench's min and median (L2 cleared before each call)."""
    import gc

    import torch
    import triton

    x = torch.randn(4096, 256, device="cuda")
    y0 = torch.empty_like(x)
    k = mod.softmax_kernel
    n_rows, n_cols = x.shape
    props = triton.runtime.driver.active.utils.get_device_properties(x.device.index)
    nsm, nregs, smem = props["multiprocessor_count"], props["max_num_regs"], props["max_shared_mem"]
    cached = k.warmup(y0, x, x.stride(0), y0.stride(0), n_rows, n_cols, BLOCK_SIZE=256, num_stages=4, num_warps=8,
                      grid=(1,))  # fmt: skip

    def body(hip: bool = True, alloc: bool = True, warm: bool = True, launch: bool = True):  # type: ignore[no-untyped-def]
        def softmax(x):  # type: ignore[no-untyped-def]
            n_rows, n_cols = x.shape
            block = triton.next_power_of_2(n_cols)
            y = torch.empty_like(x) if alloc else y0
            if warm:
                kernel = k.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block, num_stages=4,
                                  num_warps=8, grid=(1,))  # fmt: skip
            else:
                kernel = cached
            kernel._init_handles()
            n_regs, size_smem = kernel.n_regs, kernel.metadata.shared
            if hip and mod.is_hip():
                raise AssertionError("not on a CUDA device")
            occupancy = min(nregs // (n_regs * 32 * 8), smem // size_smem)
            programs = min(nsm * occupancy, n_rows)
            if launch:
                kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, block, 4)
            return y

        return lambda: softmax(x)

    variants = {
        "published": lambda: mod.softmax(x),
        "rewritten": body(),
        "no is_hip": body(hip=False),
        "no empty_like": body(alloc=False),
        "no warmup": body(warm=False),
        "no launch": body(launch=False),
        "launch only": body(hip=False, alloc=False, warm=False),
    }
    for name, fn in [*variants.items(), ("published, gc off", variants["published"])]:
        fn()
        torch.cuda.synchronize()
        if name.endswith("gc off"):
            gc.disable()
        host = _host_us(fn, 5, 200)
        times = triton.testing.do_bench(fn, return_mode="all")
        gc.enable()
        print(f"02 {mode:6s} ablate {name:18s} host {host:7.2f} us  do_bench min {min(times) * 1e3:6.1f} median "
              f"{statistics.median(times) * 1e3:6.1f} us (n={len(times)})", flush=True)  # fmt: skip


def _parts03(mod, mode: str, dtype: str, n: int) -> None:  # type: ignore[no-untyped-def]
    """Tutorial 03's matmul(a, b) taken apart at one point (after its autotuning): the allocation, the
    autotuned launch, the launch of the chosen config without the autotuner, the whole call; and the config."""
    import torch
    import triton

    a, b = _matrices(dtype, n)
    fn = lambda: mod.matmul(a, b)  # noqa: E731
    fn()
    k = mod.matmul_kernel
    cfg = k.best_config
    c = torch.empty((n, n), device="cuda", dtype=torch.float16)
    grid = lambda META: (triton.cdiv(n, META["BLOCK_SIZE_M"]) * triton.cdiv(n, META["BLOCK_SIZE_N"]),)  # noqa: E731
    args = args03(a, b, c, n)
    steps = {
        "torch.empty((M, N))": lambda: torch.empty((n, n), device=a.device, dtype=torch.float16),
        "matmul_kernel[grid](...)": lambda: k[grid](*args, ACTIVATION=""),
        "fn.run(config) (no autotuner)": lambda: k.fn.run(*args, ACTIVATION="", grid=grid, warmup=False,
                                                          **cfg.all_kwargs()),  # fmt: skip
        "matmul(a, b)": fn,
    }
    print(f"03 {mode:6s} {dtype} {n}: config {cfg}", flush=True)
    for name, step in steps.items():
        print(f"03 {mode:6s} part {name:30s} {_host_us(step, 5, 200):7.2f} us", flush=True)


def _host_us(fn, loops: int, calls: int) -> float:  # type: ignore[no-untyped-def]
    """The host time of one call of `fn`: the best of `loops` loops of `calls` calls, no synchronisation inside
    a loop (the GPU drains between loops)."""
    import torch

    best = float("inf")
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def child(mode: str, tutorials: Path, only: list[str]) -> None:
    if mode == "tilec":
        import tilec

        tilec.install(strict=True)
    import torch
    import triton

    if os.environ.get("DROPIN_STREAM", "side") == "side":
        torch.cuda.set_stream(torch.cuda.Stream())  # tutorial 02's benchmark does; harmless for 03
    for which in only:
        mod = load_head(tutorials / FILES[which])
        if which == "02":
            _parts(mod, mode)
            if os.environ.get("DROPIN_ABLATE"):
                _ablate(mod, mode)
        for dtype, n in POINTS[which]:
            fn = _call(mod, which, dtype, n)
            fn()
            torch.cuda.synchronize()
            torch.cuda._sleep(40_000_000)  # about 20 ms at the H100's clock
            t0 = time.perf_counter()
            fn()
            blocks = (time.perf_counter() - t0) * 1e6
            torch.cuda.synchronize()
            host = _host_us(fn, 3, 100)
            times = triton.testing.do_bench(fn, return_mode="all", grad_to_none=getattr(fn, "grad_to_none", None))
            graph_us = float("nan")
            try:
                graph_us = graph_time.graph_us(fn)
            except Exception as exc:  # noqa: BLE001 - a capture that fails is reported, the rest still runs
                print(f"  (graph capture failed: {exc!r:.120})")
            print(f"{which} {mode:6s} {os.environ.get('DROPIN_STREAM', 'side'):7s} {dtype} {n:5d}  blocks {blocks:9.1f} us  host {host:7.1f} us  do_bench min "
                  f"{min(times) * 1e3:7.1f} median {statistics.median(times) * 1e3:7.1f} mean "
                  f"{statistics.fmean(times) * 1e3:7.1f} us (n={len(times)})  graph {graph_us:7.1f} us", flush=True)  # fmt: skip
            if which == "03" and n == POINTS[which][0][1]:
                _parts03(mod, mode, dtype, n)
            if os.environ.get("DROPIN_PROFILE") and n == POINTS[which][0][1]:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                for _ in range(200):
                    fn()
                prof.disable()
                torch.cuda.synchronize()
                pstats.Stats(prof).sort_stats("tottime").print_stats(24)
        # the first point again, after the others: is its host time the point's, or the first's?
        if which == "03":
            dtype, n = POINTS[which][0]
            fn = _call(mod, which, dtype, n)
            fn()
            torch.cuda.synchronize()
            print(f"{which} {mode:6s} again   {dtype} {n:5d}  host {_host_us(fn, 3, 100):7.1f} us", flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4].split(","))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorials", nargs="?", default=".wt/tutorials")
    ap.add_argument("--only", default="02,03")
    ns = ap.parse_args()
    for mode in os.environ.get("DROPIN_MODES", "triton,tilec").split(","):
        env = {**os.environ, "TILEC_CACHE_DIR": tempfile.mkdtemp(prefix=f"dropin_host_{mode}_")}
        env.pop("TILEC_TRITON", None)
        subprocess.run([sys.executable, __file__, "--child", mode, str(Path(ns.tutorials).resolve()), ns.only],
                       env=env, check=False)  # fmt: skip


if __name__ == "__main__":
    main()
