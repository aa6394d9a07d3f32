"""Distributed layouts of tiles over the threads of a CUDA block, and the layout-assignment pass.

A layout maps (register, lane, warp) bits to tile coordinates: each bit has a basis vector, and the
coordinate a thread's register holds is the sum of the bases of the set bits (bases of one dimension
are distinct powers of two, so sum == xor). A zero basis means replication. Triton's "blocked"
layouts (sizePerThread / threadsPerWarp / warpsPerCTA / order) are one family of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.core import Function, Operation, Value
from ....ir.ops import OPS
from ....ir.types import TileType, elem_type, shape_of
from ....passes.axis_analysis import AxisInfo, axis_analysis
from ..layout_reshape import reshape_layout

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


def scan_layout(shape: tuple[int, ...], axis: int, num_warps: int) -> Layout:
    """Every element along `axis` in one thread's registers (for sequential scans)."""
    rank = len(shape)
    order = (axis,) + tuple(d for d in range(rank - 1, -1, -1) if d != axis)
    return blocked(shape, num_warps, vec=shape[axis], order=order)


@dataclass(frozen=True)
class MmaSpec:
    """How one `dot` runs on the tensor cores (mma.sync): operand kind, instruction shape, warp grid."""

    kind: str  # "f16", "bf16", "tf32", "s8", "u8"
    k: int  # the instruction's K (8 for tf32, 16 for 16-bit operands, 32 for 8-bit)
    wm: int  # warps along M
    wn: int  # warps along N
    mrep: int  # 16-row instruction tiles per warp
    nrep: int  # 8-column instruction tiles per warp


MMA_KINDS = {("f16", "f32"): ("f16", 16), ("bf16", "f32"): ("bf16", 16), ("i8", "i32"): ("s8", 32), ("u8", "i32"): ("u8", 32)}


