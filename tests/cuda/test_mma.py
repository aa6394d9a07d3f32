"""The tensor-core path of `dot` without a GPU: which dots take mma.sync (fp8 ones as f16), the
instructions in the PTX, and the accumulator layout checked against the m16n8 fragment layout of the PTX ISA."""

from __future__ import annotations

import itertools
import re

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.layouts import MmaSpec, mma_layout
from tilec.compiler.pipeline import compile_kernel

SRC = """import triton
import triton.language as tl


@triton.jit
def d(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, out_dtype=OUT, input_precision=PREC))
"""


def ptx(dtype: str, out: str, shape=(64, 64, 32), sm: int = 90, num_warps: int = 4, prec: str = "tf32") -> str:
    const = {"*fp32": "tl.float32", "*i32": "tl.int32", "*fp64": "tl.float64"}[out]
    bm, bn, bk = shape
    art = compile_kernel(SRC.replace("OUT", const).replace("PREC", repr(prec)), "d", signature={"a_ptr": dtype, "b_ptr": dtype, "c_ptr": out},
                         constexprs={"BM": bm, "BN": bn, "BK": bk}, options=CompileOptions(target=f"cuda:sm_{sm}", num_warps=num_warps),
                         hints={p: {"divisibility": 16} for p in ("a_ptr", "b_ptr", "c_ptr")}, emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF" and art.metadata["spill_stores"] == 0
    return art.ptx


@pytest.mark.parametrize(("dtype", "out", "inst", "sm"), [
    ("*fp16", "*fp32", "m16n8k16.row.col.f32.f16.f16.f32", 80),  # on sm_90 f16, bf16, tf32 and fp8 take wgmma
    ("*bf16", "*fp32", "m16n8k16.row.col.f32.bf16.bf16.f32", 80),
    ("*i8", "*i32", "m16n8k32.row.col.s32.s8.s8.s32", 80),
    ("*i8", "*i32", "m16n8k32.row.col.s32.s8.s8.s32", 90),
    ("*fp32", "*fp32", "m16n8k8.row.col.f32.tf32.tf32.f32", 80),
    ("*fp32", "*fp32", "m16n8k8.row.col.f32.tf32.tf32.f32", 90),  # tf32x3 (below); tf32 takes wgmma on sm_90
    ("*fp8e4nv", "*fp32", "m16n8k16.row.col.f32.f16.f16.f32", 80),  # fp8: no mma.sync, staged as f16
    ("*fp8e5", "*fp32", "m16n8k16.row.col.f32.f16.f16.f32", 80),
])  # fmt: skip
def test_tensor_core_dots(dtype: str, out: str, inst: str, sm: int) -> None:
    x3 = dtype == "*fp32" and sm == 90
    text = ptx(dtype, out, sm=sm, prec="tf32x3" if x3 else "tf32")
    assert set(re.findall(r"mma\.sync\.aligned\.(\S+)", text)) == {inst}
    per_k = {"m16n8k16": 2, "m16n8k32": 1, "m16n8k8": 4}[inst.split(".")[0]]  # instruction steps along K = 32
    assert len(re.findall(r"mma\.sync", text)) == 8 * per_k * (3 if x3 else 1)  # 2x2 warps, 2x4 tiles per step
    if x3:  # big parts rounded, and the rest rounded again: two cvt.rna per operand word
        assert "sub.f32" in text or "sub.rn.f32" in text
    assert "ldmatrix.sync.aligned.m8n8.x4" in text
    if "tf32" in inst:  # operands rounded to tf32; B read with 32-bit shared loads (no transposing ldmatrix)
        assert "cvt.rna.tf32.f32" in text and "ld.shared.b32" in text
    if dtype == "*fp8e4nv":  # decoded to f32 registers, then converted to f16 (exact) for the shared tiles
        assert re.search(r"cvt\.rn\.f16(x2)?\.f32", text)
    if dtype == "*fp8e5":  # an e5m2 code is the upper byte of the f16 of its value: shifted, not converted
        assert "shl.b16" in text and not re.search(r"cvt\.rn\.f16(x2)?\.f32", text)


@pytest.mark.parametrize("dtype", ["*fp8e4nv", "*fp8e5"])
def test_fp8_operands_convert_in_hardware_on_sm90(dtype: str) -> None:
    """sm_90 with two warps (no wgmma): e4m3 goes to f16 by cvt.rn.f16x2.e4m3x2, e5m2 by a shift; neither through
    the integer decoding (its fmul by a power of two) or an f32 -> f16 rounding."""
    text = ptx(dtype, "*fp32", sm=90, num_warps=2)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text
    assert ("cvt.rn.f16x2.e4m3x2" in text) == (dtype == "*fp8e4nv")
    assert not re.search(r"cvt\.rn\.f16(x2)?\.f32|mul\.(rn\.)?f32", text)


@pytest.mark.parametrize(("dtype", "out", "shape", "sm"), [
    ("*fp16", "*fp32", (64, 64, 32), 75),  # no mma.sync m16n8k16 before sm_80
    ("*fp32", "*fp32", (64, 64, 32), 90),  # input_precision="ieee" stays on FMAs
    ("*fp64", "*fp64", (16, 16, 16), 90),
    ("*fp16", "*fp32", (16, 16, 8), 90),  # K smaller than one instruction
    ("*i8", "*i32", (16, 16, 16), 90),
])  # fmt: skip
def test_fma_fallback(dtype: str, out: str, shape: tuple, sm: int) -> None:
    text = ptx(dtype, out, shape, sm=sm, prec="ieee")
    assert "mma.sync" not in text and "ldmatrix" not in text
    assert "ld.shared" in text  # the FMA path reads both operands from shared memory


@pytest.mark.parametrize(("shape", "wm", "wn", "num_warps"), [((16, 8), 1, 1, 1), ((64, 64), 2, 2, 4), ((128, 32), 4, 2, 8),
                                                             ((16, 16), 1, 2, 4), ((32, 256), 1, 8, 8)])  # fmt: skip
def test_mma_layout_is_the_isa_fragment(shape: tuple, wm: int, wn: int, num_warps: int) -> None:
    m, n = shape
    spec = MmaSpec("f16", 16, wm, wn, m // 16 // wm, n // 8 // wn)
    lay = mma_layout(shape, spec, num_warps)
    seen: dict = {}
    for r, lane, warp in itertools.product(range(lay.num_regs), range(32), range(num_warps)):
        row, col = lay.reg_coord(r)
        for bases, bits in ((lay.lane, lane), (lay.warp, warp)):
            for i, (dr, dc) in enumerate(bases):
                if bits >> i & 1:
                    row, col = row + dr, col + dc
        c, tile = r % 4, r // 4
        mi, ni = divmod(tile, spec.nrep)
        wrow, wcol = (warp // wn) % wm, warp % wn
        # PTX ISA, mma.m16n8 C/D fragments: row = lane / 4 (+8 for c2, c3), col = 2 * (lane % 4) + c % 2
        assert row == (wrow * spec.mrep + mi) * 16 + lane // 4 + 8 * (c // 2)
        assert col == (wcol * spec.nrep + ni) * 8 + 2 * (lane % 4) + c % 2
        seen[row, col] = seen.get((row, col), 0) + 1
    assert len(seen) == m * n and set(seen.values()) == {num_warps // (wm * wn)}
