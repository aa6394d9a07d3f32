"""Scans on cuda run in three levels (each thread's chunk, shuffles across lanes, warp totals through
shared memory; layouts.scan_layout and reduce.py). Without a GPU: the layout's shape for several tiles and
the PTX of long and tuple-valued scans through ptxas with no spills. On a GPU: long, reversed, 2-D and
tuple-valued scans with a non-commutative combine against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason, run_gpu
from tilec import client
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.layouts import scan_layout
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.pipeline import compile_kernel

RNG = np.random.default_rng(7)
GPU = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")

SRC = """
import triton
import triton.language as tl


@triton.jit
def affine(a1, b1, a2, b2):
    # x -> a x + b, composed: not commutative
    return a1 * a2, b1 * a2 + b2


@triton.jit
def scans(x_ptr, y_ptr, out_ptr, out2_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr,
          KIND: tl.constexpr, REVERSE: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    if KIND == 0:
        tl.store(out_ptr + offs, tl.cumsum(x, axis=AXIS, reverse=REVERSE))
    elif KIND == 1:
        tl.store(out_ptr + offs, tl.associative_scan(x, AXIS, tl.maximum, reverse=REVERSE))
    else:
        y = tl.load(y_ptr + offs)
        a, b = tl.associative_scan((x, y), AXIS, affine, reverse=REVERSE)
        tl.store(out_ptr + offs, a)
        tl.store(out2_ptr + offs, b)
"""


def test_layout_covers_the_axis_with_chunk_lanes_and_warps() -> None:
    lay = scan_layout((1, 4096), 1, 4)
    assert [b[1] for b in lay.reg] == [1, 2, 4, 8, 16]  # a chunk of 32 per thread
    assert [b[1] for b in lay.lane] == [32 << i for i in range(5)]
    assert [b[1] for b in lay.warp] == [1024, 2048]
    lay = scan_layout((64, 16), 1, 4)  # short axis: lanes along it, the rest on rows
    assert [b for b in lay.lane[:4]] == [(0, 1), (0, 2), (0, 4), (0, 8)]
    assert all(b[1] == 0 for b in lay.warp)


def _ptx(bm: int, bn: int, axis: int, kind: int, dtype: str, warps: int = 4):
    t = {"float32": "*fp32", "int32": "*i32"}[dtype]
    sig = {"x_ptr": t, "y_ptr": t, "out_ptr": t, "out2_ptr": t}
    consts = {"BM": bm, "BN": bn, "AXIS": axis, "KIND": kind, "REVERSE": False}
    return compile_kernel(SRC, "scans", signature=sig, constexprs=consts,
                          options=CompileOptions(target="cuda:sm_90", num_warps=warps), emit="cubin")  # fmt: skip


@pytest.mark.parametrize("shape,axis,kind", [((1, 1024), 1, 0), ((1, 256), 1, 2), ((256, 8), 0, 2), ((4, 2048), 1, 1)])
def test_long_scans_assemble_without_spills(shape, axis: int, kind: int) -> None:
    art = _ptx(*shape, axis, kind, "float32")
    assert art.metadata["spill_stores"] == 0
    assert "shfl.sync.up" in art.ptx
    assert ("bar.sync" in art.ptx) == (shape[axis] > 32)  # warps along the axis only past one warp's lanes


def _reference(args: list, consts: dict, sig: dict) -> list:
    module = build_ir(read_kernel(SRC, "scans"), sig, consts)
    host = [a.copy() for a in args]
    run_kernel(module, "scans", host, (1,))
    return host


CASES = [
    ((1, 4096), 1, 0, "float32", 4),
    ((1, 1024), 1, 0, "int32", 8),
    ((1, 32), 1, 0, "int32", 1),
    ((64, 256), 1, 0, "float32", 4),
    ((256, 64), 0, 0, "float32", 8),
    ((8, 2048), 1, 1, "float32", 4),
    ((1, 512), 1, 2, "float32", 4),
    ((128, 16), 0, 2, "float32", 4),
    ((4, 64), 1, 2, "float32", 2),
]


@GPU
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis,kind,dtype,warps", CASES)
def test_scans_match_the_interpreter(shape, axis: int, kind: int, dtype: str, warps: int, reverse: bool) -> None:
    bm, bn = shape
    if dtype == "int32":
        x = RNG.integers(-50, 50, shape).astype(np.int32)
        y = RNG.integers(-50, 50, shape).astype(np.int32)
    else:
        # the affine recurrence stays bounded with |a| < 1
        x = (RNG.uniform(0.5, 0.99, shape) if kind == 2 else RNG.standard_normal(shape)).astype(np.float32)
        y = RNG.standard_normal(shape).astype(np.float32)
    args = [x, y, np.zeros_like(x), np.zeros_like(x)]
    consts = {"BM": bm, "BN": bn, "AXIS": axis, "KIND": kind, "REVERSE": reverse}
    t = "*fp32" if dtype == "float32" else "*i32"
    want = _reference(args, consts, {"x_ptr": t, "y_ptr": t, "out_ptr": t, "out2_ptr": t})
    got = run_gpu(client.jit(SRC, "scans"), (1,), args, consts, num_warps=warps)
    tol = 1e-6 if dtype == "int32" else (2e-3 if kind == 0 and shape[axis] >= 1024 else 1e-4)
    for w, g in zip(want[2:], got[2:], strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
