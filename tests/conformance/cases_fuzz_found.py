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


# a Python number assigned to a name is a scalar tensor of its literal type in Triton (its code generator
# and its interpreter both convert at the assignment), so arithmetic on the name is C's and wraps; tilec kept
# a compile-time Python number, so `t // -4` floored and `big + 1` did not wrap
ASSIGNED_NUMBER = src("""
@triton.jit
def assigned_number(out_ptr, s):
    t = 3
    u = -7
    big = 2147483647
    w = 5
    w += s
    c: tl.constexpr = -7
    tl.store(out_ptr + 0, t // -4)
    tl.store(out_ptr + 1, u % 3)
    tl.store(out_ptr + 2, (big + 1) // 2)
    tl.store(out_ptr + 3, w // -4)
    tl.store(out_ptr + 4, c % 3)
    for q in tl.static_range(-3, 0):
        tl.store(out_ptr + 8 + q, q // 2)
""")

CASES = [
    Case(
        "fuzz_assigned_number_is_a_tensor",
        ASSIGNED_NUMBER,
        "assigned_number",
        lambda r: [np.zeros(8, np.int32), 2],
        (1,),
        # C division for assigned names (also after +=), Python's for a constexpr and a static_range variable
        lambda a: {0: np.array([0, -1, -(2**30), -1, 2, -2, -1, -1], np.int32)},
    ),
    Case(
        "fuzz_float_mod_is_fmod", FLOAT_MOD_IS_FMOD, "float_mod", _fmod_inputs, (1,), _fmod_ref, {"BLOCK": 32}
    ),
]
