"""A dot-free kernel that its registers hold under half the SM's warps is emitted again under LLVM's
register-reduction scheduler (cuda/target.py, CudaOptions.register_schedule), and that build is kept where it
gives more resident blocks with no more spilled. The kernel here has the shape of a KL divergence over a long
row (a loop over 16,384-wide blocks on 16 warps, libdevice's log on each element): in source order every
element's chain is live at once. ptxas runs here; no GPU needed."""

from __future__ import annotations

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.backends.cuda import nvptx
from tilec.compiler.backends.cuda.target import blocks_per_sm
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def row_kl(LogP, Q, Out, stride, n, eps, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    acc = 0.0
    for start in range(0, n, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = c < n
        lp = tl.load(LogP + r * stride + c, mask=m, other=0.0)
        q = tl.load(Q + r * stride + c, mask=m, other=0.0)
        acc += tl.sum(q * (tl.log(tl.maximum(q, eps)) - lp), axis=0)
    tl.store(Out + r, acc)
"""
SIG = {"LogP": "*fp32", "Q": "*fp32", "Out": "*fp32", "stride": "i32", "n": "i32", "eps": "fp32"}


def _build(schedule: bool):  # type: ignore[no-untyped-def]
    opts = CompileOptions(target="cuda:sm_90", num_warps=16, cuda=CudaOptions(register_schedule=schedule))
    return compile_kernel(SRC, "row_kl", signature=SIG, constexprs={"BLOCK": 16384},
                          hints={k: {"divisibility": 16} for k in ("LogP", "Q", "Out", "stride", "n")},
                          options=opts, emit="cubin")  # fmt: skip


def test_register_schedule_gives_more_blocks_with_nothing_spilled() -> None:
    plain, scheduled = _build(False).metadata, _build(True)
    meta = scheduled.metadata
    before = blocks_per_sm(plain["registers"], 512, plain["shared_bytes"])
    after = blocks_per_sm(meta["registers"], 512, meta["shared_bytes"])
    assert before * 16 < 32, plain["registers"]  # the premise: source order leaves it under half the warps
    assert after > before and meta["spill_stores"] == 0
    assert meta["register_schedule"] == {"registers": plain["registers"], "spill_stores": 0}
    assert "register_schedule" not in plain
    assert ".maxntid 512" in scheduled.ptx  # the artifact keeps the PTX it assembled


def test_the_scheduler_is_set_back_after_an_emit() -> None:
    """The scheduler is a process-wide LLVM option: an emit under another one leaves the default in place."""
    art = _build(False)
    first = nvptx.emit_ptx_again(art.llir, "sm_90", 3, "default")
    other = nvptx.emit_ptx_again(art.llir, "sm_90", 3, "registers")
    assert other != first
    assert nvptx.emit_ptx_again(art.llir, "sm_90", 3, "default") == first
