"""The interpreter's flat address space: each pointer argument (a NumPy array) gets a fake base address,
pointers are int64 byte addresses, and every access is resolved, bounds- and alignment-checked per lane.

Bases start at 64 KiB (so null and small addresses fault), are 4096-aligned and leave a 4096-byte gap
between buffers, so an off-by-a-little access faults instead of landing in a neighbour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir import fp8
from ..ir.types import ScalarType
from .errors import AccessError
from .numerics import bf16_to_bits, bits_to_bf16, storage_dtype, value_dtype

FIRST_BASE = 1 << 16
ALIGN = 4096


@dataclass
class Buffer:
    name: str
    base: int
    data: np.ndarray  # the caller's array as flat bytes (a view: writes reach the caller)

    @property
    def nbytes(self) -> int:
        return self.data.size


class AddressSpace:
    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self.bases = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self._next = FIRST_BASE

    def add(self, name: str, array: np.ndarray) -> int:
        """Map `array` (C-contiguous) into the space; returns its base address."""
        if not array.flags.c_contiguous:
            raise TypeError(f"argument {name}: arrays must be C-contiguous")
        base = self._next
        data = array.reshape(-1).view(np.uint8)
        self.buffers.append(Buffer(name, base, data))
        self._next = (base + data.size + 2 * ALIGN - 1) // ALIGN * ALIGN
        self.bases = np.array([b.base for b in self.buffers], np.int64)
        self.ends = np.array([b.base + b.nbytes for b in self.buffers], np.int64)
        return base

    # ---- resolution
    def resolve(self, addrs: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Buffer index and byte offset of each address; AccessError for the first bad lane."""
        idx = np.searchsorted(self.bases, addrs, side="right") - 1
        safe = np.maximum(idx, 0)
        ok = (
            (idx >= 0) & (addrs + size <= self.ends[safe])
            if len(self.buffers)
            else np.zeros(addrs.shape, bool)
        )
        if not ok.all():
            lane = int(np.flatnonzero(~ok)[0])
            raise AccessError(self._describe(int(addrs[lane]), size, lane))
        offsets = addrs - self.bases[idx]
        bad = offsets % size != 0
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            b = self.buffers[idx[lane]]
            raise AccessError(
                f"misaligned {size}-byte access at byte {offsets[lane]} of {b.name} (active lane {lane})"
            )
        return idx, offsets

    def _describe(self, addr: int, size: int, lane: int) -> str:
        for b in self.buffers:
            if b.base <= addr < b.base + b.nbytes + ALIGN:
                return (
                    f"out-of-bounds {size}-byte access at byte {addr - b.base} of {b.name} "
                    f"({b.nbytes} bytes) (active lane {lane})"
                )
        return f"access to address {addr:#x}, outside every argument buffer (active lane {lane})"

    def _view(self, buf: Buffer, elem: ScalarType) -> np.ndarray:
        dt = storage_dtype(elem)
        n = buf.nbytes - buf.nbytes % dt.itemsize
        return buf.data[:n].view(dt)

    # ---- access (addrs: 1-D int64 addresses of the active lanes, in lane order)
    def read(self, addrs: np.ndarray, elem: ScalarType) -> np.ndarray:
        size = storage_dtype(elem).itemsize
        idx, offsets = self.resolve(addrs, size)
        raw = np.empty(addrs.shape, storage_dtype(elem))
        for i in np.unique(idx):
            sel = idx == i
            raw[sel] = self._view(self.buffers[i], elem)[offsets[sel] // size]
        return from_storage(raw, elem)

    def write(self, addrs: np.ndarray, values: np.ndarray, elem: ScalarType) -> None:
        """Store lane by lane in order: where addresses repeat, the last lane wins."""
        size = storage_dtype(elem).itemsize
        idx, offsets = self.resolve(addrs, size)
        raw = to_storage(np.asarray(values), elem)
        for i in np.unique(idx):
            sel = np.flatnonzero(idx == i)
            elems = offsets[sel] // size
            _, last = np.unique(elems[::-1], return_index=True)
            keep = sel[len(sel) - 1 - last]
            view = self._view(self.buffers[i], elem)
            if not view.flags.writeable:
                raise AccessError(f"store to the read-only argument {self.buffers[i].name}")
            view[offsets[keep] // size] = raw[keep]

    def atomic(
        self, addrs: np.ndarray, elem: ScalarType, update: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """Read-modify-write each lane in lane order; returns the old values.

        `update(old, lanes)` gives the new values of `lanes`. Lanes run in rounds: round r takes the r-th
        occurrence of every address, so repeated addresses see the effects of the earlier lanes.
        """
        self.resolve(addrs, storage_dtype(elem).itemsize)  # fault before touching anything
        old = np.empty(addrs.shape, value_dtype(elem))
        rank = occurrence_rank(addrs)
        by_rank = np.argsort(rank, kind="stable")
        counts = np.bincount(rank) if rank.size else np.zeros(0, np.int64)
        start = 0
        for c in counts:
            lanes = by_rank[start : start + c]
            start += c
            cur = self.read(addrs[lanes], elem)
            old[lanes] = cur
            self.write(addrs[lanes], update(cur, lanes), elem)
        return old


def occurrence_rank(addrs: np.ndarray) -> np.ndarray:
    """For each lane, how many earlier lanes have the same address."""
    order = np.argsort(addrs, kind="stable")
    s = addrs[order]
    pos = np.arange(len(s))
    first = np.ones(len(s), bool)
    first[1:] = s[1:] != s[:-1]
    start = np.maximum.accumulate(np.where(first, pos, 0)) if len(s) else pos
    rank = np.empty(len(s), np.int64)
    rank[order] = pos - start
    return rank


def from_storage(raw: np.ndarray, elem: ScalarType) -> np.ndarray:
    if elem.name == "bf16":
        return bits_to_bf16(raw)
    if elem.is_fp8:
        return fp8.from_bits(raw, elem.name)
    if elem.is_bool:
        return raw != 0
    return raw


def to_storage(values: np.ndarray, elem: ScalarType) -> np.ndarray:
    if elem.name == "bf16":
        return bf16_to_bits(values)
    if elem.is_fp8:
        return fp8.to_bits(values, elem.name)
    if elem.is_bool:
        return values.astype(np.uint8)
    return values
