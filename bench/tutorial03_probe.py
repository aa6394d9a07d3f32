"""Why Triton's tutorial 03 (the matmul, as published) timed by its own benchmark (bench/tutorial_timings.py)
had points far under Triton: its kernel and autotune configs taken out of the tutorial file, launched by the
tutorial's own wrapper logic under Triton and under tilec (client.jit, autotuned), at the sizes and input types
of those points; per point: the config each autotuner chose, the median time as the tutorial takes it
(do_bench), the host time of one call (no synchronisation), and tilec's build of its choice (registers/spills).

Usage (GPU machine, repo root): python3 bench/tutorial03_probe.py [PATH/TO/03-matrix-multiplication.py]
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton

from tilec import client

POINTS = [(False, 256), (False, 768), (False, 3328), (True, 256), (True, 768), (True, 1280), (True, 3328)]


def kernel_module(tutorial: Path) -> str:
    """The tutorial's imports, config functions, leaky_relu and matmul_kernel (with its autotune decorator), with
    is_cuda() answering True (Triton's driver query is what the tutorial asks; both sides run on CUDA here) and
    the decorator naming get_cuda_autotune_config() (what get_autotune_config() returns there)."""
    text = tutorial.read_text()
    keep = {"get_cuda_autotune_config", "get_hip_autotune_config", "get_autotune_config", "matmul_kernel",
            "leaky_relu"}  # fmt: skip
    lines = text.splitlines()
    parts = ["import torch\nimport triton\nimport triton.language as tl\n\n\ndef is_cuda():\n    return True\n"]
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name in keep:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            parts.append("\n".join(lines[start - 1 : node.end_lineno]))
    # tilec reads the source with `ast` alone: the configs as the tutorial picks them on CUDA, by name
    return "\n\n\n".join(parts).replace("configs=get_autotune_config()", "configs=get_cuda_autotune_config()") + "\n"


def main() -> None:
    tutorial = Path(sys.argv[1] if len(sys.argv) > 1 else ".wt/tutorials/03-matrix-multiplication.py")
    text = kernel_module(tutorial)
    path = Path(tempfile.mkdtemp()) / "tut03_kernel.py"  # Triton reads a kernel's source from its file
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sides = {"triton": mod.matmul_kernel, "tilec": client.jit(text, "matmul_kernel")}

    def matmul(k, a, b):
        m, kk = a.shape
        _, n = b.shape
        c = torch.empty((m, n), device=a.device, dtype=torch.float16)
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)  # noqa: E731
        k[grid](a, b, c, m, n, kk, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                ACTIVATION="")  # fmt: skip
        return c

    print(f"{'inputs':6s} {'M=N=K':>6s} {'side':7s} {'ms':>8s} {'TFLOPS':>8s} {'host us':>8s}  config / build")
    for fp8, s in POINTS:
        torch.manual_seed(0)
        a = torch.randn((s, s), device="cuda", dtype=torch.float16)
        b = torch.randn((s, s), device="cuda", dtype=torch.float16)
        if fp8:
            a, b = a.to(torch.float8_e5m2), b.T.to(torch.float8_e5m2)
        outs = {}
        for side, k in sides.items():
            outs[side] = matmul(k, a, b)
            torch.cuda.synchronize()
            ms = triton.testing.do_bench(lambda k=k, a=a, b=b: matmul(k, a, b), quantiles=[0.5, 0.2, 0.8])[0]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(50):
                matmul(k, a, b)
            host = (time.perf_counter() - t0) / 50 * 1e6
            torch.cuda.synchronize()
            if side == "triton":
                how = str(k.best_config)
            else:
                cfg = next(reversed(k.best_configs.values()), None) if k.best_configs else None
                art = next(reversed(k.cache.values()), None)
                how = f"{cfg}  (last build {art.metadata.get('registers')} regs/{art.metadata.get('spill_stores')} spill)"
            tflops = 2 * s**3 * 1e-12 / (ms * 1e-3)
            print(f"{'fp8' if fp8 else 'fp16':6s} {s:6d} {side:7s} {ms:8.4f} {tflops:8.1f} {host:8.1f}  {how}", flush=True)
        same = torch.equal(outs["triton"], outs["tilec"])
        err = (outs["triton"].float() - outs["tilec"].float()).abs().max().item()
        print(f"{'':6s} {'':6s} outputs {'bit-equal' if same else f'max difference {err:.3g}'}")


if __name__ == "__main__":
    main()
