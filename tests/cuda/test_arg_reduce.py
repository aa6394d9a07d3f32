"""argmax/argmin on the cuda target: one reduction of (value, index) pairs, and `tl.max(x, 1,
return_indices=True)` (or a max and an argmax of one tile written out) as that one reduction, not two.

The combines are the cuda lowering's own LLVM, run here on the host (llvmlite's JIT): folded in a thread's
register order (a later index each time) and then, a partial of NaN alone marked as the lowering marks it, in
random trees (lanes and warps), they must give the
interpreter's answer: the first index of the maximum, NaN ignored unless every value is NaN (then index 0),
and as value the NaN-ignoring maximum. The PTX shows the fused reduction (its shuffles); on a GPU the kernel
runs against the interpreter."""

from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cpu.target import new_target_machine
from tilec.compiler.backends.cuda import ops
from tilec.compiler.backends.cuda.reduce import NAN_MARK, ReduceLowering
from tilec.compiler.interp.semantics import _arg_extreme
from tilec.compiler.ir.types import ScalarType
from tilec.compiler.pipeline import compile_kernel

from .gpu import gpu_reason, run_gpu

F32 = ScalarType("f32")


class _Combines(ReduceLowering):
    """The lowering's combine methods on a builder of our own: they read nothing else."""

    def __init__(self, builder: ir.IRBuilder):
        self.b = builder


def _jit_combines(kind: str):
    """`full(av, ai, bv, bi)` (the combine across lanes and warps, on partials marked as arg_nan_mark marks
    them) and `later(av, ai, bv, bi)` (b's index above a's) as host functions that return the chosen index
    (marked, from full); the value is recovered from it by the caller."""
    mod = ir.Module(name="arg_combine")
    mod.triple = llvm.get_process_triple()
    fnty = ir.FunctionType(ops.I32, [ops.F32, ops.I32, ops.F32, ops.I32])
    for name in ("full", "later"):
        fn = ir.Function(mod, fnty, name)
        bld = ir.IRBuilder(fn.append_basic_block())
        av, ai, bv, bi = fn.args
        low = _Combines(bld)
        if name == "later":
            _v, i = low._arg_combine_later(kind, F32, (av, ai), (bv, bi))
        else:  # partials across lanes and warps: a NaN one marked (marking a marked one changes nothing)
            a, b = low.arg_nan_mark(kind, F32, av, ai), low.arg_nan_mark(kind, F32, bv, bi)
            _v, i = low._arg_combine(kind, F32, a, b)
        bld.ret(i)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), new_target_machine())
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_float, ctypes.c_int32, ctypes.c_float, ctypes.c_int32)
    funcs = {n: proto(engine.get_function_address(n)) for n in ("full", "later")}
    funcs["engine"] = engine  # keeps the code alive
    return funcs


SPECIAL = np.array([np.nan, -np.inf, np.inf, -1.0, 0.0, -0.0, 2.5, 2.5, -7.0], np.float32)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_combines_give_the_interpreters_answer_in_any_tree(kind: str) -> None:
    fns = _jit_combines(kind)
    rng = np.random.default_rng(7)
    rows = [np.full(8, np.nan, np.float32), np.array([np.nan, -np.inf, np.nan, -np.inf], np.float32),
            np.array([3, 3, 3, 3], np.float32), np.array([np.nan, 5, np.nan, 5, np.nan], np.float32)]
    rows += [rng.choice(SPECIAL, size=int(rng.integers(1, 40))) for _ in range(300)]
    for x in rows:
        want = int(_arg_extreme(x[None, :], 1, kind == "argmax")[0])
        # a thread's registers: in index order, then the threads' partials combined in a random tree
        chunk = int(rng.integers(1, 6))
        parts = []
        for s in range(0, len(x), chunk):
            acc = s
            for j in range(s + 1, min(s + chunk, len(x))):
                acc = fns["later"](x[acc], acc, x[j], j)
            parts.append(acc)
        while len(parts) > 1:
            k = int(rng.integers(0, len(parts) - 1))
            a, b = (parts[k], parts[k + 1]) if rng.random() < 0.5 else (parts[k + 1], parts[k])
            parts[k:k + 2] = [fns["full"](x[a & ~NAN_MARK], a, x[b & ~NAN_MARK], b)]
        got = parts[0] & ~NAN_MARK
        assert got == want, (kind, x.tolist(), got, want)
        best = (np.fmax if kind == "argmax" else np.fmin).reduce(x)
        assert x[got] == best or (np.isnan(x[got]) and np.isnan(best)), (x.tolist(), got)


SRC = """
import triton
import triton.language as tl


@triton.jit
def both(x_ptr, v_ptr, i_ptr, BM: tl.constexpr, BN: tl.constexpr, ORDER: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    if ORDER == 0:
        v, i = tl.max(x, 1, return_indices=True)
    elif ORDER == 1:
        i = tl.argmin(x, 1)
        v = tl.min(x, 1)
    else:
        v = tl.max(x, 1)
        i = tl.argmax(x, 1)
        v = v + tl.sum(x, 1)
    tl.store(v_ptr + rm, v)
    tl.store(i_ptr + rm, i)


@triton.jit
def arg_only(x_ptr, v_ptr, i_ptr, BM: tl.constexpr, BN: tl.constexpr, ORDER: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    tl.store(i_ptr + rm, tl.argmax(x, 1))
"""

SIG = {"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32"}


def _ptx(name: str, order: int) -> str:
    return compile_kernel(SRC, name, signature=SIG, constexprs={"BM": 4, "BN": 256, "ORDER": order},
                          options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="ptx").ptx  # fmt: skip


def _shuffles(ptx: str) -> int:
    return len(re.findall(r"shfl\.sync", ptx))


def test_max_with_indices_is_one_reduction_of_pairs() -> None:
    alone = _shuffles(_ptx("arg_only", 0))
    assert alone > 0
    for order in (0, 1):  # return_indices; argmin written before min
        assert _shuffles(_ptx("both", order)) == alone, order
    # max before argmax, and a sum: the pair's shuffles carry two registers, the sum's one
    assert _shuffles(_ptx("both", 2)) == alone * 3 // 2


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("bn", [256, 4096])  # 4096: 32 registers a thread along the row, in two passes
def test_fused_reduction_on_the_gpu(order: int, bn: int) -> None:
    from tests.cuda.test_gpu import reference
    from tilec import client

    rng = np.random.default_rng(order)
    x = rng.choice(SPECIAL, size=(4, bn)).astype(np.float32)
    x[0] = np.nan
    x[1, ::3] = np.nan
    x[2] = 1.0
    consts = {"BM": 4, "BN": bn, "ORDER": order}
    args = [x, np.zeros(4, np.float32), np.zeros(4, np.int32)]
    want = reference(SRC, "both", args, (1,), consts)
    got = run_gpu(client.jit(SRC, "both"), (1,), args, consts, num_warps=4)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(got[1], want[1])
