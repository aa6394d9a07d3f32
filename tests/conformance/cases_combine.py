"""Conformance cases: tl.reduce and tl.associative_scan with general @triton.jit combine functions over one
tensor or tuples (argmax with its index, Welford mean/M2/weight, a user combine calling a helper, Inductor's
generated scan helpers), reversed scans, 3-D tiles, axis=None, keep_dims and masked inputs."""

from __future__ import annotations

import numpy as np

from .case import Case, src

ARGMAX_TUPLE = src("""
@triton.jit
def _argmax_combine(value1, index1, value2, index2):
    tie = (value1 == value2) & (index1 < index2)
    gt = (value1 > value2) | tie
    return tl.where(gt, value1, value2), tl.where(gt, index1, index2)


@triton.jit
def argmax_tuple(x_ptr, val_ptr, idx_ptr, col_idx_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=float("-inf"))
    idx = tl.broadcast_to(rn[None, :], (BM, BN))
    v, i = tl.reduce((x, idx), 1, _argmax_combine)
    tl.store(val_ptr + rm, v, mask=rm < M)
    tl.store(idx_ptr + rm, i, mask=rm < M)
    # along the other axis, keeping the reduced dimension
    rows = tl.broadcast_to(rm[:, None], (BM, BN))
    _, j = tl.reduce((tl.where(mask, -x, float("-inf")), rows), 0, _argmax_combine, keep_dims=True)
    tl.store(col_idx_ptr + tl.program_id(0) * BN + rn[None, :], j, mask=rn[None, :] < N)
""")

WELFORD = src("""
@triton.jit
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return (mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight)


@triton.jit
def welford_rows(x_ptr, out_ptr, N, BN: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BN)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    weight = tl.where(mask, 1.0, 0.0)
    mean, m2, w = tl.reduce((x, tl.zeros_like(x), weight), 0, welford_combine)
    tl.store(out_ptr + row * 3 + 0, mean)
    tl.store(out_ptr + row * 3 + 1, m2)
    tl.store(out_ptr + row * 3 + 2, w)
""")

LOGSUMEXP = src("""
@triton.jit
def _rescale(s, m_old, m_new):
    return s * tl.exp(m_old - m_new)


@triton.jit
def _lse_combine(m1, s1, m2, s2):
    m = tl.maximum(m1, m2)
    return m, _rescale(s1, m1, m) + _rescale(s2, m2, m)


@triton.jit
def logsumexp_3d(x_ptr, out_ptr, all_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    ra = tl.arange(0, A)[:, None, None]
    rb = tl.arange(0, B)[None, :, None]
    rc = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + ra * B * C + rb * C + rc)
    m, s = tl.reduce((x, tl.full(x.shape, 1.0, tl.float32)), 1, _lse_combine)
    tl.store(out_ptr + tl.arange(0, A)[:, None] * C + tl.arange(0, C)[None, :], m + tl.log(s))
    mt, st = tl.reduce((x, tl.full(x.shape, 1.0, tl.float32)), None, _lse_combine, keep_dims=True)
    tl.store(all_ptr + ra * 0 + rb * 0 + rc * 0, mt + tl.log(st), mask=(ra == 0) & (rb == 0) & (rc == 0))
""")

INDUCTOR_SCANS = src("""
@triton.jit
def _triton_helper_fn_add0(arg0_0, arg1_0):
    tmp0 = arg0_0 + arg1_0
    return tmp0


@triton.jit
def _triton_helper_fn0(arg0_0, arg0_1, arg1_0, arg1_1):
    tmp0 = arg0_0 > arg1_0
    tmp1 = arg0_0 == arg1_0
    tmp2 = arg0_1 > arg1_1
    tmp3 = tmp1 & tmp2
    tmp4 = tmp0 | tmp3
    tmp5 = tl.where(tmp4, arg0_0, arg1_0)
    tmp6 = tl.where(tmp4, arg0_1, arg1_1)
    return tmp5, tmp6


@triton.jit
def inductor_scans(in_ptr0, in_ptr1, out_ptr0, out_ptr1, out_ptr2, xnumel, rnumel, XBLOCK: tl.constexpr,
                   RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    tmp0 = tl.load(in_ptr0 + (rindex + rnumel * xindex), rmask & xmask, other=0.0)
    tmp1, = tl.associative_scan((tmp0,), 1, _triton_helper_fn_add0)
    tl.store(out_ptr0 + (rindex + rnumel * xindex), tmp1, rmask & xmask)
    tmp2 = tl.load(in_ptr1 + (rindex + rnumel * xindex), rmask & xmask, other=0)
    tmp3, = tl.associative_scan((tmp2,), 1, _triton_helper_fn_add0)
    tl.store(out_ptr1 + (rindex + rnumel * xindex), tmp3, rmask & xmask)
    tmp4 = rindex.to(tl.int64)
    tmp5 = tl.broadcast_to(tmp4, [XBLOCK, RBLOCK])
    tmp6, tmp7 = tl.associative_scan((tmp0, tmp5), 1, _triton_helper_fn0)
    tl.store(out_ptr2 + (rindex + rnumel * xindex), tmp7, rmask & xmask)
""")

