"""TMA for host tensor descriptors on sm_90 (compiler/backends/cuda/tma.py): which ring loads take it, the
PTX (grid-constant tensor-map parameters, mbarrier init / expect_tx / try_wait, one cp.async.bulk.tensor per
swizzle block) assembled by ptxas, the launch metadata, the fallbacks to cp.async; and, on a GPU, the
descriptor matmul against torch (odd sizes: boxes past the edges) and the launcher's tensor-map encoding.
The same for block pointers whose base, shape and strides are kernel parameters (tests/kernels/
blockptr_matmul.py), and the block pointers that stay on cp.async."""

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
    if torch.cuda.get_device_capability()[0] == 9:  # each operand on TMA where its stride (A: K, B: N) is x16
        want_tma = {i for i, s in ((0, k), (4, n)) if s % 16 == 0}
        assert {t["param"] for t in art.metadata.get("tma") or []} == want_tma
    want = (a.float() @ b.float()).cpu().numpy()
    got = c.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)


BP_NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
            "stride_cm", "stride_cn")  # fmt: skip
SIZES = {"M": {"divisibility": 16}, "N": {"divisibility": 16}, "K": {"divisibility": 16}}
BP_ALIGNED = {**SIZES, "a_ptr": {"divisibility": 16}, "b_ptr": {"divisibility": 16}, "c_ptr": {"divisibility": 16},
              "stride_am": {"divisibility": 16}, "stride_ak": {"equal_to_1": True},
              "stride_bk": {"divisibility": 16}, "stride_bn": {"equal_to_1": True},
              "stride_cm": {"divisibility": 16}, "stride_cn": {"equal_to_1": True}}  # fmt: skip


def build_blockptr(bm: int, bn: int, bk: int, warps: int, stages: int, *, hints=None, text: str | None = None,
                   emit: str = "cubin"):  # fmt: skip
    sig = {n: "*fp16" if n.endswith("_ptr") else "i32" for n in BP_NAMES}
    return compile_kernel(text or source("blockptr_matmul"), "matmul_blockptr_kernel", signature=sig,
                          hints=BP_ALIGNED if hints is None else hints,
                          constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8},
                          options=CompileOptions(target="cuda:sm_90a", num_warps=warps, num_stages=stages), emit=emit)  # fmt: skip


@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 3), (128, 128, 32, 4, 4)])
def test_blockptr_matmul_loads_with_tma(cfg: tuple) -> None:
    """A and B's block pointers over kernel parameters, with the hints of aligned, row-major fp16 arrays:
    both rings are filled by TMA, each map's recipe names the parameters that give base, shape, strides."""
    bm, bn, bk, warps, stages = cfg
    art = build_blockptr(*cfg)
    assert art.binary.startswith(b"\x7fELF")  # ptxas took it
    ptx = art.ptx
    maps = art.metadata["tma"]
    assert [(e["param"], e["shape"], e["strides"]) for e in maps] == [
        (0, [{"param": 3}, {"param": 5}], [{"param": 6}, {"value": 1}]),  # A: (M, K), (stride_am, 1)
        (1, [{"param": 5}, {"param": 4}], [{"param": 8}, {"value": 1}]),  # B: (K, N), (stride_bk, 1)
    ]
    assert [e["box"] for e in maps] == [[bk, bm], [64, bk]]
    assert art.metadata["arg_kinds"][-2:] == ["tmap", "tmap"] and len(art.metadata["arg_kinds"]) == 14
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 2
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    per_stage = 1 + bn * 2 // 128
    copies = len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier", ptx))
    assert copies == stages * per_stage
    armed = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", ptx)
    assert armed and {int(x) for x in armed} == {(bm * bk + bk * bn) * 2}
    assert "wgmma.mma_async" in ptx


def _without(*names: str) -> dict:
    return {n: h for n, h in BP_ALIGNED.items() if n not in names}


