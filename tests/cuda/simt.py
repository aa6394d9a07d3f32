"""The cuda lowering's data movement run on the host: the methods that move registers between threads
(layout conversions through shared memory, reductions over registers, lanes and warps, scans, argmax) are the
lowering's own, called on a builder that evaluates each IR call at once for every thread of a block, as NumPy
arrays (one element per thread). Shuffles permute the arrays within each warp; shared memory is a dictionary of
byte offsets, each vector access checked for its alignment; a barrier is where every thread has already got
to (they run in lockstep). What this cannot see: PTX, ptxas, the hardware; what it does see is whether each
value lands in the thread and register its layout says, on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import llvmlite.ir as ir
import numpy as np

from tilec.compiler.artifact import CudaOptions
from tilec.compiler.backends.cuda.lower import CudaLowering
from tilec.compiler.backends.cuda.memory import MemoryLowering
from tilec.compiler.backends.cuda.reduce import ReduceLowering
from tilec.compiler.backends.cuda.scan import ScanLowering
from tilec.compiler.backends.cuda.smem import SharedMemory
from tilec.compiler.backends.cuda.sort import SortLowering

_ICMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
         ">=": np.greater_equal}  # fmt: skip


class SimBuilder:
    """The IRBuilder calls of the data-movement code, evaluated: a value is an array over the threads."""

    def __init__(self, threads: int) -> None:
        self.n = threads
        self.masks = [np.ones(threads, bool)]

    def v(self, x):
        if isinstance(x, ir.Constant):
            if isinstance(x.type, ir.IntType) and x.type.width == 1:
                return np.full(self.n, bool(x.constant))
            if isinstance(x.type, ir.IntType):
                return np.full(self.n, int(x.constant), np.int64)
            return np.full(self.n, x.constant, np.float32)
        return x

    @property
    def active(self) -> np.ndarray:
        return self.masks[-1]

    @contextlib.contextmanager
    def if_then(self, pred, likely=None) -> Iterator[None]:
        self.masks.append(self.active & self.v(pred))
        try:
            yield
        finally:
            self.masks.pop()

    def not_(self, a, name=""):
        return ~self.v(a)

    def trunc(self, a, typ, name=""):
        a = self.v(a)
        return (a & 1).astype(bool) if typ.width == 1 else a & ((1 << typ.width) - 1)

    def zext(self, a, typ, name=""):
        return self.v(a).astype(np.int64)

    def select(self, c, a, b, name=""):
        return np.where(self.v(c), self.v(a), self.v(b))

    def icmp_unsigned(self, op, a, b, name=""):
        return _ICMP[op](self.v(a), self.v(b))

    icmp_signed = icmp_unsigned

    def fcmp_ordered(self, op, a, b, name="", flags=()):
        a, b = self.v(a), self.v(b)
        ordered = ~(np.isnan(a) | np.isnan(b))
        return ordered if op == "ord" else ordered & _ICMP[op](a, b)

    def fcmp_unordered(self, op, a, b, name="", flags=()):
        a, b = self.v(a), self.v(b)
        unordered = np.isnan(a) | np.isnan(b)
        return unordered if op == "uno" else unordered | _ICMP[op](a, b)


class SimBlock(ReduceLowering, ScanLowering, SortLowering, MemoryLowering):
    """One thread block of `num_warps` warps running the lowering's data-movement methods (see the module)."""

    # the lowering's own: a thread's coordinates from its lane and warp bits, the registers that are not copies
    thread_coord = CudaLowering.thread_coord
    _coord_from_tid = CudaLowering._coord_from_tid
    unique_regs = CudaLowering.unique_regs
    owner_pred = CudaLowering.owner_pred

    def __init__(self, num_warps: int) -> None:
        n = 32 * num_warps
        self.b = self.pb = SimBuilder(n)
        self.tid = np.arange(n, dtype=np.int64)
        self.lane, self.warp = self.tid % 32, self.tid // 32
        self.shm = SharedMemory(self.barrier)
        self.cg = CudaOptions()
        self._thread_coords: dict = {}
        self.memory: dict[int, float] = {}  # shared memory: byte offset -> the value stored there
        self.barriers = 0
        self.vector_accesses = 0

    def barrier(self) -> None:
        self.barriers += 1
        self.shm.synced()

    def shfl(self, v, mode: str, arg: int):
        v = self.b.v(v)
        lane = self.lane
        if mode == "bfly":
            src = lane ^ arg
        elif mode == "up":
            src = np.where(lane - arg >= 0, lane - arg, lane)
        elif mode == "down":
            src = np.where(lane + arg <= 31, lane + arg, lane)
        else:  # idx
            src = np.full_like(lane, arg)
        return v[self.warp * 32 + src]

    def _store(self, off, v, align: int) -> None:
        off, v = self.b.v(off), self.b.v(v)
        for t in np.nonzero(self.b.active)[0]:
            assert off[t] % align == 0, f"thread {t}: a {align}-byte access at byte {off[t]}"
            self.memory[int(off[t])] = v[t]

    def _load(self, off, like, align: int):
        off = self.b.v(off)
        assert all(o % align == 0 for o in off), f"a {align}-byte access misaligned"
        return np.array([self.memory.get(int(o), np.nan) for o in off], dtype=like)

    def _dtype(self, e):
        return np.float32 if e.is_float else np.int64

    def smem_store(self, byte_off, v, e) -> None:
        self._store(byte_off, v, 1)

    def smem_load(self, byte_off, e):
        return self._load(byte_off, self._dtype(e), 1)

    def _smem_store_run(self, off, vs: list, e, st, nbytes: int) -> None:
        self.vector_accesses += len(vs) > 1
        for i, v in enumerate(vs):
            self._store(self.b.add(off, ir.Constant(ir.IntType(32), i * nbytes)), v, len(vs) * nbytes if i == 0 else 1)

    def _smem_load_run(self, off, n: int, e, st, nbytes: int) -> list:
        self.vector_accesses += n > 1
        return [self._load(self.b.add(off, ir.Constant(ir.IntType(32), i * nbytes)), self._dtype(e),
                           n * nbytes if i == 0 else 1) for i in range(n)]  # fmt: skip

    def combine(self, kind: str, e, a, b, nan: bool):
        a, b = self.b.v(a), self.b.v(b)
        if kind == "sum":
            return a + b
        if kind in ("max", "min"):
            f = (np.maximum if kind == "max" else np.minimum) if nan else (np.fmax if kind == "max" else np.fmin)
            return f(a, b)
        return super().combine(kind, e, a, b, nan)


