"""Run a conformance case on the reference interpreter or on the cpu target (through client.jit)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilec import client
from tilec.compiler.frontend import build_ir
from tilec.compiler.interp import run_kernel
from tilec.runtime.grid import check_grid
from tilec.runtime.launch import BF16Array

from .case import Case

_KERNELS: dict[tuple[str, str], client.JITKernel] = {}


def jit_kernel(case: Case) -> client.JITKernel:
    key = (case.source, case.kernel)
    k = _KERNELS.get(key)
    if k is None:
        k = client.jit(case.source, case.kernel)
        _KERNELS[key] = k
    return k


def copy_args(args: list) -> list:
    out = []
    for a in args:
        if isinstance(a, BF16Array):
            out.append(client.as_bf16(a.bits.copy()))
        elif isinstance(a, np.ndarray):
            out.append(a.copy())
        else:
            out.append(a)
    return out


def run_cpu(case: Case, args: list) -> None:
    jit_kernel(case)[case.grid](*args, **case.constexprs)


def run_interp(case: Case, args: list) -> None:
    """Build the IR the way client.jit specialises it and run it on the interpreter."""
    k = jit_kernel(case)
    bound, _ = k.bind(tuple(args), dict(case.constexprs))
    if k.ks.autotune is not None and k.ks.autotune.configs:
        full, _ = k._config_args(bound, k.ks.autotune.configs[0])
    else:
        full = k.complete(bound)
    specs, constexprs = k.specialisation(full)
    signature = {n: s.type for n, s in specs.items()}
    module = build_ir(k.ks, signature, constexprs)
    raw = [_interp_arg(full[p.name]) for p in k.params if not p.constexpr]
    run_kernel(module, k.name, raw, check_grid(case.grid, full))


def _interp_arg(a: Any) -> Any:
    return a.bits if isinstance(a, BF16Array) else a


def compare(case: Case, args: list, expected: dict[int, np.ndarray], who: str) -> None:
    for i, want in expected.items():
        got = args[i].bits if isinstance(args[i], BF16Array) else args[i]
        msg = f"{case.name} on {who}: argument {i}"
        if case.rtol == 0.0 and case.atol == 0.0:
            np.testing.assert_array_equal(got, want, err_msg=msg)
        else:
            np.testing.assert_allclose(got.astype(np.float64), np.asarray(want).astype(np.float64), rtol=case.rtol,
                                       atol=case.atol, equal_nan=True, err_msg=msg)  # fmt: skip
