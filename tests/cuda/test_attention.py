"""Flash-attention forward (tests/kernels/attention.py, written as in Triton's tutorial) on the sm_90a path
without a GPU: both dots on wgmma (S = Q K^T from shared memory, K^T copied along its contiguous dimension;
O += P V with P from registers in the A fragment), Q staged once before each K/V loop, the K/V loads
pipelined by cp.async, assembled by ptxas; and the same source on the cpu target against NumPy (causal
and not, masked edges). bench/attention.py runs it against torch and Triton on the device."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.kernels import source
from tilec import client
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda import wgmma
from tilec.compiler.backends.cuda.layouts import WgmmaSpec
from tilec.compiler.backends.cuda.wgmma import a_fragment_layout
from tilec.compiler.frontend import build_ir
from tilec.compiler.interp import run_kernel
from tilec.compiler.pipeline import compile_kernel

STRIDES = [f"stride_{t}{d}" for t, row in zip("qkvo", "mnnm", strict=True) for d in ("z", "h", row, "k")]
WGMMA = r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.f16\.f16 \{[^}]*\}, (\{)?"


def compile_attention(d: int, bm: int, bn: int, nw: int, ns: int, causal: bool, n_ctx: int, heads: int = 32):
    vals = dict(zip(STRIDES, [heads * n_ctx * d, n_ctx * d, d, 1] * 4, strict=True)) | {
        "H": heads,
        "N_CTX": n_ctx,
    }
    sig = {
        "Q": "*fp16",
        "K": "*fp16",
        "V": "*fp16",
        "Out": "*fp16",
        "sm_scale": "fp32",
        **dict.fromkeys(vals, "i32"),
    }
    hints = {p: {"divisibility": 16} for p in ("Q", "K", "V", "Out")}
    hints |= {
        p: {"equal_to_1": True} if v == 1 else {"divisibility": 16}
        for p, v in vals.items()
        if v == 1 or v % 16 == 0
    }
    consts = {
        "HEAD_DIM": d,
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "STAGE": 3 if causal else 1,
        "MASK_N": n_ctx % bn != 0,
    }
    return compile_kernel(source("attention"), "attn_fwd", signature=sig, constexprs=consts, hints=hints,
                          options=CompileOptions(target="cuda:sm_90", num_warps=nw, num_stages=ns), emit="cubin")  # fmt: skip


@pytest.mark.parametrize(("cfg", "causal", "n_ctx"), [
    ((64, 128, 64, 8, 3), False, 4096),
    ((64, 128, 64, 8, 3), True, 4096),
    ((128, 128, 64, 8, 3), True, 4096),
    ((64, 128, 128, 8, 3), False, 1000),  # masked key columns and query rows
    ((64, 64, 64, 4, 4), True, 1000),
    ((128, 128, 32, 4, 2), False, 4096),  # 2 m64 tiles per warpgroup
])  # fmt: skip
def test_both_dots_on_wgmma(cfg: tuple, causal: bool, n_ctx: int) -> None:
    d, bm, bn, nw, ns = cfg
    art = compile_attention(d, bm, bn, nw, ns, causal, n_ctx)
    text = art.ptx
    assert art.target == "cuda:sm_90a" and ".target sm_90a" in text and art.binary[:4] == b"\x7fELF"
    assert "mma.sync" not in text and "ldmatrix" not in text
    loops = 2 if causal else 1
    mrep = bm // 64 // (nw // 4)
    got = re.findall(WGMMA, text)
    qk = [g for g in got if not g[1]]  # A (Q) through a descriptor
    pv = [g for g in got if g[1]]  # A (P) from registers
    assert qk == [(f"m64n{bn}k16", "")] * (loops * mrep * d // 16)
    assert pv == [(f"m64n{d}k16", "{")] * (loops * mrep * bn // 16)
    assert art.metadata["pipelined_loops"] == loops and art.metadata["spill_stores"] == 0
    if not causal:  # the loop: no staging, one barrier (the ring's)
        body = text[
            text.index("cp.async.wait_group", text.index("$L__BB0_2:")) : text.rindex("wgmma.wait_group")
        ]
        assert "st.shared" not in body and body.count("bar.sync") == 1


def test_operand_a_fragment_is_the_isa_fragment() -> None:
    """Word 4 * (K/16 * mi + ks) + j of a thread holds elements (2j, 2j+1) of m64nNk16's A fragment for m64
    tile mi and K step ks: a0/a1 at row g, columns 2t and 2t+1; a2/a3 at row g + 8; a4..a7 the same 8
    columns on (g = lane / 4, t = lane % 4, 16 rows per warp of the warpgroup)."""
    m, k, nw = 256, 64, 8
    a = SimpleNamespace(operands=[SimpleNamespace(type=SimpleNamespace(shape=(m, k)))])
    spec = WgmmaSpec("f16", 2, 1, 2, 128)
    lay = a_fragment_layout(a, spec, nw)
    assert a_fragment_layout(a, WgmmaSpec("f16", 1, 2, 4, 64), nw) is None
    seen = set()
    for r, lane, warp in itertools.product(range(lay.num_regs), range(32), range(nw)):
        row, col = lay.reg_coord(r)
        for bases, bits in ((lay.lane, lane), (lay.warp, warp)):
            for i, (dr, dc) in enumerate(bases):
                if bits >> i & 1:
                    row, col = row + dr, col + dc
        word, half = divmod(r, 2)
        mi, rest = divmod(word, k // 4)
        ks, j = divmod(rest, 4)
        gm = warp // 4 % spec.wm
        want_row = 64 * (gm * spec.mrep + mi) + 16 * (warp % 4) + lane // 4 + 8 * (j % 2)
        want_col = 16 * ks + 2 * (lane % 4) + half + 8 * (j // 2)
        assert (row, col) == (want_row, want_col)
        seen.add((row, col))
    assert len(seen) == m * k


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) * scale
    if causal:
        n = q.shape[-2]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


@pytest.mark.parametrize(("n_ctx", "causal"), [(128, False), (100, False), (128, True), (100, True)])
def test_cpu_target_against_numpy(n_ctx: int, causal: bool) -> None:
    z, h, d, bm, bn = 1, 2, 64, 64, 32
    rng = np.random.default_rng(n_ctx + causal)
    q, k, v = (rng.standard_normal((z, h, n_ctx, d)).astype(np.float16) for _ in range(3))
    out = np.full_like(q, np.nan)
    scale = d**-0.5
    kern = client.jit(source("attention"), "attn_fwd")
    strides = [s // 2 for a in (q, k, v, out) for s in a.strides]
    kern[(-(-n_ctx // bm), z * h, 1)](q, k, v, out, scale, *strides, h, n_ctx, HEAD_DIM=d, BLOCK_M=bm,
                                      BLOCK_N=bn, STAGE=3 if causal else 1, MASK_N=n_ctx % bn != 0)  # fmt: skip
    want = reference(q, k, v, scale, causal)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=2e-3, rtol=1e-2)


def test_switches_give_the_earlier_staged_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """With both switches off (bench/attention.py's "staged" rung), P and Q go through shared memory every
    iteration again: no register-A wgmma, stores and four barriers in the loop."""
    monkeypatch.setattr(wgmma, "A_FROM_REGISTERS", False)
    monkeypatch.setattr(wgmma, "STAGE_INVARIANTS_ONCE", False)
    art = compile_attention(64, 128, 64, 8, 3, False, 4096)
    text = art.ptx
    assert [g[1] for g in re.findall(WGMMA, text)] == [""] * 8
    body = text[text.index("cp.async.wait_group", text.index("$L__BB0_2:")) : text.rindex("wgmma.wait_group")]
    assert "st.shared" in body and body.count("bar.sync") == 4


@pytest.mark.parametrize("causal", [False, True])
def test_interpreter_against_numpy(causal: bool) -> None:
    """The reference interpreter runs the same source (the IR the client builds for the cpu launch above)."""
    n_ctx, d = 100, 64
    rng = np.random.default_rng(7 + causal)
    q, k, v = (rng.standard_normal((1, 2, n_ctx, d)).astype(np.float16) for _ in range(3))
    out = np.full_like(q, np.nan)
    kern = client.jit(source("attention"), "attn_fwd")
    args = (q, k, v, out, d**-0.5, *[s // 2 for a in (q, k, v, out) for s in a.strides], 2, n_ctx)
    consts = {"HEAD_DIM": d, "BLOCK_M": 64, "BLOCK_N": 32, "STAGE": 3 if causal else 1, "MASK_N": True}
    full = kern.complete(kern.bind(args, consts)[0])
    specs, constexprs = kern.specialisation(full)
    module = build_ir(kern.ks, {n: s.type for n, s in specs.items()}, constexprs)
    run_kernel(module, kern.name, [full[p.name] for p in kern.params if not p.constexpr], (2, 2, 1))
    np.testing.assert_allclose(
        out.astype(np.float64), reference(q, k, v, d**-0.5, causal), atol=2e-3, rtol=1e-2
    )
