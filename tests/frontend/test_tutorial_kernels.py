"""Each tutorial kernel in tests/kernels builds to verified IR and, run on the reference interpreter
over small NumPy inputs, matches a NumPy computation."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels import KERNELS, source
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module, verify_module

RNG = np.random.default_rng(0)


def build(stem: str, **constexprs):
    k = KERNELS[stem]
    ks = read_kernel(source(stem), k["name"], filename=f"{stem}.py")
    return build_ir(ks, k["signature"], {**k["constexprs"], **constexprs})


@pytest.mark.parametrize("stem", sorted(KERNELS))
def test_builds_verified_ir_that_round_trips(stem: str) -> None:
    m = build(stem)
    verify_module(m)
    text = print_module(m)
    assert print_module(parse_module(text)) == text
    assert m.kernels[0].name == KERNELS[stem]["name"]


def run(stem: str, args: list, grid: tuple, **constexprs) -> None:
    run_kernel(build(stem, **constexprs), KERNELS[stem]["name"], args, grid)


def test_vector_add() -> None:
    n = 300
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    run("vector_add", [x, y, out, n], ((n + 127) // 128,))
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


def test_fused_softmax() -> None:
    rows, cols = 5, 100
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)
    run("fused_softmax", [out, x, cols, cols, cols], (rows,))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_layer_norm() -> None:
    rows, n = 3, 150
    x = RNG.standard_normal((rows, n)).astype(np.float32)
    w, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    y, mean, rstd = np.zeros_like(x), np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    run("layer_norm", [x, y, w, b, mean, rstd, n, n, np.float32(1e-5)], (rows,))
    mu = x.mean(axis=1)
    var = ((x - mu[:, None]) ** 2).mean(axis=1)
    rs = 1 / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, rs, rtol=1e-5)
    np.testing.assert_allclose(y, (x - mu[:, None]) * rs[:, None] * w + b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul_grouped(activation: str) -> None:
    m, n, k = 70, 40, 50
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    grid = (((m + 31) // 32) * ((n + 31) // 32),)
    run("matmul", [a, b, c, m, n, k, k, 1, n, 1, n, 1], grid, ACTIVATION=activation)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    if activation:
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    np.testing.assert_allclose(c.astype(np.float32), ref.astype(np.float16).astype(np.float32), rtol=1e-2, atol=1e-2)


def test_matmul_persistent() -> None:
    """3 programs walk the 3 x 2 output tiles (ragged on both edges) in grouped order, K masked at 50."""
    m, n, k = 70, 40, 50
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    run("matmul_persistent", [a, b, c, m, n, k, k, 1, n, 1, n, 1], (3,))
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2, atol=1e-2)


def test_gather_with_indices_from_memory() -> None:
    n, src_n = 100, 37
    src = RNG.standard_normal(src_n).astype(np.float32)
    idx = RNG.integers(0, src_n, n).astype(np.int32)
    out = np.zeros(n, np.float32)
    run("gather", [src, idx, out, n], ((n + 63) // 64,))
    np.testing.assert_array_equal(out, src[idx])


def test_csr_spmv_bounds_loaded_from_memory() -> None:
    rows, cols = 6, 20
    dense = RNG.standard_normal((rows, cols)).astype(np.float32)
    dense[RNG.random((rows, cols)) < 0.6] = 0
    dense[2] = 0  # an empty row: the loop runs zero times
    rowptr = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.int32)
    col = np.nonzero(dense)[1].astype(np.int32)
    val = dense[dense != 0].astype(np.float32)
    x = RNG.standard_normal(cols).astype(np.float32)
    y = np.full(rows, 99, np.float32)
    run("csr_spmv", [rowptr, col, val, x, y], (rows,))
    np.testing.assert_allclose(y, dense @ x, rtol=1e-5, atol=1e-5)


def test_helper_2d() -> None:
    m, n = 20, 30
    x = RNG.standard_normal((m, n)).astype(np.float32)
    out = np.zeros_like(x)
    run("helper_2d", [x, out, m, n, n, np.float32(1.5)], ((m + 15) // 16, (n + 15) // 16))
    np.testing.assert_allclose(out, np.maximum(x * np.float32(1.5), 0), rtol=1e-6)


def test_histogram_atomics() -> None:
    n = 500
    x = RNG.integers(-3, 20, n).astype(np.int32)
    hist = np.zeros(16, np.int32)
    run("histogram", [x, hist, n], ((n + 63) // 64,))
    np.testing.assert_array_equal(hist, np.bincount(np.clip(x, 0, 15), minlength=16))


def test_transpose() -> None:
    m, n = 20, 35
    x = RNG.standard_normal((m, n)).astype(np.float32)
    out = np.zeros((n, m), np.float32)
    run("transpose", [x, out, m, n, n, m], ((m + 15) // 16, (n + 15) // 16))
    np.testing.assert_array_equal(out, x.T)


def test_cumsum_rows() -> None:
    rows, cols = 10, 25
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)
    run("cumsum", [x, out, rows, cols, cols], ((rows + 3) // 4,))
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("where", ["interpreter", "cpu"])
def test_matmul_b_transposed(where: str) -> None:
    """tl.dot(a, b.T) with B stored N x K, edges masked; on the cpu target through the default pipeline, whose
    trans-load pass turns the transposed load into a load of transposed pointers."""
    from tilec import client

    m, n, k = 70, 40, 50
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = ((m + 31) // 32, (n + 31) // 32)
    args = [a, b, c, m, n, k, k, k, n]
    if where == "interpreter":
        run("matmul_bt", args, grid)
    else:
        client.jit(source("matmul_bt"), "matmul_bt_kernel")[grid](*args, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    ref = (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
