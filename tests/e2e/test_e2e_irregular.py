"""Second table of e2e kernels: integer and bit semantics (C division, u32 literals, logical shifts), f64,
backward loops, defaults of runtime parameters, 3-D tiles, data-dependent while loops, persistent loops
with tl.range, scalar stores — each through `client.jit(...)[grid]` on cpu and on the interpreter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilec.compiler.errors import CompileError

from .harness import check_both, interp_launch, kernel, run_both

F32, F64, I32, I64, U32 = np.float32, np.float64, np.int32, np.int64, np.uint32


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def rng(seed: int = 3) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_stream_compaction_slots_from_one_atomic_counter() -> None:
    k = kernel("stream_compact")
    n = 500
    x = rng().standard_normal(n).astype(F32)
    cpu, it = run_both(k, (cdiv(n, 64),), x, np.zeros(n, F32), np.zeros(1, I32), n, BLOCK=64)
    want = np.sort(x[x > 0])
    for side in (cpu, it):
        count = int(side[2][0])
        assert count == want.size
        np.testing.assert_array_equal(np.sort(side[1][:count]), want)
        assert not side[1][count:].any()


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h.astype(U32)
    h ^= h >> U32(16)
    h = h * U32(0x85EBCA6B)
    h ^= h >> U32(13)
    h = h * U32(0xC2B2AE35)
    return h ^ (h >> U32(16))


def test_u32_hash_with_large_literals_and_i64_shifts() -> None:
    k = kernel("hash_u32")
    n = 100
    keys = rng().integers(0, 2**32, n, dtype=np.uint64).astype(U32)
    wide = rng(1).integers(-(2**62), 2**62, n, dtype=I64)
    shifted = np.zeros((n, 2), I64)
    ref = np.stack([wide >> 33, (wide.view(np.uint64) >> np.uint64(33)).view(I64)], 1)
    check_both(k, (cdiv(n, 32),), (keys, np.zeros(n, U32), wide, shifted, n), dict(BLOCK=32),
               {1: _fmix32(keys), 3: ref})


def test_kahan_sums_in_f64_survive_optimisation() -> None:
    k = kernel("f64_compensated")
    chunk, block, programs = 1024, 64, 3
    per_lane = np.array([1e16] + [1.0] * 14 + [-1e16])  # 1e16 + 1 == 1e16 in f64: only compensation keeps the ones
    x = np.tile(per_lane[:, None], (1, block)).reshape(-1)
    x = np.concatenate([x] * (chunk // x.size) * programs)[: chunk * programs - 5]
    sums = np.zeros(programs, F64)
    ref = [math.fsum(x[p * chunk:(p + 1) * chunk]) for p in range(programs)]
    check_both(k, (programs,), (x, sums, x.size), dict(CHUNK=chunk, BLOCK=block), {1: np.array(ref)})
    assert ref[0] == 64 * 14 * (chunk // per_lane.size // block)


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)


def test_integer_division_truncates_like_c_and_float_mod_is_fmod() -> None:
    """Integer // and % truncate as C does; float % is C's fmod (the sign of the dividend), as Triton 3.x
    computes it (found by the fuzzer against Triton's interpreter, bench/NOTES-fuzz.md)."""
    k = kernel("int_div_mod")
    n = 60
    a = rng().integers(-50, 50, n).astype(I32)
    b = rng(1).integers(1, 9, n).astype(I32) * rng(2).choice([-1, 1], n).astype(I32)
    q = _c_div(a, b)
    r = a - b * q
    py_mod = (r + b) - b * _c_div(r + b, b)
    up = _c_div(a + b - 1, b)
    fa, fb = a.astype(F32), b.astype(F32)
    fmod = np.fmod(fa, fb).astype(I32)
    check_both(k, (2,), (a, b, np.zeros((n, 5), I32), n), dict(BLOCK=32),
               {2: np.stack([q, r, py_mod, up, fmod], 1)})


def test_backward_runtime_range_and_static_range() -> None:
    k = kernel("backward_loops", "suffix_max_scalar")
    x = rng().standard_normal(20).astype(F32)
    check_both(k, (1,), (x, np.zeros(20, F32), 20), {}, {1: np.maximum.accumulate(x[::-1])[::-1]})
    k2 = kernel("backward_loops", "horner_static")
    coef = np.array([1.0, -2.0, 0.5, 3.0, 0.25], F32)
    xs = rng(1).standard_normal(40).astype(F32)
    check_both(k2, (2,), (coef, xs, np.zeros(40, F32), 40), dict(DEGREE=4, BLOCK=32),
               {2: np.polyval(coef[::-1], xs)}, rtol=1e-5, atol=1e-5)


def test_runtime_parameter_defaults_and_positional_constexprs() -> None:
    k = kernel("runtime_defaults")
    n = 100
    x = rng().standard_normal(n).astype(F32) * 3
    grid = lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    check_both(k, grid, (x, np.zeros(n, F32), n), {}, {1: np.maximum(x * 2 - 1, -3)})
    check_both(k, grid, (x, np.zeros(n, F32), n, 0.5), dict(shift=3, CLIP=False), {1: x * F32(0.5) + 3})
    check_both(k, grid, (x, np.zeros(n, F32), n, 1.0, 0, -0.5, 32, True), {}, {1: np.maximum(x, -0.5)})


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(F64))


