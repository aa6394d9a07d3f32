"""Compile time of the cpu target, stage by stage: tile IR (frontend + passes), LLVM IR build (lowering),
LLVM optimise and object emit, for big-tile kernels and the slowest conformance cases. Median of N runs.

    .venv/bin/python bench/cpu_compile_time.py [-n 3] [--only matmul]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from tests.kernels import KERNELS, source  # noqa: E402
from tilec.compiler.artifact import CompileOptions  # noqa: E402
from tilec.compiler.backends.cpu.target import emit_object, lower_module, optimise  # noqa: E402
from tilec.compiler.pipeline import frontend_module  # noqa: E402
from tilec.compiler.tir import tir_stage  # noqa: E402

SLOW_CASES = (
    "matmul_f16_in_f32_acc",
    "matmul_f16_out",
    "matmul_f32_k_loop",
    "softmax_rows",
    "layernorm_f16_out",
)


def tutorial(stem: str, **constexprs) -> tuple[str, str, dict, dict]:
    k = KERNELS[stem]
    return source(stem), k["name"], k["signature"], {**k["constexprs"], **constexprs}


def conformance(name: str) -> tuple[str, str, dict, dict]:
    """The specialisation client.jit builds for a conformance case's first call."""
    from tests.conformance.cases import CASES
    from tests.conformance.runners import jit_kernel

    case = next(c for c in CASES if c.name == name)
    k = jit_kernel(case)
    args = case.inputs(np.random.default_rng(0))
    bound, _ = k.bind(tuple(args), dict(case.constexprs))
    full = k.complete(bound)
    specs, constexprs = k.specialisation(full)
    return case.source, case.kernel, {n: s.type for n, s in specs.items()}, constexprs


def workloads() -> dict[str, tuple[str, str, dict, dict]]:
    out = {
        "matmul 64x64x32 f16": tutorial("matmul", BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32),
        "matmul 128x128x32 f16": tutorial("matmul", BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=32),
        "softmax 1x4096 f32": tutorial("fused_softmax", BLOCK_SIZE=4096),
        "layer norm 1024 f32": tutorial("layer_norm", BLOCK_SIZE=1024),
    }
    for name in SLOW_CASES:
        out[f"conformance {name}"] = conformance(name)
    return out


def time_once(src: str, name: str, signature: dict, constexprs: dict) -> dict[str, float]:
    meta: dict = {"kernel_name": name, "options": CompileOptions()}
    t0 = time.perf_counter()
    module = tir_stage(frontend_module(src, name, signature, constexprs, None), meta)
    t1 = time.perf_counter()
    llir = str(lower_module(module, name)[0])
    t2 = time.perf_counter()
    mod = optimise(llir, 3)
    t3 = time.perf_counter()
    emit_object(mod, 3)
    t4 = time.perf_counter()
    return {"tir": t1 - t0, "build": t2 - t1, "optimise": t3 - t2, "emit": t4 - t3, "total": t4 - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3, help="runs per workload (median)")
    ap.add_argument("--only", default="", help="substring of the workloads to run")
    args = ap.parse_args()
    cols = ("tir", "build", "optimise", "emit", "total")
    print(f"{'workload':40s}" + "".join(f"{c:>10s}" for c in cols) + "   (seconds, median)")
    for label, w in workloads().items():
        if args.only not in label:
            continue
        runs = [time_once(*w) for _ in range(args.n)]
        med = {c: statistics.median(r[c] for r in runs) for c in cols}
        print(f"{label:40s}" + "".join(f"{med[c]:10.3f}" for c in cols), flush=True)


if __name__ == "__main__":
    main()
