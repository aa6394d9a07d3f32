"""The cuda passes' decisions live in the IR (gpu.* attributes, backends/cuda/plan.py) without a GPU: every
layout family prints and parses back to itself, the gpu-tir stage's module round-trips as text and lowers
from that text to the same LLVM IR, and a malformed record is a located CompileError."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kernels import KERNELS, source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.layouts import MmaSpec, blocked, mma_layout, scan_layout
from tilec.compiler.backends.cuda.lower import lower_kernel
from tilec.compiler.backends.cuda.plan import format_layout, format_mma, parse_layout, parse_mma, read_layouts
from tilec.compiler.backends.cuda.target import gpu_tir
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.ir import parse_module, print_module
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.tir import tir_stage

BENCH = (Path(__file__).resolve().parents[2] / "bench/kernels_bench.py").read_text()


def test_layout_text_round_trips() -> None:
    shapes = [(1024,), (64, 16), (4, 8, 16), (1, 64)]
    lays = [blocked(s, nw, vec) for s in shapes for nw in (1, 4, 8) for vec in (1, 4)]
    lays += [scan_layout(s, 0, 4) for s in shapes]
    lays.append(mma_layout((64, 64), MmaSpec("f16", 16, 2, 2, 2, 4), 4))
    for lay in lays:
        text = format_layout(lay)
        assert parse_layout(text, lay.shape) == lay, text
    spec = MmaSpec("tf32", 8, 4, 2, 1, 8)
    assert parse_mma(format_mma(spec), None) == spec  # type: ignore[arg-type]


def _gpu_module(src: str, name: str, sig: dict, consts: dict, hints: dict | None = None, stages: int = 3):
    meta = {"kernel_name": name, "options": CompileOptions(target="cuda:sm_90", num_stages=stages)}
    module = tir_stage(build_ir(read_kernel(src, name), sig, consts, hints=hints), meta)
    return gpu_tir(module, meta)


@pytest.mark.parametrize("stem", ["matmul", "layer_norm", "fused_softmax", "cumsum"])
def test_gpu_tir_round_trips_and_lowers_from_text(stem: str) -> None:
    k = KERNELS[stem]
    module = _gpu_module(source(stem), k["name"], k["signature"], k["constexprs"])
    text = print_module(module)
    assert "gpu.num_warps = 4" in text and "gpu.layout = " in text
    again = parse_module(text)
    assert print_module(again) == text
    direct, _ = lower_kernel(module.kernels[0], 90)
    from_text, _ = lower_kernel(again.kernels[0], 90)
    assert str(from_text) == str(direct)


def test_pipelined_loop_lowers_from_text() -> None:
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    hints = {p: {"divisibility": 16} for p in sig}
    module = _gpu_module(BENCH, "matmul_plain", sig, {"BM": 64, "BN": 64, "BK": 32}, hints)
    text = print_module(module)
    assert "gpu.stages = 3" in text and text.count("gpu.ring_offset") == 2
    direct, info = lower_kernel(module.kernels[0], 90)
    from_text, _ = lower_kernel(parse_module(text).kernels[0], 90)
    assert info["pipelined_loops"] == 1 and str(from_text) == str(direct)


def test_bad_records_are_located_errors() -> None:
    k = KERNELS["vector_add"]
    text = print_module(_gpu_module(source("vector_add"), k["name"], k["signature"], k["constexprs"]))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "gpu.access" in ln)
    bad = text.replace('gpu.access = "reg=', 'gpu.access = "reg=(0,1)', 1)  # a 2-D basis in a 1-D tile
    with pytest.raises(CompileError, match="is not a layout of a") as exc:
        read_layouts(parse_module(bad).kernels[0])
    assert exc.value.line == line
    with pytest.raises(CompileError, match="run the gpu-layout pass first"):
        read_layouts(parse_module(text.replace("{gpu.num_warps = 4} ", "")).kernels[0])


NESTED = """
import triton
import triton.language as tl


