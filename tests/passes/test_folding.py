"""Constant folding against NumPy and the interpreter, for every (op, dtype) pair that folds.

Each example is a kernel `out[0] = op(constant a, constant b)`: canonicalize must fold it to one
constant (unless the case is undefined), equal to NumPy's answer and to the interpreter's on the
unfolded kernel, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module
from tilec.compiler.ir.printer import format_attr
from tilec.compiler.ir.types import ScalarType
from tilec.compiler.passes import PassManager

INTS = ["i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "f32", "f64"]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "maximum", "minimum"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "rem", "maximum", "minimum"]
FLOAT_UNARY = ["neg", "abs", "sqrt", "floor", "ceil"]
PREDS = ["eq", "ne", "lt", "le", "gt", "ge"]
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)


def values(t: str) -> st.SearchStrategy:
    s = ScalarType(t)
    if s.is_float:
        return st.floats(width=s.bits, allow_nan=True, allow_infinity=True)
    if s.is_bool:
        return st.integers(0, 1)
    info = np.iinfo(s.np_dtype)
    small = st.integers(-4, 4).filter(lambda v: info.min <= v <= info.max)
    return st.one_of(small, st.integers(int(info.min), int(info.max)))


def kernel(op: str, t: str, rt: str, args: list, attrs: str = "", tile: bool = False) -> str:
    """`out[0] = op(args)` on scalars, or (tile=True) on tiles of one element made by splat."""
    lines = [f"%a{i} = constant {{value = {format_attr(float(v) if ScalarType(t).is_float else int(v))}}} : {t}"
             for i, v in enumerate(args)]
    if tile:
        lines += [f"%t{i} = splat %a{i} : tile<1x{t}>" for i in range(len(args))]
    operands = ", ".join(f"%{'t' if tile else 'a'}{i}" for i in range(len(args)))
    if not tile:
        lines += [f"%r = {op} {operands}{attrs} : {rt}", "store %out, %r"]
    else:
        lines += [f"%r = {op} {operands}{attrs} : tile<1x{rt}>", "%i = make_range {end = 1, start = 0} : tile<1xi32>",
                  f"%p = splat %out : tile<1xptr<{rt}>>", f"%q = addptr %p, %i : tile<1xptr<{rt}>>", "store %q, %r"]
    body = "".join(f"    {line}\n" for line in lines)
    return f"module {{\n  kernel @k(%out: ptr<{rt}>) {{\n{body}    return\n  }}\n}}\n"


def run(text: str, rt: str) -> np.ndarray:
    out = np.zeros(1, dtype=ScalarType(rt).np_dtype)
    run_kernel(parse_module(text), "k", [out], (1,))
    return out


def check(op: str, t: str, rt: str, args: list, expected, attrs: str = "", tile: bool = False) -> None:
    text = kernel(op, t, rt, args, attrs, tile)
    folded = parse_module(text)
    PassManager.from_names(["canonicalize"]).run(folded)
    after = print_module(folded)
    before = run(text, rt)
    if expected is None:  # undefined: left to the target
        assert f" {op} " in after
        return
    assert f" {op} " not in after, after
    got = run(after, rt)
    # bit for bit against the interpreter, except NaN payloads/signs (targets differ there anyway)
    assert got.tobytes() == before.tobytes() or _both_nan(got, before), (text, before, got)
    want = np.array([expected]).astype(ScalarType(rt).np_dtype)
    # NumPy: equal values (IEEE lets min/max of +0 and -0 return either)
    assert (got == want).all() or _both_nan(got, want), (text, got, want)


def _both_nan(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype.kind == "f" and bool(np.isnan(x).all() and np.isnan(y).all())


def numpy_binary(op: str, t: str, a, b):
    dt = ScalarType(t).np_dtype
    x, y = np.array([a], dtype=dt), np.array([b], dtype=dt)
    s = ScalarType(t)
    with np.errstate(all="ignore"):
        if s.is_float:
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
                  "maximum": np.fmax, "minimum": np.fmin}[op]
            return fn(x, y)[0]
        if op in ("div", "rem"):
            if b == 0 or (s.is_signed and b == -1 and a == np.iinfo(dt).min):
                return None
            r = np.fmod(x, y)  # C remainder: the sign of the dividend
            return r[0] if op == "rem" else ((x - r) // y)[0]
        if op in ("shl", "shr"):
            if not 0 <= int(b) < s.bits:
                return None
            return (np.left_shift if op == "shl" else np.right_shift)(x, y)[0]
        if s.is_bool:
            x, y = x.astype(np.uint8), y.astype(np.uint8)
            r = {"add": x + y, "sub": x - y, "mul": x * y, "and": x & y, "or": x | y, "xor": x ^ y,
                 "maximum": np.maximum(x, y), "minimum": np.minimum(x, y)}[op]
            return r[0] & 1
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and, "or": np.bitwise_or,
              "xor": np.bitwise_xor, "maximum": np.maximum, "minimum": np.minimum}[op]
        return fn(x, y)[0]


BINARY_CASES = [(op, t) for t in INTS for op in INT_BINARY if not (t == "i1" and op in ("div", "rem", "shl", "shr"))]
BINARY_CASES += [(op, t) for t in FLOATS for op in FLOAT_BINARY]


@pytest.mark.parametrize(("op", "t"), BINARY_CASES)
@SETTINGS
@given(data=st.data())
def test_fold_binary(op: str, t: str, data) -> None:
    a, b = data.draw(values(t)), data.draw(values(t))
    check(op, t, t, [a, b], numpy_binary(op, t, a, b), tile=data.draw(st.booleans()))


@pytest.mark.parametrize(("pred", "t"), [(p, t) for p in PREDS for t in ["i8", "i32", "u32", "u64", "f16", "f32"]])
@SETTINGS
@given(data=st.data())
def test_fold_cmp(pred: str, t: str, data) -> None:
    a, b = data.draw(values(t)), data.draw(values(t))
    dt = ScalarType(t).np_dtype
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
          "ge": np.greater_equal}[pred]
    want = fn(np.array([a], dtype=dt), np.array([b], dtype=dt))[0]
    check("cmp", t, "i1", [a, b], want, f' {{pred = "{pred}"}}')


@pytest.mark.parametrize(("op", "t"), [(op, t) for op in FLOAT_UNARY for t in FLOATS]
                         + [(op, t) for op in ("neg", "abs") for t in INTS if t != "i1"])
@SETTINGS
@given(data=st.data())
def test_fold_unary(op: str, t: str, data) -> None:
    a = data.draw(values(t))
    x = np.array([a], dtype=ScalarType(t).np_dtype)
    with np.errstate(all="ignore"):
        want = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil}[op](x)[0]
    check(op, t, t, [a], want)


CAST_TYPES = ["i1", "i8", "i32", "u16", "u64", "i64", "f16", "f32", "f64"]


@pytest.mark.parametrize(("src", "dst"), [(s, d) for s in CAST_TYPES for d in CAST_TYPES if s != d])
@SETTINGS
@given(data=st.data())
def test_fold_cast(src: str, dst: str, data) -> None:
    a = data.draw(values(src))
    s, d = ScalarType(src), ScalarType(dst)
    x = np.array([a], dtype=s.np_dtype)
    if d.is_bool:
        want = x[0] != 0
    elif s.is_float and not d.is_float:
        info = np.iinfo(d.np_dtype)
        v = float(x[0])
        want = 0 if np.isnan(v) else int(max(info.min, min(info.max, np.trunc(v)))) if np.isfinite(v) else (
            info.max if v > 0 else info.min)
    elif not s.is_float and not d.is_float:
        want = x.astype(np.int64 if s.is_signed else np.uint64).astype(d.np_dtype)[0]
    else:
        with np.errstate(all="ignore"):
            want = x.astype(d.np_dtype)[0]
    check("cast", src, dst, [a], want)


@pytest.mark.parametrize(("src", "dst"), [("f32", "i32"), ("i32", "f32"), ("u16", "f16"), ("f64", "u64"), ("i8", "u8")])
@SETTINGS
@given(data=st.data())
def test_fold_bitcast(src: str, dst: str, data) -> None:
    a = data.draw(values(src))
    if isinstance(a, float) and a != a:
        a = float("nan")  # a constant holds one NaN (printed `nan`): its payload is not representable
    want = np.array([a], dtype=ScalarType(src).np_dtype).view(ScalarType(dst).np_dtype)[0]
    check("bitcast", src, dst, [a], want, tile=True)
