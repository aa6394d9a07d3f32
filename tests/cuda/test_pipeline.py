"""Software pipelining of dot loops (backends/cuda/passes/gpu_pipeline.py + backends/cuda/pipelined.py) without a GPU:
the plan for the benchmark and tutorial matmuls (golden), the cp.async ring in the PTX, and the loops
that must stay on the plain path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kernels import source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.passes import GpuLayoutPass, GpuPipelinePass
from tilec.compiler.backends.cuda.plan import read_layouts, read_pipeline
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.passes import PassManager, pipeline
from tilec.compiler.pipeline import compile_kernel

BENCH = (Path(__file__).resolve().parents[2] / "bench/kernels_bench.py").read_text()
SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
HINTS = {p: {"divisibility": 16} for p in SIG}
TUTORIAL_SIG = {**SIG, **{p: "i32" for p in ("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")}}
TUTORIAL_HINTS = {**HINTS, **{p: {"divisibility": 16} for p in ("stride_am", "stride_bk", "stride_cm")},
                  **{p: {"equal_to_1": True} for p in ("stride_ak", "stride_bn", "stride_cn")}}  # fmt: skip


def tutorial() -> str:
    text = source("matmul")
    start = text.index("@triton.autotune(")
    return text[:start] + text[text.index("@triton.jit", start) :]


def plan_text(src: str, name: str, sig: dict, consts: dict, hints: dict, num_warps: int = 4, stages: int = 3) -> str:
    module = build_ir(read_kernel(src, name), sig, consts, hints=hints)
    PassManager.from_names(pipeline("default")).run(module)
    PassManager([GpuLayoutPass(num_warps=num_warps, sm=90), GpuPipelinePass(num_stages=stages)]).run(module)
    fn = module.kernels[0]
    return read_pipeline(fn, read_layouts(fn)).describe()


def compile_bench(consts: dict, sig: dict | None = None, num_warps: int = 4, stages: int = 3, sm: int = 80):
    """The benchmark matmul compiled to a cubin; sm_80 by default, the mma.sync ring (on sm_90 f16 dots
    take wgmma: tests/cuda/test_wgmma.py)."""
    return compile_kernel(BENCH, "matmul_plain", signature=sig or SIG, constexprs=consts, hints=HINTS,
                          options=CompileOptions(target=f"cuda:sm_{sm}", num_warps=num_warps, num_stages=stages), emit="cubin")  # fmt: skip


def test_plan_golden_bench_matmul() -> None:
    got = plan_text(BENCH, "matmul_plain", SIG, {"BM": 64, "BN": 64, "BK": 32}, HINTS)
    assert got == (
        "for: 2 stages of 8192 bytes, address args [], 10 slice ops\n"
        "  A 64x32: 8 x f16 per copy, offset 0, stride 64, swizzle 64 contiguous dim 1\n"
        "  B 32x64: 8 x f16 per copy, offset 4096, stride 128, swizzle 128 contiguous dim 1"
    )


def test_plan_golden_tutorial_matmul() -> None:
    """Pointer tiles advanced each iteration (carried address args 2, 3) and masks along K; num_stages 4 is a ring
    of 3 slots on mma.sync, as Triton's."""
    consts = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
    got = plan_text(tutorial(), "matmul_kernel", TUTORIAL_SIG, consts, TUTORIAL_HINTS, stages=4)
    assert got == (
        "for: 3 stages of 8192 bytes, address args [2, 3], 10 slice ops\n"
        "  A 64x32: 8 x f16 per copy, offset 0, stride 64, swizzle 64 contiguous dim 1\n"
        "  B 32x64: 8 x f16 per copy, offset 4096, stride 128, swizzle 128 contiguous dim 1"
    )


