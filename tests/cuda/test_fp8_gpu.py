"""fp8 conversions run on the GPU, built for sm_90 (the cvt.rn.f16x2.{e4m3,e5m2}x2 and cvt.rn.satfinite
instructions of sm_90; e5m2 up by a shift) and for sm_80 (the integer code of llvm/fp8.py): all 256
codes up to f32 and f16, and tests/codegen/test_fp8.py's inputs down from f32 and f16 (ties, subnormals,
saturation, infinities, NaN, signed zeros), each against that file's ml_dtypes reference. A cast to fp8 that is
stored (one encode, ops.fp8_bits' memo) and one that is used again as a value are both here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.codegen.test_fp8 import FP8, NP, N, convert_kernel, down_inputs, expected_down
from tests.cuda.gpu import gpu_reason
from tests.cuda.test_gpu_dot_types import _device_sm
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")

TARGETS = ["cuda:sm_90", "cuda:sm_80"]


def _run(text: str, target: str, args: list, grid: int, expect: str | None) -> list:
    """Launch IR `text` built for `target` on CUDA copies of `args`; `expect` is an instruction its PTX has."""
    import torch

    from tilec.runtime.cuda import launch

    dev = [torch.from_numpy(a.copy()).cuda() for a in args]
    art = compile_kernel(text, "k", is_ir=True, options=CompileOptions(target=target),
                         emit="ptx" if target == "cuda:sm_80" else "cubin")  # fmt: skip
    if expect is not None:
        assert expect in art.ptx
    if target == "cuda:sm_80":  # an sm_80 cubin does not load on sm_90: its PTX, compiled by the driver
        art = replace(art, target=f"cuda:sm_{_device_sm(torch)}", binary=art.ptx.encode() + b"\0")
    launch(art, dev, (grid, 1, 1))
    torch.cuda.synchronize()
    return [d.cpu().numpy() for d in dev]


def _hw(target: str, kind: str, fmt: str) -> str | None:
    """The conversion instruction an sm_90 build has: up from e4m3 and every down conversion (e5m2 goes up by
    a shift); None for sm_80."""
    ptx = {"f8e4nv": "e4m3x2", "f8e5": "e5m2x2"}[fmt]
    if target != "cuda:sm_90" or (kind == "up" and fmt == "f8e5"):
        return None
    return f"cvt.rn.f16x2.{ptx}" if kind == "up" else f"cvt.rn.satfinite.{ptx}.f32"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("dst", ["f32", "f16"])
def test_all_codes_up(target: str, fmt: str, dst: str) -> None:
    md, _ = FP8[fmt]
    codes = np.arange(N, dtype=np.uint8)
    want = codes.view(md).astype(NP[dst])
    got = _run(convert_kernel(fmt, dst), target, [codes, np.zeros(N, NP[dst])], 1, _hw(target, "up", fmt))[1]
    nan = np.isnan(want)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("src", ["f32", "f16"])
def test_down_rounds_to_nearest_even_and_saturates(target: str, fmt: str, src: str) -> None:
    x = down_inputs(NP[src], fmt)
    want = expected_down(x, fmt).astype(np.float64)
    got = _run(convert_kernel(src, fmt), target, [x, np.zeros(len(x), np.uint8)], len(x) // N, _hw(target, "down", fmt))[1]
    values = got.view(FP8[fmt][0]).astype(np.float64)
    bad = ~((np.isnan(values) & np.isnan(want)) | ((values == want) & (np.signbit(values) == np.signbit(want))))
    assert not bad.any(), (x[bad][:8], values[bad][:8], want[bad][:8])
    assert (got[np.isnan(want)] == 0x7F).all()  # the canonical NaN


ROUND_TRIP = """module {
  kernel @k(%x: ptr<f32>, %o: ptr<f32>, %q: ptr<FMT>) {
    %0 = program_id {axis = 0} : i32
    %1 = constant {value = 256} : i32
    %2 = mul %0, %1 : i32
    %3 = make_range {end = 256, start = 0} : tile<256xi32>
    %4 = splat %2 : tile<256xi32>
    %5 = add %4, %3 : tile<256xi32>
    %6 = splat %x : tile<256xptr<f32>>
    %7 = addptr %6, %5 : tile<256xptr<f32>>
    %8 = load %7 : tile<256xf32>
    %9 = cast %8 : tile<256xFMT>
    %10 = splat %q : tile<256xptr<FMT>>
    %11 = addptr %10, %5 : tile<256xptr<FMT>>
    store %11, %9
    %12 = cast %9 : tile<256xf32>
    %13 = mul %12, %8 : tile<256xf32>
    %14 = splat %o : tile<256xptr<f32>>
    %15 = addptr %14, %5 : tile<256xptr<f32>>
    store %15, %13
    return
  }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fmt", sorted(FP8))
def test_a_rounded_value_stored_and_used(target: str, fmt: str) -> None:
    """x.to(fp8) stored, and the same rounded value multiplied by x: the stored code is the rounding of x, the
    product uses the value of that code."""
    md, big = FP8[fmt]
    x = down_inputs(np.float32, fmt)
    x = np.where(np.isfinite(x), np.clip(x, -big, big), 1.0).astype(np.float32)
    codes = expected_down(x, fmt)
    want = codes.astype(np.float32) * x
    _, out, q = _run(ROUND_TRIP.replace("FMT", fmt), target, [x, np.zeros_like(x), np.zeros(len(x), np.uint8)],
                     len(x) // N, _hw(target, "down", fmt))  # fmt: skip
    np.testing.assert_array_equal(q.view(md).astype(np.float64), codes.astype(np.float64))
    np.testing.assert_array_equal(out, want)

