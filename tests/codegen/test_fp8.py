"""fp8 (f8e4nv = e4m3fn, f8e5 = e5m2) conversions and dot on the cpu target and the reference
interpreter, both against ml_dtypes: all 256 bit patterns up, a broad f32/f16/f64 set down (subnormals,
ties, overflow, infinities, NaN, signed zeros). Down-conversion saturates (cvt.rn.satfinite): the
ml_dtypes reference is taken of the input clipped to the largest finite value."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module

from .kit import run_cpu

N = 256
FP8 = {"f8e4nv": (ml_dtypes.float8_e4m3fn, 448.0), "f8e5": (ml_dtypes.float8_e5m2, 57344.0)}
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def convert_kernel(src: str, dst: str, n: int = N) -> str:
    return f"""module {{
  kernel @k(%x: ptr<{src}>, %o: ptr<{dst}>) {{
    %0 = program_id {{axis = 0}} : i32
    %1 = constant {{value = {n}}} : i32
    %2 = mul %0, %1 : i32
    %3 = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %4 = splat %2 : tile<{n}xi32>
    %5 = add %4, %3 : tile<{n}xi32>
    %6 = splat %x : tile<{n}xptr<{src}>>
    %7 = addptr %6, %5 : tile<{n}xptr<{src}>>
    %8 = load %7 : tile<{n}x{src}>
    %9 = cast %8 : tile<{n}x{dst}>
    %10 = splat %o : tile<{n}xptr<{dst}>>
    %11 = addptr %10, %5 : tile<{n}xptr<{dst}>>
    store %11, %9
    return
  }}
}}
"""


def _run(text: str, args: list, grid: int) -> tuple[list, list]:
    ref = [a.copy() for a in args]
    cpu = [a.copy() for a in args]
    run_kernel(parse_module(text), None, ref, (grid,))
    run_cpu(text, cpu, (grid,))
    return ref, cpu


def down_inputs(np_t, fmt: str) -> np.ndarray:
    """Random magnitudes over the whole fp8 range and beyond, every fp8 value, the midpoints between
    neighbours (ties) and their float neighbours, and the special values."""
    md, big = FP8[fmt]
    rng = np.random.default_rng(11)
    rand = rng.standard_normal(4096) * 2.0 ** rng.integers(-24, 20, 4096)
    vals = np.arange(256, dtype=np.uint8).view(md).astype(np.float64)
    vals = np.sort(vals[np.isfinite(vals)])
    mids = (vals[1:] + vals[:-1]) / 2
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, big * 1.0625, big * 1.2, 1e30, -1e30]
    with np.errstate(over="ignore"):
        x = np.concatenate([rand, vals, mids, specials]).astype(np_t)
        x = np.concatenate([x, np.nextafter(x, np_t(np.inf)), np.nextafter(x, np_t(-np.inf))])
    pad = -len(x) % N
    return np.concatenate([x, np.zeros(pad, np_t)]).astype(np_t)


def expected_down(x: np.ndarray, fmt: str) -> np.ndarray:
    """ml_dtypes' rounding of the clipped input (satfinite); from f64 it rounds through f32 (twice), so
    there the nearest of ml_dtypes' fp8 values is picked exactly (ties to the even code)."""
    md, big = FP8[fmt]
    clipped = np.clip(x.astype(np.float64), -big, big)  # NaN stays NaN
    if x.dtype != np.float64:
        return clipped.astype(np.float32).astype(md)
    values = np.arange(128, dtype=np.uint8).view(md).astype(np.float64)
    codes = np.flatnonzero(np.isfinite(values))
    values = values[codes]  # increasing with the code
    a = np.abs(np.nan_to_num(clipped))
    hi = np.minimum(np.searchsorted(values, a), len(values) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - values[lo], values[hi] - a
    pick = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0)), hi, lo)
    pick = np.where(values[hi] == a, hi, pick)
    out = (codes[pick] | np.where(np.signbit(clipped), 0x80, 0)).astype(np.uint8).view(md)
    return np.where(np.isnan(clipped), md(np.nan), out).astype(md)


@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("dst", ["f32", "f16", "f64"])
def test_up_conversion_of_all_256_patterns(fmt: str, dst: str) -> None:
    md, _ = FP8[fmt]
    codes = np.arange(256, dtype=np.uint8)
    want = codes.view(md).astype(NP[dst])
    ref, cpu = _run(convert_kernel(fmt, dst), [codes, np.zeros(256, NP[dst])], 1)
    np.testing.assert_array_equal(ref[1], want)
    np.testing.assert_array_equal(cpu[1], want)
    assert np.array_equal(np.signbit(cpu[1]), np.signbit(want))


@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("src", ["f32", "f16", "f64"])
def test_down_conversion_rounds_to_nearest_even_and_saturates(fmt: str, src: str) -> None:
    x = down_inputs(NP[src], fmt)
    want = expected_down(x, fmt)
    ref, cpu = _run(convert_kernel(src, fmt), [x, np.zeros(len(x), np.uint8)], len(x) // N)
    for got in (ref[1], cpu[1]):
        values = got.view(FP8[fmt][0]).astype(np.float64)
        w = want.astype(np.float64)
        both_nan = np.isnan(values) & np.isnan(w)
        bad = ~(both_nan | ((values == w) & (np.signbit(values) == np.signbit(w))))
        assert not bad.any(), (x[bad][:8], values[bad][:8], w[bad][:8])
        assert (got[np.isnan(w)] == 0x7F).all()  # the canonical NaN


def test_constant_casts_are_not_folded_past_fp8_rounding() -> None:
    """An f32 constant cast to fp8 goes through the pipeline's folding: it must still saturate (inf -> max)."""
    text = """module {
  kernel @k(%o: ptr<f8e5>, %p: ptr<f8e4nv>) {
    %0 = constant {value = inf} : f32
    %1 = cast %0 : f8e5
    store %o, %1
    %2 = constant {value = 0.3} : f32
    %3 = cast %2 : f8e4nv
    store %p, %3
    return
  }
}
"""
    ref, cpu = _run(text, [np.zeros(1, np.uint8), np.zeros(1, np.uint8)], 1)
    want = [
        np.float32(57344.0).astype(ml_dtypes.float8_e5m2),
        np.float32(0.3).astype(ml_dtypes.float8_e4m3fn),
    ]
    for got in (ref, cpu):
        assert [got[0].view(ml_dtypes.float8_e5m2)[0], got[1].view(ml_dtypes.float8_e4m3fn)[0]] == want
