"""gpu-prefetch (compiler/backends/cuda/passes/gpu_prefetch.py): a `tl.range(..., num_stages=S)` loop without a
tensor-core dot loads its next iteration's tiles one iteration ahead. The IR after the pass, and the reference
interpreter on the kernel before and after it (same inputs, bit for bit), on Triton's fused-softmax tutorial
kernel as published and on loops the pass must leave alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.passes import GpuPrefetchPass
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module, verify_module
from tilec.compiler.pipeline import compile_kernel

SOFTMAX = """
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                   num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)
"""

SIG = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
       "n_rows": "i32", "n_cols": "i32"}  # fmt: skip

# a carried running sum reads the loaded tile; the second loop's load depends on a carried value (not prefetched)
CARRIED = """
import triton
import triton.language as tl


@triton.jit
def running(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in tl.range(0, n, BLOCK, num_stages=3):
        acc += tl.load(x_ptr + i + offs, mask=i + offs < n, other=0.0)
    p = x_ptr
    for j in tl.range(0, 2, num_stages=3):
        acc += tl.load(p + offs)
        p += BLOCK
    tl.store(out_ptr + offs, acc)
"""


def tir(src: str, name: str, sig: dict, consts: dict) -> str:
    art = compile_kernel(src, name, signature=sig, constexprs=consts, options=CompileOptions(target="cuda:sm_90"),
                         emit="tir")  # fmt: skip
    return art.tir


def prefetched(text: str, num_warps: int = 4, extra_regs: int = 16):
    before, after = parse_module(text), parse_module(text)
    GpuPrefetchPass(num_warps=num_warps, extra_regs=extra_regs).apply(after)
    verify_module(after)
    return before, after


@pytest.mark.parametrize(("block", "warps", "ahead"), [(128, 4, 3), (2048, 8, 3), (4096, 8, 2), (16384, 8, 1)])
def test_the_softmax_row_loop_loads_rows_ahead(block: int, warps: int, ahead: int) -> None:
    """num_stages=4 keeps 3 rows in flight where the rows beyond the next fit 16 registers a thread."""
    _, after = prefetched(tir(SOFTMAX, "softmax_kernel", SIG, {"BLOCK_SIZE": block, "num_stages": 4}), warps)
    text = print_module(after)
    loop = text.index(" = for ")
    assert text[:loop].count(" = load ") == ahead  # the first rows, before the loop
    body = text[loop:]
    assert body.count(" = load ") == 1 and "num_stages = 4" in body
    yielded = re.search(r"yield ([^\n]*)", body).group(1).split(", ")
    assert len(yielded) == ahead  # the rows after this one go round the loop
    _, default = prefetched(tir(SOFTMAX, "softmax_kernel", SIG, {"BLOCK_SIZE": block, "num_stages": 4}), warps, 0)
    assert print_module(default).split(" = for ")[0].count(" = load ") == 1  # the default: one ahead


@pytest.mark.parametrize(("rows", "programs", "cols"), [(5, 2, 100), (1, 3, 128), (7, 7, 1), (0, 2, 64)])
def test_softmax_before_and_after_agree_on_the_interpreter(rows: int, programs: int, cols: int) -> None:
    before, after = prefetched(tir(SOFTMAX, "softmax_kernel", SIG, {"BLOCK_SIZE": 128, "num_stages": 4}))
    rng = np.random.default_rng(rows * 31 + cols)
    x = rng.standard_normal((max(rows, 1), 128)).astype(np.float32)
    outs = []
    for module in (before, after):
        y = np.full_like(x, 7.0)
        run_kernel(module, "softmax_kernel", [y, x.copy(), np.int32(128), np.int32(128), np.int32(rows), np.int32(cols)],
                   (programs,))  # fmt: skip
        outs.append(y)
    assert outs[0].tobytes() == outs[1].tobytes()
    if rows:
        e = np.exp(x[:rows, :cols] - x[:rows, :cols].max(axis=1, keepdims=True))
        np.testing.assert_allclose(outs[1][:rows, :cols], e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_load_through_a_carried_pointer_is_left_alone() -> None:
    text = tir(CARRIED, "running", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    before, after = prefetched(text)
    printed = print_module(after)
    first, second = (m.start() for m in re.finditer(r" = for ", printed))
    assert printed[:first].count(" = load ") == 2  # the first loop's first two tiles (num_stages=3)
    assert printed[second:].count(" = load ") == 1  # the second loop's own load, in place
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    outs = []
    for module in (before, after):
        out = np.zeros(64, np.float32)
        run_kernel(module, "running", [x.copy(), out, np.int32(200)], (1,))
        outs.append(out)
    assert outs[0].tobytes() == outs[1].tobytes()


def test_a_loop_without_num_stages_is_left_alone() -> None:
    text = tir(SOFTMAX.replace(", num_stages=num_stages", ""), "softmax_kernel", SIG, {"BLOCK_SIZE": 128, "num_stages": 4})
    _, after = prefetched(text)
    assert print_module(after) == print_module(parse_module(text))


# triton-lang/triton#8259's kernel: a store, then a load of the same address, in one iteration of a pipelined loop
STORE_THEN_LOAD = """
import triton
import triton.language as tl


@triton.jit
def store_then_load(ptr, diff, n, BLOCK: tl.constexpr):
    for offset in tl.range(0, n, BLOCK, num_stages=2):
        idx = offset + tl.arange(0, BLOCK)
        values = (idx + 1).to(tl.float32)
        tl.store(ptr + idx, values)
        loaded = tl.load(ptr + idx)
        tl.store(diff + idx, loaded - values)
"""

# the loop writes through a pointer chosen at run time: its argument is not known, so no load goes ahead
SELECTED_WRITE = """
import triton
import triton.language as tl


@triton.jit
def selected_write(x_ptr, y_ptr, n, flag, BLOCK: tl.constexpr):
    for offset in tl.range(0, n, BLOCK, num_stages=3):
        idx = offset + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + idx)
        dst = x_ptr if flag > 0 else y_ptr
        tl.store(dst + idx + BLOCK, v + 1.0)