def test_math_library_zoo() -> None:
    k = kernel("math_zoo")
    n = 20
    x = np.linspace(-2.5, 2.5, n).astype(F32)
    e = np.exp(x - x.max())
    with np.errstate(invalid="ignore"):
        ref = np.stack([1 / (1 + np.exp(-x)), np.log1p(np.abs(x)), np.tanh(x), 1 / np.sqrt(np.abs(x) + 1), _erf(x),
                        np.abs(x) ** 1.5, np.where(x < 0, -1.0, 1.0), x / 3, x / 7 + np.sqrt(np.abs(x)), e / e.sum()],
                       1)
    check_both(k, (1,), (x, np.zeros((n, 10), F32), n), dict(BLOCK=32), {1: ref}, rtol=2e-5, atol=1e-6)


def test_3d_tiles_negative_axes_and_keep_dims() -> None:
    k = kernel("tiles_3d")
    na, nb, dim = 10, 7, 4
    a = rng().standard_normal((na, dim)).astype(F32)
    b = rng(1).standard_normal((nb, dim)).astype(F32) * 2
    d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    ref_nearest = np.concatenate([d.argmin(1), d.min(1).astype(I32)]).astype(I32)
    check_both(k, (cdiv(na, 4),), (a, b, np.zeros((na, nb), F32), np.zeros(2 * na, I32), na, nb),
               dict(DIM=dim, BA=4, BB=8), {2: d, 3: ref_nearest}, rtol=1e-5, atol=1e-5)


def test_rank_sort_with_duplicates() -> None:
    k = kernel("rank_sort")
    x = rng().integers(0, 20, 50).astype(F32)
    check_both(k, (1,), (x, np.zeros(50, F32), 50), dict(BLOCK=64), {1: np.sort(x)})


def test_collatz_while_on_a_reduced_condition() -> None:
    k = kernel("collatz_while")
    x = rng().integers(1, 1000, 70).astype(I32)

    def steps(v: int) -> int:
        s = 0
        while v > 1:
            v, s = (v // 2 if v % 2 == 0 else 3 * v + 1), s + 1
        return s

    check_both(k, (3,), (x, np.zeros(70, I32), 70), dict(BLOCK=32), {1: np.array([steps(int(v)) for v in x])})


def test_persistent_softmax_with_tl_range_and_a_num_stages_parameter() -> None:
    k = kernel("persistent_softmax")
    rows, cols, stride = 13, 50, 64
    x = rng().standard_normal((rows, stride)).astype(F32)
    e = np.exp(x[:, :cols] - x[:, :cols].max(1, keepdims=True))
    check_both(k, (4,), (np.zeros((rows, cols), F32), x, stride, cols, rows, cols), dict(BLOCK=64, num_stages=2),
               {0: e / e.sum(1, keepdims=True)}, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("mode", "ref"), [("zeros", lambda n: np.zeros(n)), ("iota", lambda n: np.arange(n) * 0.5),
                                           ("ones", lambda n: np.ones(n))])
def test_scalar_stores_string_modes_and_bool_scalars(mode: str, ref) -> None:
    k = kernel("scalar_stores")
    n = 40
    for flag in (True, False):
        check_both(k, (cdiv(n, 16),), (np.full(n, 9, F32), np.zeros(n, I32), n, flag), dict(MODE=mode, SCALE=0.5,
                   BLOCK=16), {0: ref(n), 1: np.full(n, 1 if flag else -1)})


def test_static_assert_fails_at_compile_time() -> None:
    k = kernel("scalar_stores")
    with pytest.raises(CompileError, match="multiple of 16") as exc:
        k[(1,)](np.zeros(8, F32), np.zeros(8, I32), 8, True, MODE="zeros", SCALE=1.0, BLOCK=8)
    assert exc.value.line == 7
    with pytest.raises(CompileError, match="multiple of 16"):
        interp_launch(k, (1,), (np.zeros(8, F32), np.zeros(8, I32), 8, True), dict(MODE="zeros", SCALE=1.0, BLOCK=8))


def test_helper_constexpr_parameter_given_a_tensor_takes_it_at_runtime() -> None:
    k = kernel("helper_constexpr_tensor")
    rows, cols = 32, 13
    x = rng().standard_normal((rows, cols)).astype(F32)
    check_both(k, (rows // 8,), (x, np.zeros(rows, F32), cols), dict(BM=8, BN=16),
               {1: (x * 2).sum(1)}, rtol=1e-5, atol=1e-5)
