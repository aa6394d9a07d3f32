"""f32 -> bf16 on the cuda target (compiler/backends/cuda/ops.py f32_to_bf16_bits): an fptrunc to LLVM's bfloat,
which the NVPTX backend makes one `cvt.rn.bf16.f32` on sm_80 and later (Triton's conversion) and integer
round-to-nearest-even before. The PTX of a bf16 store and of bf16 arithmetic (rounded after each op), by
target; the values themselves are checked on a GPU against the interpreter (tests/cuda/test_gpu_every_op.py)."""

from __future__ import annotations

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    y = tl.load(y_ptr + o)
    tl.store(out_ptr + o, (x * y + x).to(tl.bfloat16))
"""


def ptx(target: str, dtype: str) -> str:
    sig = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "out_ptr": "*bf16"}
    return compile_kernel(SRC, "k", signature=sig, constexprs={"BLOCK": 256}, options=CompileOptions(target=target),
                          emit="cubin").ptx  # fmt: skip


@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda:sm_90"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_sm80_and_later_convert_with_one_cvt(target: str, dtype: str) -> None:
    text = ptx(target, dtype)
    assert "cvt.rn.bf16.f32" in text
    assert "bfe.u32" not in text and "32767" not in text  # no integer rounding left


def test_sm70_rounds_with_integers() -> None:
    text = ptx("cuda:sm_70", "fp32")
    assert "cvt.rn.bf16.f32" not in text  # sm_70 has no such cvt
    assert "bfe.u32" in text and "32767" in text  # lowest kept bit, plus 0x7FFF: round to nearest even
