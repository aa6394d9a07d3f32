"""Reductions on a real GPU against Triton's own bits: the same source's tl.sum over rows, columns and a
whole 1-D tile, at several tile shapes and warp counts, gives the same float32 sums bit for bit (a thread's
registers folded in order, lanes from the highest shuffle down, warps in the butterfly's pairs: the order
Triton 3.6 rounds in; bench/reduce_order.py prints both sides' order), and tl.max with return_indices the
same values and indices. Skips without a GPU or without Triton."""

from __future__ import annotations

import importlib.util

import pytest

from tests.cuda.gpu import gpu_reason, triton_module
from tilec import client

pytestmark = [
    pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or ""),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed"),
]

SRC = """
import triton
import triton.language as tl


@triton.jit
def rows(x_ptr, s_ptr, m_ptr, i_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    if AXIS == 1:
        m, i = tl.max(x, 1, return_indices=True)
        tl.store(s_ptr + rm, tl.sum(x, 1))
        tl.store(m_ptr + rm, m)
        tl.store(i_ptr + rm, i)
    else:
        m, i = tl.max(x, 0, return_indices=True)
        tl.store(s_ptr + rn, tl.sum(x, 0))
        tl.store(m_ptr + rn, m)
        tl.store(i_ptr + rn, i)


@triton.jit
def whole(x_ptr, s_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(s_ptr, tl.sum(tl.load(x_ptr + offs), 0))
"""


def _triton_module(tmp_path):
    return triton_module(SRC, tmp_path, "reduce_kernels")


def _data(shape, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    scale = torch.exp2(torch.randint(-12, 12, shape, device="cuda", generator=g).float())
    return torch.randn(shape, device="cuda", generator=g) * scale  # sums whose rounding depends on the order


@pytest.mark.parametrize(
    "bm,bn,axis,warps", [(4, 4096, 1, 4), (1, 1024, 1, 4), (64, 256, 1, 8), (8, 2048, 1, 8), (256, 64, 0, 4),
                         (32, 128, 0, 2), (16, 512, 1, 1)],
)  # fmt: skip
def test_sums_and_max_indices_are_tritons_bits(bm: int, bn: int, axis: int, warps: int, tmp_path) -> None:
    import torch

    x = _data((bm, bn), bm * 7 + bn)
    n = bm if axis == 1 else bn
    outs = {}
    for side, k in (("triton", _triton_module(tmp_path).rows), ("tilec", client.jit(SRC, "rows"))):
        s = torch.empty(n, device="cuda")
        m = torch.empty(n, device="cuda")
        i = torch.empty(n, device="cuda", dtype=torch.int32)
        k[(1,)](x, s, m, i, BM=bm, BN=bn, AXIS=axis, num_warps=warps)
        torch.cuda.synchronize()
        outs[side] = (s.view(torch.int32), m.view(torch.int32), i)
    for got, want, what in zip(outs["tilec"], outs["triton"], ("sum", "max", "index"), strict=True):
        assert torch.equal(got, want), f"{what}: {int((got != want).sum())} of {n} differ"


@pytest.mark.parametrize("block,warps", [(4096, 4), (1024, 8), (256, 2), (8192, 8)])
def test_whole_tile_sums_are_tritons_bits(block: int, warps: int, tmp_path) -> None:
    import torch

    x = _data((block,), block + warps)
    outs = {}
    for side, k in (("triton", _triton_module(tmp_path).whole), ("tilec", client.jit(SRC, "whole"))):
        s = torch.empty(1, device="cuda")
        k[(1,)](x, s, BLOCK=block, num_warps=warps)
        torch.cuda.synchronize()
        outs[side] = s.view(torch.int32)
    assert torch.equal(outs["tilec"], outs["triton"]), (outs["tilec"], outs["triton"])
