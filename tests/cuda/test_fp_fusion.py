"""Scalar float code on the cuda target, checked in the PTX (and assembled by ptxas), without a GPU: a multiply
feeding an add becomes one fma (LLVM's `contract` flag, Triton's default enable_fp_fusion), bf16 keeps its
rounding after each op (no fma), exp2 is one ex2.approx.ftz, and the warp index is read back through
shfl.sync.idx so that ptxas keeps per-warp values in uniform registers."""

from __future__ import annotations

import re

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def k(X, Y, Z, Out, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    y = tl.load(Y + i)
    z = tl.load(Z + i)
    tl.store(Out + i, tl.math.exp2(x * y - z) + x * z)
"""


def build(dtype: str, cuda: CudaOptions = CudaOptions()) -> str:
    sig = {"X": f"*{dtype}", "Y": f"*{dtype}", "Z": f"*{dtype}", "Out": f"*{dtype}"}
    art = compile_kernel(SRC, "k", signature=sig, constexprs={"BLOCK": 256},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4, cuda=cuda), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"
    return art.ptx


def test_f32_multiply_add_fuses_and_exp2_flushes() -> None:
    text = build("fp32")
    assert re.search(r"\bfma\.rn\.f32\b", text)
    assert not re.search(r"\b(mul|add|sub)\.rn\.f32\b", text)  # .rn would forbid ptxas to fuse
    assert "ex2.approx.ftz.f32" in text and "ex2.approx.f32" not in text


def test_options_off_give_separate_rounding() -> None:
    text = build("fp32", CudaOptions(fp_fusion=False, ex2_ftz=False))
    assert "fma" not in text and re.search(r"\bmul\.rn\.f32\b", text)
    assert "ex2.approx.f32" in text and "ex2.approx.ftz" not in text


def test_bf16_rounds_after_each_op() -> None:
    """bf16 values live in f32 registers rounded to bf16 after each op: a fused multiply-add would skip
    the rounding of the product, so none is formed."""
    text = build("bf16")
    assert "fma" not in text


def test_warp_index_is_uniform() -> None:
    """A warp index is read back through shfl.sync.idx. This kernel needs one only with its coordinates built
    bit by bit (coords_from_tid=False); by default they come from tid.x and it makes none."""
    bitwise = CudaOptions(coords_from_tid=False)
    text = build("fp32", bitwise)
    assert re.search(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, 0, 31, -1;", text)
    assert "shfl.sync.idx" not in build("fp32", CudaOptions(coords_from_tid=False, uniform_warp=False))
    assert "shfl.sync.idx" not in build("fp32")
