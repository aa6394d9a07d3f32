"""Conformance cases: elementwise math, integer semantics (wrapping, C division, shifts), casts, dtypes."""

from __future__ import annotations

import numpy as np

from tilec.client import as_bf16

from .case import Case, bf16_bits, bf16_value, grid1, src

N = 1000  # not a power of two: the last program is masked


def _unary_source(expr: str, other: str) -> str:
    return src(f"""
@triton.jit
def unary_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other={other})
    tl.store(out_ptr + offs, {expr}, mask=mask)
""")


def unary(
    name, expr, fn, dtype=np.float32, out=None, lo=-3.0, hi=3.0, rtol=1e-5, atol=1e-6, other="1"
) -> Case:
    out = out or dtype

    def inputs(rng):
        if np.dtype(dtype).kind == "f":
            x = rng.uniform(lo, hi, N).astype(dtype)
        else:
            x = rng.integers(lo, hi, N).astype(dtype)
        return [x, np.zeros(N, out), N]

    def reference(args):
        with np.errstate(all="ignore"):
            return {1: np.asarray(fn(args[0])).astype(out)}

    return Case(
        name,
        _unary_source(expr, other),
        "unary_kernel",
        inputs,
        grid1(N),
        reference,
        {"BLOCK": 256},
        rtol,
        atol,
    )


def _binary_source(expr: str) -> str:
    return src(f"""
@triton.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)
""")


def binary(name, expr, fn, dtype, out=None, lo=None, hi=None, rtol=0.0, atol=0.0, y_nonzero=False) -> Case:
    out = out or dtype

    def inputs(rng):
        dt = np.dtype(dtype)
        if dt.kind == "f":
            x, y = (rng.uniform(lo or -4, hi or 4, N).astype(dtype) for _ in range(2))
            x[:3], y[1] = [np.nan, np.inf, -np.inf], np.nan  # NaN and inf lanes
        else:
            info = np.iinfo(dt)
            a, b = (info.min if lo is None else lo), (info.max if hi is None else hi)
            x, y = (rng.integers(a, b, N, endpoint=True, dtype=dt) for _ in range(2))
            x[:4] = [info.min, info.max, 0, -1 if dt.kind == "i" else 1]
            y[:4] = [-1 if dt.kind == "i" else 1, 2, 3, info.min]
        if y_nonzero:
            y[y == 0] = 1
        return [x, y, np.zeros(N, out), N]

    def reference(args):
        with np.errstate(all="ignore"):
            return {2: np.asarray(fn(args[0], args[1])).astype(out)}

    return Case(
        name, _binary_source(expr), "binary_kernel", inputs, grid1(N), reference, {"BLOCK": 128}, rtol, atol
    )


def c_div(x, y):
    """C division (truncating), exact on Python ints, wrapped to the dtype (MIN // -1 == MIN)."""
    bits = x.dtype.itemsize * 8
    q = [
        abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        for a, b in zip(x.tolist(), y.tolist(), strict=True)
    ]
    if x.dtype.kind == "i":
        q = [(v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1) for v in q]
    return np.array(q, dtype=x.dtype)


def c_rem(x, y):
    r = [
        a - abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) * b
        for a, b in zip(x.tolist(), y.tolist(), strict=True)
    ]
    return np.array(r, dtype=x.dtype)


def _erf(x):
    from math import erf

    return np.vectorize(erf)(x.astype(np.float64))


def _bf16_add_case() -> Case:
    def inputs(rng):
        x = bf16_bits(rng.uniform(-4, 4, N).astype(np.float32))
        y = bf16_bits(rng.uniform(-4, 4, N).astype(np.float32))
        return [as_bf16(x), as_bf16(y), as_bf16(np.zeros(N, np.uint16)), N]

    def reference(args):
        s = bf16_value(args[0].bits) + bf16_value(args[1].bits)
        return {2: bf16_bits(s)}

    return Case(
        "bf16_add", _binary_source("x + y"), "binary_kernel", inputs, grid1(N), reference, {"BLOCK": 128}
    )


