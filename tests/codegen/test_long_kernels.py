"""Long straight-line kernels (tl.static_range unrolled into thousands of ops) on the cpu and cuda targets:
they compile without Python recursion proportional to their length, in LLVM code whose size per function
stays bounded (so compile time grows linearly: bench/compile_time.py --long), and compute what NumPy does.
"""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest

import tilec
from tests.kernels import source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

HEAD = "import triton\nimport triton.language as tl\n\n"
SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}

# A where-chain through a helper (lazy elementwise ops on the cuda target) beside a chain of index adds
# (the cpu target's contiguity walk): 1000 steps are about 6000 ops.
CHAIN = (
    HEAD
    + """
@triton.jit
def step(x, i):
    return tl.where(x > 1.0, x * 0.5, x + 0.25 * i)


@triton.jit
def chain_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    shifted = offs
    for i in tl.static_range(STEPS):
        x = step(x, i)
        shifted = shifted + 1
    tl.store(out_ptr + shifted, x, mask=offs < n)
"""
)

# The kernel: a load, a multiply and an add per step.
ACC = source("static_range_acc")  # the kernel

# A load and a store per step (stores end every fused loop, so the loops stay as many as the steps).
LOAD_STORE = (
    HEAD
    + """
@triton.jit
def ldst_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in tl.static_range(STEPS):
        y = tl.load(out_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, y + tl.load(x_ptr + offs, mask=mask, other=0.0), mask=mask)
"""
)


# An index chain feeding a load each step: every load's address is a chain of adds as long as its step.
SHIFTED = (
    HEAD
    + """
@triton.jit
def shifted_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(STEPS):
        offs = offs + 1
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs - STEPS, acc, mask=offs - STEPS < n)
"""
)


def _compile(src: str, target: str, steps: int, block: int = 128, emit: str | None = None):
    return compile_kernel(src, None, signature=SIG, constexprs={"BLOCK": block, "STEPS": steps},
                          options=CompileOptions(target=target), emit=emit)  # fmt: skip


def _chain_reference(x: np.ndarray, steps: int) -> np.ndarray:
    for i in range(steps):
        x = np.where(x > 1.0, x * np.float32(0.5), x + np.float32(0.25 * i)).astype(np.float32)
    return x


def _loops(llir: str) -> list[int]:
    """Tile loops (blocks named *.body) per LLVM function of the module."""
    return [len(re.findall(r"^\S+\.body(\.\d+)?:", body, re.M)) for body in llir.split("\ndefine ")[1:]]


@pytest.mark.parametrize("target", ["cpu", "cuda:sm_90"])
def test_thousands_of_chained_ops_compile_without_recursion(target: str) -> None:
    art = _compile(CHAIN, target, 1000)
    assert art.tir.count("\n") > 5000
    assert art.binary[:4] == b"\x7fELF"


def test_long_chain_computes_what_numpy_does_on_cpu() -> None:
    steps, n = 1000, 300
    x = (np.random.default_rng(0).standard_normal(n) * 4).astype(np.float32)
    out = np.zeros(n + steps, np.float32)
    tilec.jit(CHAIN, "chain_kernel")[(3,)](x, out, n, BLOCK=128, STEPS=steps)
    np.testing.assert_array_equal(out[steps:], _chain_reference(x, steps))
    assert not out[:steps].any()


def test_unrolled_loads_share_one_loop_on_cpu() -> None:
    """Loads and elementwise ops of every step are one loop over chunks of the tile, not a loop each."""
    loops = _loops(_compile(ACC, "cpu", 200, emit="llir").llir)
    assert sum(loops) <= 8, loops


def test_loads_through_long_index_chains_stay_linear_on_cpu() -> None:
    """The contiguity walk over an address's chain of adds is bounded: walked in full for every load, it
    emitted code quadratic in the steps (13600 lines of LLVM IR for 150 steps, 49600 for 300)."""
    small, big = (_compile(SHIFTED, "cpu", s, emit="llir").llir.count("\n") for s in (150, 300))
    assert big < 2.2 * small, (small, big)
    steps, n = 300, 500
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    tilec.jit(SHIFTED, "shifted_kernel")[(4,)](x, out, n, BLOCK=128, STEPS=steps)
    ref = np.zeros(n, np.float32)
    for k in range(1, steps + 1):
        ref[: n - k] += x[k:]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_fused_loops_have_bounded_bodies_on_cpu() -> None:
    """A chain of thousands of elementwise ops is cut into fused loops of at most 256 ops: one loop body is
    one basic block, which LLVM schedules in time superlinear in its size."""
    llir = _compile(CHAIN, "cpu", 600, emit="llir").llir
    blocks = re.split(r"\n\S+:\n", llir)
    assert max(b.count("\n") for b in blocks) < 2000
    assert sum(_loops(llir)) >= 8


def test_compile_does_not_run_the_cyclic_collector() -> None:
    """The IR is objects in reference cycles: the collector, run again and again while a long kernel
    compiled (over a hundred times for this one), made compile time superlinear. It runs once after."""
    starts: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            starts.append(info["generation"])

    gc.callbacks.append(count)
    try:
        _compile(CHAIN, "cpu", 300, emit="llir")
    finally:
        gc.callbacks.remove(count)
    assert len(starts) <= 2, starts
    assert gc.isenabled()


def test_long_accumulation_on_big_tiles_fits_the_stack_and_matches_numpy() -> None:
    """One buffer per op took 12 KB a step of a 1024-wide tile: 400 steps were over the 4 MB budget."""
    steps, n = 400, 2000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    tilec.jit(ACC, "acc_kernel")[(2,)](x, out, n, BLOCK=1024, STEPS=steps)
    ref = np.zeros(n, np.float32)
    for i in range(steps):
        ref += x * np.float32(i + 1)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_long_kernel_with_stores_is_lowered_in_bounded_functions() -> None:
    """A store per step keeps a loop per step: the kernel body is split over functions of a dozen loops."""
    steps, n = 120, 200
    loops = _loops(_compile(LOAD_STORE, "cpu", steps, emit="llir").llir)
    assert sum(loops) >= 2 * steps and max(loops) <= 16, loops
    rng = np.random.default_rng(2)
    x, out = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ref = out.copy()
    for _ in range(steps):
        ref = ref + x
    tilec.jit(LOAD_STORE, "ldst_kernel")[(2,)](x, out, n, BLOCK=128, STEPS=steps)
    np.testing.assert_array_equal(out, ref)


def test_unrolled_loads_do_not_stay_live_on_cuda() -> None:
    """Math on loaded tiles is computed where the program has it, between the loads: deferred to the store
    that needs it, it came after the last load, with every loaded tile live until then (ptxas took time
    superlinear in their number: 11 s for 400 steps)."""
    ptx = _compile(ACC, "cuda:sm_90", 100, emit="ptx").ptx
    math = [m.start() for m in re.finditer(r"\b(add|mul|fma)\.rn\.f32", ptx)]
    loads = [m.start() for m in re.finditer(r"ld\.global", ptx)]
    # at least one load and one multiply-add a step (one element a thread: the pointers' alignment is not known)
    assert len(loads) >= 100 and len(math) >= 99
    assert sum(pos < loads[-1] for pos in math) > len(math) // 2
