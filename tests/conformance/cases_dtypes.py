"""Conformance cases for the types Triton's reductions and scans compute in: tl.max and tl.min without indices
widen a type narrower than 32 bits (f16, bf16 and fp8 to f32, i1/i8/u8/i16/u16 to i32) and return it, so what follows
them computes in f32 or i32 (FlagGems' softmax over f16 rows: tilec kept f16 throughout); tl.cumsum widens
narrow integers by their sign (u8 to u32) and takes a dtype; tl.softmax normalises a f16 row in f32. Also
the standard-library entries tilec lacked: tl.reduce_or, tl.add/tl.sub/tl.mul, tl.to_tensor, and the
tensor-method forms of cdiv, reduce_or, sqrt_rn, histogram, item, store and the atomics.
tests/fuzz/test_vs_triton.py checks their references against Triton's interpreter too.
"""

from __future__ import annotations

import numpy as np

from .case import Case, src

NARROW_MAX_MIN = src("""
@triton.jit
def narrow_max_min(xh_ptr, xi_ptr, xu_ptr, out_f_ptr, out_i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    xh = tl.load(xh_ptr + offs)
    xi = tl.load(xi_ptr + offs)
    xu = tl.load(xu_ptr + offs)
    mh = tl.max(xh, axis=0)
    tl.store(out_f_ptr + 0, mh + 0.0001)
    tl.store(out_f_ptr + 1, tl.min(xh, axis=0) - 0.0001)
    tl.store(out_f_ptr + 2, tl.sum(tl.exp(xh - mh), axis=0))
    tl.store(out_i_ptr + 0, tl.max(xi, axis=0) + 100)
    tl.store(out_i_ptr + 1, tl.min(xu, axis=0) - 1)
    tl.store(out_i_ptr + 2, tl.max(xu, axis=0) * 2)
""")


def _narrow_inputs(r: np.random.Generator) -> list:
    xh = r.uniform(0.5, 2.0, 64).astype(np.float16)
    xi = r.integers(-128, 128, 64).astype(np.int8)
    xi[5] = 127
    xu = r.integers(0, 65536, 64).astype(np.uint16)
    xu[7], xu[9] = 0, 65535
    return [xh, xi, xu, np.zeros(3, np.float32), np.zeros(3, np.int32)]


def _narrow_ref(a: list) -> dict:
    xh, xi, xu = a[0], a[1], a[2]
    f32 = np.float32
    step = f32(0.0001)
    mh = f32(xh.max())
    e = np.exp(xh.astype(f32) - mh).astype(f32)
    out_f = np.array([mh + step, f32(xh.min()) - step, e.sum(dtype=f32)], f32)
    out_i = np.array([int(xi.max()) + 100, int(xu.min()) - 1, int(xu.max()) * 2], np.int32)
    return {3: out_f, 4: out_i}


SCAN_TYPES = src("""
@triton.jit
def scan_types(xu_ptr, xi_ptr, out_u_ptr, out_i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    xu = tl.load(xu_ptr + offs)
    xi = tl.load(xi_ptr + offs)
    cu = tl.cumsum(xu, axis=0)
    tl.store(out_u_ptr + offs, (cu - 300).to(tl.int64))
    tl.store(out_i_ptr + offs, tl.cumsum(xi, axis=0, dtype=tl.int64))
""")


def _scan_inputs(r: np.random.Generator) -> list:
    xu = r.integers(0, 256, 32).astype(np.uint8)
    xi = r.integers(1 << 29, 1 << 30, 32).astype(np.int32)
    return [xu, xi, np.zeros(32, np.int64), np.zeros(32, np.int64)]


def _scan_ref(a: list) -> dict:
    cu = np.cumsum(a[0].astype(np.uint32), dtype=np.uint32) - np.uint32(300)
    return {2: cu.astype(np.int64), 3: np.cumsum(a[1].astype(np.int64))}


SOFTMAX_F16 = src("""
@triton.jit
def softmax_f16(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.softmax(tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, y + 0.0)
""")


