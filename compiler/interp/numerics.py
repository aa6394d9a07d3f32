"""Exact numerics of the tile IR's scalar types on NumPy arrays: bf16 rounding, C integer division,
shifts, casts and bitcasts, fused multiply-add, and the tree order of reductions.

Every function takes and returns arrays in the interpreter's representation (see `storage_dtype`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..ir import fp8
from ..ir.types import PointerType, ScalarType

Array = np.ndarray
F32, F64, I64, U16, U32, U64 = (
    np.dtype(n) for n in ("float32", "float64", "int64", "uint16", "uint32", "uint64")
)


def value_dtype(elem: ScalarType | PointerType) -> np.dtype:
    """The NumPy dtype holding values of `elem`: bf16 as float32 (rounded), pointers as int64 addresses."""
    if isinstance(elem, PointerType):
        return I64
    return elem.np_dtype


def storage_dtype(elem: ScalarType) -> np.dtype:
    """The NumPy dtype of `elem` in memory: bf16 as its uint16 bits, i1 as a byte."""
    if elem.name == "bf16":
        return U16
    if elem.name == "i1" or elem.is_fp8:
        return np.dtype("uint8")
    return elem.np_dtype


# ---- bf16 -----------------------------------------------------------------------------------------


def round_bf16(x: Array) -> Array:
    """float32 values rounded to the nearest bf16 (ties to even), still as float32; NaN stays NaN."""
    x = np.asarray(x, F32)
    bits = x.view(U32).astype(U64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(U32).view(F32)
    return np.where(np.isnan(x), x, out).astype(F32)


def bf16_to_bits(x: Array) -> Array:
    return (np.asarray(round_bf16(x), F32).view(U32) >> 16).astype(U16)


def bits_to_bf16(b: Array) -> Array:
    return (np.asarray(b).astype(U32) << 16).view(F32)


def f64_to_f32_odd(x: Array) -> Array:
    """Round float64 to float32 with round-to-odd: a later rounding to <= 22 bits is then correct."""
    x = np.asarray(x, F64)
    f = x.astype(F32)
    inexact = (f.astype(F64) != x) & np.isfinite(x) & np.isfinite(f)
    even = (f.view(U32) & 1) == 0
    fix = inexact & even
    if not fix.any():
        return f
    toward = np.where(x > f.astype(F64), np.float32(np.inf), np.float32(-np.inf))
    return np.where(fix, np.nextafter(f, toward), f).astype(F32)


def to_float(x: Array, name: str) -> Array:
    """float64 values rounded once to the float type `name` (f16, bf16, f32, f64, fp8)."""
    x = np.asarray(x, F64)
    if name == "f64":
        return x
    if name in fp8.FORMATS:
        return fp8.round_to(x, name)
    if name == "bf16":
        return round_bf16(f64_to_f32_odd(x))
    return x.astype(np.float16 if name == "f16" else F32)


# ---- integers -----------------------------------------------------------------------------------


def int_bool_op(fn: Callable[..., Array], *xs: Array) -> Array:
    """Integer arithmetic on i1 is arithmetic modulo 2: do it on bytes and keep the low bit."""
    if xs[0].dtype != np.bool_:
        return fn(*xs)
    return (np.asarray(fn(*(x.astype(np.uint8) for x in xs))) & np.uint8(1)).astype(np.bool_)


def c_div(a: Array, b: Array) -> Array:
    """Integer division truncating toward zero; x / 0 is 0; MIN / -1 wraps to MIN."""
    zero = b == 0
    if not np.issubdtype(a.dtype, np.signedinteger):
        q = a // np.where(zero, np.ones_like(b), b)
        return np.where(zero, np.zeros_like(a), q).astype(a.dtype)
    minus_one = b == -1
    safe = np.where(zero | minus_one, np.ones_like(b), b)
    q = (a - np.fmod(a, safe)) // safe  # an exact division, so floor and truncation agree
    q = np.where(minus_one, np.negative(a), q)
    return np.where(zero, np.zeros_like(a), q).astype(a.dtype)


def c_rem(a: Array, b: Array) -> Array:
    """Integer remainder with the sign of the dividend; x % 0 is 0."""
    zero = (b == 0) | ((b == -1) if np.issubdtype(a.dtype, np.signedinteger) else False)
    safe = np.where(zero, np.ones_like(b), b)
    return np.where(zero, np.zeros_like(a), np.fmod(a, safe)).astype(a.dtype)


def _shift_amount(a: Array, b: Array, bits: int) -> tuple[Array, Array]:
    """Shift amounts as the operand dtype, clamped to bits-1, and where they were >= bits (or negative)."""
    amount = b.astype(U64)  # negative amounts become huge, so they count as >= bits
    big = amount >= bits
    return np.minimum(amount, bits - 1).astype(a.dtype), big


def shl(a: Array, b: Array, bits: int) -> Array:
    """Left shift; amounts >= bits give 0 (what PTX's shl does)."""
    s, big = _shift_amount(a, b, bits)
    return np.where(big, np.zeros_like(a), np.left_shift(a, s)).astype(a.dtype)


def shr(a: Array, b: Array, bits: int) -> Array:
    """Arithmetic shift on signed, logical on unsigned; amounts >= bits fill with the sign (or 0)."""
    s, big = _shift_amount(a, b, bits)
    r = np.right_shift(a, s)
    if np.issubdtype(a.dtype, np.signedinteger):
        return r.astype(a.dtype)
    return np.where(big, np.zeros_like(a), r).astype(a.dtype)


def wrap_int(value: int, dtype: np.dtype) -> Array:
    """A Python integer wrapped modulo 2^bits into `dtype` (a 0-d array)."""
    if dtype == np.bool_:
        return np.asarray(value != 0)
    bits = dtype.itemsize * 8
    v = value & ((1 << bits) - 1)
    if np.issubdtype(dtype, np.signedinteger) and v >= 1 << (bits - 1):
        v -= 1 << bits
    return np.asarray(v, dtype)


# ---- casts --------------------------------------------------------------------------------------


def float_to_int(x: Array, dtype: np.dtype) -> Array:
    """Truncate toward zero and saturate to the range of `dtype`; NaN gives 0."""
    x = np.trunc(np.asarray(x, F64))
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max) + 1.0  # hi is a power of two, exact
    nan, big, small = np.isnan(x), x >= hi, x < lo
    out = np.where(nan | big | small, 0.0, x).astype(dtype)
    out = np.where(big, np.array(info.max, dtype), out)
    return np.where(small, np.array(info.min, dtype), out).astype(dtype)


