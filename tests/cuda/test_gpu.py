"""The cuda target on a real GPU: kernels run through client.jit on torch CUDA tensors and are compared
with the reference interpreter on the same inputs (and the conformance table when it exists).
Skips with a reason where there is no GPU (CI); the device machine runs it (bench/gpu_run.sh)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason, run_gpu
from tests.kernels import KERNELS, source
from tilec import client
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
RNG = np.random.default_rng(1)
HEADER = "import triton\nimport triton.language as tl\n\n\n"


def _signature(ks, args: list, constexprs: dict) -> dict:
    from tilec.runtime.launch import specialise

    return {p.name: specialise(p.name, a).type for p, a in zip([p for p in ks.params if not p.constexpr], args, strict=True)}


def reference(src: str, name: str, args: list, grid: tuple, constexprs: dict) -> list:
    ks = read_kernel(src, name)
    module = build_ir(ks, _signature(ks, args, constexprs), constexprs)
    host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(module, name, host, grid)
    return host


def check(src: str, name: str, args: list, grid: tuple, constexprs: dict, rtol=1e-5, atol=1e-6, **options) -> None:
    want = reference(src, name, args, grid, constexprs)
    got = run_gpu(client.jit(src, name), grid, args, constexprs, **options)
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=f"{name}: argument {i}")  # fmt: skip


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---- the tutorial kernels -------------------------------------------------------------------------


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_vector_add(num_warps: int) -> None:
    n = 3000
    check(source("vector_add"), "add_kernel", [f32(n), f32(n), np.zeros(n, np.float32), n], ((n + 255) // 256,),
          {"BLOCK_SIZE": 256}, num_warps=num_warps)  # fmt: skip


@pytest.mark.parametrize("block", [128, 1024])
def test_fused_softmax(block: int) -> None:
    rows, cols = 7, block - 3
    x = f32(rows, cols)
    check(source("fused_softmax"), "softmax_kernel", [np.zeros_like(x), x, cols, cols, cols], (rows,),
          {"BLOCK_SIZE": block}, rtol=1e-5, atol=1e-6)  # fmt: skip


def test_layer_norm() -> None:
    rows, n = 5, 300
    args = [f32(rows, n), np.zeros((rows, n), np.float32), f32(n), f32(n), np.zeros(rows, np.float32),
            np.zeros(rows, np.float32), n, n, np.float32(1e-5)]  # fmt: skip
    check(source("layer_norm"), "_layer_norm_fwd_fused", args, (rows,), {"BLOCK_SIZE": 128}, rtol=1e-4, atol=1e-5)


def without_autotune(text: str) -> str:
    """The kernel with its @triton.autotune decorator dropped, so a test can fix the block sizes."""
    start = text.index("@triton.autotune(")
    return text[:start] + text[text.index("@triton.jit", start) :]


def test_matmul_fp16() -> None:
    m, n, k = 70, 40, 50
    a, b = f32(m, k).astype(np.float16), f32(k, n).astype(np.float16)
    grid = (((m + 31) // 32) * ((n + 31) // 32),)
    args = [a, b, np.zeros((m, n), np.float16), m, n, k, k, 1, n, 1, n, 1]
    check(without_autotune(source("matmul")), "matmul_kernel", args, grid,
          {**KERNELS["matmul"]["constexprs"], "ACTIVATION": ""}, rtol=1e-2, atol=1e-2)  # fmt: skip


def test_gather() -> None:
    n, src_n = 1000, 377
    args = [f32(src_n), RNG.integers(0, src_n, n).astype(np.int32), np.zeros(n, np.float32), n]
    check(source("gather"), "gather_kernel", args, ((n + 127) // 128,), {"BLOCK": 128}, rtol=0, atol=0)


def test_transpose() -> None:
    m, n = 70, 45
    args = [f32(m, n), np.zeros((n, m), np.float32), m, n, n, m]
    check(source("transpose"), "transpose_kernel", args, ((m + 31) // 32, (n + 31) // 32),
          {"BLOCK_M": 32, "BLOCK_N": 32}, rtol=0, atol=0)  # fmt: skip


def test_cumsum() -> None:
    rows, cols = 10, 25
    args = [f32(rows, cols), np.zeros((rows, cols), np.float32), rows, cols, cols]
    check(source("cumsum"), "cumsum_kernel", args, ((rows + 3) // 4,), KERNELS["cumsum"]["constexprs"])


def test_histogram_atomics() -> None:
    n = 5000
    args = [RNG.integers(-3, 20, n).astype(np.int32), np.zeros(16, np.int32), n]
    check(source("histogram"), "histogram_kernel", args, ((n + 255) // 256,), {"NUM_BINS": 16, "BLOCK": 256}, rtol=0, atol=0)


def test_csr_spmv() -> None:
    rows, cols = 9, 50
    dense = f32(rows, cols)
    dense[RNG.random((rows, cols)) < 0.6] = 0
    dense[2] = 0
    rowptr = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.int32)
    args = [rowptr, np.nonzero(dense)[1].astype(np.int32), dense[dense != 0].astype(np.float32), f32(cols),
            np.full(rows, 99, np.float32)]  # fmt: skip
    check(source("csr_spmv"), "csr_spmv_kernel", args, (rows,), {"BLOCK": 16}, rtol=1e-5, atol=1e-5)


def test_helper_2d() -> None:
    m, n = 40, 30
    args = [f32(m, n), np.zeros((m, n), np.float32), m, n, n, np.float32(1.5)]
    check(source("helper_2d"), "relu_scale_2d_kernel", args, ((m + 15) // 16, (n + 15) // 16), {"BLOCK_M": 16, "BLOCK_N": 16})


# ---- reductions, scans, dot, atomics over dtypes --------------------------------------------------

REDUCE_SRC = HEADER + """
@triton.jit
def red(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr, KIND: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0)
    if KIND == 0:
        r = tl.sum(x, axis=AXIS)
    elif KIND == 1:
        r = tl.max(x, axis=AXIS)
    elif KIND == 2:
        r = tl.min(x, axis=AXIS)
    elif KIND == 3:
        r = tl.argmax(x, axis=AXIS)
    else:
        r = tl.argmin(x, axis=AXIS)
    if AXIS == 0:
        tl.store(out_ptr + rn, r, mask=rn < N)
    else:
        tl.store(out_ptr + rm, r, mask=rm < M)
