"""tl.sort and tl.gather as their own IR ops (`sort`, `gather`). The interpreter runs the bitonic network
and a direct gather; the cpu target expands both into plain ops (passes/expand_tileops.py); cuda sorts in
registers and warp shuffles where the sorted axis stays inside a warp (shared memory only for axis bits on
warps) and gathers through shared memory at any size (backends/cuda/sort.py).

Without a GPU: interpreter and cpu agree bit for bit (ties, -0.0, NaNs, descending, both axes, int and
float), the cuda PTX of a row sort has no barrier and no shared-memory access, a gather of [8, 256] (over
the old one-hot budget) assembles with one barrier. On a GPU: against torch.sort / torch.gather and the
interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason, run_gpu
from tilec import client
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import BudgetExceededError
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.pipeline import compile_kernel

RNG = np.random.default_rng(24)
GPU = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")

SRC = """
import triton
import triton.language as tl


@triton.jit
def sort_tile(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), dim=AXIS, descending=DESC))


@triton.jit
def sort_rows(x_ptr, out_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :])
    tl.store(out_ptr + rows[:, None] * stride + cols[None, :], tl.sort(x, dim=1))


@triton.jit
def gather_tile(x_ptr, idx_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, IM: tl.constexpr,
                IN: tl.constexpr, AXIS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    io = tl.arange(0, IM)[:, None] * IN + tl.arange(0, IN)[None, :]
    tl.store(out_ptr + io, tl.gather(x, tl.load(idx_ptr + io), axis=AXIS))
"""

_T = {np.float32: "*fp32", np.int32: "*i32", np.float16: "*fp16", np.int64: "*i64", np.uint8: "*u8"}


def _interp(name: str, args: list, consts: dict, grid=(1,)) -> list:
    sig = {}
    ks = read_kernel(SRC, name)
    arrays = iter(a for a in args if isinstance(a, np.ndarray))
    for p in ks.params:
        if p.name in consts:
            continue
        sig[p.name] = _T[next(arrays).dtype.type] if p.name.endswith("_ptr") else "i32"
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(build_ir(ks, sig, consts), name, host, grid)
    return host


def _cpu(name: str, args: list, consts: dict, grid=(1,)) -> list:
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    client.jit(SRC, name)[grid](*host, **consts)
    return host


def _awkward(shape, dtype) -> np.ndarray:
    """Values with ties, and for floats -0.0 / +0.0 and NaNs, where a network's order shows."""
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-5, 5, shape).astype(dtype)
    x = RNG.integers(-4, 4, shape).astype(dtype) * dtype(0.5)
    flat = x.reshape(-1)
    flat[RNG.choice(flat.size, flat.size // 8, replace=False)] = dtype(-0.0)
    flat[RNG.choice(flat.size, flat.size // 16, replace=False)] = dtype(np.nan)
    return x


# ---- interpreter and cpu ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("shape,axis", [((4, 32), 1), ((16, 8), 0), ((2, 64), 1)])
@pytest.mark.parametrize("desc", [False, True])
def test_sort_interpreter_and_cpu_agree_bit_for_bit(dtype, shape, axis: int, desc: bool) -> None:
    x = _awkward(shape, dtype)
    consts = {"BM": shape[0], "BN": shape[1], "AXIS": axis, "DESC": desc}
    want = _interp("sort_tile", [x, np.zeros_like(x)], consts)[1]
    got = _cpu("sort_tile", [x, np.zeros_like(x)], consts)[1]
    assert got.tobytes() == want.tobytes()
    clean = (
        RNG.standard_normal(shape).astype(dtype)
        if dtype != np.int32
        else RNG.integers(-99, 99, shape).astype(dtype)
    )
    out = _interp("sort_tile", [clean, np.zeros_like(clean)], consts)[1]
    ref = np.sort(clean, axis=axis)
    np.testing.assert_array_equal(out, np.flip(ref, axis) if desc else ref)


def test_sort_network_keeps_nans_where_the_network_leaves_them() -> None:
    """NaN compares false both ways, so it never swaps: not np.sort's NaNs-last order, Triton's."""
    x = np.array([[3.0, np.nan, 1.0, 2.0]], np.float32)
    out = _interp("sort_tile", [x, np.zeros_like(x)], {"BM": 1, "BN": 4, "AXIS": 1, "DESC": False})[1]
    # stage 1: (3, nan) stays, (1, 2) sorted down -> (2, 1); stage 2: (3, 2) -> (2, 3), (nan, 1) stays;
    # then (2, nan) stays, (3, 1) -> (1, 3)
    np.testing.assert_array_equal(out, np.array([[2.0, np.nan, 1.0, 3.0]], np.float32))


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bm,bn,im,inn,axis", [(8, 16, 8, 32, 1), (16, 4, 64, 4, 0), (4, 8, 4, 8, 1)])
def test_gather_interpreter_and_cpu_agree(idx_dtype, bm, bn, im, inn, axis: int) -> None:
    x = _awkward((bm, bn), np.float32)
    n = (bm, bn)[axis]
    idx = RNG.integers(-2, n + 2, (im, inn)).astype(idx_dtype)  # some out of range: they read 0
    args = [x, idx, np.zeros((im, inn), np.float32)]
    consts = {"BM": bm, "BN": bn, "IM": im, "IN": inn, "AXIS": axis}
    want = _interp("gather_tile", args, consts)[2]
    got = _cpu("gather_tile", args, consts)[2]
    assert got.tobytes() == want.tobytes()
    ok = (idx >= 0) & (idx < n)
    ref = np.take_along_axis(x, np.where(ok, idx, 0), axis=axis)
    assert np.where(ok, ref, 0).astype(np.float32).tobytes() == want.tobytes()


def test_large_gather_builds_ir_and_runs_on_the_interpreter() -> None:
    """[8, 256] from [8, 256]: the frontend used to refuse it (a 524288-element one-hot)."""
    x = RNG.standard_normal((8, 256)).astype(np.float32)
    idx = RNG.integers(0, 256, (8, 256)).astype(np.int32)
    consts = {"BM": 8, "BN": 256, "IM": 8, "IN": 256, "AXIS": 1}
    out = _interp("gather_tile", [x, idx, np.zeros_like(x)], consts)[2]
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, axis=1))
    with pytest.raises(BudgetExceededError, match="one-hot"):  # the cpu target's expansion keeps a budget
        _cpu("gather_tile", [x, idx, np.zeros_like(x)], consts)


# ---- cuda PTX (ptxas, no GPU) ----------------------------------------------------------------------


def _cubin(name: str, sig: dict, consts: dict, warps: int):
    """Built as a launch specialises it: every pointer and stride 16-byte aligned (the rows' layouts follow)."""
    hints = {p: {"divisibility": 16} for p in sig}
    return compile_kernel(SRC, name, signature=sig, constexprs=consts, hints=hints,
                          options=CompileOptions(target="cuda:sm_90", num_warps=warps), emit="cubin")  # fmt: skip


def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


def test_row_sort_is_registers_and_shuffles_only() -> None:
    """The speed stage's [8, 128] fp32 row sort at 8 warps: each row in one warp (4 registers x 32 lanes),
    so 28 compare-exchange steps are 13 in registers and 15 across lanes: 60 shuffles, no barrier, no
    shared memory (before: 71 barriers and 512 shared-memory instructions)."""
    art = _cubin(
        "sort_rows", {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride": "i32"}, {"BM": 8, "BN": 128}, 8
    )
    ptx = art.ptx
    assert _count(ptx, r"bar\.sync|barrier\.sync") == 0
    assert _count(ptx, r"\b(ld|st)\.shared") == 0
    assert _count(ptx, r"shfl\.sync\.bfly") == 60
    assert art.metadata["spill_stores"] == 0


@pytest.mark.parametrize("shape,axis,warps", [((1, 2048), 1, 4), ((64, 4), 0, 4), ((32, 32), 0, 8)])
def test_sorts_across_warps_assemble(shape, axis: int, warps: int) -> None:
    consts = {"BM": shape[0], "BN": shape[1], "AXIS": axis, "DESC": True}
    art = _cubin("sort_tile", {"x_ptr": "*fp32", "out_ptr": "*fp32"}, consts, warps)
    assert art.metadata["spill_stores"] == 0
    assert "shfl.sync.bfly" in art.ptx or shape[axis] <= 4


def test_gather_goes_through_shared_memory_once() -> None:
    consts = {"BM": 8, "BN": 256, "IM": 8, "IN": 256, "AXIS": 1}
    art = _cubin("gather_tile", {"x_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"}, consts, 8)
    assert _count(art.ptx, r"bar\.sync|barrier\.sync") == 1
    assert art.metadata["spill_stores"] == 0


# ---- GPU -----------------------------------------------------------------------------------------


@GPU
@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize(
    "shape,axis,warps",
    [
        ((8, 128), 1, 8),
        ((4, 32), 1, 1),
        ((16, 64), 0, 4),
        ((1, 2048), 1, 4),
        ((32, 32), 0, 8),
        ((2, 1024), 1, 8),
    ],
)
def test_sort_on_gpu_matches_torch_and_the_interpreter(
    desc: bool, dtype, shape, axis: int, warps: int
) -> None:
    import torch

    consts = {"BM": shape[0], "BN": shape[1], "AXIS": axis, "DESC": desc}
    clean = RNG.permutation(shape[0] * shape[1]).reshape(shape).astype(dtype) * dtype(1)
    if dtype == np.float16:
        clean = (clean % 1000).astype(dtype)
    got = run_gpu(client.jit(SRC, "sort_tile"), (1,), [clean, np.zeros_like(clean)], consts, num_warps=warps)[
        1
    ]
    ref = torch.sort(torch.from_numpy(clean), dim=axis, descending=desc).values.numpy()
    np.testing.assert_array_equal(got, ref)
    x = _awkward(shape, dtype)  # ties, -0.0 and NaNs: the network's own order, bit for bit
    got = run_gpu(client.jit(SRC, "sort_tile"), (1,), [x, np.zeros_like(x)], consts, num_warps=warps)[1]
    assert got.tobytes() == _interp("sort_tile", [x, np.zeros_like(x)], consts)[1].tobytes()


@GPU
@pytest.mark.parametrize(
    "bm,bn,im,inn,axis,warps",
    [(8, 256, 8, 256, 1, 8), (64, 64, 128, 64, 0, 4), (256, 128, 256, 128, 1, 8), (4, 8, 4, 8, 1, 1)],
)
def test_gather_on_gpu_matches_torch(bm, bn, im, inn, axis: int, warps: int) -> None:
    import torch

    x = RNG.standard_normal((bm, bn)).astype(np.float32)
    n = (bm, bn)[axis]
    idx = RNG.integers(0, n, (im, inn)).astype(np.int32)
    consts = {"BM": bm, "BN": bn, "IM": im, "IN": inn, "AXIS": axis}
    got = run_gpu(
        client.jit(SRC, "gather_tile"),
        (1,),
        [x, idx, np.zeros((im, inn), np.float32)],
        consts,
        num_warps=warps,
    )[2]
    ref = torch.gather(torch.from_numpy(x), axis, torch.from_numpy(idx).long()).numpy()
    np.testing.assert_array_equal(got, ref)
    bad = idx.copy()
    bad[0, 0], bad[-1, -1] = -1, n  # out of range: 0, as the interpreter
    got = run_gpu(
        client.jit(SRC, "gather_tile"),
        (1,),
        [x, bad, np.zeros((im, inn), np.float32)],
        consts,
        num_warps=warps,
    )[2]
    assert (
        got.tobytes()
        == _interp("gather_tile", [x, bad, np.zeros((im, inn), np.float32)], consts)[2].tobytes()
    )