def int_to_float(x: Array, name: str) -> Array:
    """Integers rounded once (to nearest even) to the float type `name`."""
    if name == "f32":
        return x.astype(F32)
    if name == "f64":
        return x.astype(F64)
    if name == "f16":
        return x.astype(F64).astype(np.float16)
    if name in fp8.FORMATS:
        return fp8.round_to(x.astype(F64), name)  # |x| < 2^53 is exact in f64; larger saturates anyway  # |x| < 2^53 is exact in f64; larger is inf in f16 anyway
    flat = x.reshape(-1)
    out = to_float(flat.astype(F64), "bf16")
    if x.dtype.itemsize == 8:  # above 2^53 the float64 step could round: redo those exactly
        for i in np.flatnonzero(np.abs(flat.astype(F64)) >= 2.0**53):
            out[i] = _big_int_to_bf16(int(flat[i]))
    return out.reshape(x.shape)


def _big_int_to_bf16(v: int) -> np.float32:
    m = abs(v)
    shift = m.bit_length() - 8
    q, r = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return np.float32(round_bf16(np.float32(float(q << shift) * (1 if v >= 0 else -1))))


def cast(x: Array, src: ScalarType | PointerType, dst: ScalarType | PointerType) -> Array:
    """Convert values from element type `src` to `dst` (see the semantics in compiler/ir/ops.py)."""
    if isinstance(dst, PointerType) or isinstance(src, PointerType):
        return x.astype(value_dtype(dst))
    if dst.is_bool:
        return x != 0
    if src.is_float and dst.is_float:
        return x.astype(F64) if dst.name == "f64" else _float_to_float(x, src, dst)
    if src.is_float:
        return float_to_int(x, dst.np_dtype)
    if dst.is_float:
        return int_to_float(x, dst.name)
    return x.astype(dst.np_dtype)


