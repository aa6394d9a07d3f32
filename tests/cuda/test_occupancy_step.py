"""A dot-free kernel whose registers land just past an occupancy step is assembled again for one more resident
block (cuda/target.py, CudaOptions.occupancy_step): a row-wise backward pass over 8,192 columns on 8 warps
with a spin lock around its partial sums (the shape of Triton's layer-norm tutorial) took 150-odd registers
and one block an SM under ptxas's own choice, where two blocks fit 128 with nothing spilled. ptxas runs here;
no GPU needed."""

from __future__ import annotations

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.backends.cuda.target import _regs_for_blocks, blocks_per_sm
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def row_grads(GX, GY, PW, PB, X, W, Mu, Rs, Lock, stride, n, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < n
    g = r % GROUPS
    xv = tl.load(X + r * stride + c, mask=m, other=0).to(tl.float32)
    gy = tl.load(GY + r * stride + c, mask=m, other=0).to(tl.float32)
    wv = tl.load(W + c, mask=m).to(tl.float32)
    xn = tl.where(m, (xv - tl.load(Mu + r)) * tl.load(Rs + r), 0.0)
    wg = tl.where(m, wv * gy, 0.0)
    a = tl.sum(xn * wg, axis=0) / n
    b = tl.sum(wg, axis=0) / n
    tl.store(GX + r * stride + c, (wg - (xn * a + b)) * tl.load(Rs + r), mask=m)
    pw = (gy * xn).to(wv.dtype)
    pb = gy.to(wv.dtype)
    while tl.atomic_cas(Lock + g, 0, 1) == 1:
        pass
    if tl.load(Lock + GROUPS + g) == 0:
        tl.atomic_xchg(Lock + GROUPS + g, 1)
    else:
        pw += tl.load(PW + g * n + c, mask=m)
        pb += tl.load(PB + g * n + c, mask=m)
    tl.store(PW + g * n + c, pw, mask=m)
    tl.store(PB + g * n + c, pb, mask=m)
    tl.debug_barrier()
    tl.atomic_xchg(Lock + g, 0)
"""
SIG = {**{k: "*fp16" for k in ("GX", "GY", "PW", "PB", "X", "W")}, "Mu": "*fp32", "Rs": "*fp32", "Lock": "*i32",
       "stride": "i32", "n": "i32"}  # fmt: skip


def _build(step: bool):  # type: ignore[no-untyped-def]
    hints = {k: {"divisibility": 16} for k in SIG}
    opts = CompileOptions(target="cuda:sm_90", num_warps=8, cuda=CudaOptions(occupancy_step=step))
    return compile_kernel(SRC, "row_grads", signature=SIG, constexprs={"GROUPS": 96, "BLOCK": 8192}, hints=hints,
                          options=opts, emit="cubin").metadata  # fmt: skip


def test_one_more_block_where_the_step_is_near_and_nothing_spills() -> None:
    free, stepped = _build(False), _build(True)
    assert free["spill_stores"] == stepped["spill_stores"] == 0
    assert blocks_per_sm(free["registers"], 256, free["shared_bytes"]) == 1 and free["registers"] > 128
    assert stepped["registers"] <= 128 and blocks_per_sm(stepped["registers"], 256, stepped["shared_bytes"]) == 2
    assert stepped["occupancy_step"] == {"registers": free["registers"]} and "occupancy_step" not in free


ROWS = """
import triton
import triton.language as tl


@triton.jit
def rows_softmax(Out, In, stride_in, stride_out, rows, cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    for r in tl.range(tl.program_id(0), rows, tl.num_programs(0), num_stages=STAGES):
        c = tl.arange(0, BLOCK)
        v = tl.load(In + r * stride_in + c, mask=c < cols, other=-float("inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(Out + r * stride_out + c, e / tl.sum(e, axis=0), mask=c < cols)
"""


def test_a_step_of_more_than_one_block() -> None:
    """A persistent row loop whose next row is loaded ahead into registers (gpu-prefetch) takes 40 registers at
    2,048 columns on 8 warps: six blocks an SM, where 32 registers give eight (a caller that sizes its grid by
    the registers, as Triton's softmax tutorial does, launches a third more programs)."""
    sig = {"Out": "*fp32", "In": "*fp32", "stride_in": "i32", "stride_out": "i32", "rows": "i32", "cols": "i32"}
    got = {}
    for step in (False, True):
        opts = CompileOptions(target="cuda:sm_90", num_warps=8, num_stages=4, cuda=CudaOptions(occupancy_step=step))
        got[step] = compile_kernel(ROWS, "rows_softmax", signature=sig, constexprs={"BLOCK": 2048, "STAGES": 4},
                                   hints={k: {"divisibility": 16} for k in sig}, options=opts, emit="cubin").metadata  # fmt: skip
    free, stepped = (blocks_per_sm(got[s]["registers"], 256, got[s]["shared_bytes"]) for s in (False, True))
    assert stepped >= free + 2 and got[True]["spill_stores"] == 0


def test_registers_for_a_number_of_blocks() -> None:
    for threads in (64, 128, 256, 512, 1024):
        for blocks in range(1, 9):
            cap = _regs_for_blocks(blocks, threads)
            if 0 < cap <= 255 and blocks * threads <= 2048:
                assert blocks_per_sm(cap, threads, 0) >= blocks  # the cap gives the blocks...
                assert blocks_per_sm(cap + 8, threads, 0) < blocks or cap + 8 > 255  # ...and is the most that does