def test_plan_golden_b_transposed() -> None:
    """C = A @ B.T with B stored N x K (a linear layer's weight): mma.sync's ring holds B's tile N x K (K
    contiguous, swizzled), read by ldmatrix without .trans, instead of staging B through registers."""
    from tests.kernels import KERNELS

    k = KERNELS["matmul_bt"]
    got = plan_text(source("matmul_bt"), k["name"], k["signature"], {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                    {p: {"divisibility": 16} for p in k["signature"]}, num_warps=2)  # fmt: skip
    assert got == (
        "for: 2 stages of 8192 bytes, address args [], 20 slice ops\n"
        "  A 64x32: 8 x f16 per copy, offset 0, stride 64, swizzle 64 contiguous dim 1\n"
        "  B 32x64: 8 x f16 per copy, offset 4096, stride 64, swizzle 64 contiguous dim 0"
    )
    art = compile_kernel(source("matmul_bt"), k["name"], signature=k["signature"],
                         constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                         hints={p: {"divisibility": 16} for p in k["signature"]},
                         options=CompileOptions(target="cuda:sm_80", num_warps=4), emit="ptx")  # fmt: skip
    assert art.metadata["pipelined_loops"] == 1 and ".trans" not in art.ptx
    assert len(re.findall(r"cp\.async\.cg", art.ptx)) == 12  # A and B: 2 + 2 a thread and iteration, 2 ahead + 1


def test_plan_unaligned_strides_fall_back() -> None:
    """No 4-byte copies provable (strides of unknown alignment): the loop stays on the plain path."""
    consts = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
    hints = {p: {"equal_to_1": True} for p in ("stride_ak", "stride_bn", "stride_cn")}
    assert plan_text(tutorial(), "matmul_kernel", TUTORIAL_SIG, consts, hints) == "no pipelined loops"


@pytest.mark.parametrize("stages", [2, 3, 4, 5])
def test_cp_async_ring_in_ptx(stages: int) -> None:
    """An mma.sync ring of num_stages - 1 slots (two at least), each filled as many iterations ahead: the loop
    waits for its own group, syncs, runs its dots from the slot, syncs again and refills that slot."""
    art = compile_bench({"BM": 64, "BN": 64, "BK": 32}, stages=stages)
    text = art.ptx
    slots = max(2, stages - 1)
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", text)
    assert len(copies) == 4 * (slots + 1)  # 2 A + 2 B copies per thread and iteration: prologue `slots`, loop 1
    assert text.count("cp.async.commit_group") == slots + 1
    assert f"cp.async.wait_group {slots - 1};" in text and "cp.async.wait_group 0;" in text
    loop = text[text.index(f"cp.async.wait_group {slots - 1};") : text.index("cp.async.wait_group 0;")]
    order = re.findall(r"bar\.sync|mma\.sync|cp\.async\.cg|cp\.async\.commit_group", loop)
    first_copy = order.index("cp.async.cg")
    assert order[0] == "bar.sync" and order[first_copy - 1] == "bar.sync" and order.index("mma.sync") < first_copy
    assert "mma.sync" not in order[first_copy:]
    assert art.metadata["pipelined_loops"] == 1 and art.metadata["spill_stores"] == 0
    assert slots * 8192 <= art.metadata["shared_bytes"] < (slots + 1) * 8192  # swizzled A 64 x 64 bytes, B 32 x 128
    assert "add.rn.f32" not in text  # gpu-dot-acc: acc += dot(a, b) accumulates inside the mma


def test_dot_acc_fold_keeps_other_uses() -> None:
    """A dot whose product is also used elsewhere keeps its zero accumulator and the separate add."""
    from tilec.compiler.backends.cuda.passes import GpuDotAccPass

    src = BENCH.replace("acc += tl.dot(a, b)", "p = tl.dot(a, b)\n        acc += p + p")
    module = build_ir(read_kernel(src, "matmul_plain"), SIG, {"BM": 64, "BN": 64, "BK": 32}, hints=HINTS)
    assert GpuDotAccPass().fold(module.kernels[0]) == 0
    module = build_ir(read_kernel(BENCH, "matmul_plain"), SIG, {"BM": 64, "BN": 64, "BK": 32}, hints=HINTS)
    fn = module.kernels[0]
    assert GpuDotAccPass().fold(fn) == 1
    from tilec.compiler.ir.verifier import verify_module

    verify_module(module)
    loop = next(op for op in fn.walk() if op.name == "for")
    dot = next(op for op in loop.regions[0].block.ops if op.name == "dot")
    assert dot.operands[2] is loop.regions[0].block.args[1] and loop.regions[0].block.terminator.operands[0] is dot.result


def test_large_tile_and_tf32_rings() -> None:
    big = compile_bench({"BM": 128, "BN": 128, "BK": 32}, num_warps=8)
    assert big.metadata["pipelined_loops"] == 1 and big.metadata["spill_stores"] == 0
    assert len(re.findall(r"mma\.sync", big.ptx)) == 32  # each warp 64x32: 4x4 m16n8 tiles, 2 K steps
    f32 = {**SIG, "a_ptr": "*fp32", "b_ptr": "*fp32"}
    tf32 = compile_bench({"BM": 64, "BN": 64, "BK": 32}, sig=f32)
    assert tf32.metadata["pipelined_loops"] == 1 and "m16n8k8.row.col.f32.tf32.tf32.f32" in tf32.ptx
    assert "cp.async.cg.shared.global" in tf32.ptx and "ld.shared.b32" in tf32.ptx


@pytest.mark.parametrize(("stages", "sm"), [(1, 90), (3, 75)])
def test_no_pipelining_when_off_or_before_sm80(stages: int, sm: int) -> None:
    art = compile_bench({"BM": 64, "BN": 64, "BK": 32}, stages=stages, sm=sm)
    assert "cp.async" not in art.ptx and art.metadata["pipelined_loops"] == 0


def test_int8_dots_stay_unpipelined() -> None:
    art = compile_bench({"BM": 64, "BN": 64, "BK": 64}, sig={**SIG, "a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"})
    assert "cp.async" not in art.ptx and "mma.sync.aligned.m16n8k32" in art.ptx
