"""Every elementwise op of the tile IR on every dtype it takes, cpu target against the interpreter,
on hypothesis-drawn inputs (edge values included: zeros, -1, INT_MIN, NaN, inf)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from .kit import assert_same, run_both

N = 16
INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "f32", "f64"]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "maximum", "minimum"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "rem", "maximum", "minimum", "pow", "atan2"]
FLOAT_UNARY = [
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "floor",
    "ceil",
    "erf",
    "neg",
    "abs",
]
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16, "i32": np.int32,
      "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}  # fmt: skip


def binary_kernel(op: str, t: str, attrs: str = "") -> str:
    return f"""module {{
  kernel @k(%x: ptr<{t}>, %y: ptr<{t}>, %o: ptr<{t}>) {{
    %0 = make_range {{end = {N}, start = 0}} : tile<{N}xi32>
    %1 = splat %x : tile<{N}xptr<{t}>>
    %2 = addptr %1, %0 : tile<{N}xptr<{t}>>
    %3 = load %2 : tile<{N}x{t}>
    %4 = splat %y : tile<{N}xptr<{t}>>
    %5 = addptr %4, %0 : tile<{N}xptr<{t}>>
    %6 = load %5 : tile<{N}x{t}>
    %7 = {op} %3, %6{attrs} : tile<{N}x{t}>
    %8 = splat %o : tile<{N}xptr<{t}>>
    %9 = addptr %8, %0 : tile<{N}xptr<{t}>>
    store %9, %7
    return
  }}
}}
"""


def unary_kernel(op: str, t: str) -> str:
    return f"""module {{
  kernel @k(%x: ptr<{t}>, %o: ptr<{t}>) {{
    %0 = make_range {{end = {N}, start = 0}} : tile<{N}xi32>
    %1 = splat %x : tile<{N}xptr<{t}>>
    %2 = addptr %1, %0 : tile<{N}xptr<{t}>>
    %3 = load %2 : tile<{N}x{t}>
    %4 = {op} %3 : tile<{N}x{t}>
    %5 = splat %o : tile<{N}xptr<{t}>>
    %6 = addptr %5, %0 : tile<{N}xptr<{t}>>
    store %6, %4
    return
  }}
}}
"""


def data(t: str):
    dt = np.dtype(NP[t])
    if dt.kind == "f":
        return arrays(dt, N, elements=st.floats(width=dt.itemsize * 8, allow_nan=True, allow_infinity=True))
    return arrays(dt, N)


SETTINGS = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", INT_BINARY)
def test_int_binary(op: str, t: str) -> None:
    @SETTINGS
    @given(data(t), data(t))
    def check(x, y):
        if op in ("shl", "shr"):
            y = (y.astype(np.int64) % (np.dtype(NP[t]).itemsize * 8 + 4)).astype(NP[t])
        ref, got = run_both(binary_kernel(op, t), [x, y, np.zeros_like(x)], (1,))
        assert_same(ref, got)

    check()


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary(op: str, t: str) -> None:
    tol = {"f16": 2e-3, "f32": 2e-6, "f64": 1e-13}[t] if op in ("pow", "atan2") else 0.0

    @SETTINGS
    @given(data(t), data(t))
    def check(x, y):
        ref, got = run_both(binary_kernel(op, t), [x, y, np.zeros_like(x)], (1,))
        assert_same(ref, got, rtol=tol, atol=tol * 1e-3 if tol else 0.0)

    check()


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_propagate_nan(op: str) -> None:
    x = np.array([np.nan, 1, 2, np.nan] * 4, np.float32)
    y = np.array([1, np.nan, 3, np.nan] * 4, np.float32)
    ref, got = run_both(binary_kernel(op, "f32", " {propagate_nan = true}"), [x, y, np.zeros_like(x)], (1,))
    assert_same(ref, got)
    assert np.isnan(got[2][:2]).all()


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary(op: str, t: str) -> None:
    exact = op in ("neg", "abs", "floor", "ceil", "sqrt")
    tol = 0.0 if exact else {"f16": 1e-3, "f32": 4e-6, "f64": 1e-12}[t]

    @SETTINGS
    @given(data(t))
    def check(x):
        ref, got = run_both(unary_kernel(op, t), [x, np.zeros_like(x)], (1,))
        assert_same(ref, got, rtol=tol, atol=tol)

    check()


@pytest.mark.parametrize("t", ["i8", "i32", "i64"])
@pytest.mark.parametrize("op", ["neg", "abs"])
def test_int_unary(op: str, t: str) -> None:
    info = np.iinfo(NP[t])
    x = np.array([0, 1, -1, info.min, info.max, 7, -8, 100] * 2, NP[t])
    ref, got = run_both(unary_kernel(op, t), [x, np.zeros_like(x)], (1,))
    assert_same(ref, got)
