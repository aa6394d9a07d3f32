"""Conformance cases: loops with runtime bounds read from memory, while loops, nested ifs, static_range,
atomics under contention (add, max, min, xchg, cas, and/or/xor, masked histograms) and device_assert."""

from __future__ import annotations

import numpy as np

from .case import Case, grid1, src

RUNTIME_LOOP = src("""
@triton.jit
def runtime_loop(x_ptr, bounds_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lo = tl.load(bounds_ptr + 2 * pid)
    hi = tl.load(bounds_ptr + 2 * pid + 1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(lo, hi):
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)
""")

STEP_LOOP = src("""
@triton.jit
def step_loop(out_ptr, n, step):
    pid = tl.program_id(0)
    total = 0
    for i in range(pid, n, step):
        total += i
    tl.store(out_ptr + pid, total)
""")

WHILE = src("""
@triton.jit
def collatz(x_ptr, out_ptr):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    steps = 0
    while v != 1:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        steps += 1
    tl.store(out_ptr + pid, steps)
""")

NESTED_IF = src("""
@triton.jit
def nested_if(x_ptr, out_ptr, t0, t1):
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid)
    if v > t0:
        if v > t1:
            r = v * 4
        else:
            r = v * 3
    else:
        if v < -t0:
            r = -v
        else:
            r = v + 100
    tl.store(out_ptr + pid, r)
""")

STATIC_RANGE = src("""
@triton.jit
def static_unroll(x_ptr, out_ptr, BLOCK: tl.constexpr, REPS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    acc = x
    for i in tl.static_range(REPS):
        acc = acc * 2 + i
    tl.store(out_ptr + offs, acc)
""")

ATOMIC_ADD = src("""
@triton.jit
def atomic_sum(x_ptr, total_ptr, count_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))
    tl.atomic_add(count_ptr, 1)
""")

HISTOGRAM = src("""
@triton.jit
def histogram(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    bins = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + bins, 1, mask=mask)
""")

ATOMIC_FADD = src("""
@triton.jit
def atomic_fadd(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.atomic_add(out_ptr + offs % 8, x, mask=mask)
""")

ATOMIC_MAXMIN = src("""
@triton.jit
def atomic_maxmin(x_ptr, mx_ptr, mn_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.atomic_max(mx_ptr + offs % 4, x, mask=mask)
    tl.atomic_min(mn_ptr + offs % 4, x, mask=mask)
""")

ATOMIC_OR = src("""
@triton.jit
def atomic_or_xor(x_ptr, or_ptr, xor_ptr, and_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    zero = offs * 0
    tl.atomic_or(or_ptr + zero, x, mask=mask)
    tl.atomic_xor(xor_ptr + zero, x, mask=mask)
    tl.atomic_and(and_ptr + zero, x, mask=mask)
""")

TICKET = src("""
@triton.jit
def ticket(counter_ptr, order_ptr):
    pid = tl.program_id(0)
    t = tl.atomic_add(counter_ptr, 1)
    tl.store(order_ptr + t, pid)
""")

CAS_LOCK = src("""
@triton.jit
def cas_increment(lock_ptr, value_ptr):
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    v = tl.load(value_ptr)
    tl.store(value_ptr, v + 1)
    tl.atomic_xchg(lock_ptr, 0)
""")

DEVICE_ASSERT = src("""
@triton.jit
def checked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.device_assert(x >= 0, "negative input")
    tl.store(out_ptr + offs, x, mask=mask)
""")


def _loop_inputs(r):
    x = r.standard_normal((10, 64)).astype(np.float32)
    bounds = np.array([[0, 10], [3, 7], [5, 5], [9, 2]], np.int32)
    return [x, bounds, np.zeros((4, 64), np.float32)]


def _loop_ref(a):
    x, b = a[0], a[1]
    return {2: np.stack([x[lo:hi].sum(0) if hi > lo else np.zeros(64, np.float32) for lo, hi in b])}


def _collatz(v):
    s = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        s += 1
    return s


def _nested(v, t0, t1):
    if v > t0:
        return v * 4 if v > t1 else v * 3
    return -v if v < -t0 else v + 100


N_ATOMIC = 5000

