"""Masked loads of 1 or 2 bytes a thread (fp16, bf16, int8, bool tiles that cannot be vectorised) are
predicated loads into a 16-bit register holding the `other` value, as Triton emits them, not a branch
around each element. Checked in the PTX (ptxas assembles it: the cubin stage)."""

from __future__ import annotations

import re

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def gather_rows(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    idx = (i * 7) % n  # not contiguous: one element a thread
    x = tl.load(x_ptr + idx, mask=idx < n - 1, other=3)
    tl.store(out_ptr + i, x)
"""


@pytest.mark.parametrize("dtype,bits", [("*fp16", 16), ("*bf16", 16), ("*i8", 8), ("*i1", 8)])
def test_narrow_masked_loads_are_predicated(dtype: str, bits: int) -> None:
    art = compile_kernel(SRC, "gather_rows", signature={"x_ptr": dtype, "out_ptr": dtype, "n": "i32"},
                         constexprs={"BLOCK": 256}, options=CompileOptions(target="cuda:sm_90"), emit="cubin")  # fmt: skip
    loads = re.findall(rf"@%p\d+ ld\.global\.b{bits} %rs\d+, \[ %rd\d+ \+ 0 \];", art.ptx)
    assert len(loads) == 2, art.ptx[-3000:]  # 256 elements over 128 threads
    assert not re.search(r"^\s*@%p\d+ bra", art.ptx, re.M), "a branch around a load"
