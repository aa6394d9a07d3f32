"""`tl.dot(a, b.T)` with B stored N x K: after the trans-load pass the transposed load is a plain load of
transposed pointers, so the cuda pipeline planner copies both operands through the cp.async ring, as it does
when the same K-major B is given through strides (ptxas-checked, sm_90)."""

from __future__ import annotations

import re

from tests.kernels import source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}  # fmt: skip
HINTS = {n: {"divisibility": 16} for n in SIG}
CONSTS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}


def _build(src: str, name: str, sig: dict, hints: dict):
    return compile_kernel(src, name, signature=sig, constexprs=CONSTS, hints=hints,
                          options=CompileOptions(target="cuda:sm_90", num_warps=8, num_stages=3), emit="cubin")  # fmt: skip


def test_transposed_operand_takes_the_ring_like_a_strided_one() -> None:
    bt = _build(source("matmul_bt"), "matmul_bt_kernel", SIG, HINTS)
    # the same product with B's transpose given through strides: b[k, n] at b_ptr + n * stride_bn + k
    strided = source("matmul_bt").replace(
        "b = tl.load(b_ptr + (rn % N)[:, None] * stride_bn + kk[None, :], mask=kk[None, :] < K, other=0.0)",
        "b = tl.load(b_ptr + kk[:, None] + (rn % N)[None, :] * stride_bn, mask=kk[:, None] < K, other=0.0)",
    ).replace("tl.dot(a, b.T, acc)", "tl.dot(a, b, acc)")
    assert strided != source("matmul_bt")
    ref = _build(strided, "matmul_bt_kernel", SIG, HINTS)
    assert bt.metadata["pipelined_loops"] == ref.metadata["pipelined_loops"] == 1
    assert bt.ptx.count("cp.async.cg") == ref.ptx.count("cp.async.cg") > 0
    assert bt.metadata["shared_bytes"] == ref.metadata["shared_bytes"]
    assert "wgmma.mma_async" in bt.ptx
    loop = bt.tir.split(" for ")[1].split("yield")[0]
    assert not re.search(r"= trans .*xf16>", loop)  # only pointers and masks are transposed in the K loop
