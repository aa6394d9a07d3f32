"""Conformance cases for control flow the frontend rewrites (issue 21): early exits (a `return` under runtime
ifs that sit in compile-time ifs, in `tl.static_range` and constant-tuple bodies, in runtime for/while
loops, in helpers; code after such a return; several returns on different paths) and conditional
expressions under a runtime condition. Each case failed before its fix (wrong results with no error, or
a compile error for a kernel Triton's interpreter runs).

Every kernel here was also run under Triton's interpreter (TRITON_INTERPRET=1) with the same inputs: the
NumPy references say what it computes (tests/fuzz checks the same class against the interpreter itself).
"""

from __future__ import annotations

import numpy as np

from .case import Case, src

ROWS, COLS = 12, 8

# the kernel of the issue: a runtime return inside a compile-time if; the statements after the constexpr if
# were lost for every program
RET_IN_CONSTEXPR_IF = src("""
@triton.jit
def ret_in_constexpr_if(x_ptr, label_ptr, out_ptr, n_cols, IGNORE: tl.constexpr, BLOCK: tl.constexpr,
                        HAS_LABEL: tl.constexpr):
    pid = tl.program_id(0)
    if HAS_LABEL:
        label = tl.load(label_ptr + pid)
        if label == IGNORE:
            return
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * n_cols + offs, mask=offs < n_cols)
    tl.store(out_ptr + pid * n_cols + offs, x * 2.0, mask=offs < n_cols)
""")

# two levels of compile-time ifs, an elif whose branch is compile-time, several returns on different paths
RET_NESTED_CONSTEXPR = src("""
@triton.jit
def ret_nested_constexpr(x_ptr, out_ptr, lo, hi, A: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    if A:
        if MODE == 2:
            if v < lo:
                tl.store(out_ptr + pid, -1)
                return
    if v > hi:
        return
    elif MODE == 2:
        if v == 0:
            tl.store(out_ptr + pid, 7)
            return
    tl.store(out_ptr + pid, v * 3)
""")


def _nested_ref(a: list) -> dict:
    x, out, lo, hi = a[0], a[1].copy(), a[2], a[3]
    for p, v in enumerate(x):
        if v < lo:
            out[p] = -1
        elif v > hi:
            pass
        elif v == 0:
            out[p] = 7
        else:
            out[p] = v * 3
    return {1: out}


# a return in a static_range body: the later iterations and the statements after the loop were lost
RET_STATIC_RANGE = src("""
@triton.jit
def ret_static_range(x_ptr, out_ptr, REPS: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.load(x_ptr + pid * REPS) * 0
    for i in tl.static_range(REPS):
        v = tl.load(x_ptr + pid * REPS + i)
        if v < 0:
            tl.store(out_ptr + pid, acc - 1000)
            return
        acc += v
    tl.store(out_ptr + pid, acc)
""")

# the same over a constant tuple, with the return one if deeper under a compile-time if
RET_TUPLE_UNROLL = src("""
@triton.jit
def ret_tuple_unroll(x_ptr, out_ptr, CHECK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.load(x_ptr + pid * 4) * 0
    for s in (1, 2, 3, 4):
        v = tl.load(x_ptr + pid * 4 + s - 1)
        if CHECK:
            if v < 0:
                if s > 1:
                    tl.store(out_ptr + pid, acc - 1000)
                    return
        acc += v * s
    tl.store(out_ptr + pid, acc)
""")


def _prefix_ref(a: list, reps: int, scaled: bool, skip_first: bool = False) -> dict:
    x, out = a[0].reshape(-1, reps), a[1].copy()
    for p, row in enumerate(x):
        acc = 0
        for i, v in enumerate(row):
            if v < 0 and not (skip_first and i == 0):
                out[p] = acc - 1000
                break
            acc += v * (i + 1 if scaled else 1)
        else:
            out[p] = acc
    return {1: out}