def _softmax_ref(a: list) -> dict:
    x = a[0].astype(np.float32)
    e = np.exp(x - x.max()).astype(np.float32)
    return {1: (e / e.sum(dtype=np.float32)).astype(np.float32)}


OR_AND_ARITH = src("""
@triton.jit
def or_and_arith(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.add(x, y) * 7 + tl.sub(x, y, sanitize_overflow=False) * 3 + tl.mul(x, y))
    tl.store(out_ptr + BLOCK, tl.reduce_or(x, 0))
    tl.store(out_ptr + BLOCK + 1, tl.reduce_or(y.to(tl.uint8), 0) + 100)  # u8: wraps past 255
""")


def _or_arith_inputs(r: np.random.Generator) -> list:
    return [r.integers(-1000, 1000, 16).astype(np.int32), r.integers(0, 1 << 20, 16).astype(np.int32),
            np.zeros(18, np.int32)]  # fmt: skip


def _or_arith_ref(a: list) -> dict:
    x, y = a[0].astype(np.int64), a[1].astype(np.int64)
    out = ((x + y) * 7 + (x - y) * 3 + x * y).astype(np.int32)  # wraps as i32 does
    u8_or = int(np.bitwise_or.reduce(a[1].astype(np.uint8)))
    return {2: np.concatenate([out, [np.bitwise_or.reduce(a[0]), (u8_or + 100) % 256]]).astype(np.int32)}


METHOD_FORMS = src("""
@triton.jit
def method_forms(x_ptr, f_ptr, out_ptr, fout_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    f = tl.load(f_ptr + offs)
    (out_ptr + offs).store(x.cdiv(3))
    (out_ptr + BLOCK + tl.arange(0, 8)).store(x.histogram(8))
    tl.store(out_ptr + 2 * BLOCK, x.reduce_or(0) + tl.to_tensor(5))
    tl.store(out_ptr + 2 * BLOCK + 1, x.sum(0, keep_dims=True).item() * 2)
    (out_ptr + 2 * BLOCK + 2 + offs % 2).atomic_add(x)
    (fout_ptr + offs).store(f.sqrt_rn())
""")


def _method_inputs(r: np.random.Generator) -> list:
    return [r.integers(0, 8, 16).astype(np.int32), r.uniform(0.5, 4.0, 16).astype(np.float32),
            np.zeros(36, np.int32), np.zeros(16, np.float32)]  # fmt: skip


def _method_ref(a: list) -> dict:
    x, f = a[0], a[1]
    out = np.zeros(36, np.int32)
    out[:16] = -(-x // 3)
    out[16:24] = np.bincount(x, minlength=8)[:8]
    out[32] = np.bitwise_or.reduce(x) + 5
    out[33] = x.sum() * 2
    out[34], out[35] = x[0::2].sum(), x[1::2].sum()
    return {2: out, 3: np.sqrt(f).astype(np.float32)}


CASES = [
    Case("max_min_widen_narrow_types", NARROW_MAX_MIN, "narrow_max_min", _narrow_inputs, (1,), _narrow_ref,
         {"BLOCK": 64}, rtol=2e-6),  # fmt: skip
    Case("cumsum_unsigned_and_dtype", SCAN_TYPES, "scan_types", _scan_inputs, (1,), _scan_ref, {"BLOCK": 32}),
    Case("softmax_f16_in_f32", SOFTMAX_F16, "softmax_f16",
         lambda r: [r.uniform(-3, 3, 64).astype(np.float16), np.zeros(64, np.float32)], (1,), _softmax_ref,
         {"BLOCK": 64}, rtol=2e-6),  # fmt: skip
    Case("reduce_or_and_tl_add_sub_mul", OR_AND_ARITH, "or_and_arith", _or_arith_inputs, (1,), _or_arith_ref,
         {"BLOCK": 16}),  # fmt: skip
    Case("tensor_method_forms", METHOD_FORMS, "method_forms", _method_inputs, (1,), _method_ref, {"BLOCK": 16}),
]
