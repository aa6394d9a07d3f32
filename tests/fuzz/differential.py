"""Run one generated Program on Triton (its interpreter on torch CPU tensors, or a GPU) and on tilec (its
reference interpreter, its cpu target, its cuda target), on the same inputs, and compare what they wrote.

Comparison rules (see kernelgen's docstring): int32 outputs bit for bit; float32 slots made only by
correctly rounded operations bit for bit (NaNs equal whatever their payload; +0.0 equals -0.0, because
IEEE 754's minNum/maxNum, LLVM's minnum/maxnum and PTX's min/max may return either zero when both
operands are zeros, and numpy's minimum returns its second operand); the other float slots within
rtol 1e-5 and an absolute term of 64 ulp of the slot's largest finite magnitude, which covers sums and
cumulative sums of 16 lanes added in another order (error <= n * eps * sum|x|) and division/sqrt done
with 2-ulp approximations (Triton's GPU `/` and `tl.sqrt`).
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .kernelgen import BLOCK, OUTPUTS, PROGRAMS, SLOTS, Program

GRID = (PROGRAMS,)
_TMP = Path(tempfile.mkdtemp(prefix="tilec_fuzz_"))  # Triton reads a kernel's source from its file
atexit.register(shutil.rmtree, _TMP, True)
_COUNT = [0]


@dataclass
class Outcome:
    outputs: dict[int, np.ndarray] | None
    error: str | None = None


def run_triton_interpreter(
    prog: Program, args: list, grid: tuple = GRID, outputs: tuple[int, ...] = tuple(OUTPUTS)
) -> Outcome:
    """Triton's interpreter in a child process started with TRITON_INTERPRET=1: Triton decides interpreted
    or compiled for its own library functions (tl.cumsum...) when it is first imported, and this process
    may have imported it for the GPU (the bench does) or through torch. A crash there is the oracle's."""
    try:
        return _interpreter_pool().apply(run_triton, (prog, args, "cpu", grid, outputs))
    except Exception as exc:  # noqa: BLE001
        return Outcome(None, f"oracle process: {type(exc).__name__}: {exc}")


_POOL: list = []


def _interpreter_pool():
    if not _POOL:
        pool = multiprocessing.get_context("spawn").Pool(1, initializer=_interpreted)
        atexit.register(pool.terminate)
        _POOL.append(pool)
    return _POOL[0]


def _interpreted() -> None:
    os.environ["TRITON_INTERPRET"] = "1"


def run_triton(
    prog: Program,
    args: list,
    device: str = "cpu",
    grid: tuple = GRID,
    outputs: tuple[int, ...] = tuple(OUTPUTS),
) -> Outcome:
    """Triton's interpreter (device "cpu", TRITON_INTERPRET=1 while the module is imported) or real Triton."""
    import torch

    _COUNT[0] += 1
    path = _TMP / f"fuzz_kernel_{os.getpid()}_{_COUNT[0]}.py"
    path.write_text(prog.source)
    saved = os.environ.get("TRITON_INTERPRET")
    if device == "cpu":  # read when the kernel is decorated and again on its first launch
        os.environ["TRITON_INTERPRET"] = "1"
    tensors = [torch.from_numpy(a.copy()).to(device) if isinstance(a, np.ndarray) else a for a in args]
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            mod.kernel[grid](*tensors, **prog.constexprs)
        if device != "cpu":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any failure of the oracle is reported, not raised
        return Outcome(None, f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        sys.modules.pop(path.stem, None)
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    return Outcome({i: tensors[i].cpu().numpy() for i in outputs})


def run_tilec(prog: Program, args: list, target: str) -> Outcome:
    """tilec's reference interpreter ("interp"), its cpu target ("cpu") or its cuda target ("cuda")."""
    from tilec import client

    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if target == "interp":
                _run_interp(prog, args)
            elif target == "cpu":
                client.jit(prog.source, "kernel")[GRID](*args, **prog.constexprs)
            else:
                return _run_cuda(prog, args)
    except Exception as exc:  # noqa: BLE001
        return Outcome(None, f"{type(exc).__name__}: {str(exc)[:300]}")
    return Outcome({i: args[i] for i in OUTPUTS})


def _run_interp(prog: Program, args: list) -> None:
    from tilec import client
    from tilec.compiler.frontend import build_ir
    from tilec.compiler.interp import run_kernel

    k = client.jit(prog.source, "kernel")
    bound, _ = k.bind(tuple(args), dict(prog.constexprs))
    full = k.complete(bound)
    specs, constexprs = k.specialisation(full)
    module = build_ir(k.ks, {n: s.type for n, s in specs.items()}, constexprs)
    run_kernel(module, k.name, [full[p.name] for p in k.params if not p.constexpr], GRID)


def _run_cuda(prog: Program, args: list) -> Outcome:
    import torch

    from tilec import client

    tensors = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in args]
    client.jit(prog.source, "kernel")[GRID](*tensors, **prog.constexprs)
    torch.cuda.synchronize()
    return Outcome({i: tensors[i].cpu().numpy() for i in OUTPUTS})