# a helper's return is the helper's: an early return under a compile-time if in a helper called in a loop
RET_HELPER = src("""
@triton.jit
def _clamp_twice(v, FLAG: tl.constexpr):
    if FLAG:
        if v < 0:
            return v * 0
    return v * 2


@triton.jit
def ret_helper(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    acc = tl.load(x_ptr + pid * n) * 0
    for i in range(n):
        acc += _clamp_twice(tl.load(x_ptr + pid * n + i), True)
    if acc > 50:
        return
    tl.store(out_ptr + pid, acc)
""")


def _helper_ref(a: list) -> dict:
    x, out = a[0].reshape(ROWS, -1), a[1].copy()
    for p, row in enumerate(x):
        acc = int(np.where(row < 0, 0, row * 2).sum())
        if acc <= 50:
            out[p] = acc
    return {1: out}


# a return inside a runtime for loop (Triton's compiler refuses it, its interpreter runs it as Python)
RET_IN_FOR = src("""
@triton.jit
def ret_in_for(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    acc = 0
    for i in range(n):
        v = tl.load(x_ptr + pid * n + i)
        if v < 0:
            tl.store(out_ptr + pid, acc - 1000)
            return
        acc += v
    tl.store(out_ptr + pid, acc)
""")

# a return inside a while loop whose condition has a side effect: after the return it is not evaluated again
RET_IN_WHILE = src("""
@triton.jit
def ret_in_while(x_ptr, count_ptr, out_ptr, n):
    pid = tl.program_id(0)
    i = 0
    while tl.atomic_add(count_ptr + pid, 1) < n:
        v = tl.load(x_ptr + pid * n + i)
        if v < 0:
            tl.store(out_ptr + pid, -i)
            return
        i += 1
    tl.store(out_ptr + pid, i * 10)
""")


def _while_ref(a: list) -> dict:
    x, n = a[0].reshape(ROWS, -1), a[3]
    count, out = a[1].copy(), a[2].copy()
    for p, row in enumerate(x):
        neg = np.flatnonzero(row < 0)
        if neg.size:
            out[p], count[p] = -neg[0], neg[0] + 1
        else:
            out[p], count[p] = n * 10, n + 1
    return {1: count, 2: out}


# nested runtime loops with a return in the inner one, a runtime step, and a static_range around a runtime
# loop that returns under a compile-time if
RET_NESTED_LOOPS = src("""
@triton.jit
def ret_nested_loops(x_ptr, out_ptr, rows, cols, step, T: tl.constexpr):
    pid = tl.program_id(0)
    base = x_ptr + pid * rows * cols
    for r in range(0, rows, step):
        for c in range(cols - 1, -1, -1):
            if tl.load(base + r * cols + c) == T:
                tl.store(out_ptr + pid, r * 100 + c)
                return
    for k in tl.static_range(2):
        for j in range(cols):
            if k == 1:
                if tl.load(base + j) == T - 1:
                    tl.store(out_ptr + pid, -j - 1)
                    return
    tl.store(out_ptr + pid, -1000)
""")


def _nested_loops_ref(a: list) -> dict:
    rows, cols, step = a[2], a[3], a[4]
    x, out = a[0].reshape(ROWS, rows, cols), a[1].copy()
    for p in range(ROWS):
        out[p] = _first_hit(x[p], rows, cols, step)
    return {1: out}


def _first_hit(m: np.ndarray, rows: int, cols: int, step: int) -> int:
    for r in range(0, rows, step):
        for c in range(cols - 1, -1, -1):
            if m[r, c] == 3:
                return r * 100 + c
    for j in range(cols):
        if m[0, j] == 2:
            return -j - 1
    return -1000


# a conditional expression under a runtime condition runs only the arm taken: the atomic happens in one
# program, and the load past the end of x is never made (both arms used to run, then tl.where picked)
IFEXP_ARM_TAKEN = src("""
@triton.jit
def ifexp_arm_taken(count_ptr, x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    r = tl.atomic_add(count_ptr, 1) if pid == 0 else -1
    v = tl.load(x_ptr + pid) if pid < n else 0.5
    tl.store(out_ptr + pid, v + r)
""")


