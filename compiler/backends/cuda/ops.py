"""Scalar lowering for the cuda target: (op, dtype) -> llvmlite builder calls on one element.

Tiles are lowered register by register through these tables (compiler/backends/cuda/lower.py).
bf16 values live in f32 registers (the interpreter's semantics: rounding happens on store and cast);
f32 exp and exp2 use the PTX approximate instructions as Triton does (exp2 flushes subnormals, as
Triton's libdevice exp2f under FTZ does: ex2.approx.ftz, one instruction where the non-ftz form adds a
scale and fix-up around it), the rest call libdevice with its flush-to-zero paths, as Triton links it.
f32 `/` is div.full.f32 and tl.math.div_rn div.rn.f32 (Triton's FDiv and PreciseDivF lowerings).
Float add, sub and mul (not bf16, which rounds after each op) carry LLVM's `contract` flag, so a multiply
feeding an add becomes one fma as under Triton's default enable_fp_fusion (without it the backend writes
mul.rn/add.rn, which ptxas may not fuse either).
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.types import PointerType, ScalarType
from ..llvm import fp8
from ..llvm.types import like, splat_const

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
GPTR = ir.PointerType(addrspace=1)
SPTR = ir.PointerType(addrspace=3)
LOG2E = 1.4426950408889634


def reg_type(t) -> ir.Type:
    """The LLVM type of one element held in a register."""
    if isinstance(t, PointerType):
        return GPTR
    n = t.name
    if n in ("f16",):
        return F16
    if n in ("f32", "bf16") or t.is_fp8:
        return F32
    if n == "f64":
        return F64
    return ir.IntType(t.bits)


def mem_type(t) -> ir.Type:
    """The LLVM type of one element in memory (i1 is a byte, bf16 its 16 bits)."""
    if isinstance(t, PointerType):
        return GPTR
    if t.name == "i1" or t.is_fp8:
        return I8
    if t.name == "bf16":
        return I16
    return reg_type(t)


def to_mem(b: ir.IRBuilder, t: ScalarType, v):
    if t.name == "i1":
        return b.zext(v, I8)
    if t.name == "bf16":
        return f32_to_bf16_bits(b, v)
    if t.is_fp8:
        return fp8_bits(b, v, t.name)
    return v


def from_mem(b: ir.IRBuilder, t: ScalarType, v):
    if t.name == "i1":
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    if t.name == "bf16":
        return b.bitcast(b.shl(b.zext(v, I32), ir.Constant(I32, 16)), F32)
    if t.is_fp8:
        return fp8_value(b, v, t.name)
    return v


# ---- fp8 <-> f32 ----------------------------------------------------------------------------------
# sm_90 and later convert in hardware, as Triton does there: up through cvt.rn.f16x2.e4m3x2 (every fp8 value is
# an f16 one), down through cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (nearest even, saturating to the largest finite
# value, NaN to 0x7f: the semantics compiler/ir/fp8.py states and llvm/fp8.py's integer code keeps before). sm_89 has
# the instructions from PTX ISA 8.1 only, and LLVM writes 8.0 for it (ptxas refuses them there), so it keeps the
# integer code. An e5m2 code is the upper byte of the f16 of the same value, so it goes up by a shift on every arch.
# The lowering marks its LLVM module (`tilec_fp8_cvt`) when the arch converts in hardware.

FP8_CVT_SM = 90
_PTX_FP8 = {"f8e4nv": "e4m3", "f8e5": "e5m2"}


def _fp8_cvt(b: ir.IRBuilder, v) -> bool:
    return getattr(b.module, "tilec_fp8_cvt", False) and not isinstance(v.type, ir.VectorType)


def _fp8_codes(b: ir.IRBuilder) -> dict:
    """(f32 value, format) -> the i8 code a cast to fp8 (fp8_round) encoded it to, per LLVM module: a value rounded
    to fp8 and then stored (x.to(tl.float8e4nv) written to memory) is encoded once, not encoded, decoded and encoded
    again (the code is defined before the value, so it dominates every use of it). Loaded values are not in it: a
    store re-encodes them, which turns a NaN into the canonical 0x7f (and an e5m2 infinity into the largest finite
    value), as before."""
    codes = getattr(b.module, "tilec_fp8_codes", None)
    if codes is None:
        codes = {}
        b.module.tilec_fp8_codes = codes
    return codes


def fp8_value(b: ir.IRBuilder, bits, name: str):
    """i8 fp8 codes -> their exact f32 values."""
    if name == "f8e5":
        wide = b.zext(bits, like(bits.type, I16))
        v = b.fpext(b.bitcast(b.shl(wide, splat_const(wide.type, 8)), like(bits.type, F16)), like(bits.type, F32))
    elif not _fp8_cvt(b, bits):
        v = fp8.bits_to_f32(b, bits, name)
    else:
        pair = b.zext(bits, I16)
        pair = b.or_(pair, b.shl(pair, ir.Constant(I16, 8)))  # the code in both bytes: either half of the result
        asm = ir.InlineAsm(ir.FunctionType(I32, [I16]), f"cvt.rn.f16x2.{_PTX_FP8[name]}x2 $0, $1;", "=r,h")
        v = b.fpext(b.bitcast(b.trunc(b.call(asm, [pair]), I16), F16), F32)
    return v


def fp8x4_to_f16x2(b: ir.IRBuilder, word, name: str) -> tuple:
    """An i32 of four fp8 codes (bytes 0..3) -> two i32 of f16 pairs: (bytes 0, 1) and (bytes 2, 3), the lower
    byte in the lower half (exact: f16 holds every fp8 value). e5m2 is f16's upper byte; e4m3 converts in
    hardware where the module has it (cvt.rn.f16x2.e4m3x2), else by the integer decoding."""
    if name == "f8e5":
        lo = b.or_(b.shl(b.and_(word, ir.Constant(I32, 0xFF)), ir.Constant(I32, 8)),
                   b.shl(b.and_(word, ir.Constant(I32, 0xFF00)), ir.Constant(I32, 16)))  # fmt: skip
        hi = b.or_(b.and_(b.lshr(word, ir.Constant(I32, 8)), ir.Constant(I32, 0xFF00)),
                   b.and_(word, ir.Constant(I32, 0xFF000000)))  # fmt: skip
        return lo, hi
    if getattr(b.module, "tilec_fp8_cvt", False):
        asm = ir.InlineAsm(ir.FunctionType(I32, [I16]), f"cvt.rn.f16x2.{_PTX_FP8[name]}x2 $0, $1;", "=r,h")
        return tuple(b.call(asm, [b.trunc(b.lshr(word, ir.Constant(I32, 16)) if h else word, I16)]) for h in (0, 1))
    halves = b.fptrunc(fp8.bits_to_f32(b, b.bitcast(word, ir.VectorType(I8, 4)), name), ir.VectorType(F16, 4))
    return tuple(b.bitcast(b.shuffle_vector(halves, halves, ir.Constant(ir.VectorType(I32, 2), [2 * h, 2 * h + 1])), I32)
                 for h in (0, 1))  # fmt: skip


def fp8_bits(b: ir.IRBuilder, x, name: str):
    """f32 values -> i8 fp8 codes: nearest even, saturating, NaN to 0x7f."""
    known = _fp8_codes(b).get((x, name))
    if known is not None:
        return known
    if not _fp8_cvt(b, x):
        return fp8.f32_to_bits(b, x, name)
    asm = ir.InlineAsm(ir.FunctionType(I16, [F32, F32]), f"cvt.rn.satfinite.{_PTX_FP8[name]}x2.f32 $0, $1, $2;", "=h,f,f")
    return b.trunc(b.call(asm, [x, x]), I8)  # the value in both bytes: either is the code


def fp8_round(b: ir.IRBuilder, x, name: str):
    """f32 values rounded to fp8 `name`, kept in f32."""
    bits = fp8_bits(b, x, name)
    v = fp8_value(b, bits, name)
    _fp8_codes(b)[(v, name)] = bits
    return v


class _BFloat(ir.Type):
    """LLVM's `bfloat`, which llvmlite's IR builder has no class for; only an fptrunc to it and a bitcast from
    it are built."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


