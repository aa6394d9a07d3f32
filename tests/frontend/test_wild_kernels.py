"""Kernels written the way Triton users write them in the wild (tests/frontend/wild/*.py): each one builds
to verified IR that round-trips, and, run on the reference interpreter over small NumPy inputs, matches
a NumPy reference. One table row per kernel: its signature, constexprs, and a check that runs it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilec.compiler.errors import CompileError, UnsupportedSyntaxError
from tilec.compiler.frontend import build_ir, evaluate_heuristic, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module

WILD = Path(__file__).parent / "wild"
F32, F16, I32, I64 = np.float32, np.float16, np.int32, np.int64


def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@dataclass
class Case:
    stem: str
    name: str
    signature: dict[str, str]
    constexprs: dict = field(default_factory=dict)
    check: Callable[[Callable], None] | None = None  # check(run) where run(args, grid, **constexprs)


CASES: dict[str, Case] = {}


def case(stem: str, name: str, signature: dict[str, str], **constexprs):
    def register(check: Callable[[Callable], None]) -> Callable[[Callable], None]:
        CASES[stem] = Case(stem, name, signature, constexprs, check)
        return check

    return register


def build(c: Case, **constexprs):
    ks = read_kernel((WILD / f"{c.stem}.py").read_text(), c.name, filename=f"{c.stem}.py")
    return build_ir(ks, c.signature, {**c.constexprs, **constexprs})


def sig(text: str) -> dict[str, str]:
    """'x_ptr:*fp32 n:i32' -> {'x_ptr': '*fp32', 'n': 'i32'}"""
    return dict(item.split(":") for item in text.split())


# ---- Philox-4x32-10, written from the published algorithm, as the NumPy reference of tl.rand ------

def philox_first_word(seed: int, counter: np.ndarray) -> np.ndarray:
    m0, m1, w0, w1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    c = [counter.astype(np.uint64) & 0xFFFFFFFF] + [np.zeros(counter.shape, np.uint64)] * 3
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0, p1 = np.uint64(m0) * c[0], np.uint64(m1) * c[2]
        c = [((p1 >> np.uint64(32)) ^ c[1] ^ k0) & mask, p1 & mask,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & mask, p0 & mask]
        k0, k1 = (k0 + np.uint64(w0)) & mask, (k1 + np.uint64(w1)) & mask
    return c[0].astype(np.uint32), c[1].astype(np.uint32)


def to_uniform(bits: np.ndarray) -> np.ndarray:
    s = bits.view(np.int32).astype(np.int64)
    s = np.where(s < 0, -s - 1, s)
    return (s.astype(np.float32) * np.float32(4.6566127342e-10)).astype(np.float32)


# ---- the table --------------------------------------------------------------------------------------

@case("dropout_seed", "_seeded_dropout", sig("x_ptr:*fp32 output_ptr:*fp32 n_elements:i32 p:fp32 seed:i32"),
      BLOCK_SIZE=64)
def _(run):
    n, p, seed = 200, 0.5, 123
    x = rng().standard_normal(n).astype(F32)
    out = np.full(n, 7, F32)
    run([x, out, n, F32(p), seed], (4,))
    keep = to_uniform(philox_first_word(seed, np.arange(n))[0]) > np.float32(p)
    np.testing.assert_allclose(out, np.where(keep, x / np.float32(1 - p), 0), rtol=1e-6)
    assert 60 < keep.sum() < 140
    out2 = np.zeros(n, F32)
    run([x, out2, n, F32(p), seed + 1], (4,))
    assert not np.array_equal(out, out2)


@case("random_bits", "random_bits_kernel",
      sig("out_int_ptr:*u32 out_float_ptr:*fp32 out_normal_ptr:*fp32 seed:i64 N:i32"), BLOCK=32)
def _(run):
    n, seed = 100, (5 << 32) + 77
    ints, floats, normals = np.zeros(n, np.uint32), np.zeros(n, F32), np.zeros(n, F32)
    run([ints, floats, normals, seed, n], (4,))
    w0, w1 = philox_first_word(seed, np.arange(n))
    np.testing.assert_array_equal(ints, w0)
    np.testing.assert_allclose(floats, to_uniform(w0), rtol=1e-6)
    u1, u2 = np.maximum(to_uniform(w0), np.float32(1e-7)), to_uniform(w1)
    ref = np.sqrt(-2 * np.log(u1)) * np.cos(np.float32(2 * np.pi) * u2)
    np.testing.assert_allclose(normals, ref, rtol=1e-4, atol=1e-5)
    assert 0 <= floats.min() and floats.max() < 1 and abs(normals.mean()) < 0.4


@case("add_relu_autotune", "fused_add_relu_kernel",
      sig("x_ptr:*fp32 y_ptr:*fp32 output_ptr:*fp32 n_elements:i32"), BLOCK_SIZE=128)
def _(run):
    ks = read_kernel((WILD / "add_relu_autotune.py").read_text())
    assert ks.autotune is not None and ks.autotune.key == ["n_elements"]
    assert [c.kwargs["BLOCK_SIZE"] for c in ks.autotune.configs] == [128, 256, 1024]
    n = 300
    x, y = rng().standard_normal(n).astype(F32), rng().standard_normal(n).astype(F32)[::-1].copy()
    for cfg in ks.autotune.configs:
        out = np.zeros(n, F32)
        bs = cfg.kwargs["BLOCK_SIZE"]
        run([x, y, out, n], (-(-n // bs),), **cfg.kwargs)
        np.testing.assert_array_equal(out, np.maximum(x + y, 0))


@case("matmul_pipelined", "matmul_kernel",
      sig("a_ptr:*fp16 b_ptr:*fp16 c_ptr:*fp32 M:i32 N:i32 K:i32 stride_am:i32 stride_ak:i32 stride_bk:i32 "
          "stride_bn:i32 stride_cm:i32 stride_cn:i32"), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, NUM_STAGES=3)
def _(run):
    m, n, k = 20, 24, 40
    a, b = rng().standard_normal((m, k)).astype(F16), rng().standard_normal((k, n)).astype(F16)
    c = np.zeros((m, n), F32)
    run([a, b, c, m, n, k, k, 1, n, 1, n, 1], (2, 2))
    np.testing.assert_allclose(c, a.astype(F32) @ b.astype(F32), rtol=1e-3, atol=1e-3)


def _activation_check(activation: str, ref: Callable[[np.ndarray], np.ndarray]):
    def check(run):
        rows, n = 3, 50
        x, b = rng().standard_normal((rows, n)).astype(F32), rng().standard_normal(n).astype(F32)
        out = np.zeros_like(x)
        run([x, b, out, n, n], (rows,), ACTIVATION=activation)
        np.testing.assert_allclose(out, ref(x + b), rtol=1e-5, atol=1e-6)

    return check


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(x.astype(np.float64))


@case("activation_helpers", "bias_act_kernel", sig("x_ptr:*fp32 bias_ptr:*fp32 out_ptr:*fp32 N:i32 stride:i32"),
      ACTIVATION="leaky_relu", BLOCK_N=64)
def _(run):
    _activation_check("leaky_relu", lambda v: np.where(v >= 0, v, np.float32(0.2) * v))(run)
    _activation_check("gelu", lambda v: 0.5 * v * (1 + _erf(v / np.sqrt(2))))(run)
    _activation_check("silu", lambda v: v / (1 + np.exp(-v)))(run)
    _activation_check("none", lambda v: v)(run)


@case("rms_norm", "rms_norm_fwd", sig("X:*fp16 W:*fp16 Y:*fp16 stride_x:i32 stride_y:i32 N:i32 eps:fp32"),
      BLOCK_SIZE=32)
def _(run):
    rows, n = 4, 70
    x, w = rng().standard_normal((rows, n)).astype(F16), rng().standard_normal(n).astype(F16)
    y = np.zeros_like(x)
    run([x, w, y, n, n, n, F32(1e-6)], (rows,))
    xf = x.astype(F32)
    rstd = 1 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y.astype(F32), (xf * rstd).astype(F16).astype(F32) * w.astype(F32),
                               rtol=2e-2, atol=2e-2)


@case("log_softmax", "log_softmax_kernel",
      sig("out_ptr:*fp32 in_ptr:*fp32 in_row_stride:i32 out_row_stride:i32 n_cols:i32"), BLOCK_SIZE=128)
def _(run):
    rows, cols = 5, 90
    x = (rng().standard_normal((rows, cols)) * 5).astype(F32)
    out = np.zeros_like(x)
    run([out, x, cols, cols, cols], (rows,))
    sh = x - x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(out, sh - np.log(np.exp(sh).sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-5)


@case("cross_entropy", "cross_entropy_fwd_kernel",
      sig("logits_ptr:*fp16 labels_ptr:*i64 loss_ptr:*fp32 lse_ptr:*fp32 logits_row_stride:i32 n_cols:i32 "
          "ignore_index:i32"), BLOCK_SIZE=32)
def _(run):
    rows, cols = 6, 75
    logits = (rng().standard_normal((rows, cols)) * 3).astype(F16)
    labels = rng().integers(0, cols, rows).astype(I64)
    labels[2] = -100
    loss, lse = np.zeros(rows, F32), np.zeros(rows, F32)
    run([logits, labels, loss, lse, cols, cols, -100], (rows,))
    lf = logits.astype(np.float64)
    ref_lse = np.log(np.exp(lf - lf.max(1, keepdims=True)).sum(1)) + lf.max(1)
    ref = np.where(labels == -100, 0, ref_lse - lf[np.arange(rows), np.maximum(labels, 0)])
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, ref, rtol=1e-5, atol=1e-5)


@case("embedding", "embedding_kernel",
      sig("weight_ptr:*fp32 indices_ptr:*i32 out_ptr:*fp32 n_indices:i32 embedding_dim:i32 stride_w:i64"),
      BLOCK_N=8, BLOCK_D=16)
def _(run):
    vocab, dim, n = 30, 20, 13
    w = rng().standard_normal((vocab, dim)).astype(F32)
    idx = rng().integers(0, vocab, n).astype(I32)
    out = np.zeros((n, dim), F32)
    run([w, idx, out, n, dim, dim], (2, 2))
    np.testing.assert_array_equal(out, w[idx])


@case("segment_sum", "segment_sum_kernel",
      sig("values_ptr:*fp32 segment_ids_ptr:*i32 out_ptr:*fp32 num_values:i32 feat:i32"), BLOCK=16, FEAT=4)
def _(run):
    n, feat, segs = 50, 3, 7
    v = rng().standard_normal((n, feat)).astype(F32)
    seg = rng().integers(0, segs, n).astype(I32)
    out = np.zeros((segs, feat), F32)
    run([v, seg, out, n, feat], (4,))
    ref = np.zeros((segs, feat), F32)
    np.add.at(ref, seg, v)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@case("scatter", "scatter_kernel", sig("src_ptr:*fp32 index_ptr:*i32 dst_ptr:*fp32 n:i32"), BLOCK=16)
def _(run):
    n = 40
    src = rng().standard_normal(n).astype(F32)
    perm = rng().permutation(n).astype(I32)
    dst = np.zeros(n, F32)
    run([src, perm, dst, n], (3,))
    ref = np.zeros(n, F32)
    ref[perm] = src * 2
    np.testing.assert_array_equal(dst, ref)


@case("linked_list", "linked_list_sum_kernel",
      sig("head_ptr:*i32 next_ptr:*i32 value_ptr:*fp32 out_ptr:*fp32 count_ptr:*i32"))
def _(run):
    n_nodes, chains = 30, 4
    order = rng().permutation(n_nodes)
    value = rng().standard_normal(n_nodes).astype(F32)
    nxt, head = np.full(n_nodes, -1, I32), np.full(chains, -1, I32)
    parts = np.split(order, [5, 5, 18])  # chain 1 is empty
    for c, part in enumerate(parts):
        if len(part):
            head[c] = part[0]
            nxt[part[:-1]] = part[1:]
    out, count = np.zeros(chains, F32), np.zeros(chains, I32)
    run([head, nxt, value, out, count], (chains,))
    np.testing.assert_array_equal(count, [len(p) for p in parts])
    np.testing.assert_allclose(out, [value[p].sum() for p in parts], rtol=1e-5, atol=1e-6)


@case("persistent_copy", "persistent_scale_kernel",
      sig("x_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32 stride_m:i32 alpha:fp32"), BLOCK_M=8, BLOCK_N=8)
def _(run):
    m, n = 19, 21
    x = rng().standard_normal((m, n)).astype(F32)
    out = np.zeros_like(x)
    run([x, out, m, n, n, F32(-2.0)], (3,))  # 9 tiles over 3 programs
    np.testing.assert_array_equal(out, x * F32(-2))


@case("grid_2d_outer", "outer_kernel",
      sig("x_ptr:*fp32 y_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32 stride_om:i32 stride_on:i32"), BLOCK_M=8, BLOCK_N=16)
def _(run):
    m, n = 11, 20
    x, y = rng().standard_normal(m).astype(F32), rng().standard_normal(n).astype(F32)
    out = np.zeros((m, n), F32)
    run([x, y, out, m, n, n, 1], (2, 2))
    np.testing.assert_array_equal(out, np.outer(x, y))


@case("int64_bitcast", "abs_via_bits_kernel",
      sig("in_ptr:*i32 out_ptr:*fp32 bits_ptr:*i32 n_rows:i32 row_stride:i32"), BLOCK=32)
def _(run):
    rows, cols = 3, 20
    f = rng().standard_normal((rows, cols)).astype(F32)
    out, bits = np.zeros_like(f), np.zeros((rows, cols), I32)
    run([f.view(I32), out, bits, rows, cols], (rows,))
    np.testing.assert_array_equal(out, np.abs(f))
    np.testing.assert_array_equal(bits, np.abs(f).view(I32))


@case("clamp_where", "clamp_where_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 lo:fp32 hi:fp32 n:i32"), BLOCK=32)
def _(run):
    n = 70
    x = (rng().standard_normal(n) * 3).astype(F32)
    out = np.zeros(n, F32)
    run([x, out, F32(-1.5), F32(2.0), n], (3,))
    ref = np.clip(x, -1.5, 2.0) + np.minimum(np.maximum(x, 0), 2.5) + (x > 1)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@case("row_normalize", "l2_normalize_rows", sig("x_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32 stride:i32 eps:fp32"),
      BLOCK_M=4, BLOCK_N=32)
def _(run):
    m, n = 10, 27
    x = rng().standard_normal((m, n)).astype(F32)
    x[3] = 0
    out = np.full_like(x, 5)
    run([x, out, m, n, n, F32(1e-12)], (3,))
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(out, x / np.maximum(norm, 1e-12), rtol=1e-5, atol=1e-6)


@case("dot_fp16_out", "small_dot_kernel", sig("a_ptr:*fp16 b_ptr:*fp16 c_ptr:*fp16 d_ptr:*fp32"),
      BM=16, BN=16, BK=16)
def _(run):
    a = (rng().standard_normal((16, 16)) * 0.5).astype(F16)
    b = (rng().standard_normal((16, 16)) * 0.5).astype(F16)
    c, d = np.zeros((16, 16), F16), np.zeros((16, 16), F32)
    run([a, b, c, d], (1,))
    ref = a.astype(F32) @ b.astype(F32)
    np.testing.assert_allclose(c.astype(F32), ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(d, 2 * ref, rtol=1e-4, atol=1e-4)


@case("dtype_dispatch", "scale_any_dtype", sig("x_ptr:*fp16 out_ptr:*fp16 n:i32"), BLOCK=32)
def _(run):
    n = 40
    for xt, ot, spelled in ((F16, F16, "*fp16"), (F32, F32, "*fp32"), (I32, I32, "*i32"), (I32, F32, "*i32")):
        x = (rng().standard_normal(n) * 10).astype(xt)
        out = np.zeros(n, ot)
        c = CASES["dtype_dispatch"]
        ot_spelled = {F16: "*fp16", F32: "*fp32", I32: "*i32"}[ot]
        m = build_ir(read_kernel((WILD / "dtype_dispatch.py").read_text()),
                     {**c.signature, "x_ptr": spelled, "out_ptr": ot_spelled}, c.constexprs)
        run_kernel(m, c.name, [x, out, n], (2,))
        if xt is F16:
            ref = (x.astype(F32) * 3).astype(F16)
        else:
            ref = (x * (3 if xt is I32 else F32(3))).astype(ot)
        np.testing.assert_array_equal(out, ref)
    run([np.ones(4, F16), np.zeros(4, F16), 4], (1,))


@case("constexpr_globals", "global_consts_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 n:i32"))
def _(run):
    n = 100
    x = rng().standard_normal(n).astype(F32)
    out = np.zeros(n, F32)
    run([x, out, n], (2,))
    ref = x
    for _ in range(3):
        ref = ref * F32(0.5) + F32(1)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@case("heuristics_even_k", "rowsum_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 K:i32 stride:i32"), BLOCK_K=16,
      EVEN_K=False)
def _(run):
    ks = read_kernel((WILD / "heuristics_even_k.py").read_text())
    for k in (48, 50):
        even = evaluate_heuristic(ks.heuristics["EVEN_K"], {"K": k, "BLOCK_K": 16})
        assert even == (k % 16 == 0)
        x = rng().standard_normal((3, k)).astype(F32)
        out = np.zeros(3, F32)
        run([x, out, k, k], (3,), EVEN_K=even)
        np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


@case("hints_asserts", "copy_with_hints", sig("src:*fp32 dst:*fp32 n:i32"), BLOCK=32)
def _(run):
    n = 50
    x = rng().standard_normal(n).astype(F32)
    out = np.zeros(n, F32)
    run([x, out, n], (2,))
    np.testing.assert_array_equal(out, x)
    x[7] = np.nan
    with pytest.raises(Exception, match="no NaNs allowed"):
        run([x, out, n], (2,))
    with pytest.raises(CompileError, match="BLOCK must be a multiple of 16"):
        run([x, out, n], (2,), BLOCK=8)


@case("spin_lock", "locked_accumulate_kernel",
      sig("x_ptr:*fp32 out_ptr:*fp32 lock_ptr:*i32 count_ptr:*i32 n:i32"), BLOCK=16)
def _(run):
    n = 70
    x = rng().standard_normal(n).astype(F32)
    out, lock, count = np.full(1, 99, F32), np.zeros(1, I32), np.zeros(1, I32)
    run([x, out, lock, count, n], (5,))
    assert count[0] == 5 and lock[0] == 0
    np.testing.assert_allclose(out[0], x.sum(), rtol=1e-5)


@case("atomic_max_float", "absmax_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 idx_ptr:*i32 n:i32"), BLOCK_SIZE=16)
def _(run):
    n = 60
    x = rng().standard_normal(n).astype(F32)
    out, idx = np.array([0, 0], F32), np.zeros(4, I32)
    run([x, out, idx, n], (4,))
    assert out[0] == np.abs(x).max() and out[1] == min(0, x.min())
    padded = np.concatenate([x, np.zeros(4, F32)]).reshape(4, 16)
    np.testing.assert_array_equal(idx, np.arange(4) * 16 + np.abs(padded).argmax(axis=1))


@case("reverse_cumsum", "suffix_sum_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 prod_ptr:*fp32 n:i32"), BLOCK=32)
def _(run):
    rows, n = 3, 20
    x = (rng().random((rows, n)) + 0.5).astype(F32)
    out, prod = np.zeros_like(x), np.zeros_like(x)
    run([x, out, prod, n], (rows,))
    np.testing.assert_allclose(out, np.cumsum(x[:, ::-1], axis=1)[:, ::-1], rtol=1e-5)
    np.testing.assert_allclose(prod, np.cumprod(x, axis=1), rtol=1e-5)


@case("mixed_precision", "mixed_math_kernel",
      sig("x_ptr:*fp16 w_ptr:*fp32 out_ptr:*fp32 out16_ptr:*fp16 n:i32"), BLOCK=32)
def _(run):
    n = 50
    x, w = rng().standard_normal(n).astype(F16), rng().standard_normal(n).astype(F32)
    out, out16 = np.zeros(n, F32), np.zeros(n, F16)
    run([x, w, out, out16, n], (2,))
    y = x.astype(F32) * w
    np.testing.assert_allclose(out, np.exp(y) + np.tanh(y) + 1 / np.sqrt(w * w + 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out16, x * F16(2) + x)


@case("bit_tricks", "unpack_bytes_kernel", sig("packed_ptr:*i32 out_ptr:*i32 hash_ptr:*u32 n:i32"), BLOCK=32)
def _(run):
    n = 40
    w = rng().integers(-(2**31), 2**31, n).astype(I32)
    out, h = np.zeros(n, I32), np.zeros(n, np.uint32)
    run([w, out, h, n], (2,))
    u = w.view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(out, (u & 255) + (u >> 8 & 255) + (u >> 16 & 255) + (u >> 24))
    r = (u * 2654435761) & 0xFFFFFFFF
    r ^= r >> 13
    r = ((r << 3) | (r >> 29)) & 0xFFFFFFFF
    np.testing.assert_array_equal(h, r.astype(np.uint32))


@case("division_forms", "divide_kernel", sig("a_ptr:*fp32 b_ptr:*fp32 out_ptr:*fp32 q_ptr:*i32 n:i32"), BLOCK=32)
def _(run):
    n = 40
    a, b = rng().standard_normal(n).astype(F32), (rng().random(n) + 0.5).astype(F32)
    out, q = np.zeros(n, F32), np.zeros(n, I32)
    run([a, b, out, q, n], (2,))
    np.testing.assert_allclose(out, 3 * (a / b), rtol=1e-6)
    ia = np.arange(n) * 7 - 50
    # Triton's // and % on integers truncate toward zero (C semantics), unlike Python
    np.testing.assert_array_equal(q, np.trunc(ia / 4).astype(int) + np.fmod(ia, 4))


@case("tuple_helpers", "range_norm_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 stats_ptr:*fp32 n:i32"), BLOCK=64)
def _(run):
    n = 45
    x = rng().standard_normal(n).astype(F32)
    out, stats = np.zeros(n, F32), np.zeros(2, F32)
    run([x, out, stats, n], (1,))
    lo, hi = x.min(), x.max()
    np.testing.assert_array_equal(stats, [lo, hi])
    np.testing.assert_allclose(out, (x - lo) / (hi - lo) * 2 - 1, rtol=1e-5, atol=1e-6)


@case("early_return", "copy_rows_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 n_rows:i32 n_cols:i32"), BLOCK=16)
def _(run):
    rows, cols = 3, 37
    x = rng().standard_normal((rows, cols)).astype(F32)
    out = np.zeros_like(x)
    run([x, out, rows, cols], (rows + 2,))  # two programs past the end return early
    np.testing.assert_array_equal(out, x + 1)


@case("load_store_kwargs", "kwargs_copy_kernel", sig("in_ptr:*fp32 out_ptr:*fp32 flag_ptr:*i32 n:i32"),
      BLOCK_SIZE=16)
def _(run):
    n = 30
    x = rng().standard_normal(n).astype(F32)
    for flag, ref in ((1, 2 * x), (0, 0 * x)):
        out = np.zeros(n, F32)
        run([x, out, np.array([flag], I32), n], (2,))
        np.testing.assert_array_equal(out, ref)


@case("flash_attn_fwd", "attn_fwd_kernel",
      sig("Q:*fp16 K:*fp16 V:*fp16 Out:*fp16 seq_len:i32 sm_scale:fp32 stride_qm:i32 stride_kn:i32 "
          "stride_vn:i32 stride_om:i32"), BLOCK_M=16, BLOCK_N=16, HEAD_DIM=16)
def _(run):
    s, d = 37, 16
    q, k, v = (rng().standard_normal((s, d)).astype(F16) for _ in range(3))
    out = np.zeros((s, d), F16)
    scale = 1 / np.sqrt(d)
    run([q, k, v, out, s, F32(scale), d, d, d, d], (3,))
    logits = (q.astype(F32) @ k.astype(F32).T) * scale
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v.astype(F32)
    np.testing.assert_allclose(out.astype(F32), ref, rtol=2e-2, atol=2e-2)


@case("quantize_rows", "quantize_int8_kernel",
      sig("x_ptr:*fp32 q_ptr:*i8 scale_ptr:*fp32 n_cols:i32 stride:i32"), BLOCK=64)
def _(run):
    rows, cols = 4, 50
    x = rng().standard_normal((rows, cols)).astype(F32)
    q, scale = np.zeros((rows, cols), np.int8), np.zeros(rows, F32)
    run([x, q, scale, cols, cols], (rows,))
    ref_scale = np.abs(x).max(axis=1) / F32(127)
    np.testing.assert_allclose(scale, ref_scale, rtol=1e-6)
    qf = x / ref_scale[:, None]
    ref = np.clip(np.where(qf >= 0, np.floor(qf + 0.5), np.ceil(qf - 0.5)), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(q, ref)


@case("binary_search", "bucketize_kernel",
      sig("values_ptr:*fp32 boundaries_ptr:*fp32 out_ptr:*i32 n_values:i32 n_boundaries:i32"), BLOCK=16)
def _(run):
    n, nb = 40, 11
    bounds = np.sort(rng().standard_normal(nb)).astype(F32)
    vals = (rng().standard_normal(n) * 1.5).astype(F32)
    vals[:3] = bounds[:3]
    out = np.zeros(n, I32)
    run([vals, bounds, out, n, nb], (3,))
    np.testing.assert_array_equal(out, np.searchsorted(bounds, vals, side="right"))


@case("custom_reduce", "row_stats_kernel",
      sig("x_ptr:*fp32 sum_ptr:*fp32 max_ptr:*fp32 scan_ptr:*fp32 idx_ptr:*i32 M:i32"), N=16, BLOCK_M=4)
def _(run):
    m = 10
    x = rng().standard_normal((m, 16)).astype(F32)
    s, mx, sc, idx = np.zeros(m, F32), np.zeros(m, F32), np.zeros((m, 16), F32), np.zeros(m, I32)
    run([x, s, mx, sc, idx, m], (3,))
    np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(mx, x.max(axis=1))
    np.testing.assert_array_equal(idx, x.argmax(axis=1))
    np.testing.assert_array_equal(sc, np.maximum.accumulate(x, axis=1))


@case("static_unroll", "horner_kernel", sig("x_ptr:*fp32 coeff_ptr:*fp32 out_ptr:*fp32 n:i32"), DEGREE=3, BLOCK=32)
def _(run):
    n = 50
    x, c = rng().standard_normal(n).astype(F32), rng().standard_normal(4).astype(F32)
    out = np.zeros(n, F32)
    run([x, c, out, n], (2,))
    np.testing.assert_allclose(out, ((c[3] * x + c[2]) * x + c[1]) * x + c[0], rtol=1e-5, atol=1e-6)


@case("swizzle_matmul", "swizzled_add_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32"),
      BLOCK_M=4, BLOCK_N=4, GROUP_M=2)
def _(run):
    m, n = 19, 13
    x = rng().standard_normal((m, n)).astype(F32)
    out = np.zeros_like(x)
    run([x, out, m, n], (5, 4))  # every tile is visited once, in swizzled order
    np.testing.assert_array_equal(out, x + 1)


@case("gelu_dtype_param", "gelu_tanh_kernel", sig("x_ptr:*fp16 y_ptr:*fp16 n_elements:i32"), BLOCK_SIZE=32)
def _(run):
    n = 50
    x = rng().standard_normal(n).astype(F16)
    y = np.zeros(n, F16)
    run([x, y, n], (2,))
    xf = x.astype(F32)
    ref = 0.5 * xf * (1 + np.tanh(0.7978845608028654 * (xf + 0.044715 * xf ** 3)))
    np.testing.assert_allclose(y.astype(F32), ref, rtol=2e-3, atol=2e-3)
    y64 = np.zeros(n, F16)
    run([x, y64, n], (2,), COMPUTE_DTYPE="fp16")
    np.testing.assert_allclose(y64.astype(F32), ref, rtol=1e-2, atol=1e-2)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits, round to nearest even (finite inputs)."""
    b = x.astype(F32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(F32)


@case("fp8_style_quant", "quant_rne_kernel",
      sig("x_ptr:*fp32 q_ptr:*fp32 r_ptr:*fp32 t_ptr:*fp32 scale_ptr:*fp32 n:i32"), QMAX=4.0, BLOCK=16)
def _(run):
    n = 14
    x = np.array([-2, -1.5, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 1.5, 2, 2.5, np.inf, 3.5], F32)
    q, r, t, scale = np.zeros(n, F32), np.zeros(n, F32), np.zeros(n, F32), np.zeros(1, F32)
    run([x, q, r, t, scale, n], (1,))
    xs = np.where(np.isinf(x), 0, x)
    sc = F32(4.0) / np.abs(xs).max()
    y = xs * sc
    assert scale[0] == sc
    np.testing.assert_array_equal(q, np.rint(y))
    np.testing.assert_array_equal(r, np.sign(y) * np.floor(np.abs(y) + 0.5))
    np.testing.assert_array_equal(t, np.trunc(y))
    zero = np.zeros(n, F32)
    run([zero, q, r, t, scale, n], (1,))  # the helper's early return: scale 1
    assert scale[0] == 1


@case("rope_split_join", "rope_kernel",
      sig("x_ptr:*fp32 cos_ptr:*fp32 sin_ptr:*fp32 out_ptr:*fp32 seq_len:i32 stride_s:i32"), HALF=8)
def _(run):
    s, half = 5, 8
    x = rng().standard_normal((s, 2 * half)).astype(F32)
    theta = rng().random((s, half)).astype(F32) * 6
    c, sn = np.cos(theta).astype(F32), np.sin(theta).astype(F32)
    out = np.zeros_like(x)
    run([x, c, sn, out, s, 2 * half], (s + 1,))
    ev, od = x[:, 0::2], x[:, 1::2]
    ref = np.empty_like(x)
    ref[:, 0::2], ref[:, 1::2] = ev * c - od * sn, ev * sn + od * c
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@case("block_histogram", "block_histogram_kernel", sig("x_ptr:*i32 hist_ptr:*i32 n:i32"), NUM_BINS=8,
      BLOCK_SIZE=32)
def _(run):
    n = 90
    x = rng().integers(-2, 10, n).astype(I32)
    hist = np.zeros(8, I32)
    run([x, hist, n], (3,))
    np.testing.assert_array_equal(hist, np.bincount(x[(x >= 0) & (x < 8)], minlength=8))


@case("star_import_relu", "relu_star_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 n:i32"), BLOCK=32)
def _(run):
    n = 50
    x = rng().standard_normal(n).astype(F32)
    out = np.zeros(n + 1, F32)
    run([x, out, n], (2,))
    np.testing.assert_array_equal(out[:n], np.maximum(x, 0))
    np.testing.assert_allclose(out[n], 2 * np.maximum(x, 0).sum(), rtol=1e-5)


