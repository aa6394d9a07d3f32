"""Swizzled shared-memory tiles: wgmma reads them through matrix descriptors (sm_90a), mma.sync with
ldmatrix at per-lane swizzled addresses (the 8 rows of an ldmatrix phase then fall in 8 distinct
16-byte bank groups with no row padding, so the cp.async copies into them write whole 128-byte lines).

A dot operand tile is stored with its memory-contiguous dimension as the stored row ("cols"), cut into
blocks of `sw` bytes (the swizzle width: 128, 64 or 32); each block holds every stored row, `sw` bytes
apiece, and inside it the 16-byte chunks of row r are permuted by XOR with the address bits 7.. of the
row's start, exactly as the hardware does for the descriptor's swizzle mode (so tiles start on a
1024-byte boundary). K-major operands (A as M x K, B as N x K) have K as the stored row, MN-major ones
(B as K x N, A as K x M) have M or N there; wgmma takes both for 16-bit types (imm-trans).
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 1024  # the 128-byte swizzle pattern repeats every 8 rows of 128 bytes
MODE = {128: 1, 64: 2, 32: 3}  # the descriptor's layout type (bits 62-63)


def swizzle_width(cols: int, ebytes: int) -> int:
    """The widest swizzle (bytes) that a stored row of `cols` elements fills; 0 when none does."""
    row = cols * ebytes
    return next((sw for sw in (128, 64, 32) if row % sw == 0), 0)


def swizzled(tile: SwizzledTile, r, b):
    """Byte offset of byte `b` of stored row `r` of `tile` as stored: its block, its row, its byte in the
    row, with the 16-byte chunk XOR-permuted by bits 7.. of that offset. Written with integer operators
    only, so it takes Python ints and the lowering's i32 values (mma.I32) alike."""
    sw = tile.sw
    plain = (b >> (sw.bit_length() - 1)) * tile.block_bytes + r * sw + (b & (sw - 1))
    return plain ^ (((plain >> 7) & (sw // 16 - 1)) << 4)


def constant_delta(tile: SwizzledTile, threads: list, d: int, ref: tuple[int, int], at: tuple[int, int]) -> int | None:
    """offset(chunk at) - offset(chunk ref) of a swizzled tile when it is the same in every thread, else None
    (`d` the contiguous dimension; chunks as (row, column) register offsets)."""
    deltas = {tile.offset(t[1 - d] + at[0], t[d] + at[1]) - tile.offset(t[1 - d] + ref[0], t[d] + ref[1])
              for t in threads}  # fmt: skip
    return deltas.pop() if len(deltas) == 1 else None


def align(n: int, to: int = ALIGN) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True)
class SwizzledTile:
    rows: int  # stored rows: the dimension that is not contiguous
    cols: int  # stored columns: the contiguous dimension, in elements
    ebytes: int
    sw: int  # swizzle width in bytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.ebytes

    @property
    def block_bytes(self) -> int:
        return self.rows * self.sw

    def plain(self, r: int, c: int) -> int:
        """Byte offset of element (r, c) before the swizzle: its block, its row, its byte in the row."""
        b = c * self.ebytes
        return b // self.sw * self.block_bytes + r * self.sw + b % self.sw

    def offset(self, r: int, c: int) -> int:
        """Byte offset of element (r, c) as stored (the chunk permuted within its row)."""
        return swizzled(self, r, c * self.ebytes)

    def in_bytes(self) -> SwizzledTile:
        """The same tile with bytes as its elements (the same offsets, columns counted in bytes)."""
        return SwizzledTile(self.rows, self.cols * self.ebytes, 1, self.sw)

    def descriptor(self, mn_major: bool) -> int:
        """The constant bits of a wgmma matrix descriptor of this tile (the start address is added):
        leading byte offset = the stride between blocks along the contiguous dimension (MN-major; K-major
        swizzled tiles ignore it), stride byte offset = the stride between groups of 8 stored rows."""
        lbo = self.block_bytes >> 4 if mn_major else 1
        sbo = (8 * self.sw) >> 4
        return (lbo << 16) | (sbo << 32) | (MODE[self.sw] << 62)