BFLOAT = _BFloat()


def f32_to_bf16_bits(b: ir.IRBuilder, v):
    """Round to nearest even; NaN stays a NaN. An fptrunc to LLVM's bfloat: the NVPTX backend makes it one
    `cvt.rn.bf16.f32` on sm_80 and later (what Triton emits, so a NaN comes out as the same canonical 0x7FFF)
    and integer rounding before (an add of 0x7FFF plus the kept lowest bit, a select for NaN)."""
    return b.bitcast(b.fptrunc(v, BFLOAT), I16)


def round_bf16(b: ir.IRBuilder, v):
    """An f32 register value rounded to bf16 precision (kept in f32)."""
    return from_mem(b, ScalarType("bf16"), f32_to_bf16_bits(b, v))


def const(t, value):
    lt = reg_type(t)
    if isinstance(lt, ir.IntType):
        return ir.Constant(lt, int(value) & ((1 << lt.width) - 1))
    return ir.Constant(lt, float(value))


class Expr:
    """An i32 value under Python's integer operators (+ * & ^ >> <<, an int operand as a constant; >>
    logical), so that one formula written once gives a value in Python from ints and its IR from these
    (swizzle.swizzled, mma.py's lane coordinates). Adding 0 or multiplying by 1 emits nothing."""

    __slots__ = ("b", "v")

    def __init__(self, b: ir.IRBuilder, v) -> None:
        self.b, self.v = b, v

    def _with(self, other, fn, unit: int | None = None) -> Expr:
        if unit is not None and isinstance(other, int) and other == unit:
            return self
        return Expr(self.b, fn(self.v, other.v if isinstance(other, Expr) else ir.Constant(I32, other)))

    def __add__(self, other) -> Expr:
        return self._with(other, self.b.add, 0)

    def __mul__(self, other) -> Expr:
        return self._with(other, self.b.mul, 1)

    def __and__(self, other) -> Expr:
        return self._with(other, self.b.and_)

    def __xor__(self, other) -> Expr:
        return self._with(other, self.b.xor, 0)

    def __rshift__(self, other) -> Expr:
        return self._with(other, self.b.lshr, 0)

    def __lshift__(self, other) -> Expr:
        return self._with(other, self.b.shl, 0)

    __radd__, __rmul__, __rand__, __rxor__ = __add__, __mul__, __and__, __xor__


