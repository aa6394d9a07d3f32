"""What a kernel costs per iteration and per element, checked in the assembly of kernels tilec did not write
(bench/speed_kernels.py), where a change to the lowering moved a GPU timing (bench/NOTES-cuda.md, the sixth
session):

- the batched matmul at Triton's config: its wgmma descriptors come from one base per operand plus constants,
  and an address tile advanced by a constant is one carried offset plus a base per copy, so its loop is not
  the 227 SASS instructions it was (Triton's: 165);
- an elementwise op equal over a run of a thread's registers (Triton's constancy: `cols < N` over 4 columns
  when N is a multiple of 16) is computed once per run;
- a kernel ptxas spills heavily under fewer than 255 registers is assembled again with `.minnctapersm 1`.
"""

from __future__ import annotations

import ast
import collections
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason, to_device, to_host
from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.backends.cuda.target import SPILL_RETRY_BYTES
from tilec.compiler.pipeline import compile_kernel

KERNELS = Path(__file__).resolve().parents[2] / "bench" / "speed_kernels.py"
HEAD = "import triton\nimport triton.language as tl\n\n\n"


def kernel_source(name: str) -> str:
    """`name`'s def from bench/speed_kernels.py, its decorators but @triton.jit dropped, as a module."""
    text = KERNELS.read_text()
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return HEAD + "@triton.jit\n" + "\n".join(text.splitlines()[fn.lineno - 1 : fn.end_lineno]) + "\n"


def nvdisasm() -> str:
    import triton

    path = Path(triton.__file__).parent / "backends/nvidia/bin/nvdisasm"
    if not path.is_file():
        pytest.skip("Triton's nvdisasm is not installed (the test extra brings it)")
    return str(path)


def loops(cubin: bytes, tmp_path: Path) -> list[collections.Counter]:
    """Each backward branch's loop in the SASS: a count of its instructions by opcode."""
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    lines = subprocess.run([nvdisasm(), "-c", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", line))}
    out = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i:
            body = [x for x in lines[labels[m.group(1)] : i + 1] if re.match(r"^\s+/\*[0-9a-f]{4}\*/", x)]
            ops = (re.sub(r"/\*[0-9a-f]*\*/", "", x).split() for x in body)
            out.append(collections.Counter((t[1] if t[0].startswith("@") else t[0]).split(".")[0] for t in ops))
    return out


def test_the_batched_matmul_loop_is_near_tritons(tmp_path: Path) -> None:
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"} | dict.fromkeys(
        ("M", "N", "K", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn", "stride_cb",
         "stride_cm", "stride_cn"), "i32")  # fmt: skip
    ones = ("stride_ak", "stride_bn", "stride_cn")
    hints = {p: {"equal_to_1": True} if p in ones else {"divisibility": 16} for p in sig}
    art = compile_kernel(kernel_source("bmm_kernel"), "bmm_kernel", signature=sig, hints=hints,
                         constexprs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4, num_stages=4), emit="cubin")  # fmt: skip
    (loop,) = [c for c in loops(art.binary, tmp_path) if c["HGMMA"]]
    assert loop["HGMMA"] == 8 and loop["LDGSTS"] == 16
    # 227 before (8 induction variables for A's rows, each copy's address rebuilt; 4 instructions a descriptor);
    # 199 with LLVM's carried pointers while the coordinates were built bit by bit from lane and warp (177 since
    # they come from tid.x)
    assert sum(loop.values()) <= 185, loop
    # CudaOptions.uniform_advance_offset hides the A tile's step from LLVM behind one identity asm in the loop
    body = art.ptx[art.ptx.index("$L__BB0_2:") :]
    assert "mov.b64" not in body
    hidden = compile_kernel(kernel_source("bmm_kernel"), "bmm_kernel", signature=sig, hints=hints,
                            constexprs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                            options=CompileOptions(target="cuda:sm_90", num_warps=4, num_stages=4,
                                                   cuda=CudaOptions(uniform_advance_offset=True)), emit="ptx")  # fmt: skip
    assert hidden.ptx[hidden.ptx.index("$L__BB0_2:") :].count("mov.b64") >= 1


EQUAL_RUNS = HEAD + """@triton.jit
def masked_scale(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols)
    tl.store(y_ptr + cols, tl.where(cols < N, x * 2.0, -1.0))
"""


def build_masked_scale(n_div: int):
    return compile_kernel(EQUAL_RUNS, "masked_scale", signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32"},
                          hints={"x_ptr": {"divisibility": 16}, "y_ptr": {"divisibility": 16},
                                 "N": {"divisibility": n_div}},
                          constexprs={"BLOCK": 1024}, options=CompileOptions(target="cuda:sm_90", num_warps=4),
                          emit="ptx")  # fmt: skip


def test_a_compare_equal_over_runs_is_made_once_a_run() -> None:
    # 1024 columns on 128 threads: 8 a thread, in 2 runs of 4 contiguous columns (16-byte accesses)
    compares = len(re.findall(r"\bsetp\.lt\.s32", build_masked_scale(16).ptx))
    assert compares == 2
    # N of unknown alignment: each column's own compare
    assert len(re.findall(r"\bsetp\.lt\.s32", build_masked_scale(1).ptx)) == 8


@pytest.mark.skipif(gpu_reason() is not None, reason=str(gpu_reason()))
@pytest.mark.parametrize("n", [4096, 2000, 1000, 37])
def test_equal_runs_on_the_gpu(n: int) -> None:
    from tilec import client

    kern = client.jit(EQUAL_RUNS, "masked_scale")  # N is specialised on its divisibility (16 for 4096, 2000)
    x = np.random.default_rng(n).standard_normal(4096).astype(np.float32)
    y = np.zeros(4096, np.float32)
    dx, dy = to_device(x), to_device(y)
    kern[(4,)](dx, dy, n, BLOCK=1024)
    cols = np.arange(4096)
    np.testing.assert_array_equal(to_host(dy, y), np.where(cols < n, x * 2.0, -1.0).astype(np.float32))


def build_scan(**cuda):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride": "i32"}
    return compile_kernel(kernel_source("cumsum_rows"), "cumsum_rows", signature=sig,
                          hints={p: {"divisibility": 16} for p in sig}, constexprs={"BLOCK_M": 64, "BLOCK_N": 1024},
                          options=CompileOptions(target="cuda:sm_90", num_warps=8, cuda=CudaOptions(**cuda)),
                          emit="cubin")  # fmt: skip


def test_a_heavily_spilling_kernel_is_assembled_for_one_block_an_sm() -> None:
    art = build_scan()  # 256 values a thread: ptxas alone took 32 registers and spilled 8,700 bytes
    before = art.metadata["occupancy_retry"]
    assert before["spill_stores"] >= SPILL_RETRY_BYTES and before["registers"] < 255
    assert art.metadata["spill_stores"] <= before["spill_stores"] // 2
    assert ".minnctapersm 1" in art.ptx  # the PTX kept is the one assembled


def test_a_kernel_that_does_not_spill_is_left_to_ptxas() -> None:
    built = compile_kernel(EQUAL_RUNS, "masked_scale", signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32"},
                           constexprs={"BLOCK": 1024}, options=CompileOptions(target="cuda:sm_90", num_warps=4),
                           emit="cubin")  # fmt: skip
    assert "occupancy_retry" not in built.metadata and ".minnctapersm" not in built.ptx


def test_the_occupancy_option_still_states_one_block() -> None:
    art = build_scan(leave_occupancy_to_ptxas=False)  # stated from the start: no retry
    assert "occupancy_retry" not in art.metadata and ".minnctapersm 1" in art.ptx