def compare(
    prog: Program, want: dict[int, np.ndarray], got: dict[int, np.ndarray], fused: bool = False
) -> str | None:
    """None when `got` agrees with `want` under the rules above, else a short description. `fused`: one side
    ran on a GPU, where Triton and tilec both let LLVM contract a multiply and an add into an fma wherever
    it sees one (Triton's enable_fp_fusion), so no float slot is bit for bit: all take the tolerance."""
    for i, name in OUTPUTS.items():
        w, g = want[i], got[i]
        if name != "of":
            if not np.array_equal(w, g):
                bad = np.flatnonzero(w != g)
                return f"{name}[{bad[0]}]: want {w[bad[0]]}, got {g[bad[0]]} ({bad.size} differ)"
            continue
        per = PROGRAMS * BLOCK
        for slot in range(SLOTS):
            ws, gs = w[slot * per : (slot + 1) * per], g[slot * per : (slot + 1) * per]
            bad = _float_mismatch(ws, gs, fused or prog.float_tol.get(slot, False))
            if bad is not None:
                return f"of slot {slot} lane {bad}: want {ws[bad]!r}, got {gs[bad]!r}"
    return None


def _float_mismatch(w: np.ndarray, g: np.ndarray, tolerant: bool) -> int | None:
    wn, gn = np.isnan(w), np.isnan(g)
    if not tolerant:
        same = (wn & gn) | (w == g)  # bit for bit but the sign of a zero (see the module's docstring)
    else:
        finite = np.isfinite(w)
        scale = float(np.max(np.abs(w[finite]))) if finite.any() else 1.0
        atol = 64 * float(np.finfo(np.float32).eps) * max(scale, 1.0)
        with np.errstate(all="ignore"):
            close = np.abs(w.astype(np.float64) - g.astype(np.float64)) <= atol + 1e-5 * np.abs(
                w.astype(np.float64)
            )
        same = (wn & gn) | (w == g) | (finite & close)
    bad = np.flatnonzero(~same)
    return int(bad[0]) if bad.size else None


def check(prog: Program, seed: int, targets: tuple[str, ...] = ("interp", "cpu")) -> dict[str, str | None]:
    """Run `prog` on Triton's interpreter and each tilec target; per target None (agrees) or what differed.
    A kernel the oracle itself rejects is reported under "oracle"."""
    args = prog.inputs(seed)
    oracle = run_triton_interpreter(prog, args)
    if oracle.outputs is None:
        return {"oracle": oracle.error}
    out: dict[str, str | None] = {}
    for t in targets:
        res = run_tilec(prog, args, t)
        out[t] = res.error if res.outputs is None else compare(prog, oracle.outputs, res.outputs)
    return out
