"""Constant folding of elementwise ops with the IR's exact semantics (compiler/ir/ops.py docstring).

Integers are Python ints in their type's range (wrapping, C division); floats are computed in the op's
dtype with NumPy (imported on the first float fold: integer folding needs none). Only exactly-rounded float ops fold (+ - * / fmod sqrt floor ceil abs neg max min):
transcendentals differ by an ulp between libms, so they are left to the target. bf16 never folds.
Undefined cases (integer division by zero, INT_MIN / -1, shifts >= bits) are left unfolded.
"""

from __future__ import annotations

import math
from functools import cache

from ..ir.types import ScalarType
from .ir_utils import wrap_int

Number = int | float

FLOAT_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "rem": "fmod"}  # NumPy ufuncs
FLOAT_UNARY = {"neg": "negative", "abs": "abs", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil"}
CMP = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}


@cache
def _np():
    import numpy

    return numpy


def foldable_type(t: ScalarType) -> bool:
    return isinstance(t, ScalarType) and t.name != "bf16" and not t.is_fp8  # fp8: casts round at run time


def to_dtype(v: Number, t: ScalarType):
    """A constant attribute as a value of `t`: a wrapped int, or a NumPy float of t's width."""
    if t.is_float:
        with _np().errstate(all="ignore"):
            return t.np_dtype.type(v)
    return wrap_int(int(v), t)


def fold(name: str, attrs: dict, args: list[Number], arg_type: ScalarType, result_type: ScalarType) -> Number | None:
    """The folded scalar of elementwise op `name` on constant `args`, or None when it does not fold."""
    if not (foldable_type(arg_type) and foldable_type(result_type)):
        return None
    vals = [to_dtype(a, arg_type) for a in args]
    if not (arg_type.is_float or result_type.is_float):
        return _fold_scalar(name, attrs, vals, arg_type, result_type)
    with _np().errstate(all="ignore"):
        return _fold_scalar(name, attrs, vals, arg_type, result_type)


def _fold_scalar(name: str, attrs: dict, vals: list, arg_type: ScalarType, result_type: ScalarType) -> Number | None:
    if name == "cmp":
        return int(bool(CMP[attrs["pred"]](vals[0], vals[1])))
    if name == "cast":
        return fold_cast(vals[0], arg_type, result_type)
    if name == "bitcast":
        return fold_bitcast(vals[0], arg_type, result_type)
    if arg_type.is_float:
        return _fold_float(name, attrs, vals)
    return _fold_int(name, attrs, vals, arg_type)


def _fold_float(name: str, attrs: dict, vals: list) -> float | None:
    np = _np()
    if name in FLOAT_BINARY:
        return float(getattr(np, FLOAT_BINARY[name])(vals[0], vals[1]))
    if name in FLOAT_UNARY:
        return float(getattr(np, FLOAT_UNARY[name])(vals[0]))
    if name in ("maximum", "minimum"):
        nan_wins = bool(attrs.get("propagate_nan", False))
        fn = {("maximum", False): np.fmax, ("maximum", True): np.maximum,
              ("minimum", False): np.fmin, ("minimum", True): np.minimum}[(name, nan_wins)]
        return float(fn(vals[0], vals[1]))
    return None


def _fold_int(name: str, attrs: dict, vals: list[int], t: ScalarType) -> int | None:
    a = vals[0]
    if name in ("neg", "abs"):
        return wrap_int(-a if name == "neg" else abs(a), t)
    b = vals[1] if len(vals) > 1 else None
    if b is None:
        return None
    if name in ("div", "rem"):
        return _div_rem(name, a, b, t)
    if name in ("shl", "shr"):
        if not 0 <= b < t.bits:
            return None
        return wrap_int(a << b, t) if name == "shl" else a >> b
    simple = {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
        "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
        "maximum": lambda: max(a, b), "minimum": lambda: min(a, b),
    }
    if name not in simple:
        return None
    return wrap_int(simple[name](), t)


def _div_rem(name: str, a: int, b: int, t: ScalarType) -> int | None:
    if b == 0 or (t.is_signed and b == -1 and a == -(1 << (t.bits - 1))):
        return None
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return wrap_int(q if name == "div" else a - b * q, t)


def fold_cast(v, src: ScalarType, dst: ScalarType) -> Number:
    if dst.is_bool:
        return int(bool(v != 0))
    if src.is_float and not dst.is_float:
        return _float_to_int(float(v), dst)
    if not src.is_float and not dst.is_float:
        return wrap_int(v, dst)
    # int->float and float->float: one correctly rounded NumPy conversion from the source dtype
    return float(_np().array([v], dtype=src.np_dtype).astype(dst.np_dtype)[0])


def _float_to_int(x: float, dst: ScalarType) -> int:
    if math.isnan(x):
        return 0
    lo = -(1 << (dst.bits - 1)) if dst.is_signed else 0
    hi = (1 << (dst.bits - 1)) - 1 if dst.is_signed else (1 << dst.bits) - 1
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


def fold_bitcast(v, src: ScalarType, dst: ScalarType) -> Number | None:
    if src.bits != dst.bits or src.is_bool or dst.is_bool:
        return None
    if not (src.is_float or dst.is_float):
        return wrap_int(v, dst)  # same width: the bits are the value modulo 2^bits
    out = _np().array([v], dtype=src.np_dtype).view(dst.np_dtype)[0]
    return float(out) if dst.is_float else int(out)
