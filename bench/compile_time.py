"""Compile time of the frontend on the tutorial kernels: read_kernel + build_ir + the default pass
pipeline (when compiler.passes is present), median of N runs, printed as a table in milliseconds.
With --long: whole compiles (to an object / a cubin) of long unrolled kernels at several sizes, stage by
stage, per target, in seconds (min of N runs): the time per step shows whether growth is linear.

    .venv/bin/python bench/compile_time.py [-n 20]
    .venv/bin/python bench/compile_time.py --long [-n 1] [--steps 100,200,400,800] [--targets cpu,cuda:sm_90]
        [--kernels acc,where,ldst,reduce] [--block 128]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kernels import KERNELS, source  # noqa: E402
from tilec.compiler.frontend import build_ir, read_kernel  # noqa: E402


def _passes():
    try:
        from tilec.compiler.passes import PassManager, pipeline
    except ImportError:
        return None
    return lambda m: PassManager.from_names(pipeline("default")).run(m)


def time_kernel(stem: str, runs: int, run_passes) -> tuple[float, float, float, int]:
    k = KERNELS[stem]
    text = source(stem)
    reads, builds, passes = [], [], []
    ops = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        ks = read_kernel(text, k["name"])
        t1 = time.perf_counter()
        m = build_ir(ks, k["signature"], k["constexprs"])
        t2 = time.perf_counter()
        ops = sum(1 for _ in m.walk())
        if run_passes is not None:
            run_passes(m)
        t3 = time.perf_counter()
        reads.append(t1 - t0)
        builds.append(t2 - t1)
        passes.append(t3 - t2)
    med = statistics.median
    return med(reads) * 1e3, med(builds) * 1e3, med(passes) * 1e3, ops


LONG_HEAD = "import triton\nimport triton.language as tl\n\n"
# name -> (source, what a step does); every kernel takes (x_ptr, out_ptr, n, BLOCK, STEPS)
LONG_KERNELS = {
    "acc": (source("static_range_acc"), "masked load, mul, add (the issue's kernel)"),
    "where": (LONG_HEAD + """
@triton.jit
def step(x, i):
    return tl.where(x > 1.0, x * 0.5, x + 0.25 * i)


@triton.jit
def where_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    for i in tl.static_range(STEPS):
        x = step(x, i)
    tl.store(out_ptr + offs, x, mask=offs < n)
""", "helper call: cmp, mul, add, where"),
    "ldst": (LONG_HEAD + """
@triton.jit
def ldst_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in tl.static_range(STEPS):
        y = tl.load(out_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, y + tl.load(x_ptr + offs, mask=mask, other=0.0), mask=mask)
""", "2 masked loads, add, masked store"),
    "reduce": (LONG_HEAD + """
@triton.jit
def reduce_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    s = 0.0
    for i in tl.static_range(STEPS):
        s += tl.sum(x * (i + 1), axis=0)
        x = x - tl.max(x, axis=0) * 0.001
    tl.store(out_ptr + offs, x + s, mask=mask)
""", "sum, max, broadcast sub"),
}
LONG_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def time_long(src: str, target: str, steps: int, block: int, runs: int) -> dict[str, float]:
    """Seconds per stage (frontend, then the target's stages down to its binary), min of `runs`."""
    from tilec.compiler.artifact import CompileOptions, parse_target
    from tilec.compiler.backends import stages as target_stages
    from tilec.compiler.pipeline import gc_paused

    stages = target_stages(parse_target(target)[0])
    best: dict[str, float] = {}
    for _ in range(runs):
        with gc_paused():  # as compile_request runs the stages
            times = _run_stages(src, stages, target, steps, block, CompileOptions)
        for k, v in times.items():
            best[k] = min(best.get(k, v), v)
    return best


def _run_stages(src: str, stages: list, target: str, steps: int, block: int, options) -> dict[str, float]:
    t0 = time.perf_counter()
    ir = build_ir(read_kernel(src, None), LONG_SIGNATURE, {"BLOCK": block, "STEPS": steps})
    times = {"frontend": time.perf_counter() - t0}
    meta = {"kernel_name": None, "options": options(target=target)}
    for name, stage in stages:
        t0 = time.perf_counter()
        ir = stage(ir, meta)
        times[name] = time.perf_counter() - t0
    return times


def main_long(args) -> None:
    for name in args.kernels.split(","):
        src, what = LONG_KERNELS[name]
        for target in args.targets.split(","):
            print(f"\n{name} ({what}) on {target}, BLOCK={args.block}: seconds, min of {args.runs}")
            header = None
            time_long(src, target, 2, args.block, 1)  # warm up: imports, LLVM targets, the assembler
            for steps in (int(s) for s in args.steps.split(",")):
                try:
                    t = time_long(src, target, steps, args.block, args.runs)
                except Exception as exc:  # noqa: BLE001 - a failing size is a row of the table too
                    print(f"{steps:>6}  {type(exc).__name__}: {' '.join(str(exc).split())[:90]}", flush=True)
                    continue
                if header is None:
                    header = list(t)
                    print(f"{'steps':>6}" + "".join(f"{h:>10}" for h in header) + f"{'total':>9}{'ms/step':>9}")
                total = sum(t.values())
                print(f"{steps:>6}" + "".join(f"{t[h]:>10.2f}" for h in header) + f"{total:>9.2f}"
                      f"{1e3 * total / steps:>9.1f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=None, help="runs per case (default 20; 1 with --long)")
    ap.add_argument("--long", action="store_true", help="long unrolled kernels, whole compiles per target")
    ap.add_argument("--steps", default="100,200,400,800", help="--long: unrolled steps, comma-separated")
    ap.add_argument("--targets", default="cpu,cuda:sm_90", help="--long: targets, comma-separated")
    ap.add_argument("--kernels", default="acc", help=f"--long: some of {','.join(LONG_KERNELS)}")
    ap.add_argument("--block", type=int, default=128, help="--long: the BLOCK constexpr")
    args = ap.parse_args()
    if args.long:
        args.runs = args.runs or 1
        main_long(args)
        return
    args.runs = args.runs or 20
    run_passes = _passes()
    print(f"{'kernel':<16}{'IR ops':>8}{'read ms':>10}{'build ms':>10}{'passes ms':>11}{'total ms':>10}")
    for stem in KERNELS:
        r, b, p, ops = time_kernel(stem, args.runs, run_passes)
        print(f"{stem:<16}{ops:>8}{r:>10.2f}{b:>10.2f}{p:>11.2f}{r + b + p:>10.2f}")
    if run_passes is None:
        print("(compiler.passes not present: no pass timings)")


if __name__ == "__main__":
    main()
