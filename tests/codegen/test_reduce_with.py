"""reduce_with / scan_with on the cpu target against the reference interpreter, bit for bit, on random inputs:
a 3-tuple of f32, f16 and i8 tiles with a combine that is neither commutative nor associative on every
element (so any change of order shows), along each axis of 3-D tiles, forward and reversed, small tiles
(LLVM vectors) and big ones (buffers)."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.ir import print_module

from .kit import assert_same, run_both

SOURCE = """
import triton
import triton.language as tl


@triton.jit
def _mix(a, b):
    return a * 3 + b


@triton.jit
def combine(x1, y1, z1, x2, y2, z2):
    return x1 * 0.5 + x2, tl.maximum(y1, y2) - y2 * 0.25, _mix(z1, z2)


@triton.jit
def k(x_ptr, y_ptr, z_ptr, rx_ptr, ry_ptr, rz_ptr, sx_ptr, sy_ptr, sz_ptr, A: tl.constexpr, B: tl.constexpr,
      C: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    ra = tl.arange(0, A)[:, None, None]
    rb = tl.arange(0, B)[None, :, None]
    rc = tl.arange(0, C)[None, None, :]
    offs = ra * B * C + rb * C + rc
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = tl.load(z_ptr + offs)
    rx, ry, rz = tl.reduce((x, y, z), AXIS, combine, keep_dims=True)
    oa = tl.arange(0, rx.shape[0])[:, None, None]
    ob = tl.arange(0, rx.shape[1])[None, :, None]
    oc = tl.arange(0, rx.shape[2])[None, None, :]
    out = oa * rx.shape[1] * rx.shape[2] + ob * rx.shape[2] + oc
    tl.store(rx_ptr + out, rx)
    tl.store(ry_ptr + out, ry)
    tl.store(rz_ptr + out, rz)
    sx, sy, sz = tl.associative_scan((x, y, z), AXIS, combine, reverse=REVERSE)
    tl.store(sx_ptr + offs, sx)
    tl.store(sy_ptr + offs, sy)
    tl.store(sz_ptr + offs, sz)
"""

SIGNATURE = {
    **{f"{p}_ptr": "*fp32" for p in ("x", "rx", "sx")},
    **{f"{p}_ptr": "*fp16" for p in ("y", "ry", "sy")},
    **{f"{p}_ptr": "*i8" for p in ("z", "rz", "sz")},
}


@pytest.mark.parametrize(
    "shape,axis,reverse",
    [((1, 8, 4), 1, False), ((2, 4, 8), 2, True), ((8, 2, 2), 0, False), ((2, 64, 8), 1, True)],
    ids=["small-mid", "small-last-rev", "small-first", "big-mid-rev"],
)
def test_reduce_with_and_scan_with_match_the_interpreter(shape: tuple, axis: int, reverse: bool) -> None:
    a, b, c = shape
    cx = {"A": a, "B": b, "C": c, "AXIS": axis, "REVERSE": reverse}
    text = print_module(build_ir(read_kernel(SOURCE, "k"), SIGNATURE, cx))
    assert "reduce_with" in text and "scan_with" in text
    rng = np.random.default_rng(a * 100 + b * 10 + c)
    n, reduced = a * b * c, a * b * c // shape[axis]
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float16)
    z = rng.integers(-128, 128, n).astype(np.int8)
    outs = [np.zeros(reduced, t) for t in (np.float32, np.float16, np.int8)]
    scans = [np.zeros(n, t) for t in (np.float32, np.float16, np.int8)]
    ref, got = run_both(text, [x, y, z, *outs, *scans], (1,))
    assert_same(ref, got)
    # the interpreter's scan is the sequential fold of the combine (checked here on the i8 part)
    zz = np.moveaxis(z.reshape(shape), axis, 0)
    zz = np.flip(zz, 0) if reverse else zz
    acc, want = zz[0].astype(np.int64), [zz[0]]
    for row in zz[1:]:
        acc = (acc * 3 + row) % 256
        want.append(((acc + 128) % 256 - 128).astype(np.int8))
    want_arr = np.stack(want)
    want_arr = np.flip(want_arr, 0) if reverse else want_arr
    np.testing.assert_array_equal(ref[8].reshape(shape), np.moveaxis(want_arr, 0, axis))


CONTROL_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def is_floating(x):
    return x.dtype.is_floating()


@triton.jit
def steps(r, ia, ib):
    for j in range(ia % 3):  # a trip count that differs from lane to lane
        r = r * 0.75 + 1.0
    n = ia + ib
    while n > 40:
        n = n // 3
    return r, n


@triton.jit
def combine(a, ia, b, ib):
    if is_floating(a):  # a helper's constexpr answer, as Inductor's triton_helpers ask it
        if a > b:
            r = a - b * 0.5
        else:
            r = b
    else:
        r = a
    return steps(r, ia, ib)


@triton.jit
def k(x_ptr, i_ptr, r_ptr, n_ptr, s_ptr, t_ptr, M: tl.constexpr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    i = tl.load(i_ptr + offs)
    r, n = tl.reduce((x, i), 1, combine)
    tl.store(r_ptr + tl.arange(0, M), r)
    tl.store(n_ptr + tl.arange(0, M), n)
    s, t = tl.associative_scan((x, i), 0, combine, reverse=REVERSE)
    tl.store(s_ptr + offs, s)
    tl.store(t_ptr + offs, t)
"""


@pytest.mark.parametrize("m,n,reverse", [(4, 8, False), (8, 16, True)])
def test_combiners_with_ifs_and_loops_match_the_interpreter(m: int, n: int, reverse: bool) -> None:
    sig = {
        "x_ptr": "*fp32",
        "i_ptr": "*i32",
        "r_ptr": "*fp32",
        "n_ptr": "*i32",
        "s_ptr": "*fp32",
        "t_ptr": "*i32",
    }
    text = print_module(build_ir(read_kernel(CONTROL_SOURCE, "k"), sig, {"M": m, "N": n, "REVERSE": reverse}))
    assert all(word in text for word in (" if ", " for ", " while "))
    rng = np.random.default_rng(m * n)
    x = rng.standard_normal(m * n).astype(np.float32)
    i = rng.integers(0, 30, m * n).astype(np.int32)
    args = [
        x,
        i,
        np.zeros(m, np.float32),
        np.zeros(m, np.int32),
        np.zeros(m * n, np.float32),
        np.zeros(m * n, np.int32),
    ]
    ref, got = run_both(text, args, (1,))
    assert_same(ref, got)
    # the scan's index part by hand: n = ia + ib, divided by 3 while over 40
    ii = i.reshape(m, n)
    ii = ii[::-1] if reverse else ii
    acc, want = ii[0].copy(), [ii[0].copy()]
    for row in ii[1:]:
        acc = acc + row
        while (acc > 40).any():
            acc = np.where(acc > 40, acc // 3, acc)
        want.append(acc.copy())
    want_arr = np.stack(want)[::-1] if reverse else np.stack(want)
    np.testing.assert_array_equal(ref[5].reshape(m, n), want_arr)