def mma_spec(op: Operation, num_warps: int, sm: int) -> MmaSpec | None:
    """The mma.sync plan of a dot, or None where the FMA path must take it (sm < 80, other dtypes,
    f32 dots that ask for ieee or tf32x3 precision, tiles smaller than one instruction)."""
    if sm < 80:
        return None
    a, _, c = op.operands
    kind = MMA_KINDS.get((elem_type(a.type).name, elem_type(c.type).name))
    if elem_type(a.type).name == "f32" and elem_type(c.type).name == "f32" and op.attrs.get("input_precision") == "tf32":
        kind = ("tf32", 8)
    if kind is None:
        return None
    (m, k), n = a.type.shape, c.type.shape[1]
    if m % 16 or n % 8 or k % kind[1]:
        return None
    wm = wn = 1
    for _ in range(log2(num_warps)):
        rm, rn = m // (16 * wm), n // (8 * wn)
        if rm > 1 and rm >= rn:
            wm *= 2
        elif rn > 1:
            wn *= 2
    return MmaSpec(kind[0], kind[1], wm, wn, m // (16 * wm), n // (8 * wn))


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


# ---- the pass --------------------------------------------------------------------------------------

LAZY_OPS = frozenset(
    {"make_range", "splat", "constant", "broadcast", "expand_dims", "trans", "reshape", "multiple_of", "max_contiguous"}
)


def is_lazy(op: Operation) -> bool:
    """Pure ops recomputed in whatever layout a user asks for (no conversion through shared memory)."""
    return op.name in LAZY_OPS or (OPS[op.name].has("elementwise") and OPS[op.name].has("pure"))


@dataclass
class LayoutPlan:
    """The layout each tile value is materialised in, and the layout each memory op accesses in."""

    num_warps: int
    natural: dict[Value, Layout] = field(default_factory=dict)
    strong: set[Value] = field(default_factory=set)
    access: dict[Operation, Layout] = field(default_factory=dict)
    axis: dict[Value, AxisInfo] = field(default_factory=dict)
    mma: dict[Operation, MmaSpec] = field(default_factory=dict)

    def default(self, shape: tuple[int, ...]) -> Layout:
        return blocked(shape, self.num_warps)


@dataclass(frozen=True)
class GpuLayoutPass:
    """Gives every tile value a natural layout and every load/store/atomic a coalesced access layout.

    Accesses are blocked along the pointer tile's most contiguous dimension, with up to 16 bytes per
    thread there; other values inherit layouts from their operands (reductions take the slice of
    their operand's layout), so elementwise code between accesses needs no conversion. A dot that
    the tensor cores can take (sm >= 80) leaves its result in the mma accumulator layout.
    """

    name = "gpu-layout"
    num_warps: int = 4
    sm: int = 0

    def run(self, fn: Function) -> LayoutPlan:
        plan = LayoutPlan(self.num_warps)
        plan.axis = axis_analysis(fn)
        for a in fn.args:
            if isinstance(a.type, TileType):
                plan.natural[a] = plan.default(a.type.shape)
        self._block(fn.body.block.ops, plan)
        return plan

    def _block(self, ops: list[Operation], plan: LayoutPlan) -> None:
        for op in ops:
            self._op(op, plan)

    def _access_layout(self, ptr: Value, plan: LayoutPlan) -> Layout:
        shape = shape_of(ptr.type)
        info = plan.axis.get(ptr)
        ebytes = elem_type(ptr.type).pointee.bytes
        if info is None or not shape:
            return plan.default(shape)
        dim = max(range(len(shape)), key=lambda d: (info.contiguity[d], d))
        contig = info.contiguity[dim]
        vec = max(1, min(contig, max(1, 16 // ebytes), shape[dim]))
        if vec == 1 and ptr in plan.strong:
            return plan.natural[ptr]  # no vector access possible: keep the layout the offsets came in
        order = (dim,) + tuple(d for d in range(len(shape) - 1, -1, -1) if d != dim)
        return blocked(shape, self.num_warps, vec, order)

    def _adopt_yielded(self, op: Operation, args: list[Value], lays: list, plan: LayoutPlan) -> bool:
        """A loop-carried tile whose init has no preferred layout (zeros) takes the layout of the value
        the body yields, so the accumulation needs no conversion per iteration."""
        changed = False
        term = op.regions[0].block.terminator
        for i, (a, v, init) in enumerate(zip(args, term.operands, op.operands[3:], strict=False)):
            if lays[i] is None or init in plan.strong or v not in plan.strong:
                continue
            if plan.natural[v] != lays[i] and plan.natural[v].shape == lays[i].shape:
                lays[i] = plan.natural[v]
                self._set(plan, a, lays[i], True)
                changed = True
        return changed

    def _set(self, plan: LayoutPlan, v: Value, lay: Layout, strong: bool) -> None:
        plan.natural[v] = lay
        if strong:
            plan.strong.add(v)

    def _op(self, op: Operation, plan: LayoutPlan) -> None:  # noqa: C901 - one case per op family
        name = op.name
        if name in ("load", "store", "atomic_rmw", "atomic_cas"):
            ptr = op.operands[0]
            if isinstance(ptr.type, TileType):
                lay = self._access_layout(ptr, plan)
                plan.access[op] = lay
                for r in op.results:
                    self._set(plan, r, lay, True)
            return
        if name in ("for", "while"):
            inits = op.operands[3:] if name == "for" else op.operands
            lays = [plan.natural.get(v) for v in inits]
            body = op.regions[0].block
            args = body.args[1:] if name == "for" else body.args
            for a, lay, init in zip(args, lays, inits, strict=False):
                if lay is not None:
                    self._set(plan, a, lay, init in plan.strong)
            if name == "while":
                self._block(body.ops, plan)
                cond = body.terminator
                for a, v in zip(op.regions[1].block.args, cond.operands[1:], strict=False):
                    if isinstance(v.type, TileType):
                        self._set(plan, a, plan.natural[v], True)
                self._block(op.regions[1].block.ops, plan)
                for r, v in zip(op.results, cond.operands[1:], strict=False):
                    if isinstance(v.type, TileType):
                        self._set(plan, r, plan.natural[v], True)
                return
            self._block(body.ops, plan)
            if self._adopt_yielded(op, args, lays, plan):
                self._block(body.ops, plan)
            for r, lay in zip(op.results, lays, strict=False):
                if lay is not None:
                    self._set(plan, r, lay, True)
            return
        if name == "if":
            for region in op.regions:
                self._block(region.block.ops, plan)
            then_yield = op.regions[0].block.terminator
            for r, v in zip(op.results, then_yield.operands, strict=False):
                if isinstance(v.type, TileType):
                    self._set(plan, r, plan.natural[v], True)
            return
        if not op.results or not isinstance(op.results[0].type, TileType):
            return
        res = op.results[0]
        shape = res.type.shape
        src = op.operands[0] if op.operands else None
        if name == "reduce":
            self._set(plan, res, plan.natural[src].without_dim(op.attrs["axis"]), True)
        elif name == "scan":
            self._set(plan, res, scan_layout(shape, op.attrs["axis"], self.num_warps), True)
        elif name == "dot":
            spec = mma_spec(op, self.num_warps, self.sm)
            if spec is not None:
                plan.mma[op] = spec
                self._set(plan, res, mma_layout(shape, spec, self.num_warps), True)
            else:
                self._set(plan, res, blocked(shape, self.num_warps, vec=4), True)
        elif name == "expand_dims":
            self._set(plan, res, plan.natural[src].insert_dim(op.attrs["axis"]), src in plan.strong)
        elif name == "trans":
            self._set(plan, res, plan.natural[src].permute(op.attrs["order"]), src in plan.strong)
        elif name == "reshape":  # the layout in which the reshape moves no data (passes/layout_reshape.py)
            self._set(plan, res, reshape_layout(plan.natural[src], shape) or plan.default(shape), src in plan.strong)
        elif is_lazy(op) and name not in ("broadcast", "splat", "constant", "make_range"):
            tiles = [v for v in op.operands if isinstance(v.type, TileType) and v.type.shape == shape]
            strong = [v for v in tiles if v in plan.strong]
            pick = strong[0] if strong else (tiles[0] if tiles else None)
            lay = plan.natural[pick] if pick is not None else plan.default(shape)
            self._set(plan, res, lay, bool(strong))
        else:
            self._set(plan, res, plan.default(shape), name not in LAZY_OPS)
