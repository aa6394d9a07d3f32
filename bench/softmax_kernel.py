"""The fused-softmax tutorial's kernel alone, L2 cold, no host time: Triton's build against tilec's at several
gpu-prefetch depths (CudaOptions.prefetch_regs: 0 keeps one row ahead, R lets the rows beyond the next take R
registers a thread). Each side's grid is the tutorial's: NUM_SM * min(65536 // (n_regs * 32 * num_warps),
smem // shared) programs over 4096 rows (tilec's n_regs as the drop-in's warmed handle gives it). A CUDA graph
of 20 (L2 clear, kernel) pairs is timed against one of the 20 clears alone; the difference over 20 is the
kernel's time. Outputs are checked against torch.softmax.

Usage (GPU machine, repo root): python3 bench/softmax_kernel.py [PATH/TO/02-fused-softmax.py] [--regs 0,4,16]
    [--n 256,512,1024,1280,2304,4096]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import tempfile
from pathlib import Path

import torch
import triton

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.cuda import launch
from tilec.runtime.launch import specialise

NAMES = ["output_ptr", "input_ptr", "input_row_stride", "output_row_stride", "n_rows", "n_cols"]
ROWS, WARPS, STAGES = 4096, 8, 4


def kernel_source(tutorial: Path) -> str:
    text = tutorial.read_text()
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "softmax_kernel")
    return "import triton\nimport triton.language as tl\n\n\n@triton.jit\n" + ast.get_source_segment(text, fn) + "\n"


def graph_us(step, clear) -> float:  # type: ignore[no-untyped-def]
    """Per-call kernel time: a graph of 20 (clear, step) pairs less one of 20 clears, each the best of 5."""

    def timed(body) -> float:  # type: ignore[no-untyped-def]
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                body()
        g.replay()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            torch.cuda.synchronize()
            best = min(best, s.elapsed_time(e) * 1e3)
        return best

    def both() -> None:
        clear()
        step()

    return (timed(both) - timed(clear)) / 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorial", nargs="?", default=".wt/tutorials/02-fused-softmax.py")
    ap.add_argument("--regs", default="0,4,16")
    ap.add_argument("--n", default="256,512,1024,1280,2304,4096")
    ns = ap.parse_args()
    src = kernel_source(Path(ns.tutorial))
    path = Path(tempfile.mkdtemp()) / "tut02_kernel.py"
    path.write_text(src)  # Triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    props = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    n_sm, smem = props["multiprocessor_count"], props["max_shared_mem"]
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="cuda")
    clear = cache.zero_
    print(f"{'N':>6s} {'build':12s} {'regs':>4s} {'programs':>8s} {'us':>8s} {'GB/s':>8s} {'vs Triton':>9s}")
    for n in [int(v) for v in ns.n.split(",")]:
        x = torch.randn(ROWS, n, device="cuda")
        ref = torch.softmax(x, dim=1)
        block = triton.next_power_of_2(n)
        gb = 2 * x.numel() * 4 * 1e-9
        y = torch.empty_like(x)
        k = mod.softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), ROWS, n, BLOCK_SIZE=block, num_stages=STAGES,
                                      num_warps=WARPS, grid=(1,))  # fmt: skip
        k._init_handles()
        occ = min(65536 // (k.n_regs * 32 * WARPS), smem // max(k.metadata.shared, 1))
        progs = min(n_sm * occ, ROWS)

        def tri(k=k, progs=progs, y=y, x=x, n=n, block=block) -> None:
            k[(progs, 1, 1)](y, x, x.stride(0), y.stride(0), ROWS, n, block, STAGES)

        tri()
        torch.testing.assert_close(y, ref)
        base = graph_us(tri, clear)
        print(f"{n:6d} {'triton':12s} {k.n_regs:4d} {progs:8d} {base:8.2f} {gb / (base * 1e-6):8.1f} {1.0:9.2f}", flush=True)
        for regs in [int(v) for v in ns.regs.split(",")]:
            y = torch.empty_like(x)
            args = [y, x, x.stride(0), y.stride(0), ROWS, n]
            specs = {nm: specialise(nm, v) for nm, v in zip(NAMES, args, strict=True)}
            art = compile_kernel(src, "softmax_kernel", signature={nm: s.type for nm, s in specs.items()},
                                 constexprs={"BLOCK_SIZE": block, "num_stages": STAGES},
                                 hints={nm: dict(s.hints) for nm, s in specs.items() if s.hints},
                                 options=CompileOptions(target="cuda:sm_90", num_warps=WARPS, num_stages=3,
                                                        cuda=CudaOptions(prefetch_regs=regs)), emit="cubin")  # fmt: skip
            n_regs = -(-int(art.metadata["registers"]) // 8) * 8  # as the drop-in's warmed handle gives it
            occ = min(65536 // (n_regs * 32 * WARPS), smem // max(int(art.metadata.get("shared_bytes", 0)), 1))
            progs_t = min(n_sm * occ, ROWS)

            def til(art=art, args=args, progs_t=progs_t) -> None:
                launch(art, args, (progs_t, 1, 1))

            til()
            torch.testing.assert_close(y, ref)
            us = graph_us(til, clear)
            name = f"tilec r={regs}"
            print(f"{n:6d} {name:12s} {int(art.metadata['registers']):4d} {progs_t:8d} {us:8.2f} {gb / (us * 1e-6):8.1f} "
                  f"{base / us:9.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