LINEAR_RECURRENCE = src("""
@triton.jit
def linear_recurrence(a1, b1, a2, b2):
    return a1 * a2, b1 * a2 + b2


@triton.jit
def first_element(a, b):
    return a


@triton.jit
def recurrences(a_ptr, b_ptr, fwd_ptr, rev_ptr, first_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    _, fwd = tl.associative_scan((a, b), 0, linear_recurrence)
    _, rev = tl.associative_scan((a, b), 0, linear_recurrence, reverse=True)
    tl.store(fwd_ptr + offs, fwd)
    tl.store(rev_ptr + offs, rev)
    tl.store(first_ptr + offs, tl.associative_scan(b, 1, first_element, reverse=True))
""")


def _argmax_inputs(r):
    m, n = 6, 50
    x = r.integers(-4, 5, (m, n)).astype(np.float32)  # many ties: the lowest index wins
    return [x, np.zeros(m, np.float32), np.zeros(m, np.int32), np.zeros((2, 64), np.int32), m, n]


def _argmax_ref(a):
    x = a[0]
    cols = np.full((2, 64), 0, np.int32)
    for blk in range(2):
        part = x[blk * 4 : blk * 4 + 4]
        cols[blk, : x.shape[1]] = np.argmin(part, 0) + blk * 4
    return {1: x.max(1), 2: np.argmax(x, 1).astype(np.int32), 3: cols}


def _welford_ref(a):
    x, n = a[0], a[2]
    out = np.stack([x.mean(1), ((x - x.mean(1, keepdims=True)) ** 2).sum(1), np.full(x.shape[0], n)], 1)
    return {1: out.astype(np.float32)}


def _lse(x, axis):
    m = x.max(axis, keepdims=True)
    return (np.squeeze(m, axis) if axis is not None else m.reshape(())) + np.log(np.exp(x - m).sum(axis))


def _lse_ref(a):
    x = a[0].astype(np.float64)
    return {1: _lse(x, 1).astype(np.float32), 2: np.array([_lse(x.reshape(-1), 0)], np.float32)}


def _scan_inputs(r):
    xnumel, rnumel = 5, 40
    x = r.standard_normal((xnumel, rnumel)).astype(np.float32)
    x[:, 10] = x[:, 3]  # ties in the running max: the later index wins, as the helper says
    i = r.integers(-100, 100, (xnumel, rnumel)).astype(np.int8)
    z = np.zeros((xnumel, rnumel), np.float32)
    return [
        x,
        i,
        z,
        np.zeros((xnumel, rnumel), np.int8),
        np.zeros((xnumel, rnumel), np.int64),
        xnumel,
        rnumel,
    ]


def _cummax_index(x):
    out = np.zeros(x.shape, np.int64)
    for row in range(x.shape[0]):
        best, at = -np.inf, 0
        for j, v in enumerate(x[row]):
            if v >= best:
                best, at = v, j
            out[row, j] = at
    return out


def _scan_ref(a):
    return {2: np.cumsum(a[0], 1), 3: np.cumsum(a[1], 1, dtype=np.int8), 4: _cummax_index(a[0])}


def _recurrence(a, b, reverse):
    a, b = (np.flip(a, 0), np.flip(b, 0)) if reverse else (a, b)
    out = np.zeros_like(b)
    acc = np.zeros(b.shape[1], b.dtype)
    for i in range(b.shape[0]):
        acc = a[i] * acc + b[i]
        out[i] = acc
    return np.flip(out, 0) if reverse else out


def _recurrence_ref(a):
    first = np.repeat(a[1][:, -1:], a[1].shape[1], 1)
    return {2: _recurrence(a[0], a[1], False), 3: _recurrence(a[0], a[1], True), 4: first}


CASES = [
    Case(
        "reduce_argmax_tuple_ties",
        ARGMAX_TUPLE,
        "argmax_tuple",
        _argmax_inputs,
        (2,),
        _argmax_ref,
        {"BM": 4, "BN": 64},
    ),
    Case(
        "reduce_welford_masked",
        WELFORD,
        "welford_rows",
        lambda r: [r.standard_normal((3, 100)).astype(np.float32), np.zeros((3, 3), np.float32), 100],
        (3,),
        _welford_ref,
        {"BN": 128},
        1e-4,
        1e-4,
    ),
    Case(
        "reduce_logsumexp_3d_helper",
        LOGSUMEXP,
        "logsumexp_3d",
        lambda r: [
            r.standard_normal((2, 8, 4)).astype(np.float32) * 3,
            np.zeros((2, 4), np.float32),
            np.zeros(1, np.float32),
        ],
        (1,),
        _lse_ref,
        {"A": 2, "B": 8, "C": 4},
        1e-5,
        1e-5,
    ),
    Case(
        "scan_inductor_helpers",
        INDUCTOR_SCANS,
        "inductor_scans",
        _scan_inputs,
        (3,),
        _scan_ref,
        {"XBLOCK": 2, "RBLOCK": 64},
        1e-5,
        1e-5,
    ),
    Case(
        "scan_linear_recurrence_reverse",
        LINEAR_RECURRENCE,
        "recurrences",
        lambda r: [
            r.uniform(-1, 1, (16, 4)).astype(np.float32),
            r.standard_normal((16, 4)).astype(np.float32),
            *(np.zeros((16, 4), np.float32) for _ in range(3)),
        ],
        (1,),
        _recurrence_ref,
        {"M": 16, "N": 4},
        1e-5,
        1e-5,
    ),
]