@case("discounted_returns", "discounted_returns_kernel",
      sig("rewards_ptr:*fp32 dones_ptr:*i8 returns_ptr:*fp32 T:i32 n_envs:i32 gamma:fp32"), BLOCK_E=4)
def _(run):
    t_len, envs, gamma = 9, 6, F32(0.9)
    r = rng().standard_normal((t_len, envs)).astype(F32)
    d = (rng().random((t_len, envs)) < 0.2).astype(np.int8)
    out = np.zeros_like(r)
    run([r, d, out, t_len, envs, gamma], (2,))
    ref, g = np.zeros_like(r), np.zeros(envs, F32)
    for t in range(t_len - 1, -1, -1):
        g = r[t] + gamma * g * (1 - d[t].astype(F32))
        ref[t] = g
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@case("ragged_argmax", "ragged_argmax_kernel",
      sig("values_ptr:*fp32 offsets_ptr:*i32 best_ptr:*fp32 best_idx_ptr:*i32"))
def _(run):
    lengths = [3, 0, 7, 1, 5]
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(I32)
    v = rng().standard_normal(offs[-1]).astype(F32)
    best, idx = np.zeros(5, F32), np.zeros(5, I32)
    run([v, offs, best, idx], (5,))
    for k, ln in enumerate(lengths):
        seg = v[offs[k]:offs[k + 1]]
        assert (best[k], idx[k]) == ((seg.max(), seg.argmax()) if ln else (-np.inf, -1))


