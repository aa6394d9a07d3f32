"""Host tensor descriptors as kernel parameters: Triton's `tensordesc<fp16[64, 64]>` signature type (made on
the host with TensorDescriptor(base, shape, strides, block_shape, padding)).

A descriptor parameter `d` of rank r becomes r + r IR parameters: `d_base: ptr<T>`, `d_shape0..: i32` and
`d_stride0..: i64` for the leading r - 1 strides; the last stride is 1 (Triton's host descriptor requires
it, and so does TMA), a constant here, so the innermost dimension is known contiguous. In the kernel the
parameter is the frontend's TensorDescriptor aggregate over those values, so desc.load / desc.store lower
on every target to pointer tiles with a boundary mask (blockptr.py): zero (or NaN) padding past the edges
on load, out-of-bounds elements dropped on store. The launcher expands the host object into the same
values (runtime/tensordesc.py). The base parameter carries `tensordesc = "<block>"`, the descriptor's
spelling, so a backend can tell a descriptor's parameters from ordinary ones.

Padding is part of the type: `tensordesc<fp32[32, 32],nan>` for padding="nan" (zero is the default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..ir import Param
from ..ir.types import PointerType, ScalarType, i32
from .blockptr import TensorDescriptor
from .semantic import Tensor
from .types import parse_signature_type, triton_spelling

i64 = ScalarType("i64")
MAX_RANK = 5
ATTR = "tensordesc"  # on the base parameter: the descriptor's type as spelled
_RE = re.compile(r"tensordesc<\s*([^\[\s>]+)\s*\[([^\]]*)\]\s*(?:,\s*(zero|nan)\s*)?>")


@dataclass(frozen=True)
class DescType:
    elem: ScalarType
    block_shape: tuple[int, ...]
    padding: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    def spelling(self) -> str:
        pad = ",nan" if self.padding == "nan" else ""
        return f"tensordesc<{triton_spelling(self.elem)}[{', '.join(map(str, self.block_shape))}]{pad}>"


def is_tensordesc(spelled: Any) -> bool:
    return isinstance(spelled, str) and spelled.strip().startswith("tensordesc")


def parse_tensordesc(text: str) -> DescType:
    """'tensordesc<fp16[64, 64]>' -> DescType; ValueError saying what is wrong."""
    m = _RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a descriptor type (e.g. 'tensordesc<fp16[64, 64]>')")
    elem = parse_signature_type(m.group(1))
    if not isinstance(elem, ScalarType):
        raise ValueError(f"{text!r}: unknown element type {m.group(1)!r}")
    try:
        block = tuple(int(x) for x in m.group(2).split(","))
    except ValueError:
        raise ValueError(f"{text!r}: the block shape must be integers") from None
    if not 1 <= len(block) <= MAX_RANK:
        raise ValueError(f"{text!r}: descriptors have 1 to {MAX_RANK} dimensions")
    if any(b <= 0 or b & (b - 1) for b in block):
        raise ValueError(f"{text!r}: every block dimension must be a power of two")
    pad = m.group(3) or "zero"
    if pad == "nan" and not elem.is_float:
        raise ValueError(f"{text!r}: NaN padding needs a floating-point element type")
    return DescType(elem, block, pad)


def sub_names(name: str, rank: int) -> list[str]:
    """The suffixes of a descriptor's IR parameters, in order (hints name them: 'shape0.divisibility')."""
    return ["base", *(f"shape{i}" for i in range(rank)), *(f"stride{i}" for i in range(rank - 1))]


def split_hints(hints: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A descriptor's flat hints {'base.divisibility': 16, 'stride0.divisibility': 16} per sub-parameter."""
    out: dict[str, dict[str, Any]] = {}
    for key, v in hints.items():
        sub, _, kind = str(key).partition(".")
        if not kind:
            raise ValueError(f"descriptor hint {key!r} must name its part, e.g. 'base.divisibility'")
        out.setdefault(sub, {})[kind] = v
    return out


def descriptor_params(name: str, dt: DescType, taken: set[str]) -> list[Param]:
    """The IR parameters of descriptor `name` (unique among `taken`, which is updated), without hints."""
    types = [PointerType(dt.elem), *([i32] * dt.rank), *([i64] * (dt.rank - 1))]
    params = []
    for sub, t in zip(sub_names(name, dt.rank), types, strict=True):
        n, k = f"{name}_{sub}", 1
        while n in taken:
            n, k = f"{name}_{sub}_{k}", k + 1
        taken.add(n)
        params.append(Param(n, t))
    params[0].attrs[ATTR] = dt.spelling()
    return params


def descriptor_value(dt: DescType, args: list[Tensor], base_name: str) -> TensorDescriptor:
    """The aggregate the kernel sees, over its IR parameters' values (in descriptor_params' order)."""
    r = dt.rank
    shape = tuple(args[1 : 1 + r])
    strides = (*args[1 + r :], 1)
    return TensorDescriptor(args[0], shape, strides, dt.block_shape, dt.padding, base_name)