@triton.jit
def nested(x_ptr, out_ptr, N, M, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    rows = tl.arange(0, 2)
    scattered = (cols * 3) % BLOCK  # no contiguity: the load is coalesced one element a thread
    total = tl.zeros((2, BLOCK), tl.float32)
    for i in range(N):
        buf = tl.zeros((2, BLOCK), tl.float32)
        for j in range(M):
            buf += tl.load(x_ptr + rows[:, None] * BLOCK + scattered[None, :] + j)
        total += buf * 2.0
    tl.store(out_ptr + rows[:, None] * BLOCK + cols[None, :], total)
"""


def test_nested_accumulators_take_the_layout_their_loads_come_in() -> None:
    """Both loops' accumulators start as zeros and take the layout of what their bodies yield: the load's.
    The inner loop is assigned again after the outer one adopted, and its accumulator once kept a strong
    mark from the first round in its zeros' layout, so every inner iteration crossed shared memory."""
    module = _gpu_module(NESTED, "nested", {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "M": "i32"},
                         {"BLOCK": 256})  # fmt: skip
    text = print_module(module)
    access = re.search(r'load [^\n]*gpu\.access = "([^"]+)"', text).group(1)
    loops = re.findall(r'= for [^\n]*gpu\.layouts = \["([^"]+)"\]', text)
    assert loops == [access, access], (access, loops)
    art = compile_kernel(NESTED, "nested", signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "M": "i32"},
                         constexprs={"BLOCK": 256}, options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    inner = art.ptx[art.ptx.index("ld.global"):]
    assert "bar.sync" not in inner[: inner.index("bra")], "a conversion in the inner loop"


RUNNING_SUM = """
import triton
import triton.language as tl


@triton.jit
def weighted(x_ptr, out_ptr, n, M, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    rows = tl.arange(0, 2)
    start = ((cols * 3) % n).to(tl.float32)  # recomputable, no contiguity: the load is one element a thread
    wsum = tl.zeros((BLOCK,), tl.float32)
    acc = tl.zeros((2, BLOCK), tl.float32)
    for j in range(M):
        w = tl.abs(start - j) % 7.0
        wsum += w
        acc += tl.load(x_ptr + rows[:, None] * BLOCK + (cols * 3 % n)[None, :] + j) * w[None, :]
    out = acc / tl.where(wsum != 0, wsum, 1.0)[None, :]
    tl.store(out_ptr + rows[:, None] * BLOCK + cols[None, :], out)
"""


def test_a_running_sum_is_carried_in_the_layout_it_is_read_in_after_the_loop() -> None:
    """`wsum` is computed from recomputable values only, so nothing in the loop fixes its layout; after the
    loop it divides `acc`, which is in the load's layout. It is carried in the slice of that layout: no
    conversion through shared memory after the loop, and `w` computed once for both uses."""
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "M": "i32"}
    module = _gpu_module(RUNNING_SUM, "weighted", sig, {"BLOCK": 256})
    text = print_module(module)
    access = re.search(r'load [^\n]*gpu\.access = "([^"]+)"', text).group(1)
    (carried,) = re.findall(r'= for [^\n]*gpu\.layouts = \["([^"]+)", "([^"]+)"\]', text)
    assert carried[1] == access
    assert "lane=(1)(2)(4)(8)(16)" in carried[0], carried  # the slice of the load's layout along the columns
    art = compile_kernel(RUNNING_SUM, "weighted", signature=sig, constexprs={"BLOCK": 256},
                         hints={"out_ptr": {"divisibility": 16}}, options=CompileOptions(target="cuda:sm_90"),
                         emit="ptx")  # fmt: skip
    # one conversion through shared memory is left: the result into the store's (vectorised) layout, its
    # 2x256 tile 4 registers a thread; carried in its zeros' layout, `wsum` crossed it too (4 barriers)
    assert art.ptx.count("bar.sync") == 2 and art.ptx.count("st.shared") == 4, art.ptx
    # an output of unknown alignment is stored one element a thread, the load's layout: no conversion at all
    plain = compile_kernel(RUNNING_SUM, "weighted", signature=sig, constexprs={"BLOCK": 256},
                           options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    assert "bar.sync" not in plain.ptx and "st.shared" not in plain.ptx, plain.ptx


def test_predicated_loads_and_stores_are_calls_that_return() -> None:
    """A predicated load or store is inline PTX; llvmlite prints no `willreturn`, and without it LLVM does not
    know that what follows the call runs on every trip through the loop body, so a remainder of
    loop-invariant values after it (it may trap: hoisted only where it runs anyway) stayed in the loop: FlagGems'
    bicubic inner loop recomputed its spans every iteration (bench/static_compare.py --case bicubic)."""
    src = """
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + (i * 3) % n, mask=i < n, other=0.0)
    b = tl.load(y_ptr + i, mask=i < n, other=0.0)
    tl.store(out_ptr + i, a + b, mask=i < n)
"""
    art = compile_kernel(src, "k", signature={"x_ptr": "*fp16", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                         constexprs={"BLOCK": 256}, options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    calls = re.findall(r"call [^\n]*asm sideeffect \"@\$\d+ (?:ld|st)\.global[^\n]*", art.llir)
    assert len(calls) >= 3, art.llir[-3000:]  # the narrow load, the vector load, the store
    for call in calls:
        assert re.search(r"\)\s*(#\d+|nounwind willreturn)", call), call
    attrs = dict(re.findall(r"^attributes (#\d+) = \{([^}]*)\}", art.llir, re.M))
    for call in calls:
        group = re.search(r"(#\d+)\s*$", call)
        if group is not None:
            assert "willreturn" in attrs[group.group(1)], (call, attrs)