@case("nan_aware_max", "nan_aware_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 exp_ptr:*fp32"), N=16, SCALE=0.5)
def _(run):
    x = rng().standard_normal((3, 16)).astype(F32)
    x[1, 4] = np.nan
    out, e = np.zeros((3, 2), F32), np.zeros((3, 16), F32)
    run([x, out, e], (3,))
    np.testing.assert_array_equal(out[:, 0], np.max(x, axis=1))      # NaN wins
    np.testing.assert_array_equal(out[:, 1], np.nanmax(x, axis=1))   # NaN loses
    np.testing.assert_allclose(e, np.exp(x * F32(0.5)) + np.sqrt(np.abs(np.maximum(x, 0))), rtol=1e-6)


@case("bf16_axpy", "axpy_bf16_kernel", sig("x_ptr:*bf16 y_ptr:*bf16 out_ptr:*bf16 alpha:fp32 n:i32"), BLOCK=32)
def _(run):
    n = 40
    x, y = bf16_bits(rng().standard_normal(n).astype(F32)), bf16_bits(rng().standard_normal(n).astype(F32))
    out = np.zeros(n, np.uint16)
    run([x, y, out, F32(1.5), n], (2,))
    np.testing.assert_array_equal(out, bf16_bits(F32(1.5) * bf16_value(x) + bf16_value(y)))