def _ifexp_ref(a: list) -> dict:
    n, out = a[3], a[2].copy()
    out[:n] = a[1][:n] - 1
    out[0] = a[1][0]
    out[n:] = 0.5 - 1
    return {0: np.array([1], np.int32), 2: out}


def _rows(r: np.random.Generator, lo: int, hi: int, n: int, dtype=np.int32) -> np.ndarray:
    return r.integers(lo, hi, ROWS * n).astype(dtype)


CASES = [
    Case(
        "ifexp_runtime_arm_taken",
        IFEXP_ARM_TAKEN,
        "ifexp_arm_taken",
        lambda r: [
            np.zeros(1, np.int32),
            r.standard_normal(5).astype(np.float32),
            np.zeros(8, np.float32),
            5,
        ],
        (8,),
        _ifexp_ref,
    ),
    Case(
        "ret_in_constexpr_if",
        RET_IN_CONSTEXPR_IF,
        "ret_in_constexpr_if",
        lambda r: [
            r.standard_normal((ROWS, COLS)).astype(np.float32),
            r.choice([-1, 0, 3], ROWS).astype(np.int32),
            np.zeros((ROWS, COLS), np.float32),
            COLS,
        ],
        (ROWS,),
        lambda a: {2: np.where((a[1] == -1)[:, None], 0.0, a[0] * 2).astype(np.float32)},
        {"IGNORE": -1, "BLOCK": COLS, "HAS_LABEL": True},
    ),
    Case(
        "ret_nested_constexpr",
        RET_NESTED_CONSTEXPR,
        "ret_nested_constexpr",
        lambda r: [r.integers(-20, 20, 64).astype(np.int32), np.full(64, 99, np.int32), -10, 10],
        (64,),
        _nested_ref,
        {"A": True, "MODE": 2},
    ),
    Case(
        "ret_static_range",
        RET_STATIC_RANGE,
        "ret_static_range",
        lambda r: [_rows(r, -3, 20, 4), np.zeros(ROWS, np.int32)],
        (ROWS,),
        lambda a: _prefix_ref(a, 4, False),
        {"REPS": 4},
    ),
    Case(
        "ret_tuple_unroll",
        RET_TUPLE_UNROLL,
        "ret_tuple_unroll",
        lambda r: [_rows(r, -3, 20, 4), np.zeros(ROWS, np.int32)],
        (ROWS,),
        lambda a: _prefix_ref(a, 4, True, skip_first=True),
        {"CHECK": True},
    ),
    Case(
        "ret_helper_in_loop",
        RET_HELPER,
        "ret_helper",
        lambda r: [_rows(r, -5, 8, 6), np.full(ROWS, -7, np.int32), 6],
        (ROWS,),
        _helper_ref,
    ),
    Case(
        "ret_in_for",
        RET_IN_FOR,
        "ret_in_for",
        lambda r: [_rows(r, -2, 30, 6), np.zeros(ROWS, np.int32), 6],
        (ROWS,),
        lambda a: _prefix_ref([a[0], a[1]], 6, False),
    ),
    Case(
        "ret_in_while_side_effect",
        RET_IN_WHILE,
        "ret_in_while",
        lambda r: [_rows(r, -2, 30, 6), np.zeros(ROWS, np.int32), np.zeros(ROWS, np.int32), 6],
        (ROWS,),
        _while_ref,
    ),
    Case(
        "ret_nested_loops",
        RET_NESTED_LOOPS,
        "ret_nested_loops",
        lambda r: [_rows(r, 0, 12, 15), np.zeros(ROWS, np.int32), 5, 3, 2],
        (ROWS,),
        _nested_loops_ref,
        {"T": 3},
    ),
]
