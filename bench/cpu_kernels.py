"""cpu target against NumPy on the same work: vector add (2^24 floats) and row softmax (4096 x 1024).

Run: .venv/bin/python bench/cpu_kernels.py   (prints the median times and the ratio cpu/NumPy; goal <= 3x)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tilec import client  # noqa: E402

ADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

SOFTMAX = """
import triton
import triton.language as tl


@triton.jit
def softmax(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    z = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, z / tl.sum(z, axis=0), mask=mask)
"""


def median_time(fn, reps: int = 10) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def np_softmax(x: np.ndarray, out: np.ndarray) -> None:
    np.subtract(x, x.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


def main() -> None:
    rng = np.random.default_rng(0)
    n = 1 << 24
    x, y, out = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.empty(n, np.float32)
    add = client.jit(ADD, "add_kernel")
    t_cpu = median_time(lambda: add[(n // 1024,)](x, y, out, n, BLOCK=1024))
    assert np.array_equal(out, x + y)
    t_np = median_time(lambda: np.add(x, y, out=out))
    print(
        f"vector add 2^24 f32: cpu {t_cpu * 1e3:.1f} ms, numpy {t_np * 1e3:.1f} ms, ratio {t_cpu / t_np:.2f}x"
    )

    rows, cols = 4096, 1024
    a, o = rng.standard_normal((rows, cols), dtype=np.float32), np.empty((rows, cols), np.float32)
    sm = client.jit(SOFTMAX, "softmax")
    t_cpu = median_time(lambda: sm[(rows,)](a, o, cols, BLOCK=1024))
    ref = np.empty_like(o)
    np_softmax(a, ref)
    assert np.allclose(o, ref, rtol=1e-5, atol=1e-7)
    t_np = median_time(lambda: np_softmax(a, ref))
    print(
        f"softmax 4096x1024 f32: cpu {t_cpu * 1e3:.1f} ms, numpy {t_np * 1e3:.1f} ms, ratio {t_cpu / t_np:.2f}x"
    )
    print(f"({os.cpu_count()} cores; cpu target runs programs on a thread pool, NumPy is single-threaded)")


if __name__ == "__main__":
    main()