CASES = [
    unary("exp_f32", "tl.exp(x)", np.exp),
    unary("log_f32", "tl.log(x)", np.log, lo=0.01, hi=100.0),
    unary("sqrt_f64", "tl.sqrt(x)", np.sqrt, dtype=np.float64, lo=0.0, hi=1e6, rtol=1e-15),
    unary("sin_cos_f32", "tl.sin(x) * tl.cos(x)", lambda x: np.sin(x) * np.cos(x), lo=-10, hi=10, atol=1e-6),
    unary(
        "exp2_log2_f32", "tl.exp2(x) + tl.log2(x + 4.0)", lambda x: np.exp2(x) + np.log2(x + np.float32(4))
    ),
    unary("rsqrt_f32", "tl.math.rsqrt(x)", lambda x: 1 / np.sqrt(x), lo=0.1, hi=50),
    unary("erf_f32", "tl.math.erf(x)", _erf),
    unary("tanh_f64", "tl.math.tanh(x)", np.tanh, dtype=np.float64, rtol=1e-14, atol=1e-15),
    unary(
        "floor_ceil_f32",
        "tl.floor(x) * 10.0 + tl.ceil(x)",
        lambda x: np.floor(x) * 10 + np.ceil(x),
        rtol=0,
        atol=0,
    ),
    unary(
        "abs_neg_i32",
        "tl.abs(x) - (-x)",
        lambda x: np.abs(x) + x,
        dtype=np.int32,
        lo=-1000,
        hi=1000,
        other="0",
    ),
    unary(
        "sigmoid_f16",
        "tl.sigmoid(x.to(tl.float32)).to(tl.float16)",
        lambda x: 1 / (1 + np.exp(-x.astype(np.float32))),
        dtype=np.float16,
        rtol=1e-3,
        atol=1e-3,
    ),
    unary(
        "f16_arith_rounds_in_f16", "x * x + x", lambda x: x * x + x, dtype=np.float16, rtol=1e-3, atol=1e-3
    ),
    unary("fma_f32", "tl.fma(x, x, 1.0)", lambda x: x.astype(np.float64) * x + 1, rtol=1e-6),
    unary(
        "float_to_int_cast",
        "x.to(tl.int32)",
        lambda x: np.trunc(x).astype(np.int32),
        out=np.int32,
        lo=-1e6,
        hi=1e6,
    ),
    unary(
        "int_to_f16_cast",
        "x.to(tl.float16)",
        lambda x: x.astype(np.float16),
        dtype=np.int16,
        out=np.float16,
        lo=-3000,
        hi=3000,
        other="0",
    ),
    unary("bitcast_f32_i32", "x.to(tl.int32, bitcast=True)", lambda x: x.view(np.int32), out=np.int32),
    unary(
        "u8_to_f64",
        "x.to(tl.float64) / 255.0",
        lambda x: x / 255.0,
        dtype=np.uint8,
        out=np.float64,
        lo=0,
        hi=256,
        rtol=1e-15,
        other="0",
    ),
    unary("compare_to_bool", "x > 0.5", lambda x: x > 0.5, out=np.bool_),
    unary("where_scalar", "tl.where(x > 0, x, 0.0)", lambda x: np.maximum(x, 0), rtol=0, atol=0),
    binary("add_i8_wraps", "x + y", lambda x, y: x + y, np.int8),
    binary("sub_u8_wraps", "x - y", lambda x, y: x - y, np.uint8),
    binary("mul_i16_wraps", "x * y", lambda x, y: x * y, np.int16),
    binary("mul_i32_overflow", "x * y", lambda x, y: x * y, np.int32),
    binary(
        "div_rem_i32_c_semantics",
        "x // y + x % y * 1000",
        lambda x, y: c_div(x, y) + c_rem(x, y) * np.int32(1000),
        np.int32,
        lo=-(10**6),
        hi=10**6,
        y_nonzero=True,
    ),
    binary("div_i64", "x // y", c_div, np.int64, y_nonzero=True),
    binary("div_u32", "x // y", lambda x, y: x // y, np.uint32, y_nonzero=True),
    binary("rem_u16", "x % y", lambda x, y: x % y, np.uint16, y_nonzero=True),
    binary(
        "bitwise_u64", "(x & y) | (x ^ (y >> 3))", lambda x, y: (x & y) | (x ^ (y >> np.uint64(3))), np.uint64
    ),
    binary("shifts_i32", "(x >> 5) + (y << 3)", lambda x, y: (x >> 5) + (y << 3), np.int32),
    binary("shift_u16_logical", "x >> 3", lambda x, y: x >> 3, np.uint16),
    binary(
        "max_min_nan_f32",
        "tl.maximum(x, y) - tl.minimum(x, y)",
        lambda x, y: np.fmax(x, y) - np.fmin(x, y),
        np.float32,
    ),
    binary("max_i64", "tl.maximum(x, y)", np.maximum, np.int64),
    binary(
        "pow_f32",
        "tl.math.pow(x, y)",
        lambda x, y: np.power(x.astype(np.float64), y),
        np.float32,
        lo=0.1,
        hi=3,
        rtol=1e-5,
    ),
    binary(
        "atan2_f32",
        "tl.math.atan2(x, y)",
        lambda x, y: np.arctan2(x.astype(np.float64), y),
        np.float32,
        rtol=1e-5,
        atol=1e-6,
    ),
    binary("div_f64", "x / y", lambda x, y: x / y, np.float64, y_nonzero=True),
    binary(
        "fdiv_f32_mixed_int",
        "x / y",
        lambda x, y: x.astype(np.float32) / y.astype(np.float32),
        np.int32,
        out=np.float32,
        lo=-1000,
        hi=1000,
        y_nonzero=True,
        rtol=1e-6,
    ),
    binary("cmp_and_u32", "(x < y) & (x != 0)", lambda x, y: (x < y) & (x != 0), np.uint32, out=np.bool_),
    _bf16_add_case(),
]
