"""Atomics keep the memory order and scope the kernel asks for, Triton's defaults (acq_rel, gpu) where it asks
none: each is one predicated `atom.<sem>.<scope>.global`, assembled by ptxas (no GPU needed). LLVM's NVPTX
backend printed every atomicrmw as a relaxed atom, so a spin lock's release (tutorial 05's layer-norm backward)
did not order the stores before it, and its cmpxchg at system scope. The GPU side: tests/cuda/test_gpu.py's
atomics, test_gpu_every_op's and test_lock_gpu.py."""

from __future__ import annotations

import re

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def lock_add(Lock, Count, X, H, D, Out, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    c = tl.load(Count)
    tl.atomic_xchg(Count, c + 1)
    tl.atomic_add(X + i, tl.load(X + i))
    tl.atomic_add(H + i, tl.load(H + i), sem="relaxed")
    tl.atomic_max(Out + i, i, mask=i < 7, scope="cta")
    tl.atomic_min(Out + i, i, sem="acquire", scope="sys")
    tl.atomic_add(D + i, tl.load(D + i), sem="release")
    tl.atomic_xchg(Lock, 0)
"""
SIG = {"Lock": "*i32", "Count": "*i32", "X": "*fp32", "H": "*fp16", "D": "*fp64", "Out": "*i32"}


def _ptx(src: str = SRC, sig: dict = SIG) -> str:
    art = compile_kernel(src, "lock_add", signature=sig, constexprs={"BLOCK": 128},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="cubin")  # fmt: skip
    return art.ptx


def test_each_atomic_takes_its_order_and_scope() -> None:
    ptx = _ptx()
    atoms = re.findall(r"@%p\d+ atom\.([a-z_]+)\.([a-z]+)\.global\.([a-z]+)\.([a-z0-9.]+)", ptx)
    got = {(op, ty): (sem, scope) for sem, scope, op, ty in atoms}
    assert got[("cas", "b32")] == ("acq_rel", "gpu")  # the lock, as Triton takes it
    assert got[("exch", "b32")] == ("acq_rel", "gpu")  # its release orders the stores before it
    assert got[("add", "f32")] == ("acq_rel", "gpu")
    assert got[("add", "noftz.f16")] == ("relaxed", "gpu")
    assert got[("max", "s32")] == ("acq_rel", "cta")
    assert got[("min", "s32")] == ("acquire", "sys")
    assert got[("add", "f64")] == ("release", "gpu")
    assert ".sys" not in ptx.replace("acquire.sys", "")  # nothing else at system scope
    assert not re.search(r"\batom\.global\.", ptx)  # no atom without an order (LLVM's relaxed form)


def test_a_bad_scope_is_an_error_at_its_line() -> None:
    bad = SRC.replace('scope="cta"', 'scope="device"')
    with pytest.raises(CompileError, match=r"scope must be one of gpu, cta, sys"):
        _ptx(bad)


@pytest.mark.parametrize("attr", ['sem = "acq_rel.gpu.global.exch.b32 $0, [$1], $2; //"', 'scope = "device"'])
def test_tile_ir_with_another_order_or_scope_is_refused(attr: str) -> None:
    """Tile IR text comes from strangers too: an order or scope outside Triton's words is a verify error, and
    never reaches the PTX the lowering writes."""
    ir = f"""module {{
  kernel @k(%L: ptr<i32>) {{
    %0 = constant {{value = 1}} : i32
    %1 = atomic_rmw %L, %0 {{kind = "xchg", {attr}}} : i32
    return
  }}
}}"""
    with pytest.raises(CompileError, match=r"(sem|scope) must be one of"):
        compile_kernel(ir, "k", signature={}, constexprs={}, is_ir=True,
                       options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="ptx")  # fmt: skip
