"""Shape ops, dot, reductions and scans on the interpreter, on 1-, 2- and 3-D tiles."""

from __future__ import annotations

import numpy as np
import pytest

from .kit import bf16_bits, bf16_values, kernel, nearest_bf16, run


def _load2d(name: str, elem: str, m: int, n: int) -> str:
    """IR loading a row-major [m, n] tile from pointer %name into %<name>t."""
    return f"""
    %{name}r = make_range {{end = {m}, start = 0}} : tile<{m}xi32>
    %{name}c = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %{name}re = expand_dims %{name}r {{axis = 1}} : tile<{m}x1xi32>
    %{name}ce = expand_dims %{name}c {{axis = 0}} : tile<1x{n}xi32>
    %{name}ld = constant {{value = {n}}} : tile<{m}x1xi32>
    %{name}rs = mul %{name}re, %{name}ld : tile<{m}x1xi32>
    %{name}rb = broadcast %{name}rs : tile<{m}x{n}xi32>
    %{name}cb = broadcast %{name}ce : tile<{m}x{n}xi32>
    %{name}off = add %{name}rb, %{name}cb : tile<{m}x{n}xi32>
    %{name}p = splat %{name} : tile<{m}x{n}xptr<{elem}>>
    %{name}a = addptr %{name}p, %{name}off : tile<{m}x{n}xptr<{elem}>>
    %{name}t = load %{name}a : tile<{m}x{n}x{elem}>
    """


def _store_flat(name: str, value: str, elem: str, shape: tuple[int, ...]) -> str:
    """IR storing tile %value of `shape` row-major through %name (via reshape to 1-D)."""
    n = int(np.prod(shape))
    t = "x".join(map(str, shape))
    return (
        f"""
    %{name}flat = reshape %{value} : tile<{n}x{elem}>
    %{name}i = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %{name}p = splat %{name} : tile<{n}xptr<{elem}>>
    %{name}a = addptr %{name}p, %{name}i : tile<{n}xptr<{elem}>>
    store %{name}a, %{name}flat
    """
        if t
        else ""
    )


def test_broadcast_expand_dims_reshape_trans_2d():
    body = (
        _load2d("x", "i32", 4, 8)
        + "%tt = trans %xt {order = [1, 0]} : tile<8x4xi32>"
        + _store_flat("o", "tt", "i32", (8, 4))
    )
    x = np.arange(32, dtype=np.int32)
    o = np.zeros(32, np.int32)
    run(kernel("%x: ptr<i32>, %o: ptr<i32>", body), [x, o])
    np.testing.assert_array_equal(o.reshape(8, 4), x.reshape(4, 8).T)


def test_3d_tiles_reshape_trans_and_reduce():
    body = (
        """
    %i = make_range {end = 32, start = 0} : tile<32xi32>
    %p = splat %x : tile<32xptr<f32>>
    %a = addptr %p, %i : tile<32xptr<f32>>
    %v = load %a : tile<32xf32>
    %t3 = reshape %v : tile<2x4x4xf32>
    %tt = trans %t3 {order = [2, 0, 1]} : tile<4x2x4xf32>
    %s = reduce %tt {axis = 2, kind = "sum"} : tile<4x2xf32>
    """
        + _store_flat("o", "tt", "f32", (4, 2, 4))
        + _store_flat("s2", "s", "f32", (4, 2))
    )
    x = np.arange(32, dtype=np.float32)
    o, s2 = np.zeros(32, np.float32), np.zeros(8, np.float32)
    run(kernel("%x: ptr<f32>, %o: ptr<f32>, %s2: ptr<f32>", body), [x, o, s2])
    want = x.reshape(2, 4, 4).transpose(2, 0, 1)
    np.testing.assert_array_equal(o.reshape(4, 2, 4), want)
    np.testing.assert_array_equal(s2.reshape(4, 2), want.sum(axis=2))


def test_3d_broadcast_of_a_scalar_tile():
    body = """
    %c = constant {value = 3} : tile<1x1x1xi16>
    %b = broadcast %c : tile<2x2x2xi16>
    %e = constant {value = 1} : tile<2x2x2xi16>
    %s = add %b, %e : tile<2x2x2xi16>
    """ + _store_flat("o", "s", "i16", (2, 2, 2))
    o = np.zeros(8, np.int16)
    run(kernel("%o: ptr<i16>", body), [o])
    assert (o == 4).all()