CASES = [
    Case(
        "loop_bounds_from_memory",
        RUNTIME_LOOP,
        "runtime_loop",
        _loop_inputs,
        (4,),
        _loop_ref,
        {"BLOCK": 64},
        1e-5,
        1e-5,
    ),
    Case(
        "loop_runtime_step",
        STEP_LOOP,
        "step_loop",
        lambda r: [np.zeros(7, np.int32), 50, 3],
        (7,),
        lambda a: {0: np.array([sum(range(p, 50, 3)) for p in range(7)], np.int32)},
    ),
    Case(
        "while_collatz",
        WHILE,
        "collatz",
        lambda r: [r.integers(1, 1000, 20).astype(np.int64), np.zeros(20, np.int32)],
        (20,),
        lambda a: {1: np.array([_collatz(int(v)) for v in a[0]], np.int32)},
    ),
    Case(
        "nested_if_scalar",
        NESTED_IF,
        "nested_if",
        lambda r: [r.integers(-100, 100, 40).astype(np.int32), np.zeros(40, np.int32), 10, 50],
        (40,),
        lambda a: {1: np.array([_nested(int(v), 10, 50) for v in a[0]], np.int32)},
    ),
    Case(
        "static_range_unroll",
        STATIC_RANGE,
        "static_unroll",
        lambda r: [r.integers(-5, 5, 32).astype(np.int32), np.zeros(32, np.int32)],
        (1,),
        lambda a: {1: a[0] * 16 + (0 * 8 + 1 * 4 + 2 * 2 + 3)},
        {"BLOCK": 32, "REPS": 4},
    ),
    Case(
        "atomic_add_contention",
        ATOMIC_ADD,
        "atomic_sum",
        lambda r: [
            r.integers(-100, 100, N_ATOMIC).astype(np.int32),
            np.zeros(1, np.int32),
            np.zeros(1, np.int32),
            N_ATOMIC,
        ],
        grid1(N_ATOMIC),
        lambda a: {1: np.array([a[0].sum()], np.int32), 2: np.array([-(-N_ATOMIC // 32)], np.int32)},
        {"BLOCK": 32},
    ),
    Case(
        "atomic_histogram_duplicate_lanes",
        HISTOGRAM,
        "histogram",
        lambda r: [r.integers(0, 10, N_ATOMIC).astype(np.int32), np.zeros(10, np.int32), N_ATOMIC],
        grid1(N_ATOMIC),
        lambda a: {1: np.bincount(a[0], minlength=10).astype(np.int32)},
        {"BLOCK": 64},
    ),
    Case(
        "atomic_fadd_f32",
        ATOMIC_FADD,
        "atomic_fadd",
        lambda r: [r.standard_normal(N_ATOMIC).astype(np.float32), np.zeros(8, np.float32), N_ATOMIC],
        grid1(N_ATOMIC),
        lambda a: {1: a[0].astype(np.float64).reshape(-1, 8).sum(0)},
        {"BLOCK": 128},
        1e-4,
        1e-4,
    ),
    Case(
        "atomic_max_min_f32",
        ATOMIC_MAXMIN,
        "atomic_maxmin",
        lambda r: [
            r.standard_normal(N_ATOMIC).astype(np.float32),
            np.full(4, -np.inf, np.float32),
            np.full(4, np.inf, np.float32),
            N_ATOMIC,
        ],
        grid1(N_ATOMIC),
        lambda a: {1: a[0].reshape(-1, 4).max(0), 2: a[0].reshape(-1, 4).min(0)},
        {"BLOCK": 128},
    ),
    Case(
        "atomic_max_min_i64",
        ATOMIC_MAXMIN,
        "atomic_maxmin",
        lambda r: [
            r.integers(-(2**40), 2**40, N_ATOMIC),
            np.full(4, -(2**62), np.int64),
            np.full(4, 2**62, np.int64),
            N_ATOMIC,
        ],
        grid1(N_ATOMIC),
        lambda a: {1: a[0].reshape(-1, 4).max(0), 2: a[0].reshape(-1, 4).min(0)},
        {"BLOCK": 128},
    ),
    Case(
        "atomic_or_xor_and_u32",
        ATOMIC_OR,
        "atomic_or_xor",
        lambda r: [
            r.integers(0, 2**32, 777, dtype=np.uint32),
            np.zeros(1, np.uint32),
            np.zeros(1, np.uint32),
            np.full(1, 2**32 - 1, np.uint32),
            777,
        ],
        grid1(777),
        lambda a: {
            1: np.array([np.bitwise_or.reduce(a[0])]),
            2: np.array([np.bitwise_xor.reduce(a[0])]),
            3: np.array([np.bitwise_and.reduce(a[0])]),
        },
        {"BLOCK": 64},
    ),
    Case(
        "atomic_ticket_returns_old",
        TICKET,
        "ticket",
        lambda r: [np.zeros(1, np.int32), np.full(300, -1, np.int32)],
        (300,),
        lambda a: {0: np.array([300], np.int32)},
    ),
    Case(
        "atomic_cas_spin_lock",
        CAS_LOCK,
        "cas_increment",
        lambda r: [np.zeros(1, np.int32), np.zeros(1, np.int32)],
        (500,),
        lambda a: {0: np.zeros(1, np.int32), 1: np.array([500], np.int32)},
    ),
    Case(
        "device_assert_passes",
        DEVICE_ASSERT,
        "checked_copy",
        lambda r: [r.integers(0, 100, 300).astype(np.int32), np.zeros(300, np.int32), 300],
        grid1(300),
        lambda a: {1: a[0].copy()},
        {"BLOCK": 128},
    ),
]
