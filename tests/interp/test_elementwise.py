"""Elementwise ops on the interpreter against NumPy: wrapping, C division, shifts, NaN rules, rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .kit import bf16_bits, bf16_values, elementwise, nearest_bf16

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def i32(*v):
    return np.array(v, np.int32)


def test_add_sub_mul_wrap_in_the_ir_type():
    a, b = i32(I32_MAX, I32_MIN, 7, -3), i32(1, -1, 5, 9)
    assert elementwise("add", [("i32", a), ("i32", b)], "i32").tolist() == [I32_MIN, I32_MAX, 12, 6]
    assert elementwise("sub", [("i32", a), ("i32", b)], "i32").tolist() == [I32_MAX - 1, I32_MIN + 1, 2, -12]
    assert elementwise("mul", [("i32", a), ("i32", b)], "i32").tolist() == [I32_MAX, I32_MIN, 35, -27]
    x8 = np.array([100, -128, 127, 3], np.int8)
    assert elementwise("add", [("i8", x8), ("i8", x8)], "i8").tolist() == [-56, 0, -2, 6]
    u8 = np.array([200, 0, 255, 1], np.uint8)
    assert elementwise("sub", [("u8", u8[::-1].copy()), ("u8", u8)], "u8").tolist() == [57, 255, 1, 199]


def test_i1_arithmetic_is_modulo_two():
    a = np.array([False, True, True, False])
    b = np.array([False, False, True, True])
    assert elementwise("add", [("i1", a), ("i1", b)], "i1").tolist() == [False, True, False, True]
    assert elementwise("mul", [("i1", a), ("i1", b)], "i1").tolist() == [False, False, True, False]


def test_signed_div_rem_truncate_toward_zero():
    a = i32(7, -7, 7, -7, I32_MIN, 5, -5, 0)
    b = i32(2, 2, -2, -2, -1, 0, 0, 3)
    assert elementwise("div", [("i32", a), ("i32", b)], "i32").tolist() == [3, -3, -3, 3, I32_MIN, 0, 0, 0]
    assert elementwise("rem", [("i32", a), ("i32", b)], "i32").tolist() == [1, -1, 1, -1, 0, 0, 0, 0]


def test_signed_div_rem_agree_with_c_on_random_values():
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, 256).astype(np.int16)
    b = rng.integers(-20, 20, 256).astype(np.int16)
    q = elementwise("div", [("i16", a), ("i16", b)], "i16")
    r = elementwise("rem", [("i16", a), ("i16", b)], "i16")
    for x, y, qq, rr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist(), strict=True):
        want_q = 0 if y == 0 else int(x / y)
        want_r = 0 if y == 0 else x - want_q * y
        assert (qq, rr) == (want_q, want_r), (x, y)


def test_unsigned_div_rem():
    a = np.array([4_000_000_000, 7, 9, 1], np.uint32)
    b = np.array([3, 0, 4, 2], np.uint32)
    assert elementwise("div", [("u32", a), ("u32", b)], "u32").tolist() == [1_333_333_333, 0, 2, 0]
    assert elementwise("rem", [("u32", a), ("u32", b)], "u32").tolist() == [1, 0, 1, 1]


def test_float_div_and_rem():
    a = np.array([1.0, -1.0, 0.0, 5.5, -5.5, 7.0, np.inf, 1.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 2.0, 2.0, -3.0, 2.0, np.inf], np.float32)
    q = elementwise("div", [("f32", a), ("f32", b)], "f32")
    assert q[0] == np.inf and q[1] == -np.inf and np.isnan(q[2]) and q[3] == 2.75
    r = elementwise("rem", [("f32", a), ("f32", b)], "f32")
    assert r[3] == 1.5 and r[4] == -1.5 and r[5] == 1.0 and np.isnan(r[6]) and r[7] == 1.0


def test_shifts():
    a = i32(1, -16, -16, 3, 1, -1, 5, 5)
    b = i32(31, 2, 31, 32, 40, 33, -1, 0)
    assert elementwise("shl", [("i32", a), ("i32", b)], "i32").tolist() == [I32_MIN, -64, 0, 0, 0, 0, 0, 5]
    assert elementwise("shr", [("i32", a), ("i32", b)], "i32").tolist() == [0, -4, -1, 0, 0, -1, 0, 5]
    u = np.array([0x80000000, 0xF0, 0xFFFFFFFF, 5], np.uint32)
    s = np.array([31, 4, 32, 1], np.uint32)
    assert elementwise("shr", [("u32", u), ("u32", s)], "u32").tolist() == [1, 0xF, 0, 2]
    assert elementwise("shl", [("u32", u), ("u32", s)], "u32").tolist() == [0, 0xF00, 0, 10]


def test_bitwise():
    a, b = i32(0b1100, -1, 0, 5), i32(0b1010, 7, -1, 5)
    assert elementwise("and", [("i32", a), ("i32", b)], "i32").tolist() == [0b1000, 7, 0, 5]
    assert elementwise("or", [("i32", a), ("i32", b)], "i32").tolist() == [0b1110, -1, -1, 5]
    assert elementwise("xor", [("i32", a), ("i32", b)], "i32").tolist() == [0b0110, -8, -1, 0]


def test_maximum_minimum_nan_rules():
    nan = np.nan
    a = np.array([nan, 1.0, nan, -0.5], np.float32)
    b = np.array([2.0, nan, nan, 3.0], np.float32)
    mx = elementwise("maximum", [("f32", a), ("f32", b)], "f32")
    assert mx[0] == 2.0 and mx[1] == 1.0 and np.isnan(mx[2]) and mx[3] == 3.0
    mn = elementwise("minimum", [("f32", a), ("f32", b)], "f32")
    assert mn[0] == 2.0 and mn[1] == 1.0 and mn[3] == -0.5
    mxp = elementwise("maximum", [("f32", a), ("f32", b)], "f32", " {propagate_nan = true}")
    assert np.isnan(mxp[:3]).all() and mxp[3] == 3.0
    u = np.array([1, 0xFFFFFFFF, 3, 0], np.uint32)
    v = np.array([2, 1, 3, 0], np.uint32)
    assert elementwise("maximum", [("u32", u), ("u32", v)], "u32").tolist() == [2, 0xFFFFFFFF, 3, 0]
    assert elementwise("minimum", [("i32", u.view(np.int32)), ("i32", v.view(np.int32))], "i32").tolist() == [
        1,
        -1,
        3,
        0,
    ]


@pytest.mark.parametrize("pred", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp_float_is_ordered_except_ne(pred):
    a = np.array([1.0, np.nan, 1.0, np.nan, -0.0, 2.0, -np.inf, 3.0], np.float32)
    b = np.array([1.0, 1.0, np.nan, np.nan, 0.0, 1.0, np.inf, 4.0], np.float32)
    got = elementwise("cmp", [("f32", a), ("f32", b)], "i1", f' {{pred = "{pred}"}}')
    fn = {
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
    }
    assert got.tolist() == fn[pred](a, b).tolist()
    assert got[1] == (pred == "ne")


def test_cmp_signedness_from_the_type():
    a = np.array([0xFFFFFFFF, 1, 5, 0], np.uint32)
    b = np.array([1, 0xFFFFFFFF, 5, 1], np.uint32)
    assert elementwise("cmp", [("u32", a), ("u32", b)], "i1", ' {pred = "lt"}').tolist() == [
        False,
        True,
        False,
        True,
    ]
    sa, sb = a.view(np.int32), b.view(np.int32)
    assert elementwise("cmp", [("i32", sa), ("i32", sb)], "i1", ' {pred = "lt"}').tolist() == [
        True,
        False,
        False,
        True,
    ]


def test_select():
    c = np.array([True, False, True, False])
    a, b = np.arange(4, dtype=np.float32), -np.arange(4, dtype=np.float32)
    assert elementwise("select", [("i1", c), ("f32", a), ("f32", b)], "f32").tolist() == [0, -1, 2, -3]


UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil, "erf": np.vectorize(math.erf),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("elem", ["f32", "f16", "f64"])
def test_math_unary_is_the_rounded_exact_value(name, elem):
    dt = {"f32": np.float32, "f16": np.float16, "f64": np.float64}[elem]
    x = np.linspace(0.05, 4.0, 64).astype(dt)
    if name not in ("sqrt", "rsqrt", "log", "log2"):
        x[::2] *= -1
    got = elementwise(name, [(elem, x)], elem)
    assert got.dtype == dt
    want = UNARY[name](x.astype(np.float64)).astype(dt)
    np.testing.assert_array_equal(got, want)


def test_math_on_special_values():
    x = np.array([np.inf, -np.inf, np.nan, -1.0], np.float32)
    assert elementwise("exp", [("f32", x)], "f32")[:2].tolist() == [np.inf, 0.0]
    assert np.isnan(elementwise("log", [("f32", x)], "f32")[[1, 2, 3]]).all()


def test_pow_atan2_f32():
    a = np.array([2.0, 9.0, -8.0, 0.5], np.float32)
    b = np.array([10.0, 0.5, 1.0 / 3.0, -1.0], np.float32)
    assert elementwise("pow", [("f32", a), ("f32", b)], "f32")[:2].tolist() == [1024.0, 3.0]
    got = elementwise("atan2", [("f32", a), ("f32", b)], "f32")
    np.testing.assert_array_equal(
        got, np.arctan2(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    )


def test_neg_abs():
    a = i32(I32_MIN, -5, 0, 7)
    assert elementwise("neg", [("i32", a)], "i32").tolist() == [I32_MIN, 5, 0, -7]
    assert elementwise("abs", [("i32", a)], "i32").tolist() == [I32_MIN, 5, 0, 7]
    f = np.array([-0.0, -2.5, np.nan, np.inf], np.float32)
    got = elementwise("abs", [("f32", f)], "f32")
    assert got[0] == 0.0 and not np.signbit(got[0]) and got[1] == 2.5 and np.isnan(got[2])
    assert np.signbit(elementwise("neg", [("f32", np.zeros(4, np.float32))], "f32")).all()
    u = np.array([1, 0, 5, 255], np.uint8)
    assert elementwise("neg", [("u8", u)], "u8").tolist() == [255, 0, 251, 1]


def test_fma_rounds_once():
    a = np.full(4, 1 + 2.0**-12, np.float32)
    c = np.full(4, -1.0, np.float32)
    got = elementwise("fma", [("f32", a), ("f32", a), ("f32", c)], "f32")
    assert got[0] == np.float32(2.0**-11 + 2.0**-24)
    twice = elementwise(
        "add", [("f32", elementwise("mul", [("f32", a), ("f32", a)], "f32")), ("f32", c)], "f32"
    )
    assert twice[0] == np.float32(2.0**-11)


def test_fma_f64_and_f16_round_once():
    a = np.full(4, 1 + 2.0**-30, np.float64)
    c = np.full(4, -1.0, np.float64)
    assert elementwise("fma", [("f64", a), ("f64", a), ("f64", c)], "f64")[0] == 2.0**-29 + 2.0**-60
    rng = np.random.default_rng(3)
    x, y, z = (rng.standard_normal(64).astype(np.float16) for _ in range(3))
    got = elementwise("fma", [("f16", x), ("f16", y), ("f16", z)], "f16")
    np.testing.assert_array_equal(got, (x.astype(np.float64) * y + z).astype(np.float16))


def test_f16_arithmetic_rounds_every_op_to_f16():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(256) * 100).astype(np.float16)
    b = (rng.standard_normal(256) * 0.01).astype(np.float16)
    for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        got = elementwise(op, [("f16", a), ("f16", b)], "f16")
        assert got.dtype == np.float16
        with np.errstate(over="ignore"):
            want = fn(a.astype(np.float64), b.astype(np.float64)).astype(np.float16)
        np.testing.assert_array_equal(got, want)


def test_bf16_arithmetic_rounds_every_op_to_bf16():
    rng = np.random.default_rng(0)
    a = bf16_values(bf16_bits(rng.standard_normal(128) * 50))
    b = bf16_values(bf16_bits(rng.standard_normal(128) * 0.3))
    for op, fn in (("add", np.add), ("mul", np.multiply), ("div", np.divide)):
        got = elementwise(op, [("bf16", bf16_bits(a)), ("bf16", bf16_bits(b))], "bf16")
        want = nearest_bf16(fn(a.astype(np.float64), b.astype(np.float64)))
        np.testing.assert_array_equal(got, want, err_msg=op)


def test_bf16_tie_rounds_to_even():
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: it rounds to the even one, 1.0
    a = bf16_bits([1.0, 1.0 + 2.0**-7, 1.0, 1.0])
    b = bf16_bits([2.0**-8, 2.0**-8, 0.0, -1.0])
    got = bf16_values(elementwise("add", [("bf16", a), ("bf16", b)], "bf16"))
    assert got.tolist() == [1.0, 1.0 + 2.0**-6, 1.0, 0.0]


def test_cast_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    x = np.array([1.9, -1.9, 3e9, -3e9, np.nan, np.inf, -np.inf, -0.5], np.float32)
    assert elementwise("cast", [("f32", x)], "i32").tolist() == [
        1,
        -1,
        I32_MAX,
        I32_MIN,
        0,
        I32_MAX,
        I32_MIN,
        0,
    ]
    assert elementwise("cast", [("f32", x)], "u8").tolist() == [1, 0, 255, 0, 0, 255, 0, 0]
    assert elementwise("cast", [("f32", x)], "i64").tolist()[:4] == [1, -1, 3_000_000_000, -3_000_000_000]
    assert elementwise("cast", [("f32", x)], "i64")[5] == 2**63 - 1


def test_cast_int_to_int_truncates_or_extends_by_source_signedness():
    x = np.array([-1, 300, 128, -129], np.int32)
    assert elementwise("cast", [("i32", x)], "i8").tolist() == [-1, 44, -128, 127]
    assert elementwise("cast", [("i32", x)], "u64").tolist() == [2**64 - 1, 300, 128, 2**64 - 129]
    u = np.array([255, 128, 0, 7], np.uint8)
    assert elementwise("cast", [("u8", u)], "i32").tolist() == [255, 128, 0, 7]
    assert elementwise("cast", [("i8", u.view(np.int8))], "i32").tolist() == [-1, -128, 0, 7]


def test_cast_to_and_from_i1():
    x = np.array([0.0, -0.0, np.nan, 0.25], np.float32)
    assert elementwise("cast", [("f32", x)], "i1").tolist() == [False, False, True, True]
    assert elementwise("cast", [("i32", i32(0, 2, -1, 256))], "i1").tolist() == [False, True, True, True]
    b = np.array([True, False, True, True])
    assert elementwise("cast", [("i1", b)], "i32").tolist() == [1, 0, 1, 1]
    assert elementwise("cast", [("i1", b)], "f32").tolist() == [1.0, 0.0, 1.0, 1.0]


def test_cast_float_to_float_rounds_to_nearest_even():
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 70000.0, 1e-8], np.float32)
    assert elementwise("cast", [("f32", x)], "f16").tolist() == [1.0, 1 + 2.0**-9, np.inf, 0.0]
    got = elementwise("cast", [("f32", x)], "bf16")
    np.testing.assert_array_equal(got, nearest_bf16(x.astype(np.float64)))
    d = np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-8, 1e300, -1e-300], np.float64)
    got = bf16_values(elementwise("cast", [("f64", d)], "bf16"))  # once-rounded: above the tie goes up
    assert got.tolist() == [1 + 2.0**-7, 1.0, np.inf, -0.0]
    h = np.array([65504, -(2.0**-24), 1.5, np.nan], np.float16)
    back = elementwise("cast", [("f16", h)], "f32")
    assert back[:3].tolist() == [65504.0, -(2.0**-24), 1.5] and np.isnan(back[3])


def test_cast_int_to_float_rounds_to_nearest_even():
    x = np.array([2**24 + 1, 2**24 + 3, -(2**31), 7], np.int32)
    assert elementwise("cast", [("i32", x)], "f32").tolist() == [2**24, 2**24 + 4, -(2.0**31), 7.0]
    big = np.array([2**62 + 2**54, 2**62 + 2**54 + 1, 257, -257], np.int64)  # exact tie, just above, ties
    got = bf16_values(elementwise("cast", [("i64", big)], "bf16"))
    assert got.tolist() == [2.0**62, 2.0**62 + 2.0**55, 256.0, -256.0]
    assert elementwise("cast", [("i32", i32(65519, 65520, -70000, 3))], "f16").tolist() == [
        65504,
        np.inf,
        -np.inf,
        3,
    ]


def test_bitcast_views_the_bits():
    f = np.array([1.0, -0.0, np.inf, 2.5], np.float32)
    assert elementwise("bitcast", [("f32", f)], "i32").tolist() == f.view(np.int32).tolist()
    assert elementwise("bitcast", [("i32", f.view(np.int32))], "f32").tolist() == f.tolist()
    b = bf16_bits([1.0, -2.0, 0.5, 3.0])
    assert elementwise("bitcast", [("bf16", b)], "u16").tolist() == b.tolist()
    assert elementwise("bitcast", [("u16", b)], "bf16").tolist() == b.tolist()
    h = np.array([1.0, -1.0, 0.5, 2.0], np.float16)
    assert elementwise("bitcast", [("f16", h)], "i16").tolist() == h.view(np.int16).tolist()