@pytest.mark.parametrize(
    ("elem", "acc"), [("f32", "f32"), ("f16", "f32"), ("i8", "i32"), ("f64", "f64"), ("f16", "f16")]
)
def test_dot(elem, acc):
    m, k, n = 16, 32, 8
    body = _load2d("a", elem, m, k) + _load2d("b", elem, k, n) + _load2d("c", acc, m, n)
    body += f"%d = dot %at, %bt, %ct : tile<{m}x{n}x{acc}>" + _store_flat("o", "d", acc, (m, n))
    rng = np.random.default_rng(0)
    dt, adt = (
        np.dtype({"f32": "float32", "f16": "float16", "i8": "int8", "f64": "float64"}[elem]),
        np.dtype({"f32": "float32", "i32": "int32", "f64": "float64", "f16": "float16"}[acc]),
    )
    a = rng.integers(-100, 100, m * k).astype(dt) if elem == "i8" else rng.standard_normal(m * k).astype(dt)
    b = rng.integers(-100, 100, k * n).astype(dt) if elem == "i8" else rng.standard_normal(k * n).astype(dt)
    c = np.ones(m * n, adt)
    o = np.zeros(m * n, adt)
    run(kernel(f"%a: ptr<{elem}>, %b: ptr<{elem}>, %c: ptr<{acc}>, %o: ptr<{acc}>", body), [a, b, c, o])
    exact = a.reshape(m, k).astype(np.float64) @ b.reshape(k, n).astype(np.float64) + 1
    if elem == "i8":
        np.testing.assert_array_equal(o.reshape(m, n), exact.astype(np.int32))
    else:
        np.testing.assert_allclose(o.reshape(m, n), exact, rtol=1e-2 if acc == "f16" else 1e-5, atol=1e-2)


def test_dot_bf16_inputs_tf32():
    m = k = n = 16
    body = _load2d("a", "bf16", m, k) + _load2d("b", "bf16", k, n) + _load2d("c", "f32", m, n)
    body += '%d = dot %at, %bt, %ct {input_precision = "tf32"} : tile<16x16xf32>' + _store_flat(
        "o", "d", "f32", (m, n)
    )
    rng = np.random.default_rng(1)
    a, b = bf16_bits(rng.standard_normal(m * k)), bf16_bits(rng.standard_normal(k * n))
    c, o = np.zeros(m * n, np.float32), np.zeros(m * n, np.float32)
    run(kernel("%a: ptr<bf16>, %b: ptr<bf16>, %c: ptr<f32>, %o: ptr<f32>", body), [a, b, c, o])
    exact = bf16_values(a).reshape(m, k).astype(np.float64) @ bf16_values(b).reshape(k, n)
    np.testing.assert_allclose(o.reshape(m, n), exact, rtol=1e-5, atol=1e-5)


def _reduce1d(kind: str, elem: str, out: str, x: np.ndarray, attrs: str = "") -> np.ndarray:
    n = len(x)
    body = f"""
    %i = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %p = splat %x : tile<{n}xptr<{elem}>>
    %a = addptr %p, %i : tile<{n}xptr<{elem}>>
    %v = load %a : tile<{n}x{elem}>
    %r = reduce %v {{axis = 0, kind = "{kind}"{attrs}}} : {out}
    store %o, %r
    """
    o = np.zeros(
        1,
        {
            "i32": np.int32,
            "f32": np.float32,
            "i8": np.int8,
            "f16": np.float16,
            "i1": np.bool_,
            "u8": np.uint8,
        }[out],
    )
    run(kernel(f"%x: ptr<{elem}>, %o: ptr<{out}>", body), [x, o])
    return o[0]


def test_reduce_int_kinds():
    x = np.array([3, -7, 12, 5, 12, -7, 1, 2], np.int32)
    assert _reduce1d("sum", "i32", "i32", x) == 21
    assert _reduce1d("prod", "i32", "i32", x) == int(np.prod(x.astype(np.int64)))
    assert _reduce1d("max", "i32", "i32", x) == 12
    assert _reduce1d("min", "i32", "i32", x) == -7
    assert _reduce1d("argmax", "i32", "i32", x) == 2
    assert _reduce1d("argmin", "i32", "i32", x) == 1
    assert _reduce1d("and", "i32", "i32", x) == np.bitwise_and.reduce(x)
    assert _reduce1d("or", "i32", "i32", x) == np.bitwise_or.reduce(x)
    assert _reduce1d("xor", "i32", "i32", x) == np.bitwise_xor.reduce(x)


def test_reduce_sum_of_i8_wraps_in_i8():
    assert _reduce1d("sum", "i8", "i8", np.full(4, 100, np.int8)) == np.int8(400 - 512)
    assert _reduce1d("sum", "i1", "i1", np.array([True, True, True, False])) == np.True_
    assert _reduce1d("max", "u8", "u8", np.array([1, 255, 3, 4], np.uint8)) == 255


