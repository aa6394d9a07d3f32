"""The cuda lowering's data movement, run on the host (tests/cuda/simt.py): layout conversions through shared
memory (vector accesses and padding included), reductions, argmax/argmin with NaN and ties, and scans, each on
the layouts the target uses, against NumPy. No GPU needed: the same methods emit the NVVM IR on a real build."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilec.compiler.artifact import CudaOptions
from tilec.compiler.backends.cuda.layouts import (
    MmaSpec,
    WgmmaSpec,
    blocked,
    mma_layout,
    scan_layout,
    wgmma_layout,
)
from tilec.compiler.interp.semantics import _arg_extreme
from tilec.compiler.ir.types import ScalarType

from .simt import SimBlock, gather, scatter

F32, I32, F16 = ScalarType("f32"), ScalarType("i32"), ScalarType("f16")


def _layouts(shape: tuple, nw: int) -> list:
    lays = [blocked(shape, nw, vec) for vec in (1, 2, 4, 8)]
    if len(shape) == 2:
        lays += [blocked(shape, nw, vec, order=(0, 1)) for vec in (1, 4)]
        lays.append(scan_layout(shape, 1, nw))
        lays.append(scan_layout(shape, 0, nw))
    return lays


CONVERSIONS = [((32, 64), 4), ((16, 16), 1), ((8, 128), 2), ((256,), 4), ((4, 8), 4)]  # the last: copies in every warp


@pytest.mark.parametrize("shape,nw", CONVERSIONS)
@pytest.mark.parametrize("dtype,e", [(np.float32, F32), (np.float16, F16)])
def test_conversions_through_shared_memory_move_every_element(shape: tuple, nw: int, dtype, e) -> None:
    rng = np.random.default_rng(0)
    tile = rng.standard_normal(shape).astype(dtype)
    lays = _layouts(shape, nw)
    for src, dst in itertools.product(lays, lays):
        if src == dst:
            continue
        for only_owner in (False, True):  # True: one thread of each group of copies writes
            sim = SimBlock(nw)
            out = sim.through_smem(scatter(src, tile, nw), src, dst, e, only_owner=only_owner)
            np.testing.assert_array_equal(gather(dst, out, nw, shape), tile, err_msg=f"{src} -> {dst}")


@pytest.mark.parametrize("shape,nw", CONVERSIONS)
def test_coordinates_from_tid_match_the_bitwise_ones(shape: tuple, nw: int) -> None:
    """CudaOptions.coords_from_tid builds a coordinate that lanes feed from tid.x in fields; every thread gets
    the coordinate the lane and warp bits give one by one, on every layout."""
    for lay in _layouts(shape, nw):
        fields, bitwise = SimBlock(nw), SimBlock(nw)
        bitwise.cg = CudaOptions(coords_from_tid=False)
        for got, want in zip(fields.thread_coord(lay), bitwise.thread_coord(lay), strict=True):
            np.testing.assert_array_equal(fields.b.v(got), bitwise.b.v(want), err_msg=str(lay))


def test_an_mma_accumulator_written_back_in_rows_uses_vector_reads() -> None:
    nw, shape = 4, (128, 128)
    acc = wgmma_layout(shape, WgmmaSpec("f16", 1, 1, 2, 128), nw)
    rows = blocked(shape, nw, vec=8)
    tile = np.arange(128 * 128, dtype=np.float32).reshape(shape).astype(np.float16)
    sim = SimBlock(nw)
    out = sim.through_smem(scatter(acc, tile, nw), acc, rows, F16)
    np.testing.assert_array_equal(gather(rows, out, nw, shape), tile)
    assert sim.vector_accesses > 0
    small = mma_layout((64, 64), MmaSpec("f16", 16, 2, 2, 2, 4), nw)
    tile = tile[:64, :64].copy()
    sim = SimBlock(nw)
    out = sim.through_smem(scatter(small, tile, nw), small, blocked((64, 64), nw, vec=8), F16)
    np.testing.assert_array_equal(gather(blocked((64, 64), nw, vec=8), out, nw, (64, 64)), tile)


SPECIAL = np.array([np.nan, -np.inf, np.inf, -1.0, 0.0, -0.0, 2.5, 2.5, -7.0, 3.0], np.float32)


@pytest.mark.parametrize("passes", [1, 2])  # CudaOptions.argmax_passes: pairs in a tree, or extreme then index
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,nw,axis", [((8, 64), 4, 1), ((8, 64), 4, 0), ((4, 512), 8, 1), ((256,), 2, 0)])
def test_argmax_pairs_on_every_layout(kind: str, shape: tuple, nw: int, axis: int, passes: int) -> None:
    rng = np.random.default_rng(1)
    tile = rng.choice(SPECIAL, size=shape).astype(np.float32)
    if len(shape) == 2:  # an all-NaN line, a NaN-and--inf line, a line of ties
        line = (slice(None), 0) if axis == 0 else (0, slice(None))
        tile[line] = np.nan
        line = (slice(None), 1) if axis == 0 else (1, slice(None))
        tile[line] = np.where(np.arange(tile[line].size) % 2, -np.inf, np.nan)
        line = (slice(None), 2) if axis == 0 else (2, slice(None))
        tile[line] = 3.0
    want_i = _arg_extreme(tile, axis, kind == "argmax")
    want_v = (np.fmax if kind == "argmax" else np.fmin).reduce(tile, axis=axis)
    for lay in _layouts(shape, nw):
        sim = SimBlock(nw)
        sim.cg = CudaOptions(argmax_passes=passes)
        out = sim.arg_reduce_values(kind, F32, lay, axis, scatter(lay, tile, nw))
        res = lay.without_dim(axis)
        got_i = gather(res, [p[1] for p in out], nw, want_i.shape)
        got_v = gather(res, [p[0] for p in out], nw, want_v.shape)
        np.testing.assert_array_equal(got_i, want_i, err_msg=str(lay))
        np.testing.assert_array_equal(got_v, want_v, err_msg=str(lay))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_integer_argmax_keeps_the_first_of_ties(kind: str) -> None:
    nw, shape = 4, (16, 128)
    tile = np.random.default_rng(2).integers(-3, 3, size=shape)
    want = _arg_extreme(tile, 1, kind == "argmax")
    for lay in _layouts(shape, nw):
        sim = SimBlock(nw)
        out = sim.arg_reduce_values(kind, I32, lay, 1, scatter(lay, tile, nw))
        np.testing.assert_array_equal(gather(lay.without_dim(1), [p[1] for p in out], nw, want.shape), want)


@pytest.mark.parametrize("shape,nw,axis", [((8, 64), 4, 1), ((64, 8), 4, 0), ((4, 1024), 8, 1), ((512,), 4, 0)])
def test_sums_over_registers_lanes_and_warps(shape: tuple, nw: int, axis: int) -> None:
    tile = np.random.default_rng(3).integers(-50, 50, size=shape).astype(np.float32)  # exact in any order
    for lay in _layouts(shape, nw):
        sim = SimBlock(nw)
        parts = [(v,) for v in scatter(lay, tile, nw)]
        out = sim._reduce_parts(lay, axis, parts, lambda a, b: (a[0] + b[0],), [F32])
        got = gather(lay.without_dim(axis), [p[0] for p in out], nw, tile.sum(axis=axis).shape)
        np.testing.assert_array_equal(got, tile.sum(axis=axis), err_msg=str(lay))


@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("shape,nw,axis", [((8, 64), 4, 1), ((64, 8), 4, 0), ((4, 1024), 8, 1), ((4096,), 8, 0)])
def test_scans_in_the_scan_layout(shape: tuple, nw: int, axis: int, rev: bool) -> None:
    tile = np.random.default_rng(4).integers(-9, 9, size=shape).astype(np.float32)
    lay = scan_layout(shape, axis, nw)
    sim = SimBlock(nw)
    (out,) = sim.scan_values(lay, axis, rev, [scatter(lay, tile, nw)], [F32], lambda a, b: (a[0] + b[0],))
    flip = (lambda x: np.flip(x, axis)) if rev else (lambda x: x)
    np.testing.assert_array_equal(gather(lay, out, nw, shape), flip(np.cumsum(flip(tile), axis=axis)))


@pytest.mark.parametrize("rev", [False, True])
@pytest.mark.parametrize("shape,nw,axis,chunk", [((4096,), 8, 0, 4), ((4096,), 4, 0, 8), ((2048,), 1, 0, 4),
                                                 ((4, 1024), 4, 1, 4), ((1024, 4), 4, 0, 2), ((2, 512), 2, 1, 1)])  # fmt: skip
def test_scans_in_segments(shape: tuple, nw: int, axis: int, chunk: int, rev: bool) -> None:
    """scan_layout with a capped chunk: the axis repeats over high register bits (segments), each scanned
    over its chunk, lanes and warps, then carried in order; two operands scanned together (a tuple scan)."""
    lay = scan_layout(shape, axis, nw, max_chunk=chunk)
    assert any(b[axis] > (32 * nw * chunk) // 2 for b in lay.reg), lay  # the layout has segments
    rng = np.random.default_rng(5)
    a = rng.integers(-9, 9, size=shape).astype(np.float32)
    b = rng.integers(0, 3, size=shape).astype(np.float32)
    sim = SimBlock(nw)
    fn = lambda x, y: (x[0] + y[0], np.maximum(x[1], y[1]))  # noqa: E731
    got_a, got_b = sim.scan_values(lay, axis, rev, [scatter(lay, a, nw), scatter(lay, b, nw)], [F32, F32], fn)
    flip = (lambda x: np.flip(x, axis)) if rev else (lambda x: x)
    np.testing.assert_array_equal(gather(lay, got_a, nw, shape), flip(np.cumsum(flip(a), axis=axis)))
    np.testing.assert_array_equal(gather(lay, got_b, nw, shape), flip(np.maximum.accumulate(flip(b), axis=axis)))


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("shape,nw,axis", [((8, 128), 4, 1), ((128, 8), 4, 0), ((2, 1024), 8, 1), ((256,), 2, 0)])
def test_sorts_over_registers_lanes_and_warps(shape: tuple, nw: int, axis: int, desc: bool) -> None:
    """The bitonic network where the axis bits sit in registers, lanes (shuffles) and warps (shared memory)."""
    from tilec.compiler.backends.cuda.sort import axis_bits, sort_layout

    rng = np.random.default_rng(6)
    cases = [(rng.standard_normal(shape).astype(np.float32), F32), (rng.integers(-5, 5, size=shape), I32)]
    lays = [sort_layout(lay, axis, nw) for lay in _layouts(shape, nw)]
    kinds = {tuple(k for k, _ in axis_bits(lay, axis)) for lay in lays}
    assert any("warp" in k for k in kinds) or nw == 1 or shape[axis] <= 128, kinds
    for tile, e in cases:
        want = np.sort(tile, axis=axis)
        want = np.flip(want, axis) if desc else want
        for lay in lays:
            sim = SimBlock(nw)
            out = sim.sort_values(lay, axis, scatter(lay, tile, nw), e, desc)
            np.testing.assert_array_equal(gather(lay, out, nw, shape), want, err_msg=str(lay))


def test_an_ordered_reduction_gives_every_lane_the_same_result() -> None:
    """reduce_with's `ordered` combine: every lane pair combines (lower lane's, upper lane's), so all the
    threads that hold the result agree even for a combine that does not commute (the gather below checks that
    every copy agrees). Checked with one that keeps its left operand's nonzero: without `ordered`, copies
    differ. (Which element wins depends on the layout's tree, as in Triton, which asks only associativity.)"""
    nw, shape = 4, (8, 256)
    tile = np.zeros(shape, np.float32)
    rng = np.random.default_rng(7)
    for row in range(shape[0]):
        tile[row, rng.choice(shape[1], size=3, replace=False)] = rng.integers(1, 9, size=3)

    def first_nonzero(a, b):
        return (np.where(a[0] != 0, a[0], b[0]), a[1] + b[1])

    disagreed = 0
    for lay in _layouts(shape, nw):
        res = lay.without_dim(1)
        for ordered in (True, False):
            sim = SimBlock(nw)
            parts = list(zip(scatter(lay, tile, nw), scatter(lay, np.ones(shape, np.float32), nw), strict=True))
            out = sim._reduce_parts(lay, 1, parts, first_nonzero, [F32, F32], ordered=ordered)
            try:
                got = gather(res, [p[0] for p in out], nw, (shape[0],))
            except AssertionError:
                assert not ordered, f"copies disagree with ordered combines: {lay}"
                disagreed += 1
                continue
            assert all(v in tile[r] and v != 0 for r, v in enumerate(got)), (lay, got)
            np.testing.assert_array_equal(gather(res, [p[1] for p in out], nw, (shape[0],)), np.full(shape[0], 256.0))
    assert disagreed, "the combine should tell an unordered tree from an ordered one"
