"""Distributed layouts of tiles over the threads of a CUDA block: the layout algebra the gpu-layout pass
chooses from and the lowering computes with.

A layout maps (register, lane, warp) bits to tile coordinates: each bit has a basis vector, and the
coordinate a thread's register holds is the sum of the bases of the set bits (bases of one dimension
are distinct powers of two, so sum == xor). A zero basis means replication. Triton's "blocked"
layouts (sizePerThread / threadsPerWarp / warpsPerCTA / order) are one family of these.
"""

from __future__ import annotations

from dataclasses import dataclass

Basis = tuple[int, ...]


def log2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    reg: tuple[Basis, ...]
    lane: tuple[Basis, ...]  # 5 bases (32 lanes)
    warp: tuple[Basis, ...]  # log2(num_warps) bases

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    def reg_coord(self, r: int) -> tuple[int, ...]:
        c = [0] * len(self.shape)
        for b, basis in enumerate(self.reg):
            if r >> b & 1:
                c = [x + y for x, y in zip(c, basis, strict=False)]
        return tuple(c)

    def thread_coord(self, lane: int, warp: int = 0) -> tuple[int, ...]:
        """The coordinate a thread's lane and warp bits contribute: each set bit ORs its basis in, as the
        lowering's thread_coord computes it in the kernel (lower.py)."""
        c = [0] * len(self.shape)
        for src, bases in ((lane, self.lane), (warp, self.warp)):
            for i, basis in enumerate(bases):
                if src >> i & 1:
                    c = [x | y for x, y in zip(c, basis, strict=True)]
        return tuple(c)

    def without_dim(self, axis: int) -> Layout:
        """The layout of a tile with `axis` removed; bases along it become replication (zero)."""

        def drop(b: Basis) -> Basis:
            return b[:axis] + b[axis + 1 :]

        shape = self.shape[:axis] + self.shape[axis + 1 :]
        reg = tuple(drop(b) for b in self.reg if not b[axis])
        return Layout(shape, reg, tuple(drop(b) for b in self.lane), tuple(drop(b) for b in self.warp))

    def insert_dim(self, axis: int) -> Layout:
        def ins(b: Basis) -> Basis:
            return b[:axis] + (0,) + b[axis:]

        shape = self.shape[:axis] + (1,) + self.shape[axis:]
        return Layout(shape, tuple(ins(b) for b in self.reg), tuple(ins(b) for b in self.lane), tuple(ins(b) for b in self.warp))

    def project(self, src_shape: tuple[int, ...]) -> Layout:
        """The layout of the broadcast source: components along broadcast (size-1) dims zeroed."""

        def pr(b: Basis) -> Basis:
            return tuple(0 if s == 1 else x for x, s in zip(b, src_shape, strict=False))

        return Layout(tuple(src_shape), tuple(pr(b) for b in self.reg), tuple(pr(b) for b in self.lane), tuple(pr(b) for b in self.warp))

    def permute(self, order: list[int]) -> Layout:
        """Layout of trans(x, order) when x has this layout."""

        def pm(b: Basis) -> Basis:
            return tuple(b[i] for i in order)

        shape = tuple(self.shape[i] for i in order)
        return Layout(shape, tuple(pm(b) for b in self.reg), tuple(pm(b) for b in self.lane), tuple(pm(b) for b in self.warp))

    def contiguous_vec(self, dim: int) -> int:
        """How many leading registers are consecutive along `dim` (the vector width of an access)."""
        n = 0
        for b in self.reg:
            want = tuple((1 << n) if i == dim else 0 for i in range(len(self.shape)))
            if b != want:
                break
            n += 1
        return 1 << n


def _unit(rank: int, dim: int, value: int) -> Basis:
    return tuple(value if i == dim else 0 for i in range(rank))


