"""Unseen-style kernels (tests/e2e/kernels/*.py) launched as users launch them — `client.jit(src, name)[grid]`
over NumPy arrays, grids as tuples or `lambda meta: ...`, autotuned kernels without their tuned constexprs,
heuristics, None pointers — on the cpu target and, re-enacted, on the reference interpreter; both against
NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.client import KernelAssertionError
from tilec.compiler.errors import CompileError
from tilec.compiler.interp import InterpError

from ..frontend.test_wild_kernels import philox_first_word, to_uniform
from .harness import check_both, interp_launch, kernel, run_both

F16, F32, I8, I32, I64, U8 = np.float16, np.float32, np.int8, np.int32, np.int64, np.uint8


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_lowmem_dropout_seed_per_program() -> None:
    k = kernel("lowmem_dropout")
    n, block, p = 300, 64, 0.4
    x = rng().standard_normal(n).astype(F32)
    seeds = np.array([11, 22, 33, 44, 2**30 + 5], I32)
    keep, out = np.zeros(n, I8), np.zeros(n, F32)
    cpu, it = run_both(k, lambda meta: (cdiv(n, meta["BLOCK"]),), x, keep, out, seeds, n, p, BLOCK=block)
    offs = np.arange(n)
    ref_keep = np.concatenate([
        to_uniform(philox_first_word(int(seeds[pid]), offs[pid * block:(pid + 1) * block])[0]) > F32(p)
        for pid in range(cdiv(n, block))])
    for side in (cpu, it):
        np.testing.assert_array_equal(side[1], ref_keep.astype(I8))
        np.testing.assert_allclose(side[2], np.where(ref_keep, x / F32(1 - p), 0), rtol=1e-6)
    assert 100 < ref_keep.sum() < 260


def test_layernorm_backward_with_locks_then_column_reduction() -> None:
    dx_k, dwdb_k = kernel("layernorm_bwd", "ln_bwd_dx_fused"), kernel("layernorm_bwd", "ln_bwd_dwdb")
    m, n, group = 12, 40, 4
    r = rng()
    x, dy, w = (r.standard_normal((m, n)).astype(F32) for _ in range(3))
    w = w[0].copy()
    mean = x.mean(1).astype(F32)
    rstd = (1 / np.sqrt(x.var(1) + 1e-5)).astype(F32)
    args = (np.zeros_like(x), dy, np.zeros((group, n), F32), np.zeros((group, n), F32), x, w, mean, rstd,
            np.zeros(2 * group, I32), n, n)
    cpu, it = run_both(dx_k, (m,), *args, GROUP_SIZE_M=group, BLOCK_SIZE_N=64)
    xhat = (x - mean[:, None]) * rstd[:, None]
    wdy = w * dy
    c1 = (xhat * wdy).sum(1, keepdims=True) / n
    c2 = wdy.sum(1, keepdims=True) / n
    ref_dx = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    grid = lambda meta: (cdiv(n, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    for side, launch in ((cpu, lambda k, *a, **kw: k[grid](*a, **kw)),
                         (it, lambda k, *a, **kw: interp_launch(k, grid, a, kw))):
        np.testing.assert_allclose(side[0], ref_dx, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(side[8][group:], np.full(group, 1, I32))  # every group was written
        np.testing.assert_array_equal(side[8][:group], np.zeros(group, I32))  # every lock released
        dw, db = np.zeros(n, F32), np.zeros(n, F32)
        launch(dwdb_k, side[2], side[3], dw, db, group, n, BLOCK_SIZE_M=2, BLOCK_SIZE_N=16)
        np.testing.assert_allclose(dw, (dy * xhat).sum(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(db, dy.sum(0), rtol=1e-4, atol=1e-5)


def test_grouped_gemm_problem_table_in_memory() -> None:
    k = kernel("grouped_tiles")
    shapes = [(20, 16, 24), (8, 40, 16), (33, 9, 7)]
    r = rng()
    As = [r.standard_normal((mm, kk)).astype(F16) for mm, _, kk in shapes]
    Bs = [r.standard_normal((kk, nn)).astype(F16) for _, nn, kk in shapes]
    a_off = np.cumsum([0] + [a.size for a in As])
    b_off = np.cumsum([0] + [b.size for b in Bs])
    c_off = np.cumsum([0] + [mm * nn for mm, nn, _ in shapes])
    problems = np.array([[mm, nn, kk, a_off[g], b_off[g], c_off[g]] for g, (mm, nn, kk) in enumerate(shapes)], I32)
    a = np.concatenate([x.ravel() for x in As])
    b = np.concatenate([x.ravel() for x in Bs])
    c = np.zeros(c_off[-1], F16)
    ref = np.concatenate([(x.astype(F32) @ y.astype(F32)).astype(F16).ravel() for x, y in zip(As, Bs, strict=True)])
    check_both(k, (4,), (a, b, c, problems, len(shapes)), dict(NUM_SMS=4, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16),
               {2: ref.astype(F32)}, rtol=1e-2, atol=2e-2)


def test_int_to_pointer_casts_follow_a_table_of_addresses() -> None:
    """Addresses kept in an int64 table (Triton's grouped GEMM): on the cpu target they are host addresses
    (the interpreter's memory has its own, so it is not re-enacted here)."""
    k = kernel("grouped_ptr_array")
    r = rng()
    src = [r.standard_normal(n).astype(F16) for n in (5, 19, 1)]
    dst = [np.full(n, 7, F16) for n in (5, 19, 1)]
    table = np.array([a.ctypes.data for a in src], I64)
    k[(3,)](table, np.array([a.ctypes.data for a in dst], I64), np.array([5, 19, 1], I32), BLOCK=8)
    for a, b in zip(src, dst, strict=True):
        np.testing.assert_array_equal(b, a)


def test_an_int32_is_never_a_pointer() -> None:
    narrow = kernel("grouped_ptr_array").source.replace("tl.load(src_ptrs + g).to(", "tl.load(src_ptrs + g).to(tl.int32).to(")
    from tilec import client

    k = client.jit(narrow, "grouped_copy_ptr_array")
    ptrs = np.zeros(1, I64)
    with pytest.raises(CompileError, match="only 64-bit integers hold addresses") as exc:
        k[(1,)](ptrs, ptrs.copy(), np.array([5], I32), BLOCK=8)
    assert exc.value.line == 9


def _causal_attention(q, k, v, scale):
    s = (q.astype(F32) @ np.swapaxes(k.astype(F32), -1, -2)) * scale
    n = q.shape[-2]
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(F32)


def test_causal_flash_attention_two_stages() -> None:
    k = kernel("attn_causal")
    z, h, n, d = 2, 2, 40, 16
    r = rng()
    q = r.standard_normal((z, h, n, d)).astype(F16)
    kk = r.standard_normal((z, h, n, d)).astype(F16)
    v_bshd = r.standard_normal((z, n, h, d)).astype(F16)  # V in (batch, seq, head, dim) layout
    out = np.zeros((z, h, n, d), F16)
    scale = 0.3
    grid = lambda meta: (cdiv(n, meta["BLOCK_M"]), z * h, 1)  # noqa: E731
    ref = _causal_attention(q, kk, np.swapaxes(v_bshd, 1, 2), scale)
    check_both(k, grid, (q, kk, v_bshd, scale, out, h * n * d, n * d, d, h * n * d, n * d, d,
                         n * h * d, d, h * d, h * n * d, n * d, d, h, n),
               dict(HEAD_DIM=d, BLOCK_M=16, BLOCK_N=16), {4: ref}, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("activation", ["leaky_relu", ""])
def test_autotuned_matmul_with_activation_on_transposed_b(activation: str) -> None:
    k = kernel("matmul_leaky")
    m, n, kk = 40, 24, 50
    r = rng()
    a = r.standard_normal((m, kk)).astype(F16)
    bt = r.standard_normal((n, kk)).astype(F16)  # B = bt.T, read through strides
    c = np.zeros((m, n), F16)
    grid = lambda meta: (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    ref = a.astype(F32) @ bt.T.astype(F32)
    if activation:
        ref = np.where(ref >= 0, ref, 0.01 * ref)
    check_both(k, grid, (a, bt, c, m, n, kk, kk, 1, 1, kk, n, 1), dict(ACTIVATION=activation),
               {2: ref.astype(F16).astype(F32)}, rtol=1e-2, atol=1e-2)
    assert len(k.best_configs) == 1 and len(next(iter(k.trials.values()))) == 2


def test_int8_row_quantize_round_half_away_then_dequantize() -> None:
    qk, dk = kernel("int8_rowquant", "quantize_rows_absmax"), kernel("int8_rowquant", "dequantize_rows")
    rows, n, stride = 6, 50, 64
    base = (rng().standard_normal((rows, stride)) * 3).astype(F32)
    base[2] = 0
    base[3, :4] = [127.0, 0.5, -0.5, 1.5]  # scale 1: the halves round away from zero
    q, scale = np.zeros((rows, n), I8), np.zeros(rows, F32)
    cpu, it = run_both(qk, (rows,), base, q, scale, n, stride, n, BLOCK=64)
    x = base[:, :n]
    absmax = np.abs(x).max(1)
    ref_scale = np.where(absmax == 0, F32(1), absmax / F32(127)).astype(F32)
    v = x / ref_scale[:, None]
    ref_q = np.clip(np.sign(v) * np.floor(np.abs(v) + F32(0.5)), -127, 127).astype(I8)
    assert list(ref_q[3, :4]) == [127, 1, -1, 2]
    for side, launch in ((cpu, lambda *a, **kw: dk[(rows,)](*a, **kw)),
                         (it, lambda *a, **kw: interp_launch(dk, (rows,), a, kw))):
        np.testing.assert_array_equal(side[1], ref_q)
        np.testing.assert_allclose(side[2], ref_scale, rtol=1e-7)
        back = np.zeros((rows, n), F32)
        launch(side[1], side[2], back, n, BLOCK=64)
        np.testing.assert_allclose(back, ref_q * ref_scale[:, None], rtol=1e-6)


def test_topk_by_repeated_argmax() -> None:
    k = kernel("topk_rows")
    rows, n, top = 5, 37, 4
    x = np.stack([rng(i).permutation(n) for i in range(rows)]).astype(F32) - 10
    order = np.argsort(-x, axis=1)[:, :top]
    check_both(k, (rows,), (x, np.zeros((rows, top), F32), np.zeros((rows, top), I32), n),
               dict(K=top, BLOCK=64), {1: np.take_along_axis(x, order, 1), 2: order})


def test_chained_scan_with_tickets_and_flags() -> None:
    k = kernel("scan_lookback")
    n, block = 5000, 64
    blocks = cdiv(n, block)
    x = rng().integers(0, 10, n).astype(I32)
    args = (x, np.zeros(n, I32), np.zeros(1, I32), np.zeros(blocks, I32), np.zeros(blocks, I32), n)
    cpu, it = check_both(k, (blocks,), args, dict(BLOCK=block), {1: np.cumsum(x).astype(I32)})
    for side in (cpu, it):
        assert side[2][0] == blocks and side[4].min() == 1


def test_reversed_3d_grid_with_1xn_tiles_and_nx1_tiles() -> None:
    k = kernel("batched_3d", "scale_rows_3d")
    b, rows, cols = 3, 5, 40
    x = rng().standard_normal((b, rows, cols)).astype(F32)
    s = rng(1).standard_normal((b, rows)).astype(F32)
    check_both(k, (rows, cdiv(cols, 16), b), (x, s, np.zeros_like(x), rows, cols, rows * cols, cols),
               dict(BLOCK_C=16), {2: x * s[:, :, None]})
    with pytest.raises(KernelAssertionError, match="too few column blocks"):
        k[(rows, 1, b)](x, s, np.zeros_like(x), rows, cols, rows * cols, cols, BLOCK_C=16)
    with pytest.raises(InterpError, match="too few column blocks"):
        interp_launch(k, (rows, 1, b), (x, s, np.zeros_like(x), rows, cols, rows * cols, cols), dict(BLOCK_C=16))
    k2 = kernel("batched_3d", "column_sums_bx1")
    y = rng().standard_normal((37, 6)).astype(F32)
    check_both(k2, (6,), (y, np.zeros(6, F32), 37, 6), dict(BLOCK_R=16), {1: y.sum(0)}, rtol=1e-5)


def test_strided_views_of_a_transposed_base() -> None:
    k = kernel("transpose_strides")
    m, n = 19, 33
    base = rng().standard_normal((n, m)).astype(F32)  # X = base.T, an (m, n) view
    alpha = np.float64(1.0 / 3.0)
    ref = (base.T.astype(np.float64) * alpha).astype(F32)
    grid = lambda meta: (cdiv(m, meta["BLOCK_M"]), cdiv(n, meta["BLOCK_N"]))  # noqa: E731
    check_both(k, grid, (base, np.zeros((m, n), F32), m, n, 1, m, n, 1, alpha), dict(BLOCK_M=8, BLOCK_N=16),
               {1: ref})
    # and written back transposed: Y (m, n) stored as an (n, m) base
    check_both(k, grid, (base, np.zeros((n, m), F32), m, n, 1, m, 1, m, alpha), dict(BLOCK_M=8, BLOCK_N=16),
               {1: ref.T})


def test_nanmean_with_nan_padding_and_int8_mask() -> None:
    k = kernel("nan_rows")
    rows, n = 4, 30
    x = rng().standard_normal((rows, n)).astype(F32)
    x[0, ::3] = np.nan
    x[2] = np.nan
    valid = ~np.isnan(x)
    with np.errstate(invalid="ignore"):
        ref = np.where(valid.any(1), np.nansum(x, 1) / np.maximum(valid.sum(1), 1), np.nan).astype(F32)
    check_both(k, (rows,), (x, np.zeros(rows, F32), np.zeros((rows, n), I8), n), dict(BLOCK=32),
               {1: ref, 2: valid.astype(I8)}, rtol=1e-5)


def test_fp16_rounding_flags_with_f64_and_large_i64_scalars() -> None:
    k = kernel("fp16_roundtrip")
    n = 70
    x = np.concatenate([np.arange(16, dtype=F32) / 4, rng().standard_normal(n - 16).astype(F32)])
    base, gain = 3_000_000_001, np.float64(1.5)
    xs = x.astype(np.float64) * gain
    err = xs.astype(F16).astype(F32).astype(np.float64) - xs
    exact = np.abs(err) < 1e-6
    odd = (base + np.arange(n)) % 2 == 1
    check_both(k, lambda meta: (cdiv(n, meta["BLOCK"]),), (x, np.zeros(n, F32), np.zeros(n, I8), base, n, gain),
               dict(BLOCK=32), {1: err.astype(F32), 2: (exact & odd).astype(I8) + exact.astype(I8)})
    assert exact[:16].all() and not exact[16:].all()


def test_none_pointer_with_heuristic_and_explicit_constexpr_flags() -> None:
    k = kernel("optional_bias", "rows_plus_bias")
    rows, n = 3, 20
    x, bias = rng().standard_normal((rows, n)).astype(F32), rng(1).standard_normal(n).astype(F32)
    check_both(k, (rows,), (x, None, np.zeros_like(x), n), dict(BLOCK=32), {2: x})
    check_both(k, (rows,), (x, bias, np.zeros_like(x), n), dict(BLOCK=32), {2: x + bias})
    k2 = kernel("optional_bias", "rows_scale_explicit")
    check_both(k2, (rows,), (x, None, np.zeros_like(x), n), dict(HAS_SCALE=False, BLOCK=32), {2: x})
    s = np.array([2, 3, 4], F32)
    check_both(k2, (rows,), (x, s, np.zeros_like(x), n), dict(HAS_SCALE=True, BLOCK=32), {2: x * s[:, None]})


def test_split_k_autotune_with_reset_to_zero() -> None:
    k = kernel("splitk_autotune")
    m, n = 7, 100
    a, x = rng().standard_normal((m, n)).astype(F32), rng(1).standard_normal(n).astype(F32)
    check_both(k, lambda meta: (m, meta["SPLIT_K"]), (a, x, np.zeros(m, F32), m, n), {}, {2: a @ x},
               rtol=1e-5, atol=1e-5)
    assert k.ks.autotune is not None and k.ks.autotune.key == ["M", "N"]


def test_prune_configs_by_top_k_is_ignored_and_early_prune_or_pre_hook_refused() -> None:
    k = kernel("prune_autotune", "square_topk_only")
    x = rng().standard_normal(90).astype(F32)
    check_both(k, lambda meta: (cdiv(90, meta["BLOCK"]),), (x, np.zeros_like(x), 90), {}, {1: x * x})
    with pytest.raises(CompileError, match="early_config_prune"):
        kernel("prune_autotune", "square_early_prune")
    with pytest.raises(CompileError, match="pre_hook"):
        kernel("prune_autotune", "square_pre_hook")


def test_debug_jit_gather_assertion() -> None:
    k = kernel("debug_gather")
    table = rng().standard_normal(20).astype(F32)
    idx = rng().integers(0, 20, 45).astype(I32)
    check_both(k, (3,), (table, idx, np.zeros(45, F32), 45, 20), dict(BLOCK=16), {2: table[idx]})
    bad = idx.copy()
    bad[30] = 20
    with pytest.raises(KernelAssertionError, match="gather index out of range"):
        k[(3,)](table, bad, np.zeros(45, F32), 45, 20, BLOCK=16)
    with pytest.raises(InterpError, match="gather index out of range"):
        interp_launch(k, (3,), (table, bad, np.zeros(45, F32), 45, 20), dict(BLOCK=16))


def test_uint8_image_kernels() -> None:
    k = kernel("rgb_to_gray", "rgb_to_gray_u8")
    h, w = 13, 21
    img = rng().integers(0, 256, (h, w, 3)).astype(U8)
    f = img.astype(F32)
    y = F32(0.299) * f[..., 0] + F32(0.587) * f[..., 1] + F32(0.114) * f[..., 2]
    ref = np.clip(y + F32(0.5), 0, 255).astype(U8)
    grid = lambda meta: (cdiv(h, meta["BLOCK_H"]), cdiv(w, meta["BLOCK_W"]))  # noqa: E731
    cpu, it = run_both(k, grid, img, np.zeros((h, w), U8), h, w, BLOCK_H=8, BLOCK_W=8)
    for side in (cpu, it):
        diff = np.abs(side[1].astype(I32) - ref.astype(I32))
        assert diff.max() <= 1 and (diff == 0).mean() > 0.98
    k2 = kernel("rgb_to_gray", "invert_threshold_u8")
    flat = img.reshape(-1)
    check_both(k2, (cdiv(flat.size, 128),), (flat, np.zeros_like(flat), flat.size, 100), dict(BLOCK=128),
               {1: np.where(flat > 100, 255 - flat, flat)})


def test_column_welford_mean_and_variance() -> None:
    k = kernel("welford_cols")
    m, n = 45, 20
    x = (rng().standard_normal((m, n)) * 2 + 10).astype(F32)
    check_both(k, (cdiv(n, 8),), (x, np.zeros(n, F32), np.zeros(n, F32), m, n, n), dict(BLOCK_M=16, BLOCK_N=8),
               {1: x.mean(0), 2: x.var(0)}, rtol=1e-4, atol=1e-5)


def test_csr_row_softmax_with_bounds_from_memory() -> None:
    k = kernel("csr_softmax")
    lengths = [0, 1, 5, 17, 40, 3]
    row_ptr = np.cumsum([0] + lengths).astype(I32)
    vals = (rng().standard_normal(row_ptr[-1]) * 4).astype(F32)
    ref = np.zeros_like(vals)
    for r in range(len(lengths)):
        seg = vals[row_ptr[r]:row_ptr[r + 1]]
        if seg.size:
            e = np.exp(seg - seg.max())
            ref[row_ptr[r]:row_ptr[r + 1]] = e / e.sum()
    check_both(k, (len(lengths),), (vals, row_ptr, np.zeros_like(vals)), dict(BLOCK=8), {2: ref},
               rtol=1e-5, atol=1e-7)


def test_spmv_csr_rows_per_program() -> None:
    k = kernel("spmv_csr")
    dense = rng().standard_normal((10, 30)).astype(F32)
    dense[rng(1).random((10, 30)) < 0.7] = 0
    dense[4] = 0
    rows, cols = np.nonzero(dense)
    row_ptr = np.searchsorted(rows, np.arange(11)).astype(I32)
    x = rng(2).standard_normal(30).astype(F32)
    check_both(k, (3,), (row_ptr, cols.astype(I32), dense[rows, cols], x, np.full(10, 9, F32), 10),
               dict(ROWS_PER_PROG=4, BLOCK=8), {4: dense @ x}, rtol=1e-5, atol=1e-6)


def test_embedding_backward_atomic_index_add() -> None:
    k = kernel("index_add_rows")
    tokens, dim, vocab = 50, 12, 7
    g = rng().standard_normal((tokens, dim)).astype(F32)
    ids = rng(1).integers(0, vocab, tokens).astype(I32)
    ref = np.zeros((vocab, dim), F32)
    np.add.at(ref, ids, g)
    check_both(k, (cdiv(tokens, 16),), (g, ids, np.zeros((vocab, dim), F32), tokens, dim),
               dict(BLOCK_T=16, BLOCK_D=16), {2: ref}, rtol=1e-5, atol=1e-5)


def test_row_cumsum_with_carry_across_column_blocks() -> None:
    k = kernel("cumsum_carry")
    rows, n, stride = 12, 45, 48
    base = rng().integers(-50, 50, (rows, stride)).astype(I32)
    out = np.zeros((rows, stride), I32)
    ref = out.copy()
    ref[:, :n] = np.cumsum(base[:, :n], 1)
    check_both(k, (3,), (base, out, n, stride), dict(BLOCK_R=4, BLOCK_C=16), {1: ref})


def test_conv1d_same_padding_static_taps() -> None:
    k = kernel("conv1d_taps")
    c_in, c_out, length, ks, stride = 3, 4, 50, 5, 64
    xb = rng().standard_normal((c_in, stride)).astype(F32)
    w = rng(1).standard_normal((c_out, c_in, ks)).astype(F32)
    xp = np.pad(xb[:, :length], ((0, 0), (ks // 2, ks // 2)))
    ref = np.zeros((c_out, length), F32)
    for t in range(ks):
        ref += np.einsum("oc,cl->ol", w[:, :, t], xp[:, t:t + length])
    check_both(k, (cdiv(length, 16), c_out), (xb, w, np.zeros((c_out, length), F32), length, c_in, stride,
                                              c_in * ks), dict(KSIZE=ks, BLOCK_L=16), {2: ref}, rtol=1e-5,
               atol=1e-5)


def test_paged_kv_gather_through_block_table() -> None:
    k = kernel("paged_kv")
    page, head, max_blocks, phys = 4, 8, 4, 16
    seq_lens = np.array([5, 16, 0], I32)
    table = rng().permutation(phys)[:3 * max_blocks].reshape(3, max_blocks).astype(I32)
    cache = rng(1).standard_normal((phys, page, head)).astype(F32)
    max_len = page * max_blocks
    ref = np.zeros((3, max_len, head), F32)
    for s in range(3):
        for i in range(seq_lens[s]):
            ref[s, i] = cache[table[s, i // page], i % page]
    check_both(k, (3, max_blocks), (cache, table, seq_lens, np.full((3, max_len, head), 5, F32), max_blocks,
                                    max_len), dict(PAGE=page, HEAD=head), {3: ref})


def test_bitset_and_integer_atomics() -> None:
    k = kernel("bitset_atomics")
    n = 300
    v = rng().integers(0, 1024, n).astype(I32)
    bits = np.zeros(32, np.uint32)
    for x in v:
        bits[x >> 5] |= np.uint32(1 << (x & 31))
    stats = np.array([2**31 - 1, -1, 0], I32)
    check_both(k, (cdiv(n, 64),), (v, np.zeros(32, np.uint32), stats, n), dict(BLOCK=64),
               {1: bits, 2: np.array([v.min(), v.max(), np.bitwise_xor.reduce(v)], I32)})


def test_bool_mask_input_and_1xn_tiles() -> None:
    k = kernel("bool_mask_fill")
    rows, n = 4, 27
    x = rng().standard_normal((rows, n)).astype(F32)
    keep = rng(1).random((rows, n)) < 0.5
    check_both(k, (rows,), (x, keep, np.zeros_like(x), np.zeros(rows, I32), n, -7.5), dict(BLOCK=32),
               {2: np.where(keep, x, F32(-7.5)), 3: keep.sum(1)})


@pytest.mark.parametrize("n_cols", [64, 100, 600])
def test_heuristics_pick_block_and_even_flag(n_cols: int) -> None:
    k = kernel("heuristic_blocks")
    x = rng().standard_normal((3, n_cols)).astype(F32)
    ref = x / np.sqrt((x * x).sum(1, keepdims=True) + F32(1e-6))
    check_both(k, (3,), (x, np.zeros_like(x), n_cols, 1e-6), {}, {1: ref}, rtol=1e-5, atol=1e-6)


def test_autotune_reset_to_zero_zeroes_before_every_run_and_tuning_leaves_one_run() -> None:
    k = kernel("splitk_autotune")
    assert k.ks.autotune.reset_to_zero == ["out_ptr"]
    m, n = 5, 70
    a, x = rng(4).standard_normal((m, n)).astype(F32), rng(5).standard_normal(n).astype(F32)
    out = np.full(m, 7.0, F32)  # not zeroed by the caller: reset_to_zero does it, the trials add nothing
    k[lambda meta: (m, meta["SPLIT_K"])](a, x, out, m, n)
    np.testing.assert_allclose(out, a @ x, rtol=1e-5, atol=1e-5)
    assert len(k.trials) == 1 and all(t > 0 for _, t in next(iter(k.trials.values())))
