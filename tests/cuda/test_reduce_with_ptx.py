"""reduce_with / scan_with on the cuda target, checked by ptxas for sm_90 (no GPU needed): the combiner is
inlined into the register / shuffle / shared-memory tree, one register per input moving through it; scans
stay in registers. Known combines keep the reduce/scan fast path. (The conformance cases in
cases_combine.py also compile to cubins in test_compile_cases.py and run on the GPU in test_gpu.py.)"""

from __future__ import annotations

import re

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

SOURCE = """
import triton
import triton.language as tl


@triton.jit
def _argmax_combine(value1, index1, value2, index2):
    tie = (value1 == value2) & (index1 < index2)
    gt = (value1 > value2) | tie
    return tl.where(gt, value1, value2), tl.where(gt, index1, index2)


@triton.jit
def _welford(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@triton.jit
def _triton_helper_fn_add0(arg0_0, arg1_0):
    tmp0 = arg0_0 + arg1_0
    return tmp0


@triton.jit
def _recurrence(a1, b1, a2, b2):
    return a1 * a2, b1 * a2 + b2


@triton.jit
def argmax_1d(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v, i = tl.reduce((tl.load(x_ptr + offs), offs), 0, _argmax_combine)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)


@triton.jit
def welford_rows(x_ptr, out_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = cols[None, :] < N
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    w0 = tl.broadcast_to(tl.where(mask, 1.0, 0.0), (BM, BN))
    mean, m2, w = tl.reduce((x, tl.zeros_like(x), w0), 1, _welford)
    tl.store(out_ptr + rows, m2 / w)


@triton.jit
def scans(a_ptr, b_ptr, o_ptr, s_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    _, r = tl.associative_scan((a, b), 1, _recurrence, reverse=True)
    tl.store(o_ptr + offs, r)
    (s,) = tl.associative_scan((a,), 0, _triton_helper_fn_add0)
    tl.store(s_ptr + offs, s)
"""


def compile_sm90(name: str, signature: dict, constexprs: dict, num_warps: int = 4):
    art = compile_kernel(SOURCE, name, signature=signature, constexprs=constexprs,
                         options=CompileOptions(target="cuda:sm_90", num_warps=num_warps), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF" and art.metadata["registers"] > 0
    return art


def shuffles(ptx: str) -> list[str]:
    """The register type of each butterfly shuffle (all go through b32)."""
    return re.findall(r"shfl\.sync\.bfly\.(b32)", ptx)


def test_argmax_with_index_shuffles_value_and_index_together() -> None:
    art = compile_sm90("argmax_1d", {"x_ptr": "*fp32", "v_ptr": "*fp32", "i_ptr": "*i32"}, {"BLOCK": 1024})
    assert "reduce_with" in art.tir and "call" not in art.tir  # the combine is inlined into the region
    # 5 lane steps, each moving the value and the index; then one barrier for the 4 warps' partials,
    # which take a 16-byte plane of values and one of indices
    assert len(shuffles(art.ptx)) == 10
    assert art.ptx.count("bar.sync") == 1
    assert art.metadata["shared_bytes"] == 32
    assert "_argmax_combine" not in art.ptx


def test_welford_three_registers_per_element() -> None:
    art = compile_sm90(
        "welford_rows", {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32"}, {"BM": 2, "BN": 256}
    )
    n = len(shuffles(art.ptx))
    assert n > 0 and n % 3 == 0
    assert "div.rn.f32" in art.ptx or "div.full.f32" in art.ptx or "rcp" in art.ptx


@pytest.mark.parametrize("num_warps", [1, 4])
def test_scans_stay_in_registers(num_warps: int) -> None:
    art = compile_sm90("scans", {"a_ptr": "*fp32", "b_ptr": "*fp32", "o_ptr": "*fp32", "s_ptr": "*fp32"},
                       {"M": 16, "N": 32}, num_warps)  # fmt: skip
    assert "scan_with" in art.tir
    # Inductor's add helper takes the fast path
    assert re.search(r'= scan %\d+ \{axis = 0, kind = "sum"\}', art.tir)
    assert shuffles(art.ptx) == []


@pytest.mark.parametrize("num_warps", [1, 4])
def test_combiners_with_ifs_and_loops_assemble(num_warps: int) -> None:
    from tests.codegen.test_reduce_with import CONTROL_SOURCE

    sig = {
        "x_ptr": "*fp32",
        "i_ptr": "*i32",
        "r_ptr": "*fp32",
        "n_ptr": "*i32",
        "s_ptr": "*fp32",
        "t_ptr": "*i32",
    }
    art = compile_kernel(CONTROL_SOURCE, "k", signature=sig, constexprs={"M": 8, "N": 64, "REVERSE": True},
                         options=CompileOptions(target="cuda:sm_90", num_warps=num_warps), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"
    assert "reduce_with" in art.tir and "scan_with" in art.tir
    assert len(shuffles(art.ptx)) % 2 == 0 and shuffles(art.ptx)  # value and index through each lane step