@pytest.mark.parametrize(("case", "hints", "edit", "tma", "ring"), [
    ("no alignment hints", _without("a_ptr", "b_ptr", "c_ptr", "stride_am", "stride_bk", "stride_cm"), None, [],
     False),
    ("A's base not proven aligned", _without("a_ptr"), None, [1], False),
    ("B's row stride not proven x16", _without("stride_bk"), None, [0], False),
    ("A's column stride not 1", _without("stride_ak"), None, [1], False),
    ("B column-major", {**_without("stride_bk", "stride_bn"), "stride_bk": {"equal_to_1": True},
                        "stride_bn": {"divisibility": 16}}, None, [0], True),
    ("A at an offset base", BP_ALIGNED, ("base=a_ptr,", "base=a_ptr + tl.program_id(1) * M * stride_am,"), [1],
     True),
    ("A over a computed shape", BP_ALIGNED, ("shape=(M, K),", "shape=(M, K - 8),"), [1], True),
    ("B read with NaN padding", BP_ALIGNED,
     ("b = tl.load(b_blk, boundary_check=(0, 1))", 'b = tl.load(b_blk, boundary_check=(0, 1), padding_option="nan")'),
     [0], False),
])  # fmt: skip
def test_blockptr_matmul_stays_on_pointer_path(
    case: str, hints: dict, edit: tuple | None, tma: list, ring: bool
) -> None:
    """What TMA cannot be proven to take stays on the pointer path, operand by operand: unproven alignment, a
    leading stride other than 1, a base or shape the kernel computes, NaN padding. Where the pointer path
    proves 16-byte copies (`ring`) that is the cp.async ring; elsewhere (unaligned rows, NaN padding) the
    loads are plain ones, as without block pointers."""
    text = source("blockptr_matmul")
    if edit is not None:
        assert edit[0] in text
        text = text.replace(edit[0], edit[1])
    art = build_blockptr(128, 128, 64, 8, 3, hints=hints, text=text)
    assert art.binary.startswith(b"\x7fELF")
    assert [e["param"] for e in art.metadata.get("tma") or []] == tma, case
    assert art.metadata["arg_kinds"].count("tmap") == len(tma)
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", art.ptx)) == len(tma)
    assert ("cp.async.bulk.tensor" in art.ptx) == bool(tma)
    assert ("cp.async.cg" in art.ptx) == ring  # the other operand's 16-byte cp.async copies
    assert ring or "ld.global" in art.ptx


@pytest.mark.skipif(gpu_reason() is not None, reason=str(gpu_reason()))
@pytest.mark.parametrize(("m", "n", "k"), [(512, 512, 512), (1000, 1000, 1008), (384, 520, 264)])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 3), (128, 128, 32, 4, 4)])
def test_gpu_blockptr_matmul_against_torch(m: int, n: int, k: int, cfg: tuple) -> None:
    import torch

    from tilec import client

    bm, bn, bk, warps, stages = cfg
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kern = client.jit(source("blockptr_matmul"), "matmul_blockptr_kernel")
    grid = (triton_cdiv(m, bm) * triton_cdiv(n, bn),)
    kern[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
               BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)  # fmt: skip
    torch.cuda.synchronize()
    art = next(iter(kern.cache.values()))
    if torch.cuda.get_device_capability()[0] == 9:  # on TMA where the row stride (A: K, B: N) is x16
        want_tma = {i for i, s in ((0, k), (1, n)) if s % 16 == 0}  # a_ptr and b_ptr are parameters 0 and 1
        assert {t["param"] for t in art.metadata.get("tma") or []} == want_tma
    want = (a.float() @ b.float()).cpu().numpy()
    got = c.float().cpu().numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)
    # a second launch with the same specialisation (the JIT's fast path for plain launches) on new inputs:
    # a kernel with TMA takes its tensor maps from these arguments, not the first launch's
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    c.fill_(float("nan"))
    kern[grid](a2, b2, c, m, n, k, a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1), c.stride(0), c.stride(1),
               BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)  # fmt: skip
    torch.cuda.synchronize()
    assert len(kern.cache) == 1
    np.testing.assert_allclose(c.float().cpu().numpy(), (a2.float() @ b2.float()).cpu().numpy(), rtol=1e-2, atol=5e-2)


@pytest.mark.skipif(gpu_reason() is not None, reason=str(gpu_reason()))
def test_gpu_tuner_bench_times_a_tma_kernel() -> None:
    """The tuner's CUDA bench launches an artifact whose block pointers take TMA: it encodes their tensor
    maps from the trial's own buffers and scalars (runtime/bench.py), and the trial is timed, not a fault."""
    from tilec.compiler.tune.launch import LaunchDescription, resolve
    from tilec.runtime.bench import CudaBench

    toml = """
grid = ["cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)"]
[args]
a_ptr = "randn(M, K)"
b_ptr = "randn(K, N)"
c_ptr = "empty(M, N)"
M = 1024
N = 1024
K = 1024
stride_am = "K"
stride_ak = 1
stride_bk = "N"
stride_bn = 1
stride_cm = "N"
stride_cn = 1
"""
    params = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"] + [f"stride_{x}" for x in ("am", "ak", "bk", "bn", "cm", "cn")]
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"} | {p: "i32" for p in params[3:]}
    hints = {p: {"divisibility": 16} for p in params}
    hints |= {p: {"equal_to_1": True} for p in ("stride_ak", "stride_bn", "stride_cn")}
    consts = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8}
    art = compile_kernel(source("blockptr_matmul"), "matmul_blockptr_kernel", signature=sig, constexprs=consts,
                         hints=hints, options=CompileOptions(target="cuda:sm_90", num_warps=8, num_stages=3),
                         emit="cubin")  # fmt: skip
    assert len(art.metadata["tma"]) == 2
    bench = CudaBench(resolve(LaunchDescription.from_toml(toml), sig, params))
    timing = bench.time(art, {"kwargs": consts, "num_warps": 8, "num_stages": 3}, max_seconds=0.5)
    assert 0 < timing.median_ms < 50


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