# ---- intrinsics --------------------------------------------------------------------------------


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def _suffix(lt: ir.Type) -> str:
    return {F16: "f16", F32: "f32", F64: "f64"}.get(lt, f"i{getattr(lt, 'width', 0)}")


def call_intr(b: ir.IRBuilder, base: str, *args):
    lt = args[0].type
    fn = intrinsic(b.module, f"{base}.{_suffix(lt)}", lt, [a.type for a in args])
    return b.call(fn, list(args))


# ---- binary ops --------------------------------------------------------------------------------

Binary = Callable[[ir.IRBuilder, ScalarType, object, object], object]


def _fmaxmin(b, t, x, y, is_max: bool, propagate_nan: bool):
    if t.name == "f16":  # promote: NVPTX min/max on f16 needs sm_80; keep it simple and exact
        r = _fmaxmin(b, ScalarType("f32"), b.fpext(x, F32), b.fpext(y, F32), is_max, propagate_nan)
        return b.fptrunc(r, F16)
    name = ("llvm.maximum" if is_max else "llvm.minimum") if propagate_nan else ("llvm.maxnum" if is_max else "llvm.minnum")
    return call_intr(b, name, x, y)


def _imaxmin(b, t, x, y, is_max: bool):
    cmp = b.icmp_signed if t.is_signed else b.icmp_unsigned
    return b.select(cmp(">" if is_max else "<", x, y), x, y)


def _div(b, t, x, y, precise: bool = False):
    """Float division as Triton compiles it: f32 (bf16 and f16 computed in f32) `/` is div.full.f32, its
    full-range approximation (2 ulp); `precise` (tl.math.div_rn) is div.rn.f32; f64 is div.rn.f64."""
    if not t.is_float:
        return b.sdiv(x, y) if t.is_signed else b.udiv(x, y)
    if x.type == F64:
        return b.fdiv(x, y)
    if x.type == F16:
        return b.fptrunc(_div(b, t, b.fpext(x, F32), b.fpext(y, F32), precise), F16)
    fn = intrinsic(b.module, "llvm.nvvm.div.rn.f" if precise else "llvm.nvvm.div.full", F32, [F32, F32])
    return b.call(fn, [x, y])


