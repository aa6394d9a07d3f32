"""Conformance cases: reductions along each axis (NaN/inf in max/min/argmax), scans, softmax, layernorm,
and dot in several accumulator precisions with runtime K loops."""

from __future__ import annotations

import numpy as np

from .case import Case, src

ROW_REDUCE = src("""
@triton.jit
def row_reduce(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, KIND: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    if KIND == 0:
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
        r = tl.sum(x, axis=0)
    elif KIND == 1:
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf"))
        r = tl.max(x, axis=0)
    else:
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("inf"))
        r = tl.min(x, axis=0)
    tl.store(out_ptr + row, r)
""")

ARGMAX = src("""
@triton.jit
def argmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0))
""")

ARGMIN_I32 = src("""
@triton.jit
def argmin_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=2147483647)
    tl.store(out_ptr + row, tl.argmin(x, axis=0))
""")

COL_SUM = src("""
@triton.jit
def col_sum(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0)
    tl.store(out_ptr + rn, tl.sum(x, axis=0), mask=rn < N)
""")

INT_REDUCE = src("""
@triton.jit
def int_reduce(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr + 0, tl.max(x, axis=0))
    tl.store(out_ptr + 1, tl.min(x, axis=0))
    tl.store(out_ptr + 2, tl.xor_sum(x, axis=0))
    tl.store(out_ptr + 3, tl.sum(x, axis=0))
""")

CUMSUM = src("""
@triton.jit
def cumsum_rows(x_ptr, out_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * N + rn[None, :]
    mask = rn[None, :] < N
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=1), mask=mask)
""")

CUMPROD = src("""
@triton.jit
def cumprod_cols(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.cumprod(x, axis=0))
""")

SOFTMAX = src("""
@triton.jit
def softmax(x_ptr, out_ptr, n_cols, x_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, num / den, mask=mask)
""")

LAYERNORM = src("""
@triton.jit
def layernorm(x_ptr, w_ptr, b_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(out_ptr + row * N + cols, (diff * rstd * w + b).to(tl.float16), mask=mask)
""")

MATMUL = src("""
@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=(rm[:, None] < M) & (rn[None, :] < N))
""")

INT8_DOT = src("""
@triton.jit
def int8_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.dot(a, b, out_dtype=tl.int32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
""")

DOT_ACC_TRANS = src("""
@triton.jit
def dot_acc_trans(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    bt = tl.load(b_ptr + rn[:, None] * K + rk[None, :])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    c = tl.dot(a, tl.trans(bt), acc=c, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
""")


def _rows(r, m, n, dtype=np.float32):
    x = r.standard_normal((m, n)).astype(dtype)
    return x


def _nan_rows(r):
    x = _rows(r, 6, 100)
    x[1, 7] = np.nan
    x[2, :] = np.nan
    x[3, 50] = np.inf
    x[4, 3] = -np.inf
    x[5, 10] = x[5, 20] = 99.0  # tie: lowest index
    return [x, np.zeros(6, np.float32), 100]


def _pad(x, width=128):
    """The row as the kernel sees it: masked-off lanes hold -inf (the load's `other`)."""
    return np.concatenate([x, np.full((x.shape[0], width - x.shape[1]), -np.inf, x.dtype)], 1)


def _nan_max(x):
    x = _pad(x)
    allnan = np.isnan(x).all(1)
    return np.where(allnan, np.nan, np.nanmax(np.where(np.isnan(x), -np.inf, x), 1))


def _nan_argmax(x):
    rows = _pad(x)
    out = []
    for r in rows:
        ok = np.flatnonzero(~np.isnan(r))
        out.append(0 if ok.size == 0 else ok[np.argmax(r[ok])])
    return np.array(out, np.int32)


def _softmax(x):
    z = np.exp(x - x.max(1, keepdims=True))
    return z / z.sum(1, keepdims=True)


def _layernorm_ref(a):
    x, w, b = a[0].astype(np.float32), a[1], a[2]
    mu = x.mean(1, keepdims=True)
    var = ((x - mu) ** 2).mean(1, keepdims=True)
    return {3: ((x - mu) / np.sqrt(var + 1e-5) * w + b).astype(np.float16)}


