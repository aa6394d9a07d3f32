"""Big tiles on the cpu target (compiler/backends/cpu/buffers.py): tiles above VECTOR_LIMIT elements live in
buffers and are lowered as loops. The shape-op, reduction, scan, dot and cast tests of test_tiles.py and the
elementwise tests of test_elementwise.py run again here with the limit at 0, so every tile, down to one
element, takes the buffer path; the tests below add big tiles at the real limit, control flow carrying
big tiles, calls, per-run loads and the stack budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.artifact import Artifact, compiler_version
from tilec.compiler.backends.cpu import buffers as cpu_buffers
from tilec.compiler.backends.cpu.target import emit_object, lower_module, optimise
from tilec.compiler.errors import CompileError
from tilec.compiler.ir import parse_module
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.cpu import load

from .kit import assert_same, run_both
from .test_elementwise import test_float_binary, test_float_unary, test_int_binary, test_propagate_nan  # noqa: F401
from .test_tiles import (  # noqa: F401 - collected again here, with every tile in a buffer
    kernel,
    load2d,
    store1d,
    store2d,
    test_cast,
    test_dot,
    test_reduce_1d_int,
    test_reduce_2d,
    test_scan_axis1,
    test_trans_3d_and_reshape,
)


@pytest.fixture(autouse=True)
def every_tile_in_a_buffer(request, monkeypatch) -> None:
    """The imported tests run with VECTOR_LIMIT 0; the tests of this file at the real limit."""
    if request.function.__module__ != __name__:
        monkeypatch.setattr(cpu_buffers, "VECTOR_LIMIT", 0)


def test_the_buffer_path_is_taken() -> None:
    assert cpu_buffers.VECTOR_LIMIT < 64 * 64
    text = kernel(
        "%x: ptr<f32>, %o: ptr<f32>", load2d("x", "f32", 64, 64) + store2d("o", "%x_v", 64, 64, "f32")
    )
    ll = compile_kernel(text, None, is_ir=True, emit="llir").llir
    assert "x float>" in ll and "<4096 x" not in ll  # chunks, never one 4096-lane vector


REDUCE_2D = """
    %e = exp %x_v : tile<{m}x{n}xf32>
    %s0 = reduce %e {{axis = 0, kind = "sum"}} : tile<{n}xf32>
    %s1 = reduce %x_v {{axis = 1, kind = "max"}} : tile<{m}xf32>
    %a0 = reduce %x_v {{axis = 0, kind = "argmax"}} : tile<{n}xi32>
    %a1 = reduce %x_v {{axis = 1, kind = "argmin"}} : tile<{m}xi32>
    %c0 = scan %x_v {{axis = 0, kind = "sum"}} : tile<{m}x{n}xf32>
    %c1 = scan %x_v {{axis = 1, kind = "max", reverse = true}} : tile<{m}x{n}xf32>
    %t = trans %c0 {{order = [1, 0]}} : tile<{n}x{m}xf32>
    %b = expand_dims %s1 {{axis = 1}} : tile<{m}x1xf32>
    %bb = broadcast %b : tile<{m}x{n}xf32>
    %d = sub %c1, %bb : tile<{m}x{n}xf32>