@case("autotune_loop_configs", "logsumexp_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 N:i32 stride:i32"),
      BLOCK_N=32, ONE_PASS=False)
def _(run):
    ks = read_kernel((WILD / "autotune_loop_configs.py").read_text())
    assert ks.autotune is not None
    got = [(c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in ks.autotune.configs]
    assert got == [(32, 2, 2), (32, 4, 2), (32, 8, 2), (64, 2, 2), (64, 4, 2), (128, 2, 2)]
    for n in (20, 100):
        x = (rng().standard_normal((3, n)) * 4).astype(F32)
        ref = np.log(np.exp(x.astype(np.float64)).sum(axis=1))
        for cfg in ks.autotune.configs[::2]:
            one = evaluate_heuristic(ks.heuristics["ONE_PASS"], {"N": n, **cfg.kwargs})
            out = np.zeros(3, F32)
            run([x, out, n, n], (3,), **cfg.kwargs, ONE_PASS=one)
            np.testing.assert_allclose(out, ref, rtol=1e-5)


@case("int8_matmul", "int8_matmul_rowscale_kernel",
      sig("a_ptr:*i8 b_ptr:*i8 scale_ptr:*fp32 c_ptr:*fp32 M:i32 N:i32 K:i32"), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
def _(run):
    m, n, k = 20, 18, 40
    a = rng().integers(-128, 128, (m, k)).astype(np.int8)
    b = rng().integers(-128, 128, (k, n)).astype(np.int8)
    scale = rng().random(m).astype(F32)
    c = np.zeros((m, n), F32)
    run([a, b, scale, c, m, n, k], (4,))
    exact = a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_allclose(c, exact.astype(F32) * scale[:, None], rtol=1e-6)


@case("fib_swap", "fib_tiles_kernel", sig("seed_ptr:*i32 out_ptr:*i32 steps_ptr:*i32"), BLOCK=8)
def _(run):
    seed = np.arange(8, dtype=I32)
    steps = np.array([0, 1, 5, 10], I32)
    out = np.zeros(32, I32)
    run([seed, out, steps], (4,))
    for p, n in enumerate(steps):
        a, b = seed.copy(), seed + 1
        for _ in range(n):
            a, b = b, a + b
        np.testing.assert_array_equal(out[p * 8:(p + 1) * 8], a)


# ---- block pointers, tensor descriptors, and moves within a tile (flip, cat, sort, topk, gather) -----

@case("block_ptr_copy", "block_ptr_copy_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32 stride_m:i32"),
      BLOCK_M=16, BLOCK_N=16)
def _(run):
    # a 20 x 13 view with row stride 16: both edges ragged, the columns past N lie inside the buffer
    m, n = 20, 13
    x = rng().standard_normal((m, 16)).astype(F32)
    out = np.full((m, 16), -7, F32)
    run([x, out, m, n, 16], (2,))
    np.testing.assert_array_equal(out[:, :n], x[:, :n])
    assert (out[:, n:] == -7).all()


@case("block_ptr_matmul", "matmul_block_ptr_kernel",
      sig("a_ptr:*fp16 b_ptr:*fp16 c_ptr:*fp32 M:i32 N:i32 K:i32 stride_am:i32 stride_ak:i32 stride_bk:i32 "
          "stride_bn:i32 stride_cm:i32 stride_cn:i32"), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
def _(run):
    m, n, k = 20, 24, 40
    a, b = rng().standard_normal((m, k)).astype(F16), rng().standard_normal((k, n)).astype(F16)
    c = np.zeros((m, n), F32)
    run([a, b, c, m, n, k, k, 1, n, 1, n, 1], (2, 2))
    np.testing.assert_allclose(c, a.astype(F32) @ b.astype(F32), rtol=1e-3, atol=1e-3)
    bt = np.ascontiguousarray(b.T)  # B stored column-major: strides (1, K)
    c2 = np.zeros((m, n), F32)
    run([a, bt, c2, m, n, k, k, 1, 1, k, n, 1], (2, 2))
    np.testing.assert_allclose(c2, c, rtol=1e-6)


@case("block_ptr_nan_pad", "nan_padded_tiles_kernel", sig("x_ptr:*fp32 tiles_ptr:*fp32 M:i32 N:i32"),
      BLOCK_M=16, BLOCK_N=8)
def _(run):
    m, n, bm, bn = 20, 13, 16, 8
    x = rng().standard_normal((m, n)).astype(F32)
    tiles = np.zeros((8, bm, bn), F32)
    run([x, tiles, m, n], (4,))
    padded = np.full((2 * bm, 2 * bn), np.nan, F32)
    padded[:m, :n] = x
    zero_cols = np.zeros((m, 2 * bn), F32)
    zero_cols[:, :n] = x
    for pid in range(4):
        tm, tn = divmod(pid, 2)
        np.testing.assert_array_equal(tiles[pid], padded[tm * bm:(tm + 1) * bm, tn * bn:(tn + 1) * bn])
        r0 = min(tm * bm, m - bm)
        np.testing.assert_array_equal(tiles[4 + pid], zero_cols[r0:r0 + bm, tn * bn:(tn + 1) * bn])
    assert np.isnan(tiles[3]).sum() == 16 * 8 - 4 * 5


@case("block_ptr_helpers", "row_sums_block_ptr_kernel", sig("x_ptr:*fp32 out_ptr:*fp32 M:i32 N:i32 stride_m:i32"),
      REVERSE=False, BLOCK_M=8, BLOCK_N=16)
def _(run):
    m, n = 19, 37
    x = rng().standard_normal((m, 40)).astype(F32)
    out = np.zeros(m, F32)
    run([x, out, m, n, 40], (3,))
    np.testing.assert_allclose(out, x[:, :n].sum(axis=1), rtol=1e-5, atol=1e-5)


@case("tensor_desc_transpose", "transpose_desc_kernel", sig("x_ptr:*fp32 y_ptr:*fp32 M:i32 N:i32"), BLOCK=8)
def _(run):
    m, n = 19, 13
    x = rng().standard_normal((m, n)).astype(F32)
    y = np.zeros((n, m), F32)
    run([x, y, m, n], (3, 2))
    np.testing.assert_array_equal(y, 2 * x.T)


@case("sort_rows", "sort_rows_kernel", sig("x_ptr:*fp32 out_ptr:*fp32"), N=16)
def _(run):
    x = rng().standard_normal((3, 16)).astype(F32)
    x[1, 4] = x[1, 9]  # a tie
    out = np.zeros_like(x)
    run([x, out], (3,))
    np.testing.assert_array_equal(out, np.sort(x, axis=1))


@case("sort_2d", "sort_tiles_kernel", sig("x_ptr:*fp32 rows_asc_ptr:*fp32 rows_desc_ptr:*fp32 cols_asc_ptr:*fp32"),
      R=4, C=16)
def _(run):
    for r, c in ((4, 16), (8, 8), (2, 32)):
        x = (rng().integers(-20, 20, (r, c)) / 4).astype(F32)  # many ties
        x[0, 0] = -0.0
        asc, desc, cols = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
        run([x, asc, desc, cols], (1,), R=r, C=c)
        np.testing.assert_array_equal(asc, np.sort(x, axis=1))
        np.testing.assert_array_equal(desc, np.sort(x, axis=1)[:, ::-1])
        np.testing.assert_array_equal(cols, np.sort(x, axis=0))


@case("flip_cat", "mirror_pad_kernel", sig("x_ptr:*fp16 out_ptr:*fp16 flipped_ptr:*fp16"), N=8, ROWS=4)
def _(run):
    x = rng().standard_normal((4, 8)).astype(F16)
    x[1, 2], x[2, 5] = -0.0, np.nan  # moved bit for bit
    out, flipped = np.zeros((4, 16), F16), np.zeros_like(x)
    run([x, out, flipped], (4,))
    ref = np.concatenate([x, x[:, ::-1]], axis=1)
    assert out.tobytes() == ref.tobytes() and flipped.tobytes() == x[::-1].tobytes()


@case("topk_gather", "topk_and_lookup_kernel",
      sig("scores_ptr:*fp32 table_ptr:*i32 idx_ptr:*i64 top_ptr:*fp32 picked_ptr:*i32"), N=32, K=4, T=16)
def _(run):
    scores = rng().standard_normal((3, 32)).astype(F32)
    table = rng().integers(-1000, 1000, (16, 4)).astype(I32)
    idx = rng().integers(0, 16, (3, 8, 4)).astype(I64)
    top, picked = np.zeros((3, 4), F32), np.zeros((3, 8, 4), I32)
    run([scores, table, idx, top, picked], (3,))
    np.testing.assert_array_equal(top, np.sort(scores, axis=1)[:, ::-1][:, :4])
    np.testing.assert_array_equal(picked, table[idx, np.arange(4)])


# ---- kernels whose feature is out of scope: a located, clear CompileError -------------------------

UNSUPPORTED = {
    "inline_asm_bits": ("inline_asm_kernel", sig("x_ptr:*u32 out_ptr:*u32"), {"BLOCK": 16}, (9, 9),
                        "inline assembly"),
}


# ---- the tests ---------------------------------------------------------------------------------------

def test_enough_wild_kernels() -> None:
    on_disk = {p.stem for p in WILD.glob("*.py")}
    assert on_disk == set(CASES) | set(UNSUPPORTED)
    assert len(CASES) >= 30


@pytest.mark.parametrize("stem", sorted(CASES))
def test_builds_verified_ir_that_round_trips(stem: str) -> None:
    m = build(CASES[stem])
    text = print_module(m)
    assert print_module(parse_module(text)) == text
    assert m.kernels[0].name == CASES[stem].name


@pytest.mark.parametrize("stem", sorted(CASES))
def test_matches_numpy(stem: str) -> None:
    c = CASES[stem]

    def run(args: list, grid: tuple, **constexprs) -> None:
        run_kernel(build(c, **constexprs), c.name, args, grid)

    assert c.check is not None
    c.check(run)


@pytest.mark.parametrize("stem", sorted(UNSUPPORTED))
def test_out_of_scope_is_a_located_error(stem: str) -> None:
    name, signature, cx, (line, col), word = UNSUPPORTED[stem]
    with pytest.raises(CompileError) as info:
        build_ir(read_kernel((WILD / f"{stem}.py").read_text(), name, filename=f"{stem}.py"), signature, cx)
    e = info.value
    assert isinstance(e, UnsupportedSyntaxError) and word in e.message
    assert (e.filename, e.line, e.col) == (f"{stem}.py", line, col)
    assert "compiler/frontend" not in str(e)


HEAD = "import triton\nimport triton.language as tl\n\n\n"


@pytest.mark.parametrize("body,sig_,word,line", [
    ("@triton.jit\ndef k(p, n):\n    for i in range(n):\n        if i > 3:\n            return i\n", {"p": "*fp32", "n": "i32"},
     "return with a value inside a runtime loop", 9),
    ("@triton.jit\ndef k(p):\n    q = tl.load(p).to(tl.pointer_type(tl.float32))\n", {"p": "*i32"},
     "only 64-bit integers hold addresses", 7),  # an address loaded as an i64 is a pointer; narrower ints are not
    ("def host(n):\n    return n * 2\n\n\n@triton.jit\ndef k(p):\n    tl.store(p, host(3))\n", {"p": "*fp32"},
     "not a @triton.jit function", 11),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    r = tl.rand(1, tl.arange(0, B).to(tl.int64))\n", {"p": "*fp32"},
     "32-bit integers", 7),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    r = tl.randint(tl.zeros([B], tl.int32), tl.arange(0, B))\n",
     {"p": "*fp32"}, "seed must be an integer scalar", 7),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    a, b = tl.split(tl.arange(0, B))\n", {"p": "*fp32"},
     "last dimension is 2", 7),
    ("@triton.jit\ndef f(x):\n    if x > 0:\n        return x, x\n    return x\n\n\n@triton.jit\ndef k(p):\n"
     "    tl.store(p, f(tl.load(p)))\n", {"p": "*fp32"}, "return different numbers of values", 7),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n,), (1,), (0,), (16,), (0,))\n"
     "    x = tl.load(bp, boundary_check=(0,), padding_option='nan')\n", {"p": "*i32", "n": "i32"},
     "floating-point block", 8),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))\n"
     "    x = tl.load(bp, boundary_check=(0, 2))\n", {"p": "*fp32", "n": "i32"}, "out of range", 8),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n,), (1,), (0,), (16,), (0,))\n"
     "    x = tl.load(bp, mask=tl.arange(0, 16) < n)\n", {"p": "*fp32", "n": "i32"}, "not mask/other", 8),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n,), (1,), (0,), (16,), (0,))\n"
     "    for i in range(n):\n        bp = tl.make_block_ptr(p, (n,), (1,), (i,), (32,), (0,))\n",
     {"p": "*fp32", "n": "i32"}, "same kind of block pointer", 8),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))\n"
     "    bp = tl.advance(bp, (16,))\n", {"p": "*fp32", "n": "i32"}, "needs 2 values", 8),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n, n), (n, 1), (0, 0), (16, 16), (0, 0))\n",
     {"p": "*fp32", "n": "i32"}, "not a permutation", 7),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    x = tl.cat(tl.arange(0, 16), tl.arange(0, 32), can_reorder=True)\n",
     {"p": "*fp32"}, "two tiles of one shape", 7),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    x = tl.sort(p + tl.arange(0, 16))\n", {"p": "*fp32"},
     "does not take pointers", 7),
    ("@triton.jit\ndef k(p, B: tl.constexpr):\n    x = tl.topk(tl.arange(0, 16), 3)\n", {"p": "*fp32"},
     "power of two", 7),
    ("@triton.jit\ndef k(p, n):\n    bp = tl.make_block_ptr(p, (n,), (1,), (0,), (16,), (0,))\n"
     "    if n > 2:\n        bp = tl.make_tensor_descriptor(p, (n,), (1,), (16,))\n", {"p": "*fp32", "n": "i32"},
     "same kind of block pointer", 8),
])
def test_clear_errors_for_wild_idioms(body: str, sig_: dict, word: str, line: int) -> None:
    with pytest.raises(CompileError) as info:
        ks = read_kernel(HEAD + body, "k", filename="k.py")
        build_ir(ks, sig_, {"B": 16} if any(p.name == "B" for p in ks.params) else {})
    e = info.value
    assert word in e.message and (e.filename, e.line) == ("k.py", line), str(e)
    assert "compiler/frontend" not in str(e)


