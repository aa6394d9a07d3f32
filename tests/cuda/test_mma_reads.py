"""mma.sync's operand reads from shared memory, run on the host: the lowering's own address code (mma._Reads)
evaluated for every thread of a block (tests/cuda/simt.py), ldmatrix and the 32-bit loads modelled as the PTX ISA
defines them, and each fragment register checked against the element the ISA's fragment layout puts there, for
operand tiles whose rows are padded and for swizzled ones (a pipelined ring's, swizzle.py). A swizzled tile's
reads must also keep the eight rows of each ldmatrix phase in distinct banks. No GPU needed."""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
import pytest

from tilec.compiler.backends.cuda.layouts import MmaSpec
from tilec.compiler.backends.cuda.mma import _Reads
from tilec.compiler.backends.cuda.swizzle import SwizzledTile, swizzle_width

from .simt import SimBlock

# (M, N, K, warps along M, warps along N)
SHAPES = [(64, 64, 32, 1, 2), (64, 32, 32, 1, 2), (128, 128, 32, 2, 2), (64, 128, 64, 1, 4), (32, 32, 16, 1, 2),
          (128, 64, 64, 4, 2)]  # fmt: skip


def _spec(kind: str, m: int, n: int, wm: int, wn: int) -> MmaSpec:
    return MmaSpec(kind, 8 if kind == "tf32" else 16, wm, wn, m // (16 * wm), n // (8 * wn))


def _placement(rows: int, row_bytes: int, swizzle: bool):
    """(stride, element tile or None, byte offset -> (row, byte in the row)) of a stored operand tile."""
    if swizzle:
        tile = SwizzledTile(rows, row_bytes // 2, 2, swizzle_width(row_bytes // 2, 2))
        at = {tile.in_bytes().offset(r, b): (r, b) for r in range(rows) for b in range(0, row_bytes, 2)}
        return tile.sw, tile, at
    stride = row_bytes + 16
    return stride, None, {r * stride + b: (r, b) for r in range(rows) for b in range(0, row_bytes, 2)}


def _ldmatrix(addr: np.ndarray, count: int, trans: bool) -> list[list[list[int]]]:
    """Per register, per thread, the byte addresses of the b16 halves it receives: matrix j's rows are addressed
    by lanes 8j..8j+7; without .trans lane l gets halves 2(l%4), 2(l%4)+1 of row l/4, with it half l/4 of rows
    2(l%4) and 2(l%4)+1."""
    out = [[[] for _ in range(len(addr))] for _ in range(count)]
    for t in range(len(addr)):
        w, lane = divmod(t, 32)
        g, c = lane // 4, lane % 4
        for j in range(count):
            rows = addr[32 * w + 8 * j : 32 * w + 8 * j + 8]
            out[j][t] = [int(rows[2 * c]) + 2 * g, int(rows[2 * c + 1]) + 2 * g] if trans else \
                [int(rows[g]) + 4 * c, int(rows[g]) + 4 * c + 2]  # fmt: skip
    return out


def _banks_distinct(addr: np.ndarray) -> bool:
    """Whether each quarter warp's 16-byte reads fall in distinct 16-byte bank groups (one wavefront each)."""
    groups = addr.reshape(-1, 8)
    return all(len({int(a) % 128 // 16 for a in g}) == 8 for g in groups)


def _run(spec: MmaSpec, operand: int, bt: bool, rows: int, row_bytes: int, swizzle: bool):
    block = SimBlock(spec.wm * spec.wn)
    stride, tile, where = _placement(rows, row_bytes, swizzle)
    reads = _Reads(block, spec, operand, bt, 2 if spec.kind == "f16" else 4, ir.Constant(ir.IntType(32), 0), stride, tile)
    return block, reads, where


@pytest.mark.parametrize("swizzle", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", ["f16", "tf32"])
def test_a_fragments(kind: str, shape: tuple, swizzle: bool) -> None:
    """A (M x K, row-major): register j of lane (4g + c) of the (mi, ks) tile holds row g + 8 (j & 1), bytes
    16 (j >> 1) + 4c of the instruction's K: f16 a0..a7 as pairs, tf32 a0..a3 as words (m16n8k16 / m16n8k8)."""
    m, n, k, wm, wn = shape
    spec = _spec(kind, m, n, wm, wn)
    eb = 2 if kind == "f16" else 4
    block, reads, where = _run(spec, 0, False, m, k * eb, swizzle)
    for ks in range(k // spec.k):
        for mi in range(spec.mrep):
            addr = block.b.v(reads(mi * 16, ks * 32))
            assert not swizzle or _banks_distinct(addr)
            regs = _ldmatrix(addr, 4, False)
            for t in range(len(addr)):
                w, lane = divmod(t, 32)
                wrow = (w // spec.wn % spec.wm) * 16 * spec.mrep
                for j in range(4):
                    row = wrow + mi * 16 + lane // 4 + 8 * (j & 1)
                    byte = ks * 32 + 16 * (j >> 1) + 4 * (lane % 4)
                    assert [where[a] for a in regs[j][t]] == [(row, byte), (row, byte + 2)], (ks, mi, t, j)


def _b_reads(shape: tuple, swizzle: bool, bt: bool):
    """f16 B's ldmatrix reads (B^T, N x K, without .trans where `bt`; K x N with .trans otherwise), per n-tile
    pair nj and 16-k step ks: (ks, nj, register j, warp, lane, (row, byte) of each half it received)."""
    m, n, k, wm, wn = shape
    spec = _spec("f16", m, n, wm, wn)
    block, reads, where = _run(spec, 1, bt, n if bt else k, (k if bt else n) * 2, swizzle)
    for ks in range(k // 16):
        for nj in range(0, spec.nrep, 2):
            addr = block.b.v(reads(nj * 8, ks * 32) if bt else reads(ks * 16, nj * 16))
            assert not swizzle or _banks_distinct(addr)
            count = 4 if nj + 1 < spec.nrep else 2
            regs = _ldmatrix(addr, count, not bt)
            for t in range(len(addr)):
                w, lane = divmod(t, 32)
                for j in range(count):
                    yield spec, ks, nj, j, w, lane, [where[a] for a in regs[j][t]]


@pytest.mark.parametrize("swizzle", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_b_fragments_k_by_n(shape: tuple, swizzle: bool) -> None:
    """f16 B (K x N, row-major) through ldmatrix.trans: registers 2h, 2h+1 of lane (4g + c) hold column g of
    n-tile nj + h, rows 2c, 2c+1 and 2c+8, 2c+9 of the instruction's K (b0, b1 / b2, b3)."""
    for spec, ks, nj, j, w, lane, got in _b_reads(shape, swizzle, bt=False):
        ni = nj + j // 2
        byte = 2 * ((w % spec.wn) * 8 * spec.nrep + ni * 8 + lane // 4)
        k0 = ks * 16 + 8 * (j & 1) + 2 * (lane % 4)
        assert got == [(k0, byte), (k0 + 1, byte)], (ks, nj, w, lane, j)


@pytest.mark.parametrize("swizzle", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_b_fragments_n_by_k(shape: tuple, swizzle: bool) -> None:
    """f16 B staged as N x K (B^T) through ldmatrix without .trans: register j of lane (4g + c) holds row
    (n) g of n-tile nj + (j >> 1), bytes 16 (j & 1) + 4c of the instruction's K."""
    for spec, ks, nj, j, w, lane, got in _b_reads(shape, swizzle, bt=True):
        row = (w % spec.wn) * 8 * spec.nrep + (nj + j // 2) * 8 + lane // 4
        byte = ks * 32 + 16 * (j & 1) + 4 * (lane % 4)
        assert got == [(row, byte), (row, byte + 2)], (ks, nj, w, lane, j)


@pytest.mark.parametrize("shape", SHAPES)
def test_tf32_b_words(shape: tuple) -> None:
    """tf32 B (K x N words, rows padded) read with 32-bit loads: b0 / b1 of lane (4g + c) are rows c / c + 4 of
    the instruction's K, column g of its n-tile."""
    m, n, k, wm, wn = shape
    spec = _spec("tf32", m, n, wm, wn)
    block = SimBlock(spec.wm * spec.wn)
    stride = n * 4 + 32
    reads = _Reads(block, spec, 1, False, 4, ir.Constant(ir.IntType(32), 0), stride, None)
    for ks in range(k // 8):
        for ni in range(spec.nrep):
            for h in range(2):
                addr = block.b.v(reads(ks * 8 + 4 * h, ni * 32))
                for t in range(len(addr)):
                    w, lane = divmod(t, 32)
                    col = (w % spec.wn) * 8 * spec.nrep + ni * 8 + lane // 4
                    assert divmod(int(addr[t]), stride) == (ks * 8 + 4 * h + lane % 4, 4 * col)
