"""The sm_90a path of `dot` (warpgroup MMA) without a GPU: the swizzled operand tiles against a model of
how wgmma reads shared memory through a matrix descriptor, the plans, and the tutorial matmul compiled
for cuda:sm_90a and assembled by ptxas (transposed operands too); cuda:sm_90 builds for sm_90a only
when a dot takes wgmma. The same kernels run against torch on the device in bench/wgmma_matmul.py."""

from __future__ import annotations

import itertools
import re

import pytest

from tests.kernels import source
from tilec.compiler.artifact import CompileOptions, parse_target
from tilec.compiler.backends.cuda.layouts import WgmmaSpec, wgmma_layout
from tilec.compiler.backends.cuda.swizzle import SwizzledTile, swizzle_width
from tilec.compiler.backends.cuda.wgmma import WgmmaLowering
from tilec.compiler.pipeline import compile_kernel

NAMES = ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")


def hw_address(start: int, desc: int, mn_major: bool, mn: int, k: int, eb: int) -> int:
    """Where wgmma reads element (mn, k) of an operand sub-tile whose descriptor is `desc` and whose
    unswizzled start is `start`: the canonical layouts of the PTX ISA (rows of `sw` bytes; K-major: 8-row
    groups SBO apart; MN-major: `sw`-byte column blocks LBO apart, 8-row K groups SBO apart), then the
    swizzle (address bits 4.. XOR bits 7..)."""
    lbo, sbo = ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4
    sw = {1: 128, 2: 64, 3: 32}[desc >> 62]
    if mn_major:
        a = start + mn * eb % sw + mn * eb // sw * lbo + k % 8 * sw + k // 8 * sbo
    else:
        a = start + mn % 8 * sw + mn // 8 * sbo + k * eb
    return a ^ (((a >> 7) & (sw // 16 - 1)) << 4)


@pytest.mark.parametrize(("mn_total", "k_total", "mn_major", "n_inst", "eb"), [
    (128, 64, False, 64, 2), (128, 32, False, 64, 2), (64, 16, False, 64, 2), (128, 128, False, 64, 2),
    (256, 64, False, 256, 2), (256, 64, True, 256, 2), (128, 32, True, 128, 2), (32, 64, True, 32, 2),
    (64, 64, True, 64, 2), (16, 32, True, 16, 2),
    # tf32 (k8) and fp8 (k32): K-major only; 32-, 64- and 128-byte swizzles, K over several column blocks
    (128, 32, False, 64, 4), (64, 64, False, 64, 4), (64, 8, False, 64, 4), (128, 16, False, 128, 4),
    (128, 64, False, 64, 1), (64, 128, False, 64, 1), (64, 32, False, 64, 1), (256, 256, False, 256, 1),
])  # fmt: skip
def test_stored_tile_is_what_the_descriptor_reads(
    mn_total: int, k_total: int, mn_major: bool, n_inst: int, eb: int
) -> None:
    kk = 32 // eb  # the instruction's K: 32 bytes
    rows, cols = (k_total, mn_total) if mn_major else (mn_total, k_total)
    tile = SwizzledTile(rows, cols, eb, swizzle_width(cols, eb))
    desc = tile.descriptor(mn_major)
    for mn0, ks in itertools.product(range(0, mn_total, n_inst), range(k_total // kk)):
        start = WgmmaLowering._static_start(tile, mn_major, mn0, ks * kk)
        for mn, k in itertools.product(range(n_inst), range(kk)):
            stored = tile.offset(ks * kk + k, mn0 + mn) if mn_major else tile.offset(mn0 + mn, ks * kk + k)
            assert hw_address(start, desc, mn_major, mn, k, eb) == stored, (mn0, ks, mn, k)


def test_swizzle_permutes_16_byte_chunks_within_rows() -> None:
    tile = SwizzledTile(16, 64, 2, 128)
    for r in range(16):
        chunks = sorted(tile.offset(r, c) // 16 for c in range(0, 64, 8))
        assert chunks == [r * 8 + i for i in range(8)]  # a row stays a row; its 8 chunks all land in it
        assert tile.offset(r, 8) // 16 % 8 == 1 ^ (r % 8)


@pytest.mark.parametrize(("shape", "spec", "num_warps"), [((128, 256), WgmmaSpec("f16", 2, 1, 1, 256), 8),
                                                          ((128, 128), WgmmaSpec("f16", 1, 1, 2, 128), 4),
                                                          ((64, 128), WgmmaSpec("bf16", 1, 2, 1, 64), 8)])  # fmt: skip
def test_accumulator_layout_is_the_isa_fragment(shape: tuple, spec: WgmmaSpec, num_warps: int) -> None:
    """Register 4j + c (+ n/2 per m64 tile) of lane l in warp w of warpgroup (gm, gn) holds row 16(w%4) + l/4
    (+8 for c >= 2) and column 8j + 2(l%4) + c%2 of its m64 x n block."""
    lay = wgmma_layout(shape, spec, num_warps)
    seen = set()
    for r, lane, warp in itertools.product(range(lay.num_regs), range(32), range(num_warps)):
        row, col = lay.reg_coord(r)
        for bases, bits in ((lay.lane, lane), (lay.warp, warp)):
            for i, (dr, dc) in enumerate(bases):
                if bits >> i & 1:
                    row, col = row + dr, col + dc
        wg = warp // 4
        gm, gn = wg % spec.wm, wg // spec.wm
        mi, j, c = r // (spec.n // 2), r % (spec.n // 2) // 4, r % 4
        want_row = 64 * (gm * spec.mrep + mi) + 16 * (warp % 4) + lane // 4 + 8 * (c >= 2)
        want_col = spec.n * gn + 8 * j + 2 * (lane % 4) + c % 2
        assert (row, col) == (want_row, want_col)
        seen.add((row, col))
    assert len(seen) == shape[0] * shape[1]


def test_targets() -> None:
    assert parse_target("cuda:sm_90a") == ("cuda", 90)
    with pytest.raises(ValueError, match="start at sm_90"):
        parse_target("cuda:sm_80a")


def tutorial() -> str:
    text = source("matmul")
    start = text.index("@triton.autotune(")
    return text[:start] + text[text.index("@triton.jit", start) :]


def compile_tutorial(cfg: tuple, target: str = "cuda:sm_90a", m: int = 4096, n: int = 4096, k: int = 4096,
                     trans_a: bool = False, trans_b: bool = False, dtype: str = "*fp16", b_dtype: str | None = None,
                     out: str = "*fp16"):  # fmt: skip
    bm, bn, bk, nw, ns = cfg
    vals = dict(
        zip(
            NAMES,
            (m, n, k, *((1, m) if trans_a else (k, 1)), *((1, k) if trans_b else (n, 1)), n, 1),
            strict=True,
        )
    )
    hints = {p: {"divisibility": 16} for p in ("a_ptr", "b_ptr", "c_ptr")}
    hints.update(
        {
            p: {"equal_to_1": True} if v == 1 else {"divisibility": 16}
            for p, v in vals.items()
            if v == 1 or v % 16 == 0
        }
    )
    sig = {"a_ptr": dtype, "b_ptr": b_dtype or dtype, "c_ptr": out, **dict.fromkeys(vals, "i32")}
    consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
    return compile_kernel(tutorial(), "matmul_kernel", signature=sig, constexprs=consts, hints=hints,
                          options=CompileOptions(target=target, num_warps=nw, num_stages=ns), emit="cubin")  # fmt: skip


@pytest.mark.parametrize(("cfg", "inst", "per_iter"), [
    ((128, 256, 64, 8, 3), "m64n256k16", 4),  # 2 warpgroups along M, 4 K steps
    ((64, 256, 32, 4, 4), "m64n256k16", 2),
    ((128, 128, 32, 4, 4), "m64n128k16", 4),  # 2 m64 tiles per warpgroup, 2 K steps
])  # fmt: skip
def test_tutorial_matmul_on_wgmma(cfg: tuple, inst: str, per_iter: int) -> None:
    art = compile_tutorial(cfg)
    text = art.ptx
    assert art.target == "cuda:sm_90a" and ".target sm_90a" in text and art.binary[:4] == b"\x7fELF"
    assert re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\w+)\.f32\.f16\.f16", text) == [inst] * per_iter
    assert "mma.sync" not in text and "ldmatrix" not in text
    assert re.findall(r"p, 1, 1, (\d), (\d);", text) == [("0", "1")] * per_iter  # A K-major, B N-major
    assert "wgmma.wait_group.sync.aligned 1;" in text and "wgmma.wait_group.sync.aligned 0;" in text
    assert "fence.proxy.async.shared::cta;" in text and ".shared .align 1024" in text
    assert art.metadata["pipelined_loops"] == 1 and art.metadata["spill_stores"] == 0


@pytest.mark.parametrize(("trans_a", "trans_b", "flags"), [(True, False, ("1", "1")), (False, True, ("0", "0")),
                                                          (True, True, ("1", "0"))])  # fmt: skip
def test_transposed_operands_are_copied_along_their_contiguous_dimension(
    trans_a: bool, trans_b: bool, flags: tuple
) -> None:
    art = compile_tutorial((128, 128, 32, 4, 4), m=512, n=512, k=512, trans_a=trans_a, trans_b=trans_b)
    assert set(re.findall(r"p, 1, 1, (\d), (\d);", art.ptx)) == {flags}
    assert art.metadata["pipelined_loops"] == 1 and art.metadata["spill_stores"] == 0


def test_fallbacks_within_sm_90a() -> None:
    """32x32 tiles on 2 warps cannot take wgmma: mma.sync; K = 1000 (no 16-byte copies provable): operands
    staged from registers into swizzled tiles, still wgmma."""
    small = compile_tutorial((32, 32, 32, 2, 5))
    assert "wgmma" not in small.ptx and "mma.sync.aligned.m16n8k16" in small.ptx
    staged = compile_tutorial((128, 128, 32, 4, 4), m=517, n=389, k=1000, dtype="*bf16")
    assert staged.metadata["pipelined_loops"] == 0 and "cp.async" not in staged.ptx
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16", staged.ptx)) == 4


def test_sm_90_takes_sm_90a_only_for_wgmma_dots() -> None:
    art = compile_tutorial((128, 128, 32, 4, 4), target="cuda:sm_90")
    assert art.target == "cuda:sm_90a" and ".target sm_90a" in art.ptx and "wgmma.mma_async" in art.ptx
    small = compile_tutorial((32, 32, 32, 2, 5), target="cuda:sm_90")
    assert small.target == "cuda:sm_90" and ".target sm_90\n" in small.ptx
    sm80 = compile_tutorial((128, 128, 32, 4, 4), target="cuda:sm_80")
    assert sm80.target == "cuda:sm_80" and "wgmma" not in sm80.ptx and "mma.sync" in sm80.ptx


# ---- tf32 and fp8 (K-major operands only) ------------------------------------------------------------

KINDS = {"*fp32": "tf32", "*fp8e4nv": "e4m3", "*fp8e5": "e5m2"}


@pytest.mark.parametrize(("a_t", "b_t"), [("*fp32", "*fp32"), ("*fp8e4nv", "*fp8e4nv"), ("*fp8e5", "*fp8e5"),
                                          ("*fp8e4nv", "*fp8e5"), ("*fp8e5", "*fp8e4nv")])  # fmt: skip
@pytest.mark.parametrize(("trans_a", "trans_b"), [(False, False), (False, True), (True, False), (True, True)])
def test_tf32_and_fp8_matmul_on_wgmma(a_t: str, b_t: str, trans_a: bool, trans_b: bool) -> None:
    """f32 (tf32 by default) and fp8 inputs on wgmma (k8 / k32, f32 accumulate) with no transpose flags:
    an operand contiguous along K is copied into the ring, one contiguous along M or N is loaded and
    staged K-major (B as N x K) every iteration; the wgmma group stays in flight only with both in
    the ring. Masked edges (1000 x 1000 x 1008) and a K-major B (trans_b) included."""
    bk = 32 if a_t == "*fp32" else 64
    art = compile_tutorial((128, 128, bk, 8, 3), m=1000, n=1000, k=1008, trans_a=trans_a, trans_b=trans_b,
                           dtype=a_t, b_dtype=b_t, out="*fp32")  # fmt: skip
    text = art.ptx
    assert art.target == "cuda:sm_90a" and art.binary[:4] == b"\x7fELF" and "mma.sync" not in text
    kk = 8 if a_t == "*fp32" else 32
    inst = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k(\d+)\.f32\.(\w+)\.(\w+) .*p, 1, 1;", text)
    assert inst == [(str(kk), KINDS[a_t], KINDS[b_t])] * (bk // kk)  # one warpgroup along M per m64 tile
    ringed = (not trans_a) + trans_b  # operands contiguous along K
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", text)) > 0 if ringed else "cp.async" not in text
    assert art.metadata["pipelined_loops"] == (1 if ringed else 0)
    assert ("wgmma.wait_group.sync.aligned 1;" in text) == (ringed == 2)


def test_tf32_ieee_and_tf32x3_on_sm_90a() -> None:
    """input_precision: tf32 takes wgmma; ieee stays exact f32 on FMAs (no tensor cores); tf32x3 takes
    mma.sync m16n8k8, three products per tile (small*big, big*small, big*big); those two build for sm_90."""
    src = tutorial().replace("tl.dot(a, b, accumulator)", "tl.dot(a, b, accumulator, input_precision=PREC)")
    assert src != tutorial()
    for prec, wg in (("'tf32'", True), ("'ieee'", False), ("'tf32x3'", False)):  # 64x64x32: 2x2 warps, 2x4 tiles
        sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", **dict.fromkeys(NAMES, "i32")}
        consts = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
        art = compile_kernel(src.replace("PREC", prec), "matmul_kernel", signature=sig, constexprs=consts,
                             options=CompileOptions(target="cuda:sm_90", num_warps=4, num_stages=3), emit="cubin")  # fmt: skip
        assert ("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32" in art.ptx) == wg
        assert art.target == ("cuda:sm_90a" if wg else "cuda:sm_90")
        n_mma = len(re.findall(r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32", art.ptx))
        assert n_mma == (3 * 8 * 4 if prec == "'tf32x3'" else 0)  # 8 tiles per warp, 4 K steps of 8
        assert ("fma.rn.f32" in art.ptx) == (prec == "'ieee'")


def test_fp8_dots_that_wgmma_cannot_take_run_on_mma_sync_as_f16() -> None:
    """2 warps (no warpgroup) on sm_90a, and sm_80: the fp8 operands staged as f16 for mma.sync m16n8k16."""
    for target, nw in (("cuda:sm_90a", 2), ("cuda:sm_80", 4)):
        art = compile_tutorial((64, 64, 32, nw, 3), target=target, m=500, n=300, k=200, dtype="*fp8e4nv",
                               b_dtype="*fp8e5", out="*fp32")  # fmt: skip
        assert "wgmma" not in art.ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in art.ptx
        assert art.metadata["pipelined_loops"] == 0 and art.binary[:4] == b"\x7fELF"


def test_fp8_with_an_f16_accumulator_on_wgmma() -> None:
    """fp8 operands and an f16 accumulator (tl.dot(a, b, acc) with acc f16): wgmma's .f16 result, two halves
    per accumulator register (n/4 of them: 32 for m64n128), never left in flight across iterations; on
    sm_80 the FMA path (mma.sync accumulates fp8-as-f16 in f32 only here)."""
    src = tutorial().replace("dtype=tl.float32)", "dtype=tl.float16)")
    assert src != tutorial()
    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e5", "c_ptr": "*fp16", **dict.fromkeys(NAMES, "i32")}
    hints = {p: {"divisibility": 16} for p in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bn")}
    hints |= {p: {"equal_to_1": True} for p in ("stride_ak", "stride_bk", "stride_cn")}
    for target, wg, (bm, bk, nw) in (("cuda:sm_90a", True, (128, 64, 8)), ("cuda:sm_80", False, (64, 32, 4))):
        consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bm, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
        art = compile_kernel(src, "matmul_kernel", signature=sig, constexprs=consts, hints=hints,
                             options=CompileOptions(target=target, num_warps=nw, num_stages=3), emit="cubin")  # fmt: skip
        inst = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f16\.e4m3\.e5m2 \{([^}]*)\}", art.ptx)
        assert len(inst) == (2 if wg else 0) and all(len(x.split(",")) == 32 for x in inst)
        assert ("wgmma.wait_group.sync.aligned 1;" in art.ptx) is False and art.binary[:4] == b"\x7fELF"
        assert wg or ("mma" not in art.ptx and "fma.rn" in art.ptx)


def test_cp_async_chunks_a_swizzle_period_apart_share_one_full_offset() -> None:
    """pipelined.py's copies into a swizzled tile compute the swizzle once per class of chunks and add a
    constant for the rest, where the constant holds in every thread (rows 8 apart at a 128-byte swizzle):
    checked here against the full formula for every thread, and refused where it would not hold."""
    from tilec.compiler.backends.cuda.layouts import blocked
    from tilec.compiler.backends.cuda.pipelined import thread_coords
    from tilec.compiler.backends.cuda.swizzle import constant_delta

    tile = SwizzledTile(128, 64, 2, 128)
    lay = blocked((128, 64), 4, vec=8, order=(1, 0))  # 16-byte chunks: 8 lanes a row, 16 rows a pass
    threads = thread_coords(lay)
    assert len(threads) == 128 and len({t[0] for t in threads}) == 16
    for row in range(16, 128, 16):
        delta = constant_delta(tile, threads, 1, (0, 0), (row, 0))
        assert delta == row * 128
        assert all(tile.offset(r + row, c) == tile.offset(r, c) + delta for r, c in threads)
    assert constant_delta(tile, threads, 1, (0, 0), (1, 0)) is None, "rows 1 apart permute their chunks"
    assert constant_delta(tile, threads, 1, (0, 0), (0, 8)) is None, "the next 16-byte chunk of a row is an xor"
