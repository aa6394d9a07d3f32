"""Every op of compiler.ir.OPS appears in at least one IR snippet here that parses, verifies, round-trips
and runs on the reference interpreter with a checked result (the coverage is asserted, not hoped for)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import OPS, parse_module, print_module, verify_module
from tilec.compiler.ir.ops import MATH_UNARY

Snippet = tuple[str, Callable[[], list], Callable[[list], bool]]


def _kernel(params: str, body: str, helpers: str = "") -> str:
    lines = "\n".join("    " + ln.strip() for ln in body.strip().splitlines())
    return f"module {{\n{helpers}  kernel @k({params}) {{\n{lines}\n    return\n  }}\n}}\n"


def _unary(op: str, elem: str = "f32") -> str:
    return _kernel(
        f"%x: ptr<{elem}>, %o: ptr<{elem}>",
        f"""
        %r = make_range {{end = 8, start = 0}} : tile<8xi32>
        %p = splat %x : tile<8xptr<{elem}>>
        %a = addptr %p, %r : tile<8xptr<{elem}>>
        %v = load %a : tile<8x{elem}>
        %y = {op} %v : tile<8x{elem}>
        %q = splat %o : tile<8xptr<{elem}>>
        %b = addptr %q, %r : tile<8xptr<{elem}>>
        store %b, %y
        """,
    )


def _binary(op: str, elem: str, attrs: str = "") -> str:
    return _kernel(
        f"%x: ptr<{elem}>, %y: ptr<{elem}>, %o: ptr<{elem}>",
        f"""
        %r = make_range {{end = 8, start = 0}} : tile<8xi32>
        %p = splat %x : tile<8xptr<{elem}>>
        %a = addptr %p, %r : tile<8xptr<{elem}>>
        %v = load %a : tile<8x{elem}>
        %p2 = splat %y : tile<8xptr<{elem}>>
        %a2 = addptr %p2, %r : tile<8xptr<{elem}>>
        %w = load %a2 : tile<8x{elem}>
        %z = {op} %v, %w{attrs} : tile<8x{elem}>
        %q = splat %o : tile<8xptr<{elem}>>
        %b = addptr %q, %r : tile<8xptr<{elem}>>
        store %b, %z
        """,
    )


X = np.linspace(0.25, 2.0, 8).astype(np.float32)
Y = np.linspace(-1.5, 3.0, 8).astype(np.float32)
IA = np.array([7, -7, 100, -3, 0, 12, -128, 5], np.int32)
IB = np.array([2, 3, -7, 5, 1, 2, 3, -1], np.int32)
MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil, "erf": np.vectorize(math.erf),
    "neg": np.negative, "abs": np.abs,
}  # fmt: skip
FLOAT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
    "maximum": np.fmax, "minimum": np.fmin, "pow": np.power, "atan2": np.arctan2,
}  # fmt: skip
INT_BINARY = {
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": lambda a, b: np.where((b >= 0) & (b < 32), a << (b & 31), 0),
    "shr": lambda a, b: np.where((b >= 0) & (b < 32), a >> (b & 31), np.where(a < 0, -1, 0)),
}  # fmt: skip

SNIPPETS: dict[str, Snippet] = {}
for _name in (*MATH_UNARY, "neg", "abs"):
    SNIPPETS[_name] = (
        _unary(_name),
        lambda: [X.copy(), np.zeros(8, np.float32)],
        lambda a, f=MATH[_name]: np.allclose(a[1], f(X.astype(np.float64)), rtol=1e-6),
    )
for _name, _fn in FLOAT_BINARY.items():
    SNIPPETS[_name] = (
        _binary(_name, "f32"),
        lambda: [X.copy(), Y.copy(), np.zeros(8, np.float32)],
        lambda a, f=_fn: np.allclose(
            a[2], f(X.astype(np.float64), Y.astype(np.float64)), rtol=1e-6, equal_nan=True
        ),
    )
for _name, _fn in INT_BINARY.items():
    SNIPPETS[_name] = (
        _binary(_name, "i32"),
        lambda: [IA.copy(), IB.copy(), np.zeros(8, np.int32)],
        lambda a, f=_fn: (
            a[2].tolist() == f(IA.astype(np.int64), IB.astype(np.int64)).astype(np.int32).tolist()
        ),
    )

SNIPPETS["fma-cmp-select-cast-bitcast"] = (
    _kernel(
        "%x: ptr<f32>, %o: ptr<i32>",
        """
        %r = make_range {end = 8, start = 0} : tile<8xi32>
        %p = splat %x : tile<8xptr<f32>>
        %a = addptr %p, %r : tile<8xptr<f32>>
        %v = load %a : tile<8xf32>
        %two = constant {value = 2.0} : tile<8xf32>
        %f = fma %v, %two, %v : tile<8xf32>
        %one = constant {value = 1.0} : tile<8xf32>
        %big = cmp %f, %one {pred = "gt"} : tile<8xi1>
        %s = select %big, %f, %one : tile<8xf32>
        %c = cast %s : tile<8xi32>
        %bits = bitcast %one : tile<8xi32>
        %sum = add %c, %bits : tile<8xi32>
        %q = splat %o : tile<8xptr<i32>>
        %b = addptr %q, %r : tile<8xptr<i32>>
        store %b, %sum
        """,
    ),
    lambda: [X.copy(), np.zeros(8, np.int32)],
    lambda a: a[1].tolist() == (np.maximum(3 * X, 1).astype(np.int32) + 0x3F800000).tolist(),
)

SNIPPETS["desc-box"] = (
    _kernel(
        "%x: ptr<f32>, %o: ptr<f32>, %m0: i32, %n0: i32",
        """
        %r = make_range {end = 4, start = 0} : tile<4xi32>
        %rr = expand_dims %r {axis = 1} : tile<4x1xi32>
        %rc = expand_dims %r {axis = 0} : tile<1x4xi32>
        %four = constant {value = 4} : tile<4x1xi32>
        %rs = mul %rr, %four : tile<4x1xi32>
        %rb = broadcast %rs : tile<4x4xi32>
        %cb = broadcast %rc : tile<4x4xi32>
        %off = add %rb, %cb : tile<4x4xi32>
        %p = splat %x : tile<4x4xptr<f32>>
        %a = addptr %p, %off : tile<4x4xptr<f32>>
        %box = desc_box %a, %m0, %n0 {desc = "x"} : tile<4x4xptr<f32>>
        %v = load %box : tile<4x4xf32>
        %q = splat %o : tile<4x4xptr<f32>>
        %b = addptr %q, %off : tile<4x4xptr<f32>>
        store %b, %v
        """,
    ),
    lambda: [np.arange(16, dtype=np.float32), np.zeros(16, np.float32), np.int32(0), np.int32(0)],
    lambda a: a[1].tolist() == a[0].tolist(),
)

SNIPPETS["desc-box-block-pointer"] = (  # a block pointer's box: base, shape and strides ride along
    _kernel(
        "%x: ptr<f32>, %o: ptr<f32>, %m0: i32, %n0: i32, %rows: i64",
        """
        %r = make_range {end = 4, start = 0} : tile<4xi32>
        %rr = expand_dims %r {axis = 1} : tile<4x1xi32>
        %rc = expand_dims %r {axis = 0} : tile<1x4xi32>
        %four = constant {value = 4} : tile<4x1xi32>
        %rs = mul %rr, %four : tile<4x1xi32>
        %rb = broadcast %rs : tile<4x4xi32>
        %cb = broadcast %rc : tile<4x4xi32>
        %off = add %rb, %cb : tile<4x4xi32>
        %p = splat %x : tile<4x4xptr<f32>>
        %a = addptr %p, %off : tile<4x4xptr<f32>>
        %cols = constant {value = 4} : i64
        %one = constant {value = 1} : i64
        %box = desc_box %a, %m0, %n0, %x, %rows, %cols, %cols, %one : tile<4x4xptr<f32>>
        %v = load %box : tile<4x4xf32>
        %q = splat %o : tile<4x4xptr<f32>>
        %b = addptr %q, %off : tile<4x4xptr<f32>>
        store %b, %v
        """,
    ),
    lambda: [
        np.arange(16, dtype=np.float32) - 3,
        np.zeros(16, np.float32),
        np.int32(0),
        np.int32(0),
        np.int64(4),
    ],
    lambda a: a[1].tolist() == a[0].tolist(),
)

SNIPPETS["shapes-dot-reduce-scan-hints"] = (
    _kernel(
        "%x: ptr<f32>, %o: ptr<f32>",
        """
        %r = make_range {end = 4, start = 0} : tile<4xi32>
        %rm = multiple_of %r {values = [4]} : tile<4xi32>
        %rc = max_contiguous %rm {values = [4]} : tile<4xi32>
        %row = expand_dims %rc {axis = 1} : tile<4x1xi32>
        %col = expand_dims %rc {axis = 0} : tile<1x4xi32>
        %four = constant {value = 4} : tile<4x1xi32>
        %rs = mul %row, %four : tile<4x1xi32>
        %rb = broadcast %rs : tile<4x4xi32>
        %cb = broadcast %col : tile<4x4xi32>
        %off = add %rb, %cb : tile<4x4xi32>
        %p = splat %x : tile<4x4xptr<f32>>
        %a = addptr %p, %off : tile<4x4xptr<f32>>
        %m = load %a : tile<4x4xf32>
        %t = trans %m {order = [1, 0]} : tile<4x4xf32>
        %z = constant {value = 0.0} : tile<4x4xf32>
        %d = dot %m, %t, %z : tile<4x4xf32>
        %s = scan %d {axis = 1, kind = "sum"} : tile<4x4xf32>
        %flat = reshape %s : tile<16xf32>
        %tot = reduce %flat {axis = 0, kind = "max"} : f32
        barrier
        store %o, %tot
        """,
    ),
    lambda: [np.arange(16, dtype=np.float32), np.zeros(1, np.float32)],
    lambda a: a[1][0] == np.cumsum((lambda m: m @ m.T)(np.arange(16.0).reshape(4, 4)), axis=1).max(),
)

SNIPPETS["atomics-programs-assert"] = (
    _kernel(
        "%c: ptr<i32>, %o: ptr<i32>",
        """
        %pid = program_id {axis = 0} : i32
        %np = num_programs {axis = 0} : i32
        %ok = cmp %pid, %np {pred = "lt"} : i1
        assert %ok {message = "pid in range"}
        print %pid, %ok {hex = true, prefix = "pid"}
        %prev = atomic_rmw %c, %pid {kind = "add"} : i32
        %q = addptr %o, %pid : ptr<i32>
        %swapped = atomic_cas %q, %np, %prev : i32
        """,
    ),
    lambda: [np.zeros(1, np.int32), np.full(4, 4, np.int32)],
    lambda a: a[0][0] == 6 and a[1].tolist() == [0, 0, 1, 3],
)

SNIPPETS["control-flow-and-calls"] = (
    _kernel(
        "%x: ptr<i32>, %o: ptr<i32>",
        """
        %n = load %x : i32
        %zero = constant {value = 0} : i32
        %one = constant {value = 1} : i32
        %s = for %zero, %n, %one, %zero : i32 {
        ^(%i: i32, %acc: i32):
          %t = call %acc, %i {callee = "plus"} : i32
          yield %t
        }
        %w = while %s : i32 {
        ^(%a: i32):
          %more = cmp %a, %zero {pred = "gt"} : i1
          condition %more, %a
        } {
        ^(%b: i32):
          %two = constant {value = 2} : i32
          %h = div %b, %two : i32
          yield %h
        }
        %neg = cmp %s, %zero {pred = "lt"} : i1
        %r = if %neg : i32 {
          yield %w
        } {
          yield %s
        }
        store %o, %r
        """,
        "  func @plus(%a: i32, %b: i32) -> i32 {\n    %r = add %a, %b : i32\n    return %r\n  }\n\n",
    ),
    lambda: [np.array([5], np.int32), np.zeros(1, np.int32)],
    lambda a: a[1][0] == 10,
)

SNIPPETS["sort-gather"] = (
    _kernel(
        "%x: ptr<f32>, %o: ptr<f32>, %og: ptr<f32>",
        """
        %r = make_range {end = 8, start = 0} : tile<8xi32>
        %p = splat %x : tile<8xptr<f32>>
        %a = addptr %p, %r : tile<8xptr<f32>>
        %v = load %a : tile<8xf32>
        %s = sort %v {axis = 0, descending = true} : tile<8xf32>
        %q = splat %o : tile<8xptr<f32>>
        %b = addptr %q, %r : tile<8xptr<f32>>
        store %b, %s
        %seven = constant {value = 7} : tile<8xi32>
        %rev = sub %seven, %r : tile<8xi32>
        %g = gather %v, %rev {axis = 0} : tile<8xf32>
        %qg = splat %og : tile<8xptr<f32>>
        %bg = addptr %qg, %r : tile<8xptr<f32>>
        store %bg, %g
        """,
    ),
    lambda: [np.array([3, 1, 4, 1, 5, 9, 2, 6], np.float32), np.zeros(8, np.float32), np.zeros(8, np.float32)],
    lambda a: a[1].tolist() == sorted(a[0].tolist(), reverse=True) and a[2].tolist() == a[0][::-1].tolist(),
)

SNIPPETS["reduce_with-scan_with"] = (
    _kernel(
        "%x: ptr<f32>, %o: ptr<f32>, %oi: ptr<i32>",
        """
        %r = make_range {end = 8, start = 0} : tile<8xi32>
        %p = splat %x : tile<8xptr<f32>>
        %a = addptr %p, %r : tile<8xptr<f32>>
        %v = load %a : tile<8xf32>
        %best, %at = reduce_with %v, %r {axis = 0} : f32, i32 {
        ^(%v1: f32, %i1: i32, %v2: f32, %i2: i32):
          %gt = cmp %v1, %v2 {pred = "gt"} : i1
          %b = select %gt, %v1, %v2 : f32
          %j = select %gt, %i1, %i2 : i32
          yield %b, %j
        }
        %run = scan_with %v {axis = 0, reverse = true} : tile<8xf32> {
        ^(%s: f32, %t: f32):
          %u = call %s, %t {callee = "plus"} : f32
          yield %u
        }
        %q = splat %o : tile<8xptr<f32>>
        %b = addptr %q, %r : tile<8xptr<f32>>
        store %b, %run
        store %oi, %at
        """,
        "  func @plus(%a: f32, %b: f32) -> f32 {\n    %r = add %a, %b : f32\n    return %r\n  }\n\n",
    ),
    lambda: [np.array([3, 1, 4, 1, 5, 9, 2, 6], np.float32), np.zeros(8, np.float32), np.zeros(1, np.int32)],
    lambda a: a[2][0] == 5 and a[1].tolist() == np.cumsum(a[0][::-1])[::-1].tolist(),
)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_round_trips_and_runs(name):
    text, make_args, check = SNIPPETS[name]
    m = parse_module(text)
    verify_module(m)
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed
    args = make_args()
    run_kernel(m, "k", args, (4,) if name.startswith("atomics") else (1,))
    assert check(args)


def test_every_op_is_exercised():
    seen = {op.name for text, _, _ in SNIPPETS.values() for op in parse_module(text).walk()}
    assert seen == set(OPS), f"missing: {sorted(set(OPS) - seen)}"