"""


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(32, 64), (128, 16)])
def test_reduce(dtype: str, kind: int, axis: int, shape: tuple) -> None:
    bm, bn = shape
    m, n = bm - 3, bn - 1
    x = (RNG.standard_normal((m, n)) * 10).astype(dtype)
    out_dtype = np.int32 if kind >= 3 else np.dtype(dtype)
    out = np.zeros(n if axis == 0 else m, out_dtype)
    tol = 1e-2 if dtype == "float16" else 1e-5
    if dtype == "float16" and kind == 0:
        tol = 0.25  # fp16 sums of ~100 terms of size ~10 round differently in another (tree) order
    check(REDUCE_SRC, "red", [x, out, m, n], (1,), {"BM": bm, "BN": bn, "AXIS": axis, "KIND": kind}, rtol=tol, atol=tol)


SCAN_SRC = HEADER + """
@triton.jit
def scan(x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=AXIS))
"""


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_scan(axis: int, dtype: str) -> None:
    x = (RNG.standard_normal((16, 32)) * 10).astype(dtype)
    check(SCAN_SRC, "scan", [x, np.zeros_like(x)], (1,), {"BM": 16, "BN": 32, "AXIS": axis}, rtol=1e-5, atol=1e-4)


DOT_SRC = HEADER + """
@triton.jit
def dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)
"""


@pytest.mark.parametrize("dtype", ["float32", "float16", "ieee"])
@pytest.mark.parametrize("shape", [(16, 16, 16), (64, 32, 32), (32, 64, 16)])
def test_dot(dtype: str, shape: tuple) -> None:
    """f32 dots default to tf32 (as Triton): the interpreter computes them in f32, so they compare with a
    tf32 tolerance; input_precision="ieee" keeps f32 products (FMA path) and the tight one."""
    bm, bn, bk = shape
    src = DOT_SRC.replace("tl.dot(a, b)", 'tl.dot(a, b, input_precision="ieee")') if dtype == "ieee" else DOT_SRC
    dt = "float32" if dtype == "ieee" else dtype
    a, b = RNG.standard_normal((bm, bk)).astype(dt), RNG.standard_normal((bk, bn)).astype(dt)
    tol = 1e-2 if dtype == "float32" else 1e-4
    check(src, "dot", [a, b, np.zeros((bm, bn), np.float32)], (1,), {"BM": bm, "BN": bn, "BK": bk}, rtol=tol, atol=tol)


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("shape", [(16, 8, 8), (64, 64, 32), (128, 64, 64)])
def test_dot_tf32(shape: tuple, num_warps: int) -> None:
    """tf32 mma.sync (m16n8k8, operands rounded to tf32): norm-wise error against float64 near tf32's
    unit roundoff (~5e-4), far above f32's; row sums read the accumulator layout."""
    bm, bn, bk = shape
    a, b = RNG.standard_normal((bm, bk)).astype(np.float32), RNG.standard_normal((bk, bn)).astype(np.float32)
    c, s = np.full((bm, bn), -7, np.float32), np.full(bm, -7, np.float32)
    k = client.jit(MMA_SRC.replace("out_dtype=OUT", "out_dtype=tl.float32"), "mma")
    got = run_gpu(k, (1,), [a, b, c, s], {"BM": bm, "BN": bn, "BK": bk, "OUT": 0}, num_warps=num_warps)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert _rel(got[2], want) < 2e-3
    assert _rel(got[3], want.sum(axis=1)) < 2e-3


