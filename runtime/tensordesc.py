"""Host tensor descriptors at launch: tilec's own TensorDescriptor (the fields of Triton's
triton.tools.tensor_descriptor.TensorDescriptor, which is accepted as well: any object with `base`,
`shape`, `strides`, `block_shape` and `padding` is one), its specialisation as Triton spells it
(`tensordesc<fp16[64, 64]>`), and its expansion into the kernel's runtime values.

A descriptor passes as its base array, its shape and its leading strides (compiler/frontend/hostdesc.py);
on targets that load it with TMA the cuda runtime also encodes a CUtensorMap from it (_tma.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ArgumentError

MAX_RANK = 5


@dataclass
class TensorDescriptor:
    """A `block_shape` window onto `base` (a NumPy array, or a torch/CuPy CUDA array) seen as a tensor of
    `shape` with `strides` in elements, the last one 1; loads past the edges read `padding` ("zero" or
    "nan"), stores there are dropped."""

    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"

    def __post_init__(self) -> None:
        check(self)

    @staticmethod
    def from_tensor(tensor: Any, block_shape: list[int], padding: str = "zero") -> TensorDescriptor:
        """The descriptor of a whole array (its shape and element strides)."""
        return TensorDescriptor(
            tensor, list(tensor.shape), element_strides(tensor), list(block_shape), padding
        )


def element_strides(a: Any) -> list[int]:
    if isinstance(a, np.ndarray):
        return [s // a.itemsize for s in a.strides]
    if callable(getattr(a, "stride", None)):  # torch
        return list(a.stride())
    cai = a.__cuda_array_interface__
    item = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        out, acc = [], 1
        for d in reversed(cai["shape"]):
            out.append(acc)
            acc *= d
        return out[::-1]
    return [s // item for s in strides]


def is_descriptor(v: Any) -> bool:
    """Duck-typed: tilec's class, Triton's host TensorDescriptor, or any object with their fields."""
    return all(hasattr(v, f) for f in ("base", "shape", "strides", "block_shape")) and not hasattr(v, "dtype")


def check(d: Any) -> None:
    """The rules Triton's host descriptor checks (rank, unit last stride, power-of-two block, padding)."""
    rank = len(d.shape)
    if not 1 <= rank <= MAX_RANK:
        raise ArgumentError(f"a tensor descriptor has 1 to {MAX_RANK} dimensions, got {rank}")
    if len(d.strides) != rank or len(d.block_shape) != rank:
        raise ArgumentError(f"tensor descriptor: shape {list(d.shape)}, strides {list(d.strides)} and block_shape "
                            f"{list(d.block_shape)} must have the same length")  # fmt: skip
    if int(d.strides[-1]) != 1:
        raise ArgumentError(
            f"tensor descriptor: the last dimension must be contiguous (stride 1), got {list(d.strides)}"
        )
    if any(int(b) <= 0 or int(b) & (int(b) - 1) for b in d.block_shape):
        raise ArgumentError(f"tensor descriptor: block_shape {list(d.block_shape)} must be powers of two")
    if any(int(s) <= 0 for s in d.shape):
        raise ArgumentError(f"tensor descriptor: shape {list(d.shape)} must be positive")
    if getattr(d, "padding", "zero") not in ("zero", "nan"):
        raise ArgumentError(f"tensor descriptor: padding must be 'zero' or 'nan', got {d.padding!r}")


def spelling(name: str, d: Any, pointer_type: str) -> str:
    """Triton's type of a descriptor argument, from its base's pointer type ('*fp16'):
    'tensordesc<fp16[64, 64]>', with ',nan' before '>' for NaN padding."""
    check(d)
    pad = getattr(d, "padding", "zero")
    if pad == "nan" and not pointer_type[1:].startswith(("fp", "bf")):
        raise ArgumentError(f"argument '{name}': NaN padding needs a floating-point tensor")
    block = ", ".join(str(int(b)) for b in d.block_shape)
    return f"tensordesc<{pointer_type[1:]}[{block}]{',nan' if pad == 'nan' else ''}>"


def int_hints(v: int) -> tuple[tuple[str, Any], ...]:
    """Triton's integer specialisation, for a descriptor's shape and strides."""
    if v == 1:
        return (("equal_to_1", True),)
    return (("divisibility", 16),) if v % 16 == 0 else ()


def hints(d: Any, base_aligned: bool) -> tuple[tuple[str, Any], ...]:
    """Flat hints per part ('base.divisibility', 'shape0.divisibility', 'stride0.divisibility')."""
    out: list[tuple[str, Any]] = [("base.divisibility", 16)] if base_aligned else []
    for i, s in enumerate(d.shape):
        out += [(f"shape{i}.{k}", v) for k, v in int_hints(int(s)) if k == "divisibility"]
    for i, s in enumerate(d.strides[:-1]):
        out += [(f"stride{i}.{k}", v) for k, v in int_hints(int(s)) if k == "divisibility"]
    return tuple(out)


def expand(d: Any) -> list[Any]:
    """The runtime values a descriptor passes as: base array, shape, leading strides."""
    return [d.base, *(int(s) for s in d.shape), *(int(s) for s in d.strides[:-1])]


def expand_args(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if is_descriptor(a):
            out.extend(expand(a))
        else:
            out.append(a)
    return out
