"""Control flow on the interpreter: for with runtime bounds, while, nested if, calls, assert, grids."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tilec.compiler.interp import InterpAssertionError, InterpError, run_kernel

from .kit import kernel, parse_checked, run

SUM_RANGE = kernel(
    "%b: ptr<i32>, %o: ptr<i32>",
    """
    %lb = load %b : i32
    %one = constant {value = 1} : i32
    %p1 = addptr %b, %one : ptr<i32>
    %ub = load %p1 : i32
    %two = constant {value = 2} : i32
    %p2 = addptr %b, %two : ptr<i32>
    %st = load %p2 : i32
    %zero = constant {value = 0} : i32
    %n, %s = for %lb, %ub, %st, %zero, %zero : i32, i32 {
    ^(%i: i32, %cnt: i32, %acc: i32):
      %c2 = add %cnt, %one : i32
      %a2 = add %acc, %i : i32
      yield %c2, %a2
    }
    store %o, %n
    %q = addptr %o, %one : ptr<i32>
    store %q, %s
    """,
)


@pytest.mark.parametrize(
    ("lb", "ub", "step"), [(0, 10, 1), (3, 17, 4), (5, 5, 1), (9, 2, 1), (10, 0, -3), (-4, 4, 3)]
)
def test_for_with_bounds_read_from_memory(lb, ub, step):
    o = np.zeros(2, np.int32)
    run(SUM_RANGE, [np.array([lb, ub, step], np.int32), o])
    ivs = list(range(lb, ub, step))
    assert o.tolist() == [len(ivs), sum(ivs)]


def test_for_with_step_zero_is_an_error():
    with pytest.raises(InterpError, match="step 0"):
        run(SUM_RANGE, [np.array([0, 5, 0], np.int32), np.zeros(2, np.int32)])


def test_while_loop_collatz_steps():
    text = kernel(
        "%x: ptr<i64>, %o: ptr<i64>",
        """
        %v = load %x : i64
        %zero = constant {value = 0} : i64
        %one = constant {value = 1} : i64
        %two = constant {value = 2} : i64
        %three = constant {value = 3} : i64
        %r, %steps = while %v, %zero : i64, i64 {
        ^(%a: i64, %n: i64):
          %more = cmp %a, %one {pred = "ne"} : i1
          condition %more, %a, %n
        } {
        ^(%b: i64, %k: i64):
          %m = rem %b, %two : i64
          %odd = cmp %m, %zero {pred = "ne"} : i1
          %nxt = if %odd : i64 {
            %t = mul %b, %three : i64
            %t1 = add %t, %one : i64
            yield %t1
          } {
            %h = div %b, %two : i64
            yield %h
          }
          %k1 = add %k, %one : i64
          yield %nxt, %k1
        }
        store %o, %steps
        """,
    )
    o = np.zeros(1, np.int64)
    run(text, [np.array([27], np.int64), o])
    assert o[0] == 111


def test_nested_if_with_results_and_tiles():
    text = kernel(
        "%x: ptr<i32>, %o: ptr<i32>",
        """
        %v = load %x : i32
        %zero = constant {value = 0} : i32
        %ten = constant {value = 10} : i32
        %pos = cmp %v, %zero {pred = "gt"} : i1
        %r = if %pos : tile<4xi32> {
          %big = cmp %v, %ten {pred = "gt"} : i1
          %inner = if %big : tile<4xi32> {
            %c = constant {value = 2} : tile<4xi32>
            yield %c
          } {
            %c1 = constant {value = 1} : tile<4xi32>
            yield %c1
          }
          yield %inner
        } {
          %c0 = constant {value = 0} : tile<4xi32>
          yield %c0
        }
        %i = make_range {end = 4, start = 0} : tile<4xi32>
        %s = add %r, %i : tile<4xi32>
        %p = splat %o : tile<4xptr<i32>>
        %a = addptr %p, %i : tile<4xptr<i32>>
        store %a, %s
        """,
    )
    for v, base in ((-3, 0), (5, 1), (50, 2)):
        o = np.zeros(4, np.int32)
        run(text, [np.array([v], np.int32), o])
        assert o.tolist() == [base, base + 1, base + 2, base + 3]


def test_if_without_results_guards_a_store():
    text = kernel(
        "%o: ptr<i32>",
        """
        %pid = program_id {axis = 0} : i32
        %one = constant {value = 1} : i32
        %odd0 = and %pid, %one : i32
        %zero = constant {value = 0} : i32
        %odd = cmp %odd0, %zero {pred = "ne"} : i1
        if %odd {
          %q = addptr %o, %pid : ptr<i32>
          store %q, %pid
          yield
        } {
          yield
        }
        """,
    )
    o = np.full(6, -1, np.int32)
    run(text, [o], grid=(6,))
    assert o.tolist() == [-1, 1, -1, 3, -1, 5]


HELPERS = """module {
  func @axpy(%a: f32, %x: tile<8xf32>, %y: tile<8xf32>) -> tile<8xf32>, f32 {
    %s = splat %a : tile<8xf32>
    %m = mul %s, %x : tile<8xf32>
    %r = add %m, %y : tile<8xf32>
    %t = reduce %r {axis = 0, kind = "sum"} : f32
    return %r, %t
  }

  func @twice(%v: f32) -> f32 {
    %r = add %v, %v : f32
    return %r
  }

  kernel @k(%x: ptr<f32>, %o: ptr<f32>) {
    %i = make_range {end = 8, start = 0} : tile<8xi32>
    %p = splat %x : tile<8xptr<f32>>
    %a = addptr %p, %i : tile<8xptr<f32>>
    %v = load %a : tile<8xf32>
    %c = constant {value = 1.5} : f32
    %c2 = call %c {callee = "twice"} : f32
    %r, %t = call %c2, %v, %v {callee = "axpy"} : tile<8xf32>, f32
    %q = splat %o : tile<8xptr<f32>>
    %b = addptr %q, %i : tile<8xptr<f32>>
    store %b, %r
    %eight = constant {value = 8} : i32
    %last = addptr %o, %eight : ptr<f32>
    store %last, %t
    return
  }
}
"""


def test_calls_of_helper_functions():
    x = np.arange(8, dtype=np.float32)
    o = np.zeros(9, np.float32)
    run(HELPERS, [x, o])
    assert o[:8].tolist() == (4 * x).tolist() and o[8] == 4 * x.sum()


def test_program_id_and_num_programs_on_a_2d_grid():
    text = kernel(
        "%o: ptr<i32>",
        """
        %x = program_id {axis = 0} : i32
        %y = program_id {axis = 1} : i32
        %nx = num_programs {axis = 0} : i32
        %ny = num_programs {axis = 1} : i32
        %nz = num_programs {axis = 2} : i32
        %row = mul %y, %nx : i32
        %idx = add %row, %x : i32
        %hundred = constant {value = 100} : i32
        %a = mul %y, %hundred : i32
        %v0 = add %a, %x : i32
        %prod = mul %nx, %ny : i32
        %pz = mul %prod, %nz : i32
        %b = mul %pz, %hundred : i32
        %hh = mul %b, %hundred : i32
        %v = add %v0, %hh : i32
        %q = addptr %o, %idx : ptr<i32>
        store %q, %v
        """,
    )
    o = np.zeros(6, np.int32)
    run(text, [o], grid=(3, 2))
    assert o.tolist() == [60000 + v for v in (0, 1, 2, 100, 101, 102)]


def test_assert_raises_a_located_error():
    text = kernel(
        "%x: ptr<i32>",
        """
        %i = make_range {end = 4, start = 0} : tile<4xi32>
        %p = splat %x : tile<4xptr<i32>>
        %a = addptr %p, %i : tile<4xptr<i32>>
        %v = load %a : tile<4xi32>
        %z = constant {value = 0} : tile<4xi32>
        %ok = cmp %v, %z {pred = "ge"} : tile<4xi1>
        assert %ok, %v {message = "x must be non-negative"}
        """,
    )
    run(text, [np.array([0, 1, 2, 3], np.int32)])
    with pytest.raises(InterpAssertionError, match="x must be non-negative .*at index \\[2\\]") as info:
        run(text, [np.array([0, 1, -2, 3], np.int32)])
    assert (info.value.line, info.value.col) == (9, 5)


def test_endless_while_hits_the_op_budget():
    text = kernel(
        "%o: ptr<i32>",
        """
        %t = constant {value = 1} : i1
        %z = constant {value = 0} : i32
        %r = while %z : i32 {
        ^(%a: i32):
          condition %t, %a
        } {
        ^(%b: i32):
          yield %b
        }
        store %o, %r
        """,
    )
    with pytest.raises(InterpError, match="more than 1000 ops"):
        run_kernel(parse_checked(text), None, [np.zeros(1, np.int32)], (1,), max_ops=1000)


def test_constants_hints_and_barrier():
    text = kernel(
        "%o: ptr<i8>, %f: ptr<bf16>",
        """
        %c = constant {value = 44} : i8
        %h = multiple_of %c {values = [4]} : i8
        %h2 = max_contiguous %h {values = [1]} : i8
        barrier
        store %o, %h2
        %b = constant {value = 1.00390625} : bf16
        store %f, %b
        """,
    )
    o, f = np.zeros(1, np.int8), np.zeros(1, np.uint16)
    run(text, [o, f])
    assert o[0] == 44 and f[0] == 0x3F80  # 1 + 2^-8 ties to even: 1.0


def test_grid_of_100_programs_with_1024_element_tiles_is_fast():
    from .test_memory import COPY

    text = COPY.replace("64", "1024")
    n = 100 * 1024 - 7
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    o = np.zeros(n, np.float32)
    m = parse_checked(text)
    # this process's CPU time, not the wall clock: other processes on a loaded machine (xdist workers, a
    # build beside CI) stretch the wall clock, not this; a per-element interpreter takes tens of seconds
    start = time.process_time()
    run_kernel(m, "k", [x, o, n], (100,))
    spent = time.process_time() - start
    np.testing.assert_array_equal(o, x)
    assert spent < 3.0, spent
