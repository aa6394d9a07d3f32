"""fp8 conversions in LLVM IR by bit manipulation, shared by the targets (fp8 values live in f32
registers and are 8-bit integers in memory; compiler/ir/fp8.py states the semantics).

Up: the 7 magnitude bits shifted into an f32's exponent/mantissa fields and scaled by 2^(127-bias), which
also makes the subnormals exact. Down: round to nearest even on the f32 bits for normal results, and by
the "magic number" addition for subnormal ones; saturating, NaN to 0x7f.
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.fp8 import FORMATS, NAN_CODE
from .types import F32, F64, I8, I32, intrinsic, like, splat_const


def _c(x: ir.Value, v) -> ir.Constant:
    return splat_const(x.type, v)


def bits_to_f32(b: ir.IRBuilder, bits: ir.Value, name: str) -> ir.Value:
    """i8 fp8 bit patterns (scalar or vector) -> exact f32 values."""
    fmt = FORMATS[name]
    it, ft = like(bits.type, I32), like(bits.type, F32)
    w = b.zext(bits, it)
    mag = b.and_(w, _c(w, 0x7F))
    f = b.bitcast(b.shl(mag, _c(mag, 23 - fmt.man_bits)), ft)
    f = b.fmul(f, splat_const(ft, 2.0 ** (127 - fmt.bias)))
    if fmt.has_inf:
        inf_code = 0x7F & ~((1 << fmt.man_bits) - 1)
        special = b.icmp_unsigned(">=", mag, _c(mag, inf_code))
        inf_or_nan = b.select(b.icmp_unsigned("==", mag, _c(mag, inf_code)), splat_const(ft, float("inf")),
                              splat_const(ft, float("nan")))  # fmt: skip
        f = b.select(special, inf_or_nan, f)
    else:
        f = b.select(b.icmp_unsigned("==", mag, _c(mag, NAN_CODE)), splat_const(ft, float("nan")), f)
    sign = b.shl(b.and_(w, _c(w, 0x80)), _c(w, 24))
    return b.bitcast(b.or_(b.bitcast(f, it), sign), ft)


def f32_to_bits(b: ir.IRBuilder, x: ir.Value, name: str) -> ir.Value:
    """f32 values -> i8 fp8 bit patterns: nearest even, saturating to the largest finite value."""
    fmt = FORMATS[name]
    it, ft = like(x.type, I32), x.type
    xb = b.bitcast(x, it)
    sign = b.and_(b.lshr(xb, _c(xb, 24)), _c(xb, 0x80))
    nan = b.fcmp_unordered("uno", x, x)
    a = intrinsic(b, "minnum", [intrinsic(b, "fabs", [x]), splat_const(ft, fmt.max_finite)])
    ab = b.bitcast(a, it)
    shift = 23 - fmt.man_bits
    odd = b.and_(b.lshr(ab, _c(ab, shift)), _c(ab, 1))
    r = b.add(b.add(ab, _c(ab, (1 << (shift - 1)) - 1)), odd)
    normal = b.sub(b.lshr(r, _c(r, shift)), _c(r, (127 - fmt.bias) << fmt.man_bits))
    magic = 2.0 ** (23 + 1 - fmt.bias - fmt.man_bits)  # its ulp is the subnormal step
    sub = b.sub(b.bitcast(b.fadd(a, splat_const(ft, magic)), it), b.bitcast(splat_const(ft, magic), it))
    tiny = b.fcmp_ordered("<", a, splat_const(ft, fmt.min_normal))
    code = b.or_(b.select(tiny, sub, normal), sign)
    code = b.select(nan, _c(code, NAN_CODE), code)
    return b.trunc(code, like(x.type, I8))


def round_f32(b: ir.IRBuilder, x: ir.Value, name: str) -> ir.Value:
    """f32 values rounded to fp8 `name`, kept in f32."""
    return bits_to_f32(b, f32_to_bits(b, x, name), name)


def f64_to_f32_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 -> f32 rounding to odd, so that the later rounding to fp8 is the only one that counts."""
    f = b.fptrunc(x, like(x.type, F32))
    back = b.fpext(f, x.type)
    it = like(x.type, I32)
    fb = b.bitcast(f, it)
    inexact = b.fcmp_ordered("!=", back, x)  # false for NaN
    finite = b.fcmp_ordered("<", intrinsic(b, "fabs", [f]), splat_const(f.type, float("inf")))
    even = b.icmp_unsigned("==", b.and_(fb, _c(fb, 1)), _c(fb, 0))
    away = b.fcmp_ordered(">", intrinsic(b, "fabs", [x]), intrinsic(b, "fabs", [back]))
    nudged = b.add(fb, b.select(away, _c(fb, 1), _c(fb, -1)))
    fix = b.and_(b.and_(inexact, finite), even)
    return b.bitcast(b.select(fix, nudged, fb), f.type)


def to_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """A float register of any width as f32 for a rounding to fp8 (exact, or round-to-odd from f64)."""
    ety = x.type.element if isinstance(x.type, ir.VectorType) else x.type
    if ety == F32:
        return x
    if ety == F64:
        return f64_to_f32_odd(b, x)
    return b.fpext(x, like(x.type, F32))


__all__ = ["bits_to_f32", "f32_to_bits", "round_f32", "to_f32"]
