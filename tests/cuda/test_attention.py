"""Flash-attention forward (tests/kernels/attention.py, written as in Triton's tutorial) on the sm_90a path
without a GPU: both dots on wgmma (S = Q K^T from shared memory, K^T copied along its contiguous dimension;
O += P V with P from registers in the A fragment), Q staged once before each K/V loop, the K/V loads
pipelined by cp.async with Triton's schedule (P V's group left in flight into the next iteration, the
copies after it), two blocks per SM at head dim 64 (causal too), assembled by ptxas; and the same source on the cpu
target against NumPy (causal and not, masked edges). bench/attention.py runs it against torch and Triton on the device."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import numpy as np
import pytest

from tests.kernels import source
from tilec import client
from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.backends.cuda import target as cuda_target
from tilec.compiler.backends.cuda.layouts import WgmmaSpec
from tilec.compiler.backends.cuda.wgmma import a_fragment_layout
from tilec.compiler.frontend import build_ir
from tilec.compiler.interp import run_kernel
from tilec.compiler.pipeline import compile_kernel

STRIDES = [f"stride_{t}{d}" for t, row in zip("qkvo", "mnnm", strict=True) for d in ("z", "h", row, "k")]
WGMMA = r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.f16\.f16 \{[^}]*\}, (\{)?"


def compile_attention(d: int, bm: int, bn: int, nw: int, ns: int, causal: bool, n_ctx: int, heads: int = 32,
                      cuda: CudaOptions = CudaOptions()):  # fmt: skip
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
                          options=CompileOptions(target="cuda:sm_90", num_warps=nw, num_stages=ns, cuda=cuda),
                          emit="cubin")  # fmt: skip


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
    assert art.metadata["pipelined_loops"] == loops
    # 128 rows on 4 warps at head dim 128 sits at 255 registers: issuing the copies after P V (their addresses
    # live through both dots) spills 8 bytes there (none with CudaOptions.issue_after_last_dot off); the bench
    # leaves that shape out
    assert art.metadata["spill_stores"] <= (8 if (d, bm, nw) == (128, 128, 4) else 0)
    if not causal:  # the loop: no staging; the ring's barrier, and (Triton's schedule) one before the
        # copies where more than one warpgroup must have waited for the P V that read their slot
        body = loop_body(text)
        assert "st.shared" not in body and body.count("bar.sync") == (2 if nw > 4 else 1)


def loop_body(text: str) -> str:
    """The PTX of the first loop: from its label to its back branch."""
    start = text.index("$L__BB0_2:")
    return text[start : text.index("bra \t$L__BB0_2;", start)]


def test_schedule_keeps_p_v_in_flight() -> None:
    """Per iteration: wait for the ring, barrier, S = Q K^T (one group), wait 0 (also for the previous
    iteration's P V, whose registers pass through the wait), softmax, O += P V (one group) left in flight
    (wait 1), barrier, then the copies of iteration i+2 into the slot that P V of i-1 read; after the
    loop, wait 0."""
    text = compile_attention(64, 128, 64, 8, 3, False, 4096).ptx
    body = loop_body(text)
    marks = re.findall(r"cp\.async\.wait_group \d|bar\.sync|wgmma\.commit_group|wgmma\.wait_group\.sync\.aligned \d|"
                       r"cp\.async\.commit_group", body)  # fmt: skip
    assert marks == ["cp.async.wait_group 1", "bar.sync", "wgmma.commit_group", "wgmma.wait_group.sync.aligned 0",
                     "wgmma.commit_group", "wgmma.wait_group.sync.aligned 1", "bar.sync", "cp.async.commit_group"]  # fmt: skip
    after = text[text.index("$L__BB0_3:") :]
    assert after.index("wgmma.wait_group.sync.aligned 0") < after.index("st.global")
    # the first wait passes P V's 32 accumulator registers through with S's 32
    wait0 = body[body.index("wgmma.wait_group.sync.aligned 0") :]
    assert "wgmma.fence" in wait0  # P V's issue comes after it


def test_schedule_options() -> None:
    """mma_in_flight_across off: P V is waited in its iteration (copies still after it);
    issue_after_last_dot off too: the copies go right after the ring's barrier, as before."""
    body = loop_body(
        compile_attention(64, 128, 64, 8, 3, False, 4096, cuda=CudaOptions(mma_in_flight_across=False)).ptx
    )
    assert body.count("bar.sync") == 1 and "wgmma.wait_group.sync.aligned 1" not in body
    assert body.rindex("cp.async.commit_group") > body.rindex("wgmma.commit_group")
    both_off = CudaOptions(mma_in_flight_across=False, issue_after_last_dot=False)
    body = loop_body(compile_attention(64, 128, 64, 8, 3, False, 4096, cuda=both_off).ptx)
    assert body.count("bar.sync") == 1
    assert body.rindex("cp.async.commit_group") < body.index("wgmma.commit_group")


def test_causal_second_loop_reads_the_q_the_first_staged() -> None:
    """Q (128 x 64 f16 over 256 threads: four 16-byte stores each) is staged once for both loops of the
    causal kernel; with reuse_staged off it is stored again before the second loop."""
    on = compile_attention(64, 128, 64, 8, 3, True, 4096)
    off = compile_attention(64, 128, 64, 8, 3, True, 4096, cuda=CudaOptions(reuse_staged=False))
    count = lambda t: len(re.findall(r"st\.shared\.v4\.b32", t))  # noqa: E731
    assert count(off.ptx) - count(on.ptx) == 4
    assert on.metadata["registers"] < off.metadata["registers"]


@pytest.mark.parametrize("causal", [False, True])
def test_two_blocks_per_sm_at_head_dim_64(causal: bool) -> None:
    """The tutorial's favourite config at head dim 64 fits two 256-thread blocks per SM (<= 128 registers,
    as Triton's build does): exp2 as one ex2.approx.ftz, fma, the warp index uniform (wgmma descriptors in
    uniform registers); causal too (two loops), the PTX leaving the registers per block to ptxas's heuristic
    (no .minnctapersm, as Triton's PTX)."""
    art = compile_attention(64, 128, 64, 8, 3, causal, 4096)
    assert art.metadata["registers"] <= 128 and art.metadata["spill_stores"] == 0
    assert ".minnctapersm" not in art.ptx and ".maxntid 256" in art.ptx


def test_one_block_hint_costs_the_second_block() -> None:
    """With leave_occupancy_to_ptxas off the PTX says .minnctapersm 1 (what tilec emitted before):
    ptxas, told one block per SM is enough, spends ~150 registers on the causal kernel, one block per SM."""
    art = compile_attention(64, 128, 64, 8, 3, True, 4096, cuda=CudaOptions(leave_occupancy_to_ptxas=False))
    assert ".minnctapersm 1" in art.ptx and art.metadata["registers"] > 128
    assert cuda_target.blocks_per_sm(art.metadata["registers"], 256, art.metadata["shared_bytes"]) == 1


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


def test_options_give_the_earlier_staged_path() -> None:
    """With both options off (bench/attention.py's "staged" rung), P and Q go through shared memory every
    iteration again: no register-A wgmma, stores and four barriers in the loop."""
    staged = CudaOptions(a_from_registers=False, stage_invariants_once=False, issue_after_last_dot=False)
    art = compile_attention(64, 128, 64, 8, 3, False, 4096, cuda=staged)
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


def test_blocks_per_sm() -> None:
    """Registers go per warp in units of 256 (8 per thread), 64 Ki per SM; shared memory 228 KiB with 1 KiB
    reserved per block; at most 64 warps and 32 blocks."""
    assert cuda_target.blocks_per_sm(122, 256, 65536) == 2  # 128 per thread: two 8-warp blocks
    assert cuda_target.blocks_per_sm(129, 256, 65536) == 1  # 136 per thread: one
    assert cuda_target.blocks_per_sm(128, 256, 120 * 1024) == 1  # shared memory for one
    assert cuda_target.blocks_per_sm(64, 128, 0) == 8
    assert cuda_target.blocks_per_sm(16, 64, 0) == 32  # the block limit
