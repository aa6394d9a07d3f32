"""A conformance case as data: Triton-language source, the kernel's name, inputs, grid, constexprs, a NumPy
reference and a tolerance. Runners (the interpreter, the cpu target, later cuda) share the same table.

`inputs(rng)` returns the kernel's runtime arguments in parameter order (NumPy arrays, client.as_bf16
arrays of bf16 bits, Python/NumPy scalars). `reference(args)` maps argument index -> expected array,
computed from a copy of the inputs before the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HEADER = "import triton\nimport triton.language as tl\n\n\n"


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    kernel: str
    inputs: Callable[[np.random.Generator], list]
    grid: Any
    reference: Callable[[list], dict[int, np.ndarray]]
    constexprs: dict = field(default_factory=dict)
    rtol: float = 0.0
    atol: float = 0.0
    tags: tuple[str, ...] = ()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid1(n: int, key: str = "BLOCK") -> Callable[[dict], tuple[int]]:
    return lambda meta: (cdiv(n, meta[key]),)


def src(body: str) -> str:
    """Kernel source with the usual imports."""
    return HEADER + body.strip() + "\n"


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, rounded to nearest even."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)