"""


@pytest.mark.parametrize(("src", "name", "sig"), [
    (STORE_THEN_LOAD, "store_then_load", {"ptr": "*fp32", "diff": "*fp32", "n": "i32"}),
    (SELECTED_WRITE, "selected_write", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "flag": "i32"}),
])  # fmt: skip
def test_a_load_the_loop_may_have_written_is_not_read_ahead(src: str, name: str, sig: dict) -> None:
    text = tir(src, name, sig, {"BLOCK": 64})
    before, after = prefetched(text)
    assert print_module(after) == print_module(before)
    args = [np.zeros(512, np.float32) if t == "*fp32" else np.int32(256 if n == "n" else 1) for n, t in sig.items()]
    outs = []
    for module in (before, after):
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run_kernel(module, name, got, (1,))
        outs.append(got)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(*outs, strict=True) if isinstance(a, np.ndarray))
    if name == "store_then_load":
        assert not outs[1][1].any()  # each iteration reads back what it stored


def test_the_prefetch_depth_is_a_compile_option() -> None:
    """CudaOptions.prefetch_regs reaches the pass through the cuda pipeline: the softmax rows of 256 floats on 8
    warps go three ahead with 4 registers to spare, one ahead by default; another option, another artifact key."""
    from tilec.compiler.artifact import CudaOptions, artifact_key
    from tilec.compiler.pipeline import compile_request
    from tilec.compiler.request import CompileRequest

    def gpu_tir(regs: int) -> str:
        request = CompileRequest(text=SOFTMAX, name="softmax_kernel", signature=SIG,
                                 constexprs={"BLOCK_SIZE": 256, "num_stages": 4}, emit="gpu-tir", pass_dumps=True,
                                 options=CompileOptions(target="cuda:sm_90", num_warps=8, cuda=CudaOptions(prefetch_regs=regs)))  # fmt: skip
        return compile_request(request).pass_dumps[-1]["ir"]

    ahead = [gpu_tir(r).split(" = for ")[0].count(" = load ") for r in (0, 4)]  # the rows loaded before the loop
    assert ahead == [1, 3]
    spec = {"signature": SIG, "constexprs": {"BLOCK_SIZE": 256, "num_stages": 4}, "hints": {}, "emit": "cubin"}
    config = {"kwargs": {}, "num_warps": 8, "num_stages": 3}
    keys = {artifact_key("k" * 64, spec, config, "cuda:sm_90", "v1", codegen=CudaOptions(prefetch_regs=r)) for r in (0, 4)}
    assert len(keys) == 2