def test_reduce_max_argmax_with_nan_and_inf():
    x = np.array([1.0, np.nan, -np.inf, 7.0, np.nan, 7.0, np.inf, 2.0], np.float32)
    assert _reduce1d("max", "f32", "f32", x) == np.inf
    assert _reduce1d("argmax", "f32", "i32", x) == 6
    assert _reduce1d("argmin", "f32", "i32", x) == 2
    assert np.isnan(_reduce1d("max", "f32", "f32", x, ", propagate_nan = true"))
    allnan = np.full(4, np.nan, np.float32)
    assert np.isnan(_reduce1d("max", "f32", "f32", allnan))
    assert _reduce1d("argmax", "f32", "i32", allnan) == 0
    y = np.array([np.nan, -np.inf, np.nan, -np.inf], np.float32)
    assert _reduce1d("argmax", "f32", "i32", y) == 1
    assert _reduce1d("min", "f32", "f32", y) == -np.inf


def test_reduce_f16_sum_is_a_tree_in_f16():
    x = np.array([2048, 1, 1, 1, 1, 1, 1, 1], np.float16)  # 2048 + 1 rounds back to 2048 in f16
    want = np.float16(
        np.float16(np.float16(2048 + 1) + np.float16(1 + 1)) + np.float16(np.float16(2) + np.float16(2))
    )
    assert _reduce1d("sum", "f16", "f16", x) == want
    rng = np.random.default_rng(0)
    y = rng.standard_normal(1024).astype(np.float32)
    np.testing.assert_allclose(_reduce1d("sum", "f32", "f32", y), y.astype(np.float64).sum(), rtol=1e-5)


def test_reduce_2d_along_each_axis():
    for axis, shape in ((0, "tile<8xf32>"), (1, "tile<4xf32>")):
        body = _load2d("x", "f32", 4, 8) + f'%r = reduce %xt {{axis = {axis}, kind = "max"}} : {shape}'
        n = 8 if axis == 0 else 4
        body += _store_flat("o", "r", "f32", (n,))
        x = np.random.default_rng(axis).standard_normal(32).astype(np.float32)
        o = np.zeros(n, np.float32)
        run(kernel("%x: ptr<f32>, %o: ptr<f32>", body), [x, o])
        np.testing.assert_array_equal(o, x.reshape(4, 8).max(axis=axis))


def _scan1d(kind: str, elem: str, x: np.ndarray, reverse: bool = False) -> np.ndarray:
    n = len(x)
    rev = ", reverse = true" if reverse else ""
    body = f"""
    %i = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %p = splat %x : tile<{n}xptr<{elem}>>
    %a = addptr %p, %i : tile<{n}xptr<{elem}>>
    %v = load %a : tile<{n}x{elem}>
    %r = scan %v {{axis = 0, kind = "{kind}"{rev}}} : tile<{n}x{elem}>
    %q = splat %o : tile<{n}xptr<{elem}>>
    %b = addptr %q, %i : tile<{n}xptr<{elem}>>
    store %b, %r
    """
    o = np.zeros_like(x)
    run(kernel(f"%x: ptr<{elem}>, %o: ptr<{elem}>", body), [x, o])
    return o


def test_scan_kinds_and_reverse():
    x = np.array([3, -1, 4, 1, -5, 9, 2, 6], np.int32)
    assert _scan1d("sum", "i32", x).tolist() == np.cumsum(x).tolist()
    assert _scan1d("prod", "i32", x).tolist() == np.cumprod(x).tolist()
    assert _scan1d("max", "i32", x).tolist() == np.maximum.accumulate(x).tolist()
    assert _scan1d("min", "i32", x).tolist() == np.minimum.accumulate(x).tolist()
    assert _scan1d("sum", "i32", x, reverse=True).tolist() == np.cumsum(x[::-1])[::-1].tolist()
    big = np.full(4, 2**30, np.int32)
    assert _scan1d("sum", "i32", big).tolist() == [2**30, -(2**31), -(2**30), 0]


def test_scan_rounds_each_step():
    x = np.array([2048, 1, 1, 2, 2, 4, 1, 1], np.float16)
    want, acc = [], np.float16(0)
    for v in x:
        acc = np.float16(acc + v)
        want.append(acc)
    assert _scan1d("sum", "f16", x).tolist() == want
    bits = bf16_bits([256.0, 1.0, 1.0, 1.0, 2.0, 0.5, 0.5, 4.0])
    got = bf16_values(_scan1d("sum", "bf16", bits))
    acc, want = 0.0, []
    for v in bf16_values(bits):
        acc = float(bf16_values(nearest_bf16(np.array([acc + float(v)])))[0])
        want.append(acc)
    assert got.tolist() == want


def test_scan_2d_along_axis_1():
    body = (
        _load2d("x", "f32", 4, 8)
        + '%r = scan %xt {axis = 1, kind = "sum"} : tile<4x8xf32>'
        + _store_flat("o", "r", "f32", (4, 8))
    )
    x = np.arange(32, dtype=np.float32)
    o = np.zeros(32, np.float32)
    run(kernel("%x: ptr<f32>, %o: ptr<f32>", body), [x, o])
    np.testing.assert_array_equal(o.reshape(4, 8), np.cumsum(x.reshape(4, 8), axis=1))