def blocked(shape: tuple[int, ...], num_warps: int, vec: int = 4, order: tuple[int, ...] | None = None) -> Layout:
    """A blocked layout: `vec` elements per thread along order[0], then lanes, then warps, in `order`;
    what is left of each dimension becomes more registers, and unused lanes/warps replicate."""
    rank = len(shape)
    order = order if order is not None else tuple(range(rank - 1, -1, -1))
    covered = [1] * rank  # size covered so far per dim
    reg: list[Basis] = []
    if rank:
        d = order[0]
        while covered[d] < min(vec, shape[d]):
            reg.append(_unit(rank, d, covered[d]))
            covered[d] *= 2

    def fill(nbits: int) -> list[Basis]:
        out = []
        for _ in range(nbits):
            for d in order:
                if covered[d] < shape[d]:
                    out.append(_unit(rank, d, covered[d]))
                    covered[d] *= 2
                    break
            else:
                out.append((0,) * rank)
        return out

    lane = fill(5)
    warp = fill(log2(num_warps))
    for d in order:
        while covered[d] < shape[d]:
            reg.append(_unit(rank, d, covered[d]))
            covered[d] *= 2
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def scan_layout(shape: tuple[int, ...], axis: int, num_warps: int, max_chunk: int | None = None) -> Layout:
    """The scanned axis spread over the low register bits (a chunk of consecutive elements per thread),
    then the low lane bits, then the low warp bits, the chunk sized so that they cover the axis together;
    the other dimensions take what is left. reduce.py's scan runs in three levels over this shape.
    `max_chunk` caps the chunk (16 bytes of the element, as an access vectorises): the rest of the axis
    then repeats over higher register bits, segments that the scan carries in order (Triton's blocked
    layout, whose accesses coalesce: a warp's lanes read consecutive 16-byte pieces)."""
    rank = len(shape)
    order = (axis,) + tuple(d for d in range(rank - 1, -1, -1) if d != axis)
    chunk = max(1, shape[axis] // (32 * num_warps))
    if max_chunk is not None:
        chunk = max(1, min(chunk, max_chunk))
    return blocked(shape, num_warps, vec=chunk, order=order)


@dataclass(frozen=True)
class MmaSpec:
    """How one `dot` runs on the tensor cores (mma.sync): operand kind, instruction shape, warp grid."""

    kind: str  # "f16", "bf16", "tf32", "tf32x3", "s8", "u8"
    k: int  # the instruction's K (8 for tf32, 16 for 16-bit operands, 32 for 8-bit)
    wm: int  # warps along M
    wn: int  # warps along N
    mrep: int  # 16-row instruction tiles per warp
    nrep: int  # 8-column instruction tiles per warp


def mma_layout(shape: tuple[int, ...], spec: MmaSpec, num_warps: int) -> Layout:
    """The accumulator layout of m16n8 mma.sync: lane = 4 * row + col / 2 inside each 16x8 tile, two
    columns per register pair and rows +8 in the second pair; warps take blocks of tiles (N first)."""
    reg = [(0, 1), (8, 0)] + [(0, 8 << i) for i in range(log2(spec.nrep))] + [(16 << i, 0) for i in range(log2(spec.mrep))]
    lane = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    warp = [(0, 8 * spec.nrep << j) for j in range(log2(spec.wn))] + [(16 * spec.mrep << j, 0) for j in range(log2(spec.wm))]
    warp += [(0, 0)] * (log2(num_warps) - len(warp))
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def is_pow2_shape(shape: tuple[int, ...]) -> bool:
    return all(s > 0 and s & (s - 1) == 0 for s in shape)


WGMMA_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}  # the instruction's K: 32 bytes of each


@dataclass(frozen=True)
class WgmmaSpec:
    """How one `dot` runs on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): both operands in shared
    memory, warpgroups of 4 warps in a wm x wn grid (M first), each taking `mrep` m64 tiles by `n`
    columns (one m64nNkK instruction per m64 tile and K step, K = 32 bytes of the operand type)."""

    kind: str  # A's type: "f16", "bf16", "tf32", "e4m3", "e5m2"
    wm: int  # warpgroups along M
    wn: int  # warpgroups along N
    mrep: int  # m64 tiles per warpgroup
    n: int  # the instruction's N: columns per warpgroup
    b_kind: str = ""  # B's type where it differs from A's (fp8 only: e4m3 x e5m2 and the reverse)
    acc: str = "f32"  # the accumulator: f32, or f16 (fp8 operands with an f16 accumulator)

    @property
    def kinds(self) -> tuple[str, str]:
        return self.kind, self.b_kind or self.kind

    @property
    def k(self) -> int:
        return WGMMA_K[self.kind]

    @property
    def k_major(self) -> bool:
        """Both operands must be K-major in shared memory: wgmma transposes 16-bit types only."""
        return self.kind not in ("f16", "bf16")


def wgmma_layout(shape: tuple[int, ...], spec: WgmmaSpec, num_warps: int) -> Layout:
    """The accumulator layout of m64nNkK (f32, any operand type): each warp of a warpgroup holds 16 rows as the m16n8
    mma.sync fragment, repeated every 8 columns; registers of further m64 tiles follow; warpgroups
    take blocks of mrep*64 rows (M first), then of n columns."""
    reg = [(0, 1), (8, 0)] + [(0, 8 << i) for i in range(log2(spec.n // 8))] + [(64 << i, 0) for i in range(log2(spec.mrep))]
    lane = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    warp = [(16, 0), (32, 0)] + [(64 * spec.mrep << j, 0) for j in range(log2(spec.wm))]
    warp += [(0, spec.n << j) for j in range(log2(spec.wn))]
    warp += [(0, 0)] * (log2(num_warps) - len(warp))
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))
