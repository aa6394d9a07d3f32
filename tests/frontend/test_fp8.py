"""fp8 in kernel source: tl.float8e4nv / tl.float8e5 and '*fp8e4nv' / '*fp8e5' signatures, `.to()` both
ways, fp8 loads/stores and tl.dot on fp8 inputs, run through client.jit on the cpu target with ml_dtypes
arrays (checked against NumPy over ml_dtypes), and the located errors for fp8 arithmetic."""

from __future__ import annotations

import textwrap

import ml_dtypes
import numpy as np
import pytest

from tilec import client
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import print_module

HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
FP8 = {"float8e4nv": ml_dtypes.float8_e4m3fn, "float8e5": ml_dtypes.float8_e5m2}

ROUND_TRIP = HEAD + textwrap.dedent("""\
    def round_trip(x_ptr, q_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(q_ptr + offs, x.to(q_ptr.dtype.element_ty), mask=m)
        q = tl.load(q_ptr + offs, mask=m)
        tl.store(y_ptr + offs, q.to(tl.float32) * 2.0, mask=m)
""")

DOT = HEAD + textwrap.dedent("""\
    def dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        rm = tl.arange(0, M)
        rn = tl.arange(0, N)
        rk = tl.arange(0, K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        c = tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
""")


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_round_trip_through_fp8_on_cpu(fmt: str) -> None:
    md = FP8[fmt]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(300) * 50).astype(np.float32)
    x[:4] = [1e6, -1e6, np.nan, -0.0]
    q, y = np.zeros(300, md), np.zeros(300, np.float32)
    client.jit(ROUND_TRIP, "round_trip")[(3,)](x, q, y, 300, BLOCK=128)
    big = float(ml_dtypes.finfo(md).max)
    want = np.clip(x, -big, big).astype(md)
    np.testing.assert_array_equal(q.view(np.uint8)[4:], want.view(np.uint8)[4:])
    assert q.astype(np.float32)[0] == big and q.astype(np.float32)[1] == -big  # saturated
    assert np.isnan(q.astype(np.float32)[2])
    np.testing.assert_array_equal(y, want.astype(np.float32) * 2)


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_dot_of_fp8_inputs_on_cpu(fmt: str) -> None:
    md = FP8[fmt]
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((16, 32)) * 4).astype(md)
    b = (rng.standard_normal((32, 16)) * 4).astype(md)
    c = np.zeros((16, 16), np.float32)
    client.jit(DOT, "dot")[(1,)](a, b, c, M=16, N=16, K=32)
    want = a.astype(np.float64) @ b.astype(np.float64)  # products are exact; sums of 32 stay close
    np.testing.assert_allclose(c, want, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(("fa", "fb"), [("float8e4nv", "float8e5"), ("float8e5", "float8e4nv")])
def test_dot_of_mixed_fp8_formats_on_cpu_and_the_interpreter(fa: str, fb: str) -> None:
    """e4m3 x e5m2 (either way round) is a valid tl.dot, as in Triton: the cpu target and the reference
    interpreter both take the exact products of the two formats' values."""
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((16, 32)) * 4).astype(FP8[fa])
    b = (rng.standard_normal((32, 16)) * 4).astype(FP8[fb])
    want = a.astype(np.float64) @ b.astype(np.float64)
    c = np.zeros((16, 16), np.float32)
    client.jit(DOT, "dot")[(1,)](a, b, c, M=16, N=16, K=32)
    np.testing.assert_allclose(c, want, rtol=1e-6, atol=1e-5)
    sig = {"a_ptr": "*fp8" + fa[6:], "b_ptr": "*fp8" + fb[6:], "c_ptr": "*fp32"}
    module = build_ir(read_kernel(DOT, "dot"), sig, {"M": 16, "N": 16, "K": 32})
    text = print_module(module)
    assert f"tile<16x32xf{fa[5:]}>" in text and f"tile<32x16xf{fb[5:]}>" in text  # float8e4nv -> f8e4nv
    ref = [a.view(np.uint8).copy(), b.view(np.uint8).copy(), np.zeros((16, 16), np.float32)]  # fp8 as its bytes
    run_kernel(module, "dot", ref, (1,))
    np.testing.assert_allclose(ref[2], want, rtol=1e-6, atol=1e-5)


def test_signature_spellings_reach_the_ir() -> None:
    ks = read_kernel(ROUND_TRIP, filename="k.py")
    ir = print_module(build_ir(ks, {"x_ptr": "*fp32", "q_ptr": "*fp8e5", "y_ptr": "*fp32", "n": "i32"},
                               {"BLOCK": 128}))  # fmt: skip
    assert "ptr<f8e5>" in ir and "tile<128xf8e5>" in ir


def _err(body: str, sig: dict) -> CompileError:
    with pytest.raises(CompileError) as info:
        build_ir(read_kernel(HEAD + textwrap.dedent(body), filename="k.py"), sig, {})
    e = info.value
    assert "compiler/" not in str(e)
    return e


@pytest.mark.parametrize("expr", ["x + x", "x * 2.0", "x - 1", "-x"])
def test_fp8_arithmetic_is_refused_where_it_is_written(expr: str) -> None:
    e = _err(
        f"""\
    def k(x_ptr):
        x = tl.load(x_ptr)
        y = {expr}
    """,
        {"x_ptr": "*fp8e4nv"},
    )
    assert "fp8" in e.message and (e.filename, e.line) == ("k.py", 8)


def test_fp8_with_fp16_computes_in_fp16_as_triton() -> None:
    ks = read_kernel(
        HEAD
        + textwrap.dedent("""\
    def k(x_ptr, h_ptr):
        tl.store(h_ptr, tl.load(x_ptr) + tl.load(h_ptr))
    """),
        filename="k.py",
    )
    ir = print_module(build_ir(ks, {"x_ptr": "*fp8e5", "h_ptr": "*fp16"}, {}))
    assert "cast" in ir and "add" in ir and ": f16" in ir