@pytest.mark.parametrize("builder", [
    "    configs = []\n    for a in range(5000):\n        for b in range(5000):\n"
    "            configs.append(triton.Config({'B': 16}))\n    return configs\n",
    "    configs = [triton.Config({'B': 16})]\n    for a in range(100):\n        configs.extend(configs)\n"
    "    return configs\n",
    "    import os\n    return []\n",
    "    d = {}\n    d['x'] = d\n    return [triton.Config(d)]\n",
    "    c = []\n    c.append(c)\n    return c\n",
    "    while True:\n        pass\n",
])
def test_hostile_config_builders_end_in_compile_errors(builder: str) -> None:
    src = (HEAD + "def get_configs():\n" + builder + "\n\n@triton.autotune(configs=get_configs(), key=['n'])\n"
           "@triton.jit\ndef k(p, n, B: tl.constexpr):\n    pass\n")
    with pytest.raises(CompileError) as info:
        read_kernel(src, filename="k.py")
    assert "autotune" in info.value.message


FUZZ_STEMS = ["dropout_seed", "rope_split_join", "fp8_style_quant", "autotune_loop_configs", "ragged_argmax",
              "star_import_relu", "tuple_helpers", "block_ptr_helpers", "block_ptr_matmul", "sort_2d", "topk_gather"]
MUTATIONS = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 30), st.sampled_from(
    ["", "(", ")", ":", "return", "if x:\n", "    ", "\n", "tl.", ",", "[", "]", "None", "*", "-1", "0x", "x",
     "for i in range(n):\n", "while", "=", "tl.rand(", "tl.split(", ".to(tl.int64)", "lambda", "'", "\\"])),
    max_size=4)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(FUZZ_STEMS), MUTATIONS)
def test_fuzz_mutated_wild_kernels(stem: str, muts: list) -> None:
    """Random edits of wild kernels: a Module or a CompileError, nothing else (and no hang)."""
    c = CASES[stem]
    text = (WILD / f"{stem}.py").read_text()
    for pos, cut, ins in muts:
        pos %= len(text) + 1
        text = text[:pos] + ins + text[pos + cut:]
    try:
        build_ir(read_kernel(text, c.name), c.signature, c.constexprs)
    except CompileError:
        pass
