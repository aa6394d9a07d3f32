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