PIPE_SRC = (Path(__file__).resolve().parents[2] / "bench/kernels_bench.py").read_text()


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(("blocks", "num_warps"), [((64, 64, 32), 4), ((128, 128, 32), 8), ((64, 64, 32), 2)])
@pytest.mark.parametrize("k", [32, 64, 96, 288])
def test_pipelined_matmul(k: int, blocks: tuple, num_warps: int, stages: int) -> None:
    """The cp.async ring over num_stages, fewer iterations than stages included (k = 32, 64); on two warps it
    is mma.sync's ring (num_stages - 1 slots, refilled at the end of an iteration), on more wgmma's."""
    bm, bn, bk = blocks
    m, n = 2 * bm, 2 * bn
    a, b = (RNG.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
    c = np.full((m, n), np.nan, np.float16)
    got = run_gpu(client.jit(PIPE_SRC, "matmul_plain"), (m // bm, n // bn), [a, b, c, m, n, k],
                  {"BM": bm, "BN": bn, "BK": bk}, num_warps=num_warps, num_stages=stages)  # fmt: skip
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got[2].astype(np.float64), want, rtol=1e-2, atol=2e-2)


def test_pipelined_matmul_tf32() -> None:
    m, n, k = 128, 128, 160
    a, b = (RNG.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    src = PIPE_SRC.replace("acc.to(tl.float16)", "acc")
    got = run_gpu(client.jit(src, "matmul_plain"), (2, 2), [a, b, np.full((m, n), np.nan, np.float32), m, n, k],
                  {"BM": 64, "BN": 64, "BK": 32}, num_warps=4, num_stages=3)  # fmt: skip
    assert _rel(got[2], a.astype(np.float64) @ b.astype(np.float64)) < 2e-3


@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("stages", [2, 3, 4, 5])
@pytest.mark.parametrize(("blocks", "num_warps"), [((64, 64, 32), 4), ((128, 128, 32), 8), ((64, 32, 32), 2)])
def test_pipelined_tutorial_matmul(blocks: tuple, num_warps: int, stages: int, b_t: bool) -> None:
    """Advanced pointer tiles, masks along K (zero-filled copies), rows wrapped with % M: strides
    divisible by 16 so the copies are 16 bytes; ragged M, N and K. `b_t`: B stored N x K (its K stride 1, as
    `w.T` of a linear layer's weight), which mma.sync's ring holds N x K and reads without .trans."""
    m, n, k = 200, 144, 176
    a, b = f32(m, k).astype(np.float16), f32(k, n).astype(np.float16)
    bm, bn, bk = blocks
    grid = (((m + bm - 1) // bm) * ((n + bn - 1) // bn),)
    b_strides = [1, k] if b_t else [n, 1]
    args = [a, np.ascontiguousarray(b.T) if b_t else b, np.full((m, n), np.nan, np.float16), m, n, k, k, 1,
            *b_strides, n, 1]  # fmt: skip
    consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 4, "ACTIVATION": ""}
    check(without_autotune(source("matmul")), "matmul_kernel", args, grid, consts, rtol=1e-2, atol=1e-2,
          num_warps=num_warps, num_stages=stages)  # fmt: skip


MMA_SRC = HEADER + """
@triton.jit
def mma(a_ptr, b_ptr, c_ptr, s_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, OUT: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b, out_dtype=OUT)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)
    tl.store(s_ptr + rm, tl.sum(c, axis=1))
"""


def _bf16(x: np.ndarray) -> tuple[client.BF16Array, np.ndarray]:
    bits = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return client.BF16Array(bits), (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("shape", [(16, 16, 32), (64, 64, 32), (128, 64, 64), (32, 128, 32)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
def test_dot_tensor_cores(dtype: str, shape: tuple, num_warps: int) -> None:
    """Tensor-core dots (mma.sync) against float64/int64 products of the same inputs; the row sums
    read the mma accumulator layout through a reduction."""
    import torch

    bm, bn, bk = shape
    if dtype == "int8":
        a, b = (RNG.integers(-128, 128, s).astype(np.int8) for s in ((bm, bk), (bk, bn)))
        fa, fb, out, tol = a.astype(np.int64), b.astype(np.int64), np.int32, 0
        const = "tl.int32"
    else:
        a, b = RNG.standard_normal((bm, bk)), RNG.standard_normal((bk, bn))
        if dtype == "float16":
            a, b = a.astype(np.float16), b.astype(np.float16)
            fa, fb = a.astype(np.float64), b.astype(np.float64)
        else:
            (a, fa), (b, fb) = _bf16(a), _bf16(b)
        out, tol, const = np.float32, 1e-4, "tl.float32"
    c, s = np.full((bm, bn), -7, out), np.full(bm, -7, out)
    k = client.jit(MMA_SRC.replace("out_dtype=OUT", f"out_dtype={const}"), "mma")
    got = run_gpu(k, (1,), [a, b, c, s], {"BM": bm, "BN": bn, "BK": bk, "OUT": 0}, num_warps=num_warps)
    torch.cuda.synchronize()
    want = fa.astype(np.float64) @ fb.astype(np.float64)
    np.testing.assert_allclose(got[2].astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got[3].astype(np.float64), want.sum(axis=1), rtol=tol, atol=tol * 10)


@pytest.mark.parametrize(("blocks", "num_warps"), [((64, 64, 32), 4), ((128, 64, 64), 8), ((32, 32, 64), 2)])
def test_tutorial_matmul_tensor_cores(blocks: tuple, num_warps: int) -> None:
    m, n, k = 200, 136, 150  # ragged edges: masked loads along K, masked stores
    a, b = f32(m, k).astype(np.float16), f32(k, n).astype(np.float16)
    bm, bn, bk = blocks
    grid = (((m + bm - 1) // bm) * ((n + bn - 1) // bn),)
    args = [a, b, np.full((m, n), np.nan, np.float16), m, n, k, k, 1, n, 1, n, 1]
    consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 4, "ACTIVATION": ""}
    check(without_autotune(source("matmul")), "matmul_kernel", args, grid, consts, rtol=1e-2, atol=1e-2, num_warps=num_warps)


ATOMIC_SRC = HEADER + """
@triton.jit
def atom(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_max(out_ptr + (offs % 4), x, mask=offs < n)
    tl.atomic_add(out_ptr + 4, 1)
"""


def test_atomics_max_and_scalar_add() -> None:
    n = 1000
    args = [RNG.integers(-1000, 1000, n).astype(np.int32), np.zeros(5, np.int32), n]
    check(ATOMIC_SRC, "atom", args, ((n + 127) // 128,), {"BLOCK": 128}, rtol=0, atol=0)


CAST_SRC = HEADER + """
@triton.jit
def cast(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.exp(x.to(tl.float32)) * 0.5 + tl.sqrt(tl.abs(x.to(tl.float32)))
    tl.store(y_ptr + offs, y.to(tl.float16), mask=offs < n)
"""


def test_f16_math_and_casts() -> None:
    n = 700
    args = [RNG.standard_normal(n).astype(np.float16), np.zeros(n, np.float16), n]
    check(CAST_SRC, "cast", args, ((n + 255) // 256,), {"BLOCK": 256}, rtol=2e-3, atol=2e-3)


# ---- the conformance table ------------------------------------------------------------------------


def _cases():
    try:
        from tests.conformance.cases import CASES
    except ImportError:
        return []
    return list(CASES)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_conformance_case_on_gpu(case) -> None:
    args = case.inputs(np.random.default_rng(7))
    want = case.reference([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    grid = case.grid(case.constexprs) if callable(case.grid) else case.grid
    got = run_gpu(client.jit(case.source, case.kernel), grid, args, case.constexprs)
    for i, w in want.items():
        g = got[i].bits if isinstance(got[i], client.BF16Array) else got[i]
        w = w.bits if isinstance(w, client.BF16Array) else w
        if case.rtol == 0 and case.atol == 0:
            np.testing.assert_array_equal(g, w, err_msg=f"{case.name}: argument {i}")
        else:
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=case.rtol,
                                       atol=case.atol, equal_nan=True, err_msg=f"{case.name}: argument {i}")  # fmt: skip


def test_warm_launches_follow_new_arguments() -> None:
    """The warm launch path reuses the kernel but must take each call's pointers, sizes and alignment."""
    import torch

    k = client.jit(source("vector_add"), "add_kernel")
    for n, offset in ((1000, 0), (1000, 0), (777, 1), (4096, 0)):
        x, y = torch.randn(n + offset, device="cuda")[offset:], torch.randn(n + offset, device="cuda")[offset:]
        out = torch.full((n,), float("nan"), device="cuda")
        k[lambda meta: (triton_cdiv(meta["n_elements"], meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=256)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)
