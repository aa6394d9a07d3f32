"""Conformance cases: masks and other=, strides (negative, 2-D, transposing), gathers, scalar loads,
3-D tiles, 2-D and 3-D grids, i64 offsets, helper functions and constexpr branches."""

from __future__ import annotations

import numpy as np

from .case import Case, grid1, src

COPY_OTHER = src("""
@triton.jit
def copy_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-7)
    tl.store(out_ptr + offs, x)
""")

REVERSE = src("""
@triton.jit
def reverse_copy(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src_ptr = x_ptr + (n - 1) * stride + offs * (-stride)
    tl.store(out_ptr + offs, tl.load(src_ptr, mask=mask), mask=mask)
""")

TRANSPOSE = src("""
@triton.jit
def transpose(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
              BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rn[None, :] * stride_om + rm[:, None] * stride_on, x, mask=mask)
""")

GATHER = src("""
@triton.jit
def gather(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.load(x_ptr + idx, mask=mask), mask=mask)
""")

SCALAR = src("""
@triton.jit
def scalar_ops(x_ptr, out_ptr, scale):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    tl.store(out_ptr + pid, v * scale + pid)
""")

CUBE = src("""
@triton.jit
def cube3d(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    a = tl.arange(0, A)[:, None, None]
    b = tl.arange(0, B)[None, :, None]
    c = tl.arange(0, C)[None, None, :]
    offs = a * (B * C) + b * C + c
    x = tl.load(x_ptr + offs)
    y = x * 2 + tl.sum(x, axis=2)[:, :, None]
    tl.store(out_ptr + offs, y)
""")

GRID2D = src("""
@triton.jit
def grid2d(out_ptr, W):
    x = tl.program_id(0)
    y = tl.program_id(1)
    z = tl.program_id(2)
    nx = tl.num_programs(0)
    ny = tl.num_programs(1)
    tl.store(out_ptr + (z * ny + y) * W + x, x + 10 * y + 100 * z + 1000 * nx)
""")

I64_OFFSETS = src("""
@triton.jit
def i64_offsets(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
""")

HELPER = src("""
@triton.jit
def _squash(x, lo, hi):
    return tl.minimum(tl.maximum(x, lo), hi)


@triton.jit
def _affine(x, a, b):
    return _squash(x * a + b, -1.0, 1.0)


@triton.jit
def helper_calls(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _affine(x, 2.0, 0.5), mask=mask)
""")

CONSTEXPR_BRANCH = src("""
@triton.jit
def constexpr_branch(x_ptr, out_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 0:
        y = x + 1
    elif MODE == 1:
        y = x * 3
    else:
        y = x - 5
    tl.store(out_ptr + offs, y, mask=mask)
""")

FULL_ZEROS = src("""
@triton.jit
def full_zeros(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.full((BLOCK,), 3, tl.int16)
    b = tl.zeros((BLOCK,), dtype=tl.int16) + offs.to(tl.int16)
    tl.store(out_ptr + offs, a * b, mask=offs < n)
""")

BOOL_MASK_ARRAY = src("""
@triton.jit
def masked_by_array(x_ptr, m_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inb = offs < n
    keep = tl.load(m_ptr + offs, mask=inb, other=0) != 0
    x = tl.load(x_ptr + offs, mask=inb & keep, other=0.0)
    tl.store(out_ptr + offs, x, mask=inb)
""")


def _transpose_ref(args):
    return {1: args[0].T.copy()}