def _rem(b, t, x, y):
    if t.is_float:
        return b.frem(x, y)
    return b.srem(x, y) if t.is_signed else b.urem(x, y)


def binary(b: ir.IRBuilder, name: str, t: ScalarType, x, y, attrs: dict, fusion: bool = True):
    """`fusion`: the compile's CudaOptions.fp_fusion (see the module docstring); off: mul.rn/add.rn."""
    f = t.is_float
    fl = ("contract",) if fusion and f and t.name != "bf16" and not t.is_fp8 else ()
    if name == "add":
        r = b.fadd(x, y, flags=fl) if f else b.add(x, y)
    elif name == "sub":
        r = b.fsub(x, y, flags=fl) if f else b.sub(x, y)
    elif name == "mul":
        r = b.fmul(x, y, flags=fl) if f else b.mul(x, y)
    elif name == "div":
        r = _div(b, t, x, y, attrs.get("precise", False))
    elif name == "rem":
        r = _rem(b, t, x, y)
    elif name == "and":
        r = b.and_(x, y)
    elif name == "or":
        r = b.or_(x, y)
    elif name == "xor":
        r = b.xor(x, y)
    elif name == "shl":
        r = b.shl(x, y)
    elif name == "shr":
        r = b.ashr(x, y) if t.is_signed else b.lshr(x, y)
    elif name in ("maximum", "minimum"):
        is_max = name == "maximum"
        r = _fmaxmin(b, t, x, y, is_max, attrs.get("propagate_nan", False)) if f else _imaxmin(b, t, x, y, is_max)
    elif name == "pow":
        r = libm(b, t, "pow", x, y)
    elif name == "atan2":
        r = libm(b, t, "atan2", x, y)
    else:
        raise CompileError(f"cuda: no lowering for binary op '{name}'")
    return round_bf16(b, r) if t.name == "bf16" and name not in ("maximum", "minimum") else r


_PRED_S = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def compare(b: ir.IRBuilder, pred: str, t, x, y):
    op = _PRED_S[pred]
    if isinstance(t, PointerType):
        return b.icmp_unsigned(op, b.ptrtoint(x, I64), b.ptrtoint(y, I64))
    if t.is_float:
        return b.fcmp_unordered(op, x, y) if pred == "ne" else b.fcmp_ordered(op, x, y)
    return (b.icmp_signed if t.is_signed else b.icmp_unsigned)(op, x, y)


# ---- unary math ----------------------------------------------------------------------------------

_LIBDEVICE = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor", "ceil": "ceil", "erf": "erf",
    "pow": "pow", "atan2": "atan2",
}


def libm(b: ir.IRBuilder, t: ScalarType, name: str, *args):
    """libdevice's __nv_<name>f / __nv_<name> (f16 and bf16 are computed in f32)."""
    lt = args[0].type
    if lt == F16:
        r = libm(b, ScalarType("f32"), name, *(b.fpext(a, F32) for a in args))
        return b.fptrunc(r, F16)
    fname = "__nv_" + _LIBDEVICE[name] + ("f" if lt == F32 else "")
    fn = intrinsic(b.module, fname, lt, [lt] * len(args))
    return b.call(fn, list(args))


def _approx(b: ir.IRBuilder, intr: str, x):
    fn = intrinsic(b.module, intr, F32, [F32])
    return b.call(fn, [x])


def unary(b: ir.IRBuilder, name: str, t: ScalarType, x, ex2_ftz: bool = True, attrs: dict | None = None):
    """`ex2_ftz`: the compile's CudaOptions.ex2_ftz (exp2 as ex2.approx.ftz; off: ex2.approx)."""
    if name == "neg":
        return b.fneg(x) if t.is_float else b.sub(ir.Constant(x.type, 0), x)
    if name == "abs":
        if t.is_float:
            return call_intr(b, "llvm.fabs", x)
        if not t.is_signed:
            return x
        return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.sub(ir.Constant(x.type, 0), x), x)
    if not t.is_float:
        raise CompileError(f"cuda: '{name}' needs a float operand")
    r = _math(b, name, t, x, ex2_ftz, bool((attrs or {}).get("precise", False)))
    return round_bf16(b, r) if t.name == "bf16" else r