def _matmul_case(name, dtype, out, m, n, k, bm, bn, bk, rtol):
    def inputs(r):
        a = r.standard_normal((m, k)).astype(dtype)
        b = r.standard_normal((k, n)).astype(dtype)
        c = np.zeros((m, n), out)
        return [a, b, c, m, n, k, k, 1, n, 1, n, 1]

    def reference(a):
        return {2: (a[0].astype(np.float64) @ a[1].astype(np.float64)).astype(out)}

    grid = lambda meta: (-(-m // meta["BM"]), -(-n // meta["BN"]))  # noqa: E731
    return Case(name, MATMUL, "matmul", inputs, grid, reference, {"BM": bm, "BN": bn, "BK": bk}, rtol, rtol)


CASES = [
    Case(
        "row_sum_f32",
        ROW_REDUCE,
        "row_reduce",
        lambda r: [_rows(r, 7, 100), np.zeros(7, np.float32), 100],
        (7,),
        lambda a: {1: a[0].sum(1)},
        {"BLOCK": 128, "KIND": 0},
        1e-5,
        1e-5,
    ),
    Case(
        "row_max_nan_inf",
        ROW_REDUCE,
        "row_reduce",
        _nan_rows,
        (6,),
        lambda a: {1: _nan_max(a[0])},
        {"BLOCK": 128, "KIND": 1},
    ),
    Case(
        "row_min_f32",
        ROW_REDUCE,
        "row_reduce",
        lambda r: [_rows(r, 5, 33), np.zeros(5, np.float32), 33],
        (5,),
        lambda a: {1: a[0].min(1)},
        {"BLOCK": 64, "KIND": 2},
    ),
    Case(
        "argmax_nan_ties",
        ARGMAX,
        "argmax_rows",
        lambda r: [*_nan_rows(r)[:1], np.zeros(6, np.int32), 100],
        (6,),
        lambda a: {1: _nan_argmax(a[0])},
        {"BLOCK": 128},
    ),
    Case(
        "argmin_i32",
        ARGMIN_I32,
        "argmin_rows",
        lambda r: [r.integers(-50, 50, (4, 77)).astype(np.int32), np.zeros(4, np.int32), 77],
        (4,),
        lambda a: {1: a[0].argmin(1).astype(np.int32)},
        {"BLOCK": 128},
    ),
    Case(
        "col_sum_axis0_i64",
        COL_SUM,
        "col_sum",
        lambda r: [r.integers(-1000, 1000, (13, 70)).astype(np.int64), np.zeros(70, np.int64), 13, 70],
        lambda m: (-(-70 // m["BN"]),),
        lambda a: {1: a[0].sum(0)},
        {"BM": 16, "BN": 32},
    ),
    Case(
        "int_reductions_u16",
        INT_REDUCE,
        "int_reduce",
        lambda r: [r.integers(0, 65535, 64).astype(np.uint16), np.zeros(4, np.uint16)],
        (1,),
        lambda a: {
            1: np.array(
                [a[0].max(), a[0].min(), np.bitwise_xor.reduce(a[0]), a[0].astype(np.int64).sum() % 2**16],
                np.uint16,
            )
        },
        {"BLOCK": 64},
    ),
    Case(
        "cumsum_axis1_i32",
        CUMSUM,
        "cumsum_rows",
        lambda r: [r.integers(-100, 100, (8, 20)).astype(np.int32), np.zeros((8, 20), np.int32), 20],
        lambda m: (8 // m["BM"],),
        lambda a: {1: np.cumsum(a[0], 1).astype(np.int32)},
        {"BM": 4, "BN": 32},
    ),
    Case(
        "cumprod_axis0_f64",
        CUMPROD,
        "cumprod_cols",
        lambda r: [r.uniform(0.5, 1.5, (8, 4)), np.zeros((8, 4))],
        (1,),
        lambda a: {1: np.cumprod(a[0], 0)},
        {"BM": 8, "BN": 4},
        1e-12,
        1e-12,
    ),
    Case(
        "softmax_rows",
        SOFTMAX,
        "softmax",
        lambda r: [_rows(r, 9, 300) * 5, np.zeros((9, 300), np.float32), 300, 300, 300],
        (9,),
        lambda a: {1: _softmax(a[0].astype(np.float64))},
        {"BLOCK": 512},
        1e-5,
        1e-7,
    ),
    Case(
        "layernorm_f16_out",
        LAYERNORM,
        "layernorm",
        lambda r: [
            _rows(r, 6, 200, np.float16),
            r.standard_normal(200).astype(np.float32),
            r.standard_normal(200).astype(np.float32),
            np.zeros((6, 200), np.float16),
            200,
            1e-5,
        ],
        (6,),
        _layernorm_ref,
        {"BLOCK": 256},
        2e-3,
        2e-3,
    ),
    _matmul_case("matmul_f32_k_loop", np.float32, np.float32, 33, 40, 70, 16, 16, 32, 1e-4),
    _matmul_case("matmul_f16_in_f32_acc", np.float16, np.float32, 32, 32, 64, 32, 32, 16, 1e-3),
    _matmul_case("matmul_f16_out", np.float16, np.float16, 20, 24, 40, 16, 16, 16, 5e-3),
    Case(
        "dot_int8_i32_acc",
        INT8_DOT,
        "int8_dot",
        lambda r: [
            r.integers(-128, 127, (16, 32)).astype(np.int8),
            r.integers(-128, 127, (32, 16)).astype(np.int8),
            np.zeros((16, 16), np.int32),
        ],
        (1,),
        lambda a: {2: a[0].astype(np.int32) @ a[1].astype(np.int32)},
        {"M": 16, "N": 16, "K": 32},
    ),
    Case(
        "dot_acc_and_trans",
        DOT_ACC_TRANS,
        "dot_acc_trans",
        lambda r: [_rows(r, 16, 16), _rows(r, 32, 16), _rows(r, 16, 32)],
        (1,),
        lambda a: {2: a[2] + a[0].astype(np.float64) @ a[1].T},
        {"M": 16, "N": 32, "K": 16},
        1e-5,
        1e-5,
    ),
]
