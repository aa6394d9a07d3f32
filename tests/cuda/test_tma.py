"""TMA for host tensor descriptors on sm_90 (compiler/backends/cuda/tma.py): which ring loads take it, the
PTX (grid-constant tensor-map parameters, mbarrier init / expect_tx / try_wait, one cp.async.bulk.tensor per
swizzle block) assembled by ptxas, the launch metadata, the fallbacks to cp.async; and, on a GPU, the
descriptor matmul against torch (odd sizes: boxes past the edges) and the launcher's tensor-map encoding."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason
from tests.kernels import source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.tma import grid_constant_params
from tilec.compiler.pipeline import compile_kernel

PARTS = ("base", "shape0", "shape1", "stride0")


def build(bm: int, bn: int, bk: int, warps: int, stages: int, *, aligned: bool = True, target: str = "cuda:sm_90a",
          emit: str = "cubin"):  # fmt: skip
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
           "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}  # fmt: skip
    parts = PARTS if aligned else ("shape0", "shape1")
    hints = {d: {f"{p}.divisibility": 16 for p in parts} for d in ("a_desc", "b_desc", "c_desc")}
    return compile_kernel(source("desc_matmul"), "matmul_desc_kernel", signature=sig, hints=hints,
                          constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8},
                          options=CompileOptions(target=target, num_warps=warps, num_stages=stages), emit=emit)  # fmt: skip


@pytest.mark.parametrize(("cfg", "boxes"), [
    ((128, 256, 64, 8, 3), [[64, 128], [64, 64]]),
    ((128, 128, 32, 4, 4), [[32, 128], [64, 32]]),
    ((64, 256, 32, 4, 4), [[32, 64], [64, 32]]),
])  # fmt: skip
def test_descriptor_matmul_loads_with_tma(cfg: tuple, boxes: list) -> None:
    bm, bn, bk, warps, stages = cfg
    art = build(*cfg)
    assert art.binary.startswith(b"\x7fELF")  # ptxas took it
    ptx = art.ptx
    assert [e["box"] for e in art.metadata["tma"]] == boxes
    assert [e["param"] for e in art.metadata["tma"]] == [0, 4]  # a_desc's and b_desc's base parameters
    assert art.metadata["arg_kinds"][-2:] == ["tmap", "tmap"]
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 2
    assert "cp.async.cg" not in ptx  # both operands come by TMA
    per_stage = 1 + bn * 2 // 128  # A: one box (BK <= 64 halves); B: one per 128-byte block of its BN
    copies = len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier", ptx))
    assert copies == stages * per_stage  # the prologue's S-1 stages and the loop's one
    assert ptx.count("mbarrier.init.shared::cta.b64") == stages
    assert ptx.count("mbarrier.inval.shared::cta.b64") == stages
    nbytes = (bm * bk + bk * bn) * 2
    armed = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", ptx)
    assert armed and {int(x) for x in armed} == {nbytes}
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "wgmma.mma_async" in ptx


def test_unproven_alignment_stays_on_cp_async() -> None:
    """Without the hints that base and strides are 16-byte multiples, TMA could refuse the tensor at launch:
    the build keeps the cp.async ring (and no tensor-map parameters)."""
    art = build(128, 128, 64, 8, 3, aligned=False, emit="ptx")
    assert "tma" not in art.metadata and "tmap" not in art.metadata["arg_kinds"]
    assert "cp.async.bulk.tensor" not in art.ptx


def test_sm80_has_no_tma() -> None:
    art = build(128, 128, 32, 4, 3, target="cuda:sm_80", emit="ptx")
    assert "tma" not in art.metadata and "cp.async.bulk.tensor" not in art.ptx and "cp.async.cg" in art.ptx


def test_grid_constant_parameters_only_on_the_definition() -> None:
    text = 'define ptx_kernel void @"k"(ptr %"tilec.tmap.0", i32 %"n")\n  %"1" = ptrtoint ptr %"tilec.tmap.0" to i64'
    got = grid_constant_params(text).split("\n")
    assert got[0] == ('define ptx_kernel void @"k"(ptr byval([128 x i8]) align 64 "nvvm.grid_constant" '
                      '%"tilec.tmap.0", i32 %"n")')  # fmt: skip
    assert got[1] == text.split("\n")[1]


@pytest.mark.skipif(gpu_reason() is not None, reason=str(gpu_reason()))
@pytest.mark.parametrize(("m", "n", "k"), [(512, 512, 512), (1000, 1000, 1008), (384, 520, 264)])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 3), (128, 128, 32, 4, 4)])
def test_gpu_descriptor_matmul_against_torch(m: int, n: int, k: int, cfg: tuple) -> None:
    import torch

    from tilec import TensorDescriptor, client

    bm, bn, bk, warps, stages = cfg
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kern = client.jit(source("desc_matmul"), "matmul_desc_kernel")
    grid = (triton_cdiv(m, bm) * triton_cdiv(n, bn),)
    kern[grid](TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
               TensorDescriptor.from_tensor(c, [bm, bn]), m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
               GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)  # fmt: skip
    torch.cuda.synchronize()
    art = next(iter(kern.cache.values()))
    if torch.cuda.get_device_capability()[0] == 9:  # each operand on TMA where its stride (K of A, N of B) divides by 16
        assert {t["param"] for t in art.metadata.get("tma") or []} == {i for i, s in ((0, k), (4, n)) if s % 16 == 0}
    want = (a.float() @ b.float()).cpu().numpy()
    got = c.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
