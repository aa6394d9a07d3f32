"""Shape ops, reductions, scans, dot and casts on the cpu target, against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.ir.types import ScalarType

from .kit import assert_same, run_both


def kernel(params: str, body: str) -> str:
    lines = "\n".join("    " + ln.strip() for ln in body.strip().splitlines())
    return f"module {{\n  kernel @k({params}) {{\n{lines}\n    return\n  }}\n}}\n"


def load2d(name: str, t: str, m: int, n: int) -> str:
    """IR loading an m x n row-major tile from pointer %name into %name_v."""
    return f"""
    %{name}_r = make_range {{end = {m}, start = 0}} : tile<{m}xi32>
    %{name}_c = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %{name}_re = expand_dims %{name}_r {{axis = 1}} : tile<{m}x1xi32>
    %{name}_ce = expand_dims %{name}_c {{axis = 0}} : tile<1x{n}xi32>
    %{name}_k = constant {{value = {n}}} : tile<{m}x1xi32>
    %{name}_rs = mul %{name}_re, %{name}_k : tile<{m}x1xi32>
    %{name}_rb = broadcast %{name}_rs : tile<{m}x{n}xi32>
    %{name}_cb = broadcast %{name}_ce : tile<{m}x{n}xi32>
    %{name}_off = add %{name}_rb, %{name}_cb : tile<{m}x{n}xi32>
    %{name}_s = splat %{name} : tile<{m}x{n}xptr<{t}>>
    %{name}_p = addptr %{name}_s, %{name}_off : tile<{m}x{n}xptr<{t}>>
    %{name}_v = load %{name}_p : tile<{m}x{n}x{t}>
    """


def store2d(name: str, value: str, m: int, n: int, t: str) -> str:
    return load2d(name, t, m, n).rsplit("\n", 2)[0] + f"\n    store %{name}_p, {value}\n"


def store1d(name: str, value: str, n: int, t: str) -> str:
    return f"""
    %{name}_r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %{name}_s = splat %{name} : tile<{n}xptr<{t}>>
    %{name}_p = addptr %{name}_s, %{name}_r : tile<{n}xptr<{t}>>
    store %{name}_p, {value}
    """


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_2d(kind: str, axis: int) -> None:
    m, n = 4, 8
    out_n = n if axis == 0 else m
    rt = "i32" if kind.startswith("arg") else "f32"
    body = (
        load2d("x", "f32", m, n)
        + f"""
    %red = reduce %x_v {{axis = {axis}, kind = "{kind}"}} : tile<{out_n}x{rt}>
    """
        + store1d("o", "%red", out_n, rt)
    )
    x = np.random.default_rng(1).standard_normal((m, n)).astype(np.float32)
    x[1, 2] = np.nan
    x[2, 3] = np.inf
    x[0, 5] = x[0, 6]  # a tie
    out = np.zeros(out_n, np.int32 if rt == "i32" else np.float32)
    ref, got = run_both(kernel(f"%x: ptr<f32>, %o: ptr<{rt}>", body), [x, out], (1,))
    assert_same(ref, got, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "and", "or", "xor", "argmin"])
def test_reduce_1d_int(kind: str) -> None:
    n = 64
    rt = "i32" if kind.startswith("arg") else "i16"
    body = f"""
    %r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %s = splat %x : tile<{n}xptr<i16>>
    %p = addptr %s, %r : tile<{n}xptr<i16>>
    %v = load %p : tile<{n}xi16>
    %red = reduce %v {{axis = 0, kind = "{kind}"}} : {rt}
    store %o, %red
    """
    x = np.random.default_rng(2).integers(-30000, 30000, n).astype(np.int16)
    ref, got = run_both(
        kernel(f"%x: ptr<i16>, %o: ptr<{rt}>", body), [x, np.zeros(1, np.dtype(rt.replace("i", "int")))], (1,)
    )
    assert_same(ref, got)


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_axis1(kind: str, reverse: bool) -> None:
    m, n = 2, 16
    body = (
        load2d("x", "f32", m, n)
        + f"""
    %sc = scan %x_v {{axis = 1, kind = "{kind}", reverse = {str(reverse).lower()}}} : tile<{m}x{n}xf32>
    """
        + store2d("o", "%sc", m, n, "f32")
    )
    x = (np.random.default_rng(3).random((m, n)) + 0.5).astype(np.float32)
    ref, got = run_both(kernel("%x: ptr<f32>, %o: ptr<f32>", body), [x, np.zeros_like(x)], (1,))
    assert_same(ref, got, rtol=1e-5)


def test_trans_3d_and_reshape() -> None:
    body = """
    %r = make_range {end = 32, start = 0} : tile<32xi32>
    %s = splat %x : tile<32xptr<i32>>
    %p = addptr %s, %r : tile<32xptr<i32>>
    %v = load %p : tile<32xi32>
    %t3 = reshape %v : tile<2x4x4xi32>
    %tt = trans %t3 {order = [2, 0, 1]} : tile<4x2x4xi32>
    %fl = reshape %tt : tile<32xi32>
    %q = splat %o : tile<32xptr<i32>>
    %qq = addptr %q, %r : tile<32xptr<i32>>
    store %qq, %fl
    """
    x = np.arange(32, dtype=np.int32)
    ref, got = run_both(kernel("%x: ptr<i32>, %o: ptr<i32>", body), [x, np.zeros_like(x)], (1,))
    assert_same(ref, got)
    np.testing.assert_array_equal(got[1], x.reshape(2, 4, 4).transpose(2, 0, 1).ravel())


@pytest.mark.parametrize(
    ("elem", "acc"), [("f32", "f32"), ("f16", "f32"), ("f16", "f16"), ("i8", "i32"), ("f64", "f64")]
)
def test_dot(elem: str, acc: str) -> None:
    m, k, n = 4, 16, 8
    body = (
        load2d("a", elem, m, k)
        + load2d("b", elem, k, n)
        + load2d("c", acc, m, n)
        + f"""
    %d = dot %a_v, %b_v, %c_v : tile<{m}x{n}x{acc}>
    """
        + store2d("o", "%d", m, n, acc)
    )
    rng = np.random.default_rng(4)
    npd = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32, "f64": np.float64}
    a = (rng.integers(-5, 5, (m, k)) if elem == "i8" else rng.standard_normal((m, k))).astype(npd[elem])
    b = (rng.integers(-5, 5, (k, n)) if elem == "i8" else rng.standard_normal((k, n))).astype(npd[elem])
    c = np.ones((m, n), npd[acc])
    params = f"%a: ptr<{elem}>, %b: ptr<{elem}>, %c: ptr<{acc}>, %o: ptr<{acc}>"
    ref, got = run_both(kernel(params, body), [a, b, c, np.zeros_like(c)], (1,))
    tol = 2e-2 if acc == "f16" else 1e-5
    assert_same(ref, got, rtol=tol, atol=tol)


CASTS = ["i1", "i8", "i32", "i64", "u8", "u32", "u64", "f16", "bf16", "f32", "f64"]


@pytest.mark.parametrize("dst", CASTS)
@pytest.mark.parametrize("src", ["f32", "i32", "u8", "f64", "bf16"])
def test_cast(src: str, dst: str) -> None:
    n = 16
    mem = {"bf16": np.uint16, "i1": np.bool_}
    npd = lambda t: mem.get(t) or ScalarType(t).np_dtype  # noqa: E731
    body = f"""
    %r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %s = splat %x : tile<{n}xptr<{src}>>
    %p = addptr %s, %r : tile<{n}xptr<{src}>>
    %v = load %p : tile<{n}x{src}>
    %c = cast %v : tile<{n}x{dst}>
    """ + store1d("o", "%c", n, dst)
    vals = np.array(
        [0, 1, -1, 2.5, -2.5, 1e10, -1e10, np.nan, np.inf, -np.inf, 255.5, 3.0, 65504, 1e-3, 0.5, -0.5]
    )
    if src == "bf16":
        x = (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif src[0] in "iu":
        with np.errstate(invalid="ignore"):
            x = np.nan_to_num(vals, posinf=7, neginf=-7).astype(np.int64).astype(npd(src))
    else:
        x = vals.astype(npd(src))
    out = np.zeros(n, npd(dst))
    ref, got = run_both(kernel(f"%x: ptr<{src}>, %o: ptr<{dst}>", body), [x, out], (1,))
    assert_same(ref, got)