"""


def test_big_2d_reductions_scans_trans_broadcast() -> None:
    m, n = 32, 64
    body = (
        load2d("x", "f32", m, n)
        + REDUCE_2D.format(m=m, n=n)
        + store1d("o0", "%s0", n, "f32")
        + store1d("o1", "%s1", m, "f32")
        + store1d("o2", "%a0", n, "i32")
        + store1d("o3", "%a1", m, "i32")
        + store2d("o4", "%t", n, m, "f32")
        + store2d("o5", "%d", m, n, "f32")
    )
    params = "%x: ptr<f32>, %o0: ptr<f32>, %o1: ptr<f32>, %o2: ptr<i32>, %o3: ptr<i32>, %o4: ptr<f32>, %o5: ptr<f32>"
    x = np.random.default_rng(5).standard_normal((m, n)).astype(np.float32)
    x[3, 7] = x[3, 9] = 9.0  # ties: argmax keeps the first index
    x[5, :] = np.nan
    outs = [np.zeros(n, np.float32), np.zeros(m, np.float32), np.zeros(n, np.int32), np.zeros(m, np.int32),
            np.zeros((n, m), np.float32), np.zeros((m, n), np.float32)]  # fmt: skip
    ref, got = run_both(kernel(params, body), [x, *outs], (1,))
    assert_same(ref, got, rtol=1e-5, atol=1e-5)
    assert got[5][7, 3] == np.cumsum(x, 0)[3, 7]


def test_big_dot_in_a_loop_with_swapped_carries() -> None:
    """acc += a @ b over a k loop; two carried big tiles swap places each iteration (copies, not aliases)."""
    m = n = k = 32
    T = f"tile<{m}x{n}xf32>"  # noqa: N806
    body = (
        load2d("a", "f16", m, k)
        + load2d("b", "f16", k, n)
        + f"""
    %z = constant {{value = 0.0}} : {T}
    %one = constant {{value = 1.0}} : {T}
    %lo = constant {{value = 0}} : i32
    %hi = constant {{value = 3}} : i32
    %st = constant {{value = 1}} : i32
    %r0, %r1, %r2 = for %lo, %hi, %st, %z, %z, %one : {T}, {T}, {T} {{
    ^(%i: i32, %acc: {T}, %p: {T}, %q: {T}):
      %d = dot %a_v, %b_v, %acc : {T}
      %q2 = add %q, %q : {T}
      yield %d, %q2, %p
    }}
    %sum = add %r0, %r1 : {T}
    %all = add %sum, %r2 : {T}
    """
        + store2d("o", "%all", m, n, "f32")
    )
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal((32, 32)).astype(np.float16) for _ in range(2))
    ref, got = run_both(kernel("%a: ptr<f16>, %b: ptr<f16>, %o: ptr<f32>", body), [a, b, np.zeros((m, n), np.float32)],
                        (1,))  # fmt: skip
    assert_same(ref, got, rtol=1e-4, atol=1e-3)


def test_big_if_and_while() -> None:
    n = 2048
    body = (
        f"""
    %r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %s = splat %x : tile<{n}xptr<f32>>
    %p = addptr %s, %r : tile<{n}xptr<f32>>
    %v = load %p : tile<{n}xf32>
    %zero = constant {{value = 0}} : i32
    %one = constant {{value = 1}} : i32
    %c = cmp %flag, %zero {{pred = "gt"}} : i1
    %w = if %c : {{T}} {{
      %e = exp %v : {{T}}
      yield %e
    }} {{
      yield %v
    }}
    %k, %u = while %zero, %w : i32, {{T}} {{
    ^(%i: i32, %t: {{T}}):
      %go = cmp %i, %flag {{pred = "lt"}} : i1
      condition %go, %i, %t
    }} {{
    ^(%j: i32, %t2: {{T}}):
      %j2 = add %j, %one : i32
      %t3 = add %t2, %t2 : {{T}}
      yield %j2, %t3
    }}
    """.replace("{T}", f"tile<{n}xf32>")
        + store1d("o", "%u", n, "f32")
    )
    x = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    for flag in (0, 3):
        ref, got = run_both(
            kernel("%x: ptr<f32>, %o: ptr<f32>, %flag: i32", body), [x, np.zeros_like(x), flag], (1,)
        )
        assert_same(ref, got, rtol=1e-6)


def test_big_tiles_across_a_call() -> None:
    """A helper taking and returning big tiles (not inlined: lowered straight from the IR)."""
    n = 1024
    text = f"""module {{
  func @twice(%t: tile<{n}xf32>, %k: f32) -> tile<{n}xf32>, f32, tile<{n}xf32> {{
    %d = add %t, %t : tile<{n}xf32>
    %s = splat %k : tile<{n}xf32>
    %m = mul %t, %s : tile<{n}xf32>
    return %d, %k, %m
  }}
  kernel @k(%x: ptr<f32>, %o: ptr<f32>) {{
    %r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>
    %s = splat %x : tile<{n}xptr<f32>>
    %p = addptr %s, %r : tile<{n}xptr<f32>>
    %v = load %p : tile<{n}xf32>
    %three = constant {{value = 3.0}} : f32
    %c0, %c1, %c2 = call %v, %three {{callee = "twice"}} : tile<{n}xf32>, f32, tile<{n}xf32>
    %sum = add %c0, %c2 : tile<{n}xf32>
    %os = splat %o : tile<{n}xptr<f32>>
    %op = addptr %os, %r : tile<{n}xptr<f32>>
    store %op, %sum
    return
  }}
}}
"""
    ll, meta = lower_module(parse_module(text), "k")
    mod = optimise(str(ll))
    art = Artifact(target="cpu", kernel_name="k", binary=emit_object(mod), tir=text, llir="", ptx="", metadata=meta,
                   compiler_version=compiler_version())  # fmt: skip
    x = np.arange(n, dtype=np.float32)
    out = np.zeros_like(x)
    load(art).launch([x.ctypes.data, out.ctypes.data], (1, 1, 1))
    np.testing.assert_array_equal(out, 5 * x)


def test_row_runs_are_vector_loads_not_gathers() -> None:
    """Rows of consecutive addresses (axis analysis) load and store per run, also through a for-carried
    pointer advanced by a uniform step."""
    m, n = 64, 32
    body = (
        load2d("x", "f32", m, n)
        + f"""
    %lo = constant {{value = 0}} : i32
    %hi = constant {{value = 2}} : i32
    %st = constant {{value = 1}} : i32
    %step = constant {{value = 0}} : tile<{m}x{n}xi32>
    %acc0 = constant {{value = 0.0}} : tile<{m}x{n}xf32>
    %r0, %r1 = for %lo, %hi, %st, %x_p, %acc0 : tile<{m}x{n}xptr<f32>>, tile<{m}x{n}xf32> {{
    ^(%i: i32, %p: tile<{m}x{n}xptr<f32>>, %acc: tile<{m}x{n}xf32>):
      %v = load %p : tile<{m}x{n}xf32>
      %a2 = add %acc, %v : tile<{m}x{n}xf32>
      %p2 = addptr %p, %step : tile<{m}x{n}xptr<f32>>
      yield %p2, %a2
    }}
    """
        + store2d("o", "%r1", m, n, "f32")
    )
    text = kernel("%x: ptr<f32>, %o: ptr<f32>", body)
    ll = compile_kernel(text, None, is_ir=True, emit="llir").llir
    assert "masked.load" in ll and "masked.store" in ll
    assert "masked.gather" not in ll and "masked.scatter" not in ll
    x = np.random.default_rng(8).standard_normal((m, n)).astype(np.float32)
    ref, got = run_both(text, [x, np.zeros_like(x)], (1,))
    assert_same(ref, got)


def test_tiles_beyond_the_stack_budget_are_a_compile_error() -> None:
    n = 2048
    text = kernel("%x: ptr<f32>, %o: ptr<f32>", load2d("x", "f32", n, n) + store2d("o", "%x_v", n, n, "f32"))
    with pytest.raises(CompileError, match="bytes of tile buffers"):
        compile_kernel(text, None, is_ir=True, emit="llir")
