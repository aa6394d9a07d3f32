"""Types of the tile IR: scalars, global pointers, and tiles (statically shaped blocks) of either."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_SCALARS = {
    # name: (bits, kind) with kind in {"int", "uint", "float", "bool"}
    "i1": (1, "bool"),
    "i8": (8, "int"),
    "i16": (16, "int"),
    "i32": (32, "int"),
    "i64": (64, "int"),
    "u8": (8, "uint"),
    "u16": (16, "uint"),
    "u32": (32, "uint"),
    "u64": (64, "uint"),
    "f16": (16, "float"),
    "bf16": (16, "float"),
    "f32": (32, "float"),
    "f64": (64, "float"),
    "f8e4nv": (8, "float"),  # e4m3fn (Triton's fp8e4nv); see compiler/ir/fp8.py
    "f8e5": (8, "float"),  # e5m2 (Triton's fp8e5)
}
FP8_NAMES = ("f8e4nv", "f8e5")


@dataclass(frozen=True)
class ScalarType:
    name: str

    def __post_init__(self) -> None:
        if self.name not in _SCALARS:
            raise ValueError(f"unknown scalar type {self.name!r}")

    @property
    def bits(self) -> int:
        return _SCALARS[self.name][0]

    @property
    def is_float(self) -> bool:
        return _SCALARS[self.name][1] == "float"

    @property
    def is_fp8(self) -> bool:
        """fp8 values are storage only: loaded, stored, moved, converted and fed to dot, never computed on."""
        return self.name in FP8_NAMES

    @property
    def is_int(self) -> bool:
        """Integers, signed or unsigned, and i1."""
        return not self.is_float

    @property
    def is_bool(self) -> bool:
        return self.name == "i1"

    @property
    def is_signed(self) -> bool:
        return _SCALARS[self.name][1] == "int"

    @property
    def is_unsigned(self) -> bool:
        return _SCALARS[self.name][1] in ("uint", "bool")

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def np_dtype(self) -> np.dtype:
        import numpy as np  # imported on first use: compiling needs no NumPy

        return np.dtype(_NP[self.name])

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class PointerType:
    pointee: ScalarType

    @property
    def bits(self) -> int:
        return 64

    is_float = False
    is_int = False
    is_bool = False

    def __str__(self) -> str:
        return f"ptr<{self.pointee}>"


ElemType = ScalarType | PointerType


@dataclass(frozen=True)
class TileType:
    shape: tuple[int, ...]
    elem: ElemType

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return "tile<" + "x".join(str(d) for d in self.shape) + f"x{self.elem}>"


Type = ScalarType | PointerType | TileType

# bf16 and fp8 are held in float32 by NumPy-side code; their rounding is applied on store/cast.
_NP = {
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "float32",
    "f32": "float32",
    "f64": "float64",
    "f8e4nv": "float32",
    "f8e5": "float32",
}

i1, i8, i16, i32, i64 = (ScalarType(n) for n in ("i1", "i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (ScalarType(n) for n in ("u8", "u16", "u32", "u64"))
f16, bf16, f32, f64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "f64"))


def elem_type(t: Type) -> ElemType:
    return t.elem if isinstance(t, TileType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    return t.shape if isinstance(t, TileType) else ()


def with_elem(t: Type, elem: ElemType) -> Type:
    """The same shape as `t` with another element type."""
    return TileType(t.shape, elem) if isinstance(t, TileType) else elem


def make_type(shape: tuple[int, ...], elem: ElemType) -> Type:
    return TileType(tuple(shape), elem) if shape else elem


def is_ptr(t: Type) -> bool:
    return isinstance(elem_type(t), PointerType)


def is_float(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_float


def is_int(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_int


def is_fp8(t: Type) -> bool:
    e = elem_type(t)
    return isinstance(e, ScalarType) and e.is_fp8


def parse_scalar(name: str) -> ScalarType | None:
    return ScalarType(name) if name in _SCALARS else None