CASES = [
    Case(
        "mask_other_at_edge",
        COPY_OTHER,
        "copy_other",
        lambda r: [r.integers(-100, 100, 300).astype(np.int32), np.zeros(384, np.int32), 300],
        grid1(300),
        lambda a: {1: np.concatenate([a[0], np.full(84, -7, np.int32)])},
        {"BLOCK": 128},
    ),
    Case(
        "negative_stride",
        REVERSE,
        "reverse_copy",
        lambda r: [r.standard_normal(777).astype(np.float32), np.zeros(777, np.float32), 777, 1],
        grid1(777),
        lambda a: {1: a[0][::-1].copy()},
        {"BLOCK": 256},
    ),
    Case(
        "negative_stride_2",
        REVERSE,
        "reverse_copy",
        lambda r: [r.standard_normal(600).astype(np.float64), np.zeros(300, np.float64), 300, 2],
        grid1(300),
        lambda a: {1: a[0][598::-2].copy()},
        {"BLOCK": 64},
    ),
    Case(
        "transpose_strided_2d",
        TRANSPOSE,
        "transpose",
        lambda r: [
            r.standard_normal((50, 70)).astype(np.float32),
            np.zeros((70, 50), np.float32),
            50,
            70,
            70,
            1,
            50,
            1,
        ],
        lambda m: (-(-50 // m["BM"]), -(-70 // m["BN"])),
        _transpose_ref,
        {"BM": 16, "BN": 32},
    ),
    Case(
        "gather_by_index",
        GATHER,
        "gather",
        lambda r: [
            r.standard_normal(500).astype(np.float32),
            r.integers(0, 500, 999).astype(np.int32),
            np.zeros(999, np.float32),
            999,
        ],
        grid1(999),
        lambda a: {2: a[0][a[1]]},
        {"BLOCK": 128},
    ),
    Case(
        "scalar_load_store",
        SCALAR,
        "scalar_ops",
        lambda r: [r.integers(-50, 50, 37).astype(np.int64), np.zeros(37, np.int64), np.int64(3)],
        (37,),
        lambda a: {1: a[0] * 3 + np.arange(37)},
    ),
    Case(
        "tile_3d",
        CUBE,
        "cube3d",
        lambda r: [r.integers(-9, 9, 2 * 4 * 8).astype(np.int32), np.zeros(64, np.int32)],
        (1,),
        lambda a: {1: (a[0].reshape(2, 4, 8) * 2 + a[0].reshape(2, 4, 8).sum(2, keepdims=True)).ravel()},
        {"A": 2, "B": 4, "C": 8},
    ),
    Case(
        "grid_3d_program_ids",
        GRID2D,
        "grid2d",
        lambda r: [np.zeros((2, 3, 5), np.int32), 5],
        (5, 3, 2),
        lambda a: {
            0: (
                np.arange(5)[None, None, :]
                + 10 * np.arange(3)[None, :, None]
                + 100 * np.arange(2)[:, None, None]
                + 5000
            ).astype(np.int32)
        },
    ),
    Case(
        "i64_offsets",
        I64_OFFSETS,
        "i64_offsets",
        lambda r: [r.integers(0, 1000, 999).astype(np.int64), np.zeros(999, np.int64), 999],
        grid1(999),
        lambda a: {1: a[0] + 1},
        {"BLOCK": 64},
    ),
    Case(
        "helper_functions",
        HELPER,
        "helper_calls",
        lambda r: [r.uniform(-2, 2, 999).astype(np.float32), np.zeros(999, np.float32), 999],
        grid1(999),
        lambda a: {1: np.clip(a[0] * 2 + 0.5, -1, 1)},
        {"BLOCK": 128},
        1e-6,
        1e-6,
    ),
    Case(
        "constexpr_branch_mode1",
        CONSTEXPR_BRANCH,
        "constexpr_branch",
        lambda r: [r.integers(-9, 9, 100).astype(np.int8), np.zeros(100, np.int8), 100],
        grid1(100),
        lambda a: {1: a[0] * 3},
        {"BLOCK": 64, "MODE": 1},
    ),
    Case(
        "constexpr_branch_mode2",
        CONSTEXPR_BRANCH,
        "constexpr_branch",
        lambda r: [r.integers(-9, 9, 100).astype(np.int8), np.zeros(100, np.int8), 100],
        grid1(100),
        lambda a: {1: a[0] - 5},
        {"BLOCK": 64, "MODE": 2},
    ),
    Case(
        "full_and_zeros_i16",
        FULL_ZEROS,
        "full_zeros",
        lambda r: [np.zeros(200, np.int16), 200],
        grid1(200),
        lambda a: {0: (np.arange(200) * 3).astype(np.int16)},
        {"BLOCK": 64},
    ),
    Case(
        "mask_from_bool_array",
        BOOL_MASK_ARRAY,
        "masked_by_array",
        lambda r: [
            r.standard_normal(333).astype(np.float32),
            r.integers(0, 2, 333).astype(np.bool_),
            np.zeros(333, np.float32),
            333,
        ],
        grid1(333),
        lambda a: {2: np.where(a[1], a[0], 0).astype(np.float32)},
        {"BLOCK": 128},
    ),
]
