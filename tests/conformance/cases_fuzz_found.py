"""Conformance cases for the disagreements with Triton that the differential fuzzer (tests/fuzz) found,
one per finding, named after it. tests/fuzz/test_vs_triton.py checks their references against Triton's
interpreter too.
"""

from __future__ import annotations

import numpy as np

from .case import Case, src

# float `%` is C's fmod, with the sign of the dividend, in Triton (frem on the GPU, np.fmod in its
# interpreter); tilec floored like Python (a - floor(a / b) * b), which older Triton releases did
FLOAT_MOD_IS_FMOD = src("""
@triton.jit
def float_mod(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x % y)
    tl.store(out_ptr + BLOCK + offs, x % -2.5)
    tl.store(out_ptr + 2 * BLOCK + offs, x % 3.0)
""")


def _fmod_ref(a: list) -> dict:
    x, y, n = a[0], a[1], a[0].size
    out = np.concatenate([np.fmod(x, y), np.fmod(x, np.float32(-2.5)), np.fmod(x, np.float32(3.0))])
    assert out.size == 3 * n
    return {2: out.astype(np.float32)}


def _fmod_inputs(r: np.random.Generator) -> list:
    x = (r.standard_normal(32) * 8).astype(np.float32)
    y = (r.standard_normal(32) * 3).astype(np.float32)
    y[y == 0] = 1.0
    return [x, y, np.zeros(96, np.float32)]


CASES = [
    Case(
        "fuzz_float_mod_is_fmod", FLOAT_MOD_IS_FMOD, "float_mod", _fmod_inputs, (1,), _fmod_ref, {"BLOCK": 32}
    ),
]
