"""Compile time of the frontend on the tutorial kernels: read_kernel + build_ir + the default pass
pipeline (when compiler.passes is present), median of N runs, printed as a table in milliseconds.

    .venv/bin/python bench/compile_time.py [-n 20]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=20)
    args = ap.parse_args()
    run_passes = _passes()
    print(f"{'kernel':<16}{'IR ops':>8}{'read ms':>10}{'build ms':>10}{'passes ms':>11}{'total ms':>10}")
    for stem in KERNELS:
        r, b, p, ops = time_kernel(stem, args.runs, run_passes)
        print(f"{stem:<16}{ops:>8}{r:>10.2f}{b:>10.2f}{p:>11.2f}{r + b + p:>10.2f}")
    if run_passes is None:
        print("(compiler.passes not present: no pass timings)")


if __name__ == "__main__":
    main()
