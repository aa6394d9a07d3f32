"""Triton's dtypes as the frontend sees them: spellings (tl.float16, '*fp32'), the DType value that
kernels hold at compile time, and Triton's promotion rules for binary ops and weak Python scalars.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import ElemType, PointerType, ScalarType, TileType, Type, elem_type, parse_scalar

# tl.<name> -> IR scalar name
TL_DTYPES = {
    "int1": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "float8e4nv": "f8e4nv",
    "float8e5": "f8e5",
}
TL_DTYPE_ALIASES = {"bool": "int1", "half": "float16", "float": "float32", "double": "float64"}

# Triton's short spellings used in signatures: 'fp32', 'i32', 'u8', 'bf16', 'i1'
_SHORT = {"fp16": "f16", "fp32": "f32", "fp64": "f64", "bf16": "bf16", "f16": "f16", "f32": "f32", "f64": "f64",
          "fp8e4nv": "f8e4nv", "fp8e5": "f8e5"}  # fmt: skip
_TRITON_NAME = {"f16": "fp16", "f32": "fp32", "f64": "fp64", "bf16": "bf16", "f8e4nv": "fp8e4nv", "f8e5": "fp8e5"}  # fmt: skip


@dataclass(frozen=True)
class DType:
    """A dtype held as a compile-time value (tl.float32, x.dtype, ptr.dtype.element_ty)."""

    ir: ElemType

    @property
    def element_ty(self) -> DType:
        if not isinstance(self.ir, PointerType):
            raise AttributeError("element_ty")
        return DType(self.ir.pointee)

    @property
    def primitive_bitwidth(self) -> int:
        return self.ir.bits

    @property
    def name(self) -> str:
        return triton_spelling(self.ir)

    def is_ptr(self) -> bool:
        return isinstance(self.ir, PointerType)

    def is_floating(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.is_float

    def is_int(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.is_int

    def is_int_signed(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.is_signed

    def is_int_unsigned(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.is_int and not self.ir.is_signed

    def is_bool(self) -> bool:
        return self.ir == ScalarType("i1")

    def _is(self, name: str) -> bool:
        return self.ir == ScalarType(name)

    @property
    def int_bitwidth(self) -> int:
        if not (isinstance(self.ir, ScalarType) and self.ir.is_int):
            raise AttributeError("int_bitwidth")
        return self.ir.bits

    @property
    def fp_mantissa_width(self) -> int:
        widths = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e4nv": 3, "f8e5": 2}
        if not isinstance(self.ir, ScalarType) or self.ir.name not in widths:
            raise AttributeError("fp_mantissa_width")
        return widths[self.ir.name]

    def is_int1(self) -> bool:
        return self._is("i1")

    def is_int8(self) -> bool:
        return self._is("i8")

    def is_int16(self) -> bool:
        return self._is("i16")

    def is_int32(self) -> bool:
        return self._is("i32")

    def is_int64(self) -> bool:
        return self._is("i64")

    def is_uint8(self) -> bool:
        return self._is("u8")

    def is_uint16(self) -> bool:
        return self._is("u16")

    def is_uint32(self) -> bool:
        return self._is("u32")

    def is_uint64(self) -> bool:
        return self._is("u64")

    def is_standard_floating(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.name in ("f16", "bf16", "f32", "f64")

    def is_fp16(self) -> bool:
        return self._is("f16")

    def is_bf16(self) -> bool:
        return self._is("bf16")

    def is_fp32(self) -> bool:
        return self._is("f32")

    def is_fp64(self) -> bool:
        return self._is("f64")

    def is_fp8(self) -> bool:
        return isinstance(self.ir, ScalarType) and self.ir.is_fp8

    def is_fp8e4nv(self) -> bool:
        return self._is("f8e4nv")

    def is_fp8e5(self) -> bool:
        return self._is("f8e5")

    @property
    def scalar(self) -> DType:
        return self

    def is_block(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class BlockType:
    """`x.type` of a tile (Triton's block type): its element type and shape."""

    elem: ElemType
    shape: tuple[int, ...]

    @property
    def element_ty(self) -> DType:
        return DType(self.elem)

    @property
    def scalar(self) -> DType:
        return DType(self.elem)

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"<{list(self.shape)}, {DType(self.elem)}>"


@dataclass(frozen=True)
class BlockPtrType:
    """`p.type` / `p.dtype` of a block pointer (Triton's pointer to a block type): `.element_ty` is the
    block type, whose `.element_ty` is the element dtype (`p.type.element_ty.element_ty`)."""

    elem: ElemType
    shape: tuple[int, ...]

    @property
    def element_ty(self) -> BlockType:
        return BlockType(self.elem, self.shape)

    @property
    def scalar(self) -> BlockPtrType:
        return self

    def is_ptr(self) -> bool:
        return True

    def is_block(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"pointer<{self.element_ty}>"


def dtype_named(qualname: str) -> DType | None:
    """tl.float16 (canonical 'triton.language.float16'), tl.bfloat16, tl.int32... -> DType, else None."""
    prefix = "triton.language."
    if not qualname.startswith(prefix):
        return None
    name = qualname[len(prefix):]
    name = TL_DTYPE_ALIASES.get(name, name)
    return DType(ScalarType(TL_DTYPES[name])) if name in TL_DTYPES else None


def triton_spelling(t: ElemType) -> str:
    if isinstance(t, PointerType):
        return "*" + triton_spelling(t.pointee)
    return _TRITON_NAME.get(t.name, t.name)


def parse_signature_type(text: str) -> Type | None:
    """'*fp32', '*i64', 'i32', 'fp16', 'u32', 'ptr<f32>', 'f32' -> IR type; None if unknown."""
    s = text.strip()
    if s.startswith("*"):
        inner = parse_signature_type(s[1:])
        return PointerType(inner) if isinstance(inner, ScalarType) else None
    if s.startswith("ptr<") and s.endswith(">"):
        inner = parse_signature_type(s[4:-1])
        return PointerType(inner) if isinstance(inner, ScalarType) else None
    if s in _SHORT:
        return ScalarType(_SHORT[s])
    if s in TL_DTYPES:
        return ScalarType(TL_DTYPES[s])
    return parse_scalar(s)


def int_literal_type(v: int) -> ScalarType | None:
    """Triton types an int literal as i32 when it fits, else i64 (u64 above i64's range)."""
    if -(2**31) <= v < 2**31:
        return ScalarType("i32")
    if -(2**63) <= v < 2**63:
        return ScalarType("i64")
    if 0 <= v < 2**64:
        return ScalarType("u64")
    return None


def fits(v: int, t: ScalarType) -> bool:
    if t.is_bool:
        return v in (0, 1)
    if t.is_signed:
        return -(2 ** (t.bits - 1)) <= v < 2 ** (t.bits - 1)
    return 0 <= v < 2**t.bits


def _float_rank(t: ScalarType) -> int:
    return {"f16": 1, "bf16": 1, "f32": 2, "f64": 3}[t.name]


def promote(a: ScalarType, b: ScalarType, *, div_or_mod: bool = False) -> ScalarType:
    """The computation type of two non-weak operands (Triton's rules)."""
    f16, bf16, f32, f64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "f64"))
    if f64 in (a, b):
        return f64
    if f32 in (a, b):
        return f32
    if a.is_float and b.is_float and (a.is_fp8 or b.is_fp8):
        # Triton: fp8 with f16 is f16, with bf16 f32, two different fp8 meet in f16 (one fp8 type stays fp8,
        # which the caller refuses: fp8 is not computed on)
        other = b if a.is_fp8 else a
        if not other.is_fp8:
            return f32 if other == bf16 else other
        return a if a == b else f16
    if a.is_float and b.is_float:
        return a if a == b else f32  # f16 with bf16 meets in f32
    if a.is_float or b.is_float:
        return a if a.is_float else b
    return int_promote(a, b)


def int_promote(a: ScalarType, b: ScalarType) -> ScalarType:
    if a.is_bool and b.is_bool:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_signed == b.is_signed:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def promote_weak(tensor: ScalarType, weak: object) -> ScalarType:
    """The computation type of a tensor and a Python scalar (weakly typed: it does not widen tiles)."""
    if isinstance(weak, bool):
        return tensor if not tensor.is_bool else tensor
    if isinstance(weak, float):
        return tensor if tensor.is_float else ScalarType("f32")
    if tensor.is_float:
        return tensor
    if tensor.is_bool:
        lit = int_literal_type(weak)
        return lit if lit is not None else ScalarType("i64")
    if fits(weak, tensor):
        return tensor
    lit = int_literal_type(weak) or ScalarType("i64")
    return int_promote(tensor, lit)


def literal_type(v: object) -> ScalarType | None:
    if isinstance(v, bool):
        return ScalarType("i1")
    if isinstance(v, int):
        return int_literal_type(v)
    if isinstance(v, float):
        return ScalarType("f32")
    return None


def scalar_of(t: Type) -> ElemType:
    return elem_type(t)


def tile_shape(t: Type) -> tuple[int, ...]:
    return t.shape if isinstance(t, TileType) else ()
