"""Runs one Triton-language kernel two ways, as a user would: `client.jit(source, name)[grid](...)` on the
cpu target, and the same launch re-enacted on the reference interpreter (bind, heuristics, defaults, grid
callable -> build_ir -> run_kernel). Each side gets its own copies of the arrays; both copies come back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tilec import client
from tilec.client._jit import JITKernel
from tilec.compiler.frontend import build_ir
from tilec.compiler.interp import run_kernel
from tilec.runtime.grid import check_grid
from tilec.runtime.launch import BF16Array

KERNELS = Path(__file__).parent / "kernels"


def source(stem: str) -> str:
    return (KERNELS / f"{stem}.py").read_text()


def kernel(stem: str, name: str | None = None) -> JITKernel:
    return client.jit(source(stem), name)


def _copy(args: tuple) -> list:
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a.copy())
        elif isinstance(a, BF16Array):
            out.append(BF16Array(a.bits.copy()))
        else:
            out.append(a)
    return out


def interp_launch(k: JITKernel, grid: Any, args: tuple, kwargs: dict, config: dict | None = None) -> None:
    """The launch of `k[grid](*args, **kwargs)`, on the interpreter. An autotuned kernel runs `config`
    (default: the one the cpu launch picked for these arguments, else the first)."""
    bound, _ = k.bind(args, kwargs)
    if k.ks.autotune is not None and k.ks.autotune.configs:
        if config is None:
            picked = k.best_configs.get(k.tuning_key(bound))
            config = dict(picked.kwargs) if picked is not None else dict(k.ks.autotune.configs[0].kwargs)
        bound = {**bound, **config}
    full = k.complete(bound)
    specs, constexprs = k.specialisation(full)
    signature = {n: s.type for n, s in specs.items()}
    hints = {n: dict(s.hints) for n, s in specs.items() if s.hints}
    module = build_ir(k.ks, signature, constexprs, hints=hints)
    g = check_grid(grid, full)
    runtime = [full[n] for n in specs]
    run_kernel(module, k.name, [a.bits if isinstance(a, BF16Array) else a for a in runtime], g)


def run_both(k: JITKernel, grid: Any, *args: Any, **kwargs: Any) -> tuple[list, list]:
    """Launch on the cpu target and on the interpreter, each over fresh copies of the arrays."""
    cpu_args, interp_args = _copy(args), _copy(args)
    k[grid](*cpu_args, **kwargs)
    interp_launch(k, grid, tuple(interp_args), kwargs)
    return cpu_args, interp_args


def check_both(k: JITKernel, grid: Any, args: tuple, kwargs: dict, outputs: dict[int, np.ndarray], *,
               rtol: float = 0.0, atol: float = 0.0) -> tuple[list, list]:
    """run_both, then each output argument (by position) of both runs against its NumPy reference."""
    cpu, interp = run_both(k, grid, *args, **kwargs)
    for i, ref in outputs.items():
        for side, got in (("cpu", cpu[i]), ("interp", interp[i])):
            got = got.bits if isinstance(got, BF16Array) else got
            np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{side}: argument {i}")
    return cpu, interp