def _math(b: ir.IRBuilder, name: str, t: ScalarType, x, ex2_ftz: bool = True, precise: bool = False):
    """As Triton lowers math: f32 exp is ex2.approx of x * log2(e) (its ExpOpConversionApprox), a precise
    sqrt (tl.math.sqrt_rn) is sqrt.rn; the rest are libdevice's functions, linked with flush-to-zero
    (f32 sqrt is then sqrt.approx.ftz.f32, exp2 ex2.approx.ftz.f32, log and log2 libdevice's own)."""
    if x.type == F32:
        if name == "exp":
            return _approx(b, "llvm.nvvm.ex2.approx.f", b.fmul(x, ir.Constant(F32, LOG2E)))
        if name == "exp2":
            return _approx(b, "llvm.nvvm.ex2.approx.ftz.f" if ex2_ftz else "llvm.nvvm.ex2.approx.f", x)
    if name == "sqrt" and (precise or x.type == F64):
        return call_intr(b, "llvm.sqrt", x)
    if name in ("floor", "ceil"):
        return call_intr(b, f"llvm.{name}", x)
    return libm(b, t, name, x)


def fma(b: ir.IRBuilder, t: ScalarType, x, y, z):
    r = call_intr(b, "llvm.fma", x, y, z)
    return round_bf16(b, r) if t.name == "bf16" else r


# ---- casts ---------------------------------------------------------------------------------------


def cast(b: ir.IRBuilder, src, dst, x):  # noqa: C901 - one case per kind pair
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        if isinstance(dst, PointerType):
            return x if isinstance(src, PointerType) else b.inttoptr(x, reg_type(dst))
        return b.ptrtoint(x, reg_type(dst))
    if src == dst:
        return x
    st, dt = reg_type(src), reg_type(dst)
    if dst.is_fp8:  # one rounding: f64 goes to f32 by round-to-odd first
        x32 = fp8.to_f32(b, x) if src.is_float else b.sitofp(x, F32) if src.is_signed else b.uitofp(x, F32)
        return fp8_round(b, x32, dst.name)
    if dst.is_bool:
        if src.is_float:
            return b.fcmp_unordered("!=", x, ir.Constant(st, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(st, 0))
    if src.is_float and dst.is_float:
        if st == dt:
            r = x
        elif _fbits(st) < _fbits(dt):
            r = b.fpext(x, dt)
        else:
            r = b.fptrunc(x, dt)
        return round_bf16(b, r) if dst.name == "bf16" else r
    if src.is_float:
        return _fp_to_int(b, x, dst)
    if dst.is_float:
        r = b.sitofp(x, dt) if src.is_signed else b.uitofp(x, dt)
        return round_bf16(b, r) if dst.name == "bf16" else r
    if st.width == dt.width:
        return x
    if st.width > dt.width:
        return b.trunc(x, dt)
    return b.sext(x, dt) if src.is_signed else b.zext(x, dt)


def _fbits(t: ir.Type) -> int:
    return {F16: 16, F32: 32, F64: 64}[t]


def _fp_to_int(b: ir.IRBuilder, x, dst: ScalarType):
    """Truncate toward zero, saturating, NaN -> 0 (the interpreter's choice for undefined cases)."""
    dt = reg_type(dst)
    if x.type == F16:
        x = b.fpext(x, F32)
    name = "llvm.fptosi.sat" if dst.is_signed else "llvm.fptoui.sat"
    fn = intrinsic(b.module, f"{name}.i{dt.width}.{_suffix(x.type)}", dt, [x.type])
    return b.call(fn, [x])


def bitcast(b: ir.IRBuilder, src, dst, x):
    if src.is_fp8 or dst.is_fp8:
        bits = fp8_bits(b, x, src.name) if src.is_fp8 else x
        return fp8_value(b, bits, dst.name) if dst.is_fp8 else bits
    if src.name == "bf16" or dst.name == "bf16":
        bits = to_mem(b, src, x) if src.name == "bf16" else b.bitcast(x, I16) if reg_type(src) == F16 else x
        return from_mem(b, dst, bits) if dst.name == "bf16" else b.bitcast(bits, reg_type(dst))
    return b.bitcast(x, reg_type(dst))
