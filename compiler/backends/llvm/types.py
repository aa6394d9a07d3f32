"""Tile IR types as LLVM types, constants, intrinsic declarations and bf16 rounding; shared by the targets.

A small tile is one flat LLVM vector in row-major order (big ones live in buffers: backends/cpu/buffers.py); pointers (scalar or tile) are held as i64 addresses.
bf16 values live in `float` registers and are rounded to bf16 after every op that makes one; in memory
they are 16-bit integers holding the bf16 bits.
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.types import PointerType, ScalarType, TileType, Type, bf16, elem_type

I1, I8, I16, I32, I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

_SCALAR_LL = {
    "i1": I1, "i8": I8, "i16": I16, "i32": I32, "i64": I64,
    "u8": I8, "u16": I16, "u32": I32, "u64": I64,
    "f16": F16, "bf16": F32, "f32": F32, "f64": F64,
    "f8e4nv": F32, "f8e5": F32,  # fp8 values live in f32 registers, as bytes in memory
}  # fmt: skip


def kind_of(t: Type) -> str:
    """The lowering kind of a type's elements: float, sint, uint, bool or ptr."""
    e = elem_type(t)
    if isinstance(e, PointerType):
        return "ptr"
    if e.is_float:
        return "float"
    if e.is_bool:
        return "bool"
    return "sint" if e.is_signed else "uint"


def is_bf16(t: Type) -> bool:
    return elem_type(t) == bf16


def fp8_name(t: Type) -> str | None:
    """The fp8 format of a type's elements, or None."""
    e = elem_type(t)
    return e.name if isinstance(e, ScalarType) and e.is_fp8 else None


def scalar_ll(e: ScalarType | PointerType) -> ir.Type:
    """The register type of one element."""
    if isinstance(e, PointerType):
        return I64
    return _SCALAR_LL[e.name]


def mem_ll(e: ScalarType) -> ir.Type:
    """The in-memory type of one element: bf16 is its 16 bits, i1 is a byte."""
    if e.name == "bf16":
        return I16
    if e.name == "i1" or e.is_fp8:
        return I8
    return _SCALAR_LL[e.name]


def ll_type(t: Type) -> ir.Type:
    if isinstance(t, TileType):
        return ir.VectorType(scalar_ll(t.elem), t.numel)
    return scalar_ll(t)


def like(t: ir.Type, elem: ir.Type) -> ir.Type:
    """`elem`, or a vector of it as long as `t` when `t` is a vector."""
    return ir.VectorType(elem, t.count) if isinstance(t, ir.VectorType) else elem


def splat_const(t: ir.Type, value) -> ir.Constant:
    """A constant of LLVM type `t` (scalar or vector) with every element `value`."""
    if isinstance(t, ir.VectorType):
        one = ir.Constant(t.element, value)
        return ir.Constant(t, [one] * t.count)
    return ir.Constant(t, value)


def const_of(t: Type, value, llty: ir.Type | None = None) -> ir.Constant:
    """A constant of IR type `t` (held in `llty`, ll_type(t) by default); bf16 values are rounded first."""
    e = elem_type(t)
    if isinstance(e, ScalarType) and e.is_float:
        value = float(value)
        if e.name == "bf16":
            value = round_bf16_py(value)
        elif e.is_fp8:
            from ...ir.fp8 import round_to  # NumPy on first use, as round_bf16_py

            value = float(round_to(value, e.name, keep_inf=True))
    elif isinstance(e, ScalarType):
        value = _wrap_int(int(value), e)
    return splat_const(llty or ll_type(t), value)


def _wrap_int(v: int, e: ScalarType) -> int:
    if e.is_bool:
        return 1 if v else 0
    v &= (1 << e.bits) - 1
    return v - (1 << e.bits) if v >> (e.bits - 1) else v


def round_bf16_py(x: float) -> float:
    """Round a Python float to the nearest bf16 (ties to even), via f32."""
    import numpy as np  # imported on first use: most kernels have no bf16 constants

    with np.errstate(over="ignore"):
        f = np.array([x], dtype=np.float32)
    if np.isnan(f[0]):
        return x
    bits = f.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return float(bits.view(np.float32)[0])


def mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(t)]


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function `name` of `module`, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def intrinsic(
    b: ir.IRBuilder, base: str, args: list, ret: ir.Type | None = None, overload: list | None = None
):
    """Call llvm.<base>.<mangled overload types> on `args` (overloaded on the first arg's type by default)."""
    types = overload if overload is not None else [args[0].type]
    name = f"llvm.{base}" + "".join("." + mangle(t) for t in types)
    fn = declare(b.module, name, ret or args[0].type, [a.type for a in args])
    return b.call(fn, args)


def round_bf16(b: ir.IRBuilder, x):
    """Round f32 registers (scalar or vector) to bf16 precision, ties to even; NaN stays NaN."""
    it = like(x.type, I32)
    bits = b.bitcast(x, it)
    lsb = b.and_(b.lshr(bits, splat_const(it, 16)), splat_const(it, 1))
    r = b.add(b.add(bits, splat_const(it, 0x7FFF)), lsb)
    r = b.and_(r, splat_const(it, 0xFFFF0000 - (1 << 32)))
    nan = b.fcmp_unordered("uno", x, x)
    r = b.select(nan, b.or_(bits, splat_const(it, 0x00400000)), r)
    return b.bitcast(r, x.type)


def bf16_to_bits(b: ir.IRBuilder, x):
    """f32 registers holding bf16 values -> their 16 bits (i16)."""
    it = like(x.type, I32)
    bits = b.lshr(b.bitcast(round_bf16(b, x), it), splat_const(it, 16))
    return b.trunc(bits, like(x.type, I16))


def bits_to_bf16(b: ir.IRBuilder, x):
    """i16 bf16 bits -> f32 registers."""
    it = like(x.type, I32)
    return b.bitcast(b.shl(b.zext(x, it), splat_const(it, 16)), like(x.type, F32))