def _float_to_float(x: Array, src: ScalarType, dst: ScalarType) -> Array:
    if dst.is_fp8:
        return fp8.round_to(x, dst.name)  # from f64 directly: one rounding
    if dst.name == "bf16":
        return to_float(x.astype(F64), "bf16") if src.name == "f64" else round_bf16(x.astype(F32))
    return x.astype(dst.np_dtype)


def to_bits(x: Array, elem: ScalarType | PointerType) -> Array:
    """The bit pattern of each value as an unsigned integer of the element's width."""
    if isinstance(elem, PointerType):
        return _view(x, U64)
    if elem.name == "bf16":
        return bf16_to_bits(x)
    if elem.is_fp8:
        return fp8.to_bits(x, elem.name)
    if elem.is_bool:
        return x.astype(np.uint8)
    return _view(x, np.dtype(f"uint{elem.bits}"))


def from_bits(bits: Array, elem: ScalarType | PointerType) -> Array:
    if isinstance(elem, PointerType):
        return _view(bits, I64)
    if elem.name == "bf16":
        return bits_to_bf16(bits)
    if elem.is_fp8:
        return fp8.from_bits(bits, elem.name)
    if elem.is_bool:
        return bits != 0
    return _view(bits, elem.np_dtype)


def _view(x: Array, dtype: np.dtype) -> Array:
    """Reinterpret the bits of `x` (any shape, 0-d included) as `dtype` of the same width."""
    return np.array(x, order="C").view(dtype)


# ---- fused multiply-add ---------------------------------------------------------------------------


def fma(a: Array, b: Array, c: Array, name: str) -> Array:
    """a*b+c with one rounding to the float type `name`."""
    if name == "f64":
        return _fma_f64(a, b, c)
    p = a.astype(F64) * b.astype(F64)  # exact: at most 48 significant bits
    s = p + c.astype(F64)
    bb = s - p
    err = (p - (s - bb)) + (c.astype(F64) - bb)  # the exact sum is s + err (TwoSum)
    odd_fix = (err != 0) & np.isfinite(s) & ((s.view(U64) & 1) == 0)
    s = np.where(odd_fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)  # round to odd
    return to_float(s, name)


def _fma_f64(a: Array, b: Array, c: Array) -> Array:
    a, b, c = np.broadcast_arrays(a, b, c)
    out = np.empty(a.shape, F64)
    for idx in np.ndindex(a.shape):
        x, y, z = float(a[idx]), float(b[idx]), float(c[idx])
        if all(np.isfinite((x, y, z))):
            exact = Fraction(x) * Fraction(y) + Fraction(z)
            try:
                out[idx] = float(exact)
            except OverflowError:
                out[idx] = np.inf if exact > 0 else -np.inf
        else:
            out[idx] = x * y + z
    return out


# ---- reductions -----------------------------------------------------------------------------------


def tree_reduce(x: Array, axis: int, combine: Callable[[Array, Array], Array]) -> Array:
    """Combine along `axis` as a balanced tree: first half with second half, until one is left.

    This fixes the order (and so the rounding) of float reductions; an odd leftover element is carried.
    """
    x = np.moveaxis(x, axis, 0)
    while x.shape[0] > 1:
        h = x.shape[0] // 2
        y = combine(x[:h], x[h : 2 * h])
        x = np.concatenate([y, x[2 * h :]]) if x.shape[0] % 2 else y
    return x[0]
