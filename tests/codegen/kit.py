"""Helpers for cpu-target tests: compile tile IR text, run it on the cpu target and on the reference
interpreter over copies of the same NumPy arguments, and compare the arrays they leave behind."""

from __future__ import annotations

import numpy as np

from tilec.compiler.artifact import Artifact
from tilec.compiler.backends.cpu import buffers as cpu_buffers
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.cpu import load

_ARTIFACTS: dict[tuple[str, int], Artifact] = {}


def compile_ir(text: str) -> Artifact:
    key = (text, cpu_buffers.VECTOR_LIMIT)  # tests lower the limit to put every tile in buffers
    art = _ARTIFACTS.get(key)
    if art is None:
        art = compile_kernel(text, None, is_ir=True, emit="object")
        _ARTIFACTS[key] = art
    return art


def run_cpu(text: str, args: list, grid: tuple[int, ...]) -> None:
    art = compile_ir(text)
    raw = [
        a.ctypes.data if isinstance(a, np.ndarray) else (a.item() if isinstance(a, np.generic) else a)
        for a in args
    ]
    g = tuple(grid) + (1,) * (3 - len(grid))
    load(art).launch(raw, g)


def run_both(text: str, args: list, grid: tuple[int, ...]) -> tuple[list, list]:
    """(interpreter's args after the run, cpu target's args after the run), each on its own copies."""
    a_ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    a_cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(parse_module(text), None, a_ref, grid)
    run_cpu(text, a_cpu, grid)
    return a_ref, a_cpu


def assert_same(ref, got, rtol: float = 0.0, atol: float = 0.0) -> None:
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        if not isinstance(r, np.ndarray):
            continue
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(g, r, err_msg=f"argument {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"argument {i}")  # fmt: skip
