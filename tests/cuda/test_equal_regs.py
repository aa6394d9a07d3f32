"""Elementwise ops computed once per block of registers that axis analysis proves equal (Triton's
deduplication by constancy): a 2-D mask `rows[:, None] < M and cols[None, :] < N` over a thread's 8 rows is
one predicate per column when M is a multiple of 16, and one per element when nothing is known of M. No GPU
needed: the PTX is read; tests/cuda/test_gpu.py runs masked loads of both kinds on a GPU."""

from __future__ import annotations

import re

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def rows_max(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :] + tl.program_id(1), mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.max(x, 1), mask=rows < M)
"""
SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"}


def _ptx(m_hint: bool) -> str:
    hints = {"x_ptr": {"divisibility": 16}, "out_ptr": {"divisibility": 16}, "N": {"divisibility": 16}}
    if m_hint:
        hints["M"] = {"divisibility": 16}
    return compile_kernel(SRC, "rows_max", signature=SIG, constexprs={"BM": 8, "BN": 1024}, hints=hints,
                          options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="ptx").ptx  # fmt: skip


@pytest.mark.parametrize("m_hint", [True, False])
def test_a_mask_constant_over_a_threads_rows_is_computed_once_a_column(m_hint: bool) -> None:
    ptx = _ptx(m_hint)
    loads = len(re.findall(r"@%p\d+ ld\.global", ptx))
    masks = len(re.findall(r"\band\.pred\b", ptx))
    assert loads == 8 * 1024 // 128  # 8 rows x 8 columns a thread, one element each (the offset's alignment is 1)
    if m_hint:  # rows[:, None] < M is the same for the 8 rows: a predicate for each of the thread's 8 columns
        assert masks <= 8 + 1, masks  # (+ the store's)
        assert len(set(re.findall(r"@(%p\d+) ld\.global", ptx))) <= 8
    else:  # nothing known of M: each element's own
        assert masks >= loads, masks


