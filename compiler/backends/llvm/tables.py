"""Scalar-lowering tables: (op, element kind) -> llvmlite builder calls, shared by the cpu and cuda targets.

Every entry works on scalars and on vectors alike. Kinds are float, sint, uint and bool (bool lowers as
an unsigned 1-bit integer). Integer division by zero yields 0 and INT_MIN / -1 wraps, as the reference
interpreter does, so no lowering can trap. Shifts by >= the bit width yield 0 (or the sign for shr).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from .loops import map_lanes
from .types import F32, F64, I1, declare, intrinsic, splat_const

Binary = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]
Unary = Callable[[ir.IRBuilder, ir.Value], ir.Value]


def _c(x: ir.Value, v) -> ir.Constant:
    return splat_const(x.type, v)


def _int_div(signed: bool, rem: bool) -> Binary:
    def lower(b: ir.IRBuilder, x, y):
        zero = b.icmp_unsigned("==", y, _c(y, 0))
        minus1 = b.icmp_signed("==", y, _c(y, -1)) if signed else None
        bad = b.or_(zero, minus1) if signed else zero
        safe = b.select(bad, _c(y, 1), y)
        op = (b.srem if rem else b.sdiv) if signed else (b.urem if rem else b.udiv)
        r = op(x, safe)
        if signed and not rem:
            r = b.select(minus1, b.sub(_c(x, 0), x), r)  # x / -1 == -x, wrapping at INT_MIN
        if signed and rem:
            r = b.select(minus1, _c(x, 0), r)
        return b.select(zero, _c(x, 0), r)

    return lower


def _shift(kind: str) -> Binary:
    def lower(b: ir.IRBuilder, x, y):
        bits = x.type.element.width if isinstance(x.type, ir.VectorType) else x.type.width
        big = b.icmp_unsigned(">=", y, _c(y, bits))
        safe = b.select(big, _c(y, 0), y)
        if kind == "shl":
            return b.select(big, _c(x, 0), b.shl(x, safe))
        if kind == "lshr":
            return b.select(big, _c(x, 0), b.lshr(x, safe))
        return b.ashr(x, b.select(big, _c(y, bits - 1), y))

    return lower


def _intr2(name: str) -> Binary:
    return lambda b, x, y: intrinsic(b, name, [x, y])


def _intr1(name: str) -> Unary:
    return lambda b, x: intrinsic(b, name, [x])


BINARY: dict[tuple[str, str], Binary] = {
    ("add", "float"): lambda b, x, y: b.fadd(x, y),
    ("sub", "float"): lambda b, x, y: b.fsub(x, y),
    ("mul", "float"): lambda b, x, y: b.fmul(x, y),
    ("div", "float"): lambda b, x, y: b.fdiv(x, y),
    ("rem", "float"): lambda b, x, y: b.frem(x, y),
    ("pow", "float"): _intr2("pow"),
    ("atan2", "float"): _intr2("atan2"),
    ("maximum", "float"): _intr2("maxnum"),
    ("minimum", "float"): _intr2("minnum"),
    ("maximum_nan", "float"): _intr2("maximum"),
    ("minimum_nan", "float"): _intr2("minimum"),
    ("div", "sint"): _int_div(True, False),
    ("rem", "sint"): _int_div(True, True),
    ("div", "uint"): _int_div(False, False),
    ("rem", "uint"): _int_div(False, True),
    ("maximum", "sint"): _intr2("smax"),
    ("minimum", "sint"): _intr2("smin"),
    ("maximum", "uint"): _intr2("umax"),
    ("minimum", "uint"): _intr2("umin"),
    ("shr", "sint"): _shift("ashr"),
    ("shr", "uint"): _shift("lshr"),
}
for _k in ("sint", "uint"):
    BINARY[("add", _k)] = lambda b, x, y: b.add(x, y)
    BINARY[("sub", _k)] = lambda b, x, y: b.sub(x, y)
    BINARY[("mul", _k)] = lambda b, x, y: b.mul(x, y)
    BINARY[("and", _k)] = lambda b, x, y: b.and_(x, y)
    BINARY[("or", _k)] = lambda b, x, y: b.or_(x, y)
    BINARY[("xor", _k)] = lambda b, x, y: b.xor(x, y)
    BINARY[("shl", _k)] = _shift("shl")
for (_n, _k), _f in list(BINARY.items()):
    if _k == "uint":
        BINARY.setdefault((_n, "bool"), _f)
for _n in ("maximum", "minimum"):
    BINARY[(_n + "_nan", "sint")] = BINARY[(_n, "sint")]
    BINARY[(_n + "_nan", "uint")] = BINARY[(_n, "uint")]
    BINARY[(_n + "_nan", "bool")] = BINARY[(_n, "bool")]


def _rsqrt(b: ir.IRBuilder, x):
    return b.fdiv(_c(x, 1.0), intrinsic(b, "sqrt", [x]))


def _libm(name32: str, name64: str) -> Unary:
    """A libm function applied per lane; half-precision goes through float."""

    def lower(b: ir.IRBuilder, x):
        ety = x.type.element if isinstance(x.type, ir.VectorType) else x.type

        def one(v):
            if ety == F64:
                return b.call(declare(b.module, name64, F64, [F64]), [v])
            w = v if ety == F32 else b.fpext(v, F32)
            r = b.call(declare(b.module, name32, F32, [F32]), [w])
            return r if ety == F32 else b.fptrunc(r, ety)

        return map_lanes(b, x, ety, one)

    return lower


UNARY: dict[tuple[str, str], Unary] = {
    ("exp", "float"): _intr1("exp"),
    ("exp2", "float"): _intr1("exp2"),
    ("log", "float"): _intr1("log"),
    ("log2", "float"): _intr1("log2"),
    ("sqrt", "float"): _intr1("sqrt"),
    ("rsqrt", "float"): _rsqrt,
    ("sin", "float"): _intr1("sin"),
    ("cos", "float"): _intr1("cos"),
    ("tanh", "float"): _libm("tanhf", "tanh"),
    ("floor", "float"): _intr1("floor"),
    ("ceil", "float"): _intr1("ceil"),
    ("erf", "float"): _libm("erff", "erf"),
    ("neg", "float"): lambda b, x: b.fneg(x),
    ("abs", "float"): _intr1("fabs"),
    ("neg", "sint"): lambda b, x: b.sub(_c(x, 0), x),
    ("neg", "uint"): lambda b, x: b.sub(_c(x, 0), x),
    ("abs", "sint"): lambda b, x: intrinsic(b, "abs", [x, ir.Constant(I1, 0)]),
    ("abs", "uint"): lambda b, x: x,
    ("abs", "bool"): lambda b, x: x,
    ("neg", "bool"): lambda b, x: x,
}

_PRED = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
CMP: dict[tuple[str, str], Binary] = {}
for _p, _s in _PRED.items():
    CMP[(_p, "sint")] = lambda b, x, y, s=_s: b.icmp_signed(s, x, y)
    CMP[(_p, "uint")] = lambda b, x, y, s=_s: b.icmp_unsigned(s, x, y)
    CMP[(_p, "bool")] = CMP[(_p, "uint")]
    CMP[(_p, "ptr")] = CMP[(_p, "uint")]
    if _p == "ne":
        CMP[(_p, "float")] = lambda b, x, y: b.fcmp_unordered("!=", x, y)
    else:
        CMP[(_p, "float")] = lambda b, x, y, s=_s: b.fcmp_ordered(s, x, y)


def fma(b: ir.IRBuilder, x, y, z):
    return intrinsic(b, "fma", [x, y, z])


def float_width(t: ir.Type) -> int:
    e = t.element if isinstance(t, ir.VectorType) else t
    return {"half": 16, "float": 32, "double": 64}[str(e)]


def int_width(t: ir.Type) -> int:
    e = t.element if isinstance(t, ir.VectorType) else t
    return e.width


def _int_to_int(b, x, src: str, dst_t: ir.Type):
    sw, dw = int_width(x.type), int_width(dst_t)
    if sw == dw:
        return x
    if sw > dw:
        return b.trunc(x, dst_t)
    return b.sext(x, dst_t) if src == "sint" else b.zext(x, dst_t)


def _float_to_float(b, x, dst_t: ir.Type):
    sw, dw = float_width(x.type), float_width(dst_t)
    if sw == dw:
        return x
    return b.fptrunc(x, dst_t) if sw > dw else b.fpext(x, dst_t)


def _float_to_int(b, x, signed: bool, dst_t: ir.Type):
    """Saturating conversion (NaN -> 0), so out-of-range values are defined, as in the interpreter."""
    name = "fptosi.sat" if signed else "fptoui.sat"
    return intrinsic(b, name, [x], ret=dst_t, overload=[dst_t, x.type])


def _to_bool(b, x, src: str):
    if src == "float":
        return b.fcmp_unordered("!=", x, _c(x, 0.0))
    return b.icmp_unsigned("!=", x, _c(x, 0))


def cast(b: ir.IRBuilder, x: ir.Value, src: str, dst: str, dst_t: ir.Type) -> ir.Value:
    """Convert `x` of kind `src` to kind `dst` held in LLVM type `dst_t` (scalar or vector)."""
    if dst == "bool":
        return x if src == "bool" else _to_bool(b, x, src)
    if src == "ptr" or dst == "ptr":
        return _int_to_int(b, x, "uint", dst_t)
    if src == "float" and dst == "float":
        return _float_to_float(b, x, dst_t)
    if src == "float":
        return _float_to_int(b, x, dst == "sint", dst_t)
    if dst == "float":
        return b.sitofp(x, dst_t) if src == "sint" else b.uitofp(x, dst_t)
    return _int_to_int(b, x, src, dst_t)

