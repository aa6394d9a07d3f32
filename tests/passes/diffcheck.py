"""Differential checking of passes: the reference interpreter runs a kernel before and after a pass on
the same random inputs, and every output buffer must agree bit for bit (NaNs included)."""

from __future__ import annotations

import numpy as np

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import Module, parse_module, print_module, verify_module
from tilec.compiler.ir.types import PointerType, ScalarType
from tilec.compiler.passes import PassManager


def random_args(module: Module, kernel: str, rng: np.random.Generator, n: int, scalars: dict) -> list:
    """Arrays of `n` random elements for pointer params; `scalars[name]` or small ints for the rest."""
    f = module.get(kernel)
    assert f is not None
    args: list = []
    for p in f.params:
        if isinstance(p.type, PointerType):
            args.append(_array(p.type.pointee, rng, n))
        elif p.attrs.get("equal_to_1") is True:
            args.append(p.type.np_dtype.type(1))
        elif p.name in scalars:
            args.append(p.type.np_dtype.type(scalars[p.name]))
        else:
            args.append(_array(p.type, rng, 1)[0])
    return args


def _array(t: ScalarType, rng: np.random.Generator, n: int) -> np.ndarray:
    if t.name == "bf16":
        return (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if t.is_float:
        return (rng.standard_normal(n) * 4).astype(t.np_dtype)
    if t.is_bool:
        return rng.integers(0, 2, n).astype(np.bool_)
    info = np.iinfo(t.np_dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(t.np_dtype)


def run_both(text: str, passes: list[str], *, kernel: str, grid: tuple, n: int = 256, scalars: dict | None = None,
             seed: int = 0) -> tuple[list, list, str]:
    """(outputs before, outputs after, IR after): the kernel run on identical copies of random args."""
    before = parse_module(text)
    verify_module(before)
    after = parse_module(text)
    PassManager.from_names(passes).run(after)
    args = random_args(before, kernel, np.random.default_rng(seed), n, scalars or {})
    a1 = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    a2 = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(before, kernel, a1, grid)
    run_kernel(after, kernel, a2, grid)
    return a1, a2, print_module(after)


def assert_same(a1: list, a2: list) -> None:
    for i, (x, y) in enumerate(zip(a1, a2, strict=True)):
        if isinstance(x, np.ndarray):
            assert x.tobytes() == y.tobytes(), f"argument {i} differs:\n{x}\n{y}"