def scatter(lay, tile: np.ndarray, num_warps: int) -> list[np.ndarray]:
    """`tile` in layout `lay`: per register, the array over the block's threads of the element it holds."""
    out = []
    for r in range(lay.num_regs):
        rc = lay.reg_coord(r)
        vals = np.empty(32 * num_warps, dtype=tile.dtype)
        for t in range(32 * num_warps):
            c = list(rc)
            for i, basis in enumerate([*lay.lane, *lay.warp]):
                if t >> i & 1:
                    c = [x | y for x, y in zip(c, basis, strict=True)]
            vals[t] = tile[tuple(c)] if c else tile[()]
        out.append(vals)
    return out


def gather(lay, regs: list[np.ndarray], num_warps: int, shape: tuple) -> np.ndarray:
    """The tile that registers `regs` (in layout `lay`) hold; every copy of an element must agree."""
    tile = np.full(shape, np.nan) if shape else np.array(np.nan)
    seen: dict = {}
    for r in range(lay.num_regs):
        rc = lay.reg_coord(r)
        for t in range(32 * num_warps):
            c = list(rc)
            for i, basis in enumerate([*lay.lane, *lay.warp]):
                if t >> i & 1:
                    c = [x | y for x, y in zip(c, basis, strict=True)]
            key = tuple(c)
            v = regs[r][t]
            if key in seen:
                assert seen[key] == v or (v != v and seen[key] != seen[key]), (key, seen[key], v, r, t)
            seen[key] = v
            tile[key] = v
    return tile


# the binary IR calls, one NumPy function each (lshr: the values here are coordinates and offsets, >= 0)
for _name, _f in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and_": np.bitwise_and,
                  "or_": np.bitwise_or, "xor": np.bitwise_xor, "shl": np.left_shift, "lshr": np.right_shift}.items():  # fmt: skip
    setattr(SimBuilder, _name, lambda self, a, b, name="", _f=_f: _f(self.v(a), self.v(b)))
