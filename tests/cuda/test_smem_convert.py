"""Layout conversions through shared memory: vector accesses where a thread's registers hold a row's
consecutive elements, and the row padding that gives the fewest bank conflicts (wavefronts) for the write
and the read together. The padding choice is checked on the layouts the cuda target uses (an MMA
accumulator to a store layout, a transpose), the wavefront count against hand counts, and the PTX of a
matmul's epilogue for its vector reads."""

from __future__ import annotations

import re

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.layouts import WgmmaSpec, blocked, wgmma_layout
from tilec.compiler.backends.cuda.memory import (
    choose_padding,
    padded_strides,
    vector_groups,
    vector_run,
    wavefronts,
)
from tilec.compiler.pipeline import compile_kernel


def test_vector_run_follows_the_register_bases() -> None:
    store = blocked((128, 128), 4, vec=8)  # 8 consecutive fp16 a thread: one 16-byte access
    assert vector_run(store, 2, 16, 136) == 8
    assert vector_run(store, 2, 16, 130) == 2  # rows 260 bytes apart: only 4-byte runs stay aligned
    assert vector_run(store, 2, 8, 136) == 4  # the limit (the scratch base's alignment) caps it
    assert vector_run(store, 4, 16, 132) == 4
    acc = wgmma_layout((128, 128), WgmmaSpec("f16", 1, 1, 2, 128), 4)
    assert vector_run(acc, 2, 16, 136) == 2  # column pairs
    assert vector_run(blocked((64,), 4, vec=1), 4, 16, None) == 1


def test_vector_groups_cover_every_register_once() -> None:
    lay = blocked((32, 64), 4, vec=4)
    groups = vector_groups(lay, range(lay.num_regs), 4)
    assert sorted(g for _, run in groups for g in run) == list(range(lay.num_regs))
    strides, _ = padded_strides(lay.shape, 4)
    for first, run in groups:  # a run's elements are consecutive in memory
        offs = [sum(c * s for c, s in zip(lay.reg_coord(r), strides, strict=True)) for r in run]
        assert first == run[0] and offs == list(range(offs[0], offs[0] + 4))


def test_wavefronts_count_bank_conflicts() -> None:
    # 32 lanes down one column of fp32 rows: pitch 33 words spreads them over 32 banks, pitch 36 over 8
    col = blocked((32, 32), 1, vec=1, order=(0, 1))
    assert wavefronts(col, padded_strides(col.shape, 1)[0], 4, 1) == 32  # 32 registers, one wavefront each
    assert wavefronts(col, padded_strides(col.shape, 4)[0], 4, 1) == 32 * 4
    # 16-byte reads of consecutive lanes along a row: 8 lanes a wavefront, 4 wavefronts an access
    row = blocked((16, 64), 1, vec=4)
    assert wavefronts(row, padded_strides(row.shape, 4)[0], 4, 4) == (row.num_regs // 4) * 4


def test_padding_for_an_accumulator_written_back_in_rows() -> None:
    acc = wgmma_layout((128, 128), WgmmaSpec("f16", 1, 1, 2, 128), 4)
    store = blocked((128, 128), 4, vec=8)
    pad, runs = choose_padding(acc, store, 2, 16)
    assert (pad * 2, runs) == (16, (2, 8))  # 16 bytes a row: 4-byte writes, 16-byte reads


def test_padding_for_a_transpose_stays_one_word() -> None:
    rows = blocked((64, 64), 4, vec=1)
    cols = blocked((64, 64), 4, vec=1, order=(0, 1))
    pad, runs = choose_padding(rows, cols, 4, 16)
    assert (pad, runs) == (1, (1, 1))


def test_matmul_epilogue_reads_its_rows_as_vectors() -> None:
    src = """
import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16))
"""
    art = compile_kernel(src, "mm", signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"},
                         constexprs={"BM": 128, "BN": 128, "BK": 64}, hints={p: {"divisibility": 16} for p in ("a_ptr", "b_ptr", "c_ptr", "K")},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="ptx")  # fmt: skip
    reads = re.findall(r"ld\.shared(\.\w+)*", art.ptx)
    assert "wgmma.mma_async" in art.ptx
    assert re.search(r"ld\.shared\.v4\.b32", art.ptx), reads
    assert not re.search(r"ld\.shared\.b16", art.ptx)


def _layouts():
    from tilec.compiler.backends.cuda.layouts import MmaSpec, mma_layout, scan_layout

    for shape in [(2, 256), (16, 64), (64, 64), (128, 128), (8, 4, 32), (1024,), (32, 8)]:
        for nw in (1, 4, 8):
            for vec in (1, 2, 4, 8):
                yield blocked(shape, nw, vec)
                if len(shape) == 2:
                    yield blocked(shape, nw, vec, order=(0, 1))
            yield scan_layout(shape, 0, nw)
    yield mma_layout((64, 64), MmaSpec("f16", 16, 2, 2, 2, 4), 4)
    yield wgmma_layout((128, 256), WgmmaSpec("f16", 2, 1, 1, 256), 8)


def test_every_vector_access_is_aligned_and_reads_what_the_scalars_would() -> None:
    """For every thread of every layout above, each run's first element sits at a multiple of the run (its
    byte offset a multiple of the access width), and the run's elements are the next ones in memory. A
    thread's offset is the sum of its lane and warp bits' (each basis one power of two), so thread 0 and
    the threads of one bit each stand for all of them."""


    for lay in _layouts():
        threads = [0] + [1 << i for i in range(5 + len(lay.warp))]
        for nbytes in (1, 2, 4, 8):
            for pad_bytes in (4, 8, 16):
                pad = max(1, pad_bytes // nbytes)
                strides, _ = padded_strides(lay.shape, pad)
                pitch = lay.shape[-1] + pad if len(lay.shape) > 1 else None
                run = vector_run(lay, nbytes, 16, pitch)
                assert run & (run - 1) == 0 and run * nbytes <= 16
                for t in threads:
                    coord = [0] * len(lay.shape)
                    for i, basis in enumerate([*lay.lane, *lay.warp]):
                        if t >> i & 1:
                            coord = [c | b for c, b in zip(coord, basis, strict=True)]
                    base = sum(c * s for c, s in zip(coord, strides, strict=True))
                    for first, group in vector_groups(lay, range(lay.num_regs), run):
                        offs = [base + sum(c * s for c, s in zip(lay.reg_coord(r), strides, strict=True)) for r in group]
                        assert offs[0] % run == 0, (lay, nbytes, pad, t, first)
                        assert offs == list(range(offs[0], offs[0] + run)), (lay, nbytes, pad, t, first)

