"""gpu-layout: chooses the distributed layout (layouts.py) of every tile value, the coalesced access layout
of every tile load/store/atomic and the vector width of every tile load/store, and the tensor-core plan of
every dot; records them as gpu.* attributes (plan.py) for the cuda lowering.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.core import Function, Module, Operation, Value, uses_in
from ....ir.types import PointerType, TileType, elem_type, is_fp8, shape_of
from ....passes.axis_analysis import AxisInfo, axis_analysis
from ....passes.ir_utils import defining_op
from ..layout_reshape import reshape_layout
from ..layouts import (
    WGMMA_K,
    Layout,
    MmaSpec,
    WgmmaSpec,
    blocked,
    log2,
    mma_layout,
    scan_layout,
    wgmma_layout,
)
from ..plan import (
    ACCESS,
    BEFORE_LAYOUTS,
    LAYOUT,
    LAYOUTS,
    LAZY_OPS,
    MMA,
    NUM_WARPS,
    STRONG,
    VEC,
    LayoutPlan,
    format_layout,
    format_mma,
    is_lazy,
)
from ..sort import sort_layout

MMA_KINDS = {("f16", "f32"): ("f16", 16), ("bf16", "f32"): ("bf16", 16), ("i8", "i32"): ("s8", 32), ("u8", "i32"): ("u8", 32),
             ("f8e4nv", "f32"): ("f16", 16), ("f8e5", "f32"): ("f16", 16)}  # fmt: skip
# fp8 has no mma.sync: its operands are staged as f16 (every e4m3 and e5m2 value is one) and run as f16 dots


def mma_spec(op: Operation, num_warps: int, sm: int) -> MmaSpec | None:
    """The mma.sync plan of a dot, or None where the FMA path must take it (sm < 80, other dtypes,
    f32 dots that ask for ieee precision, tiles smaller than one instruction). f32 dots with tf32x3
    take three tf32 products (mma.py); fp8 dots (either format for A and B) are planned as f16 ones."""
    if sm < 80:
        return None
    a, _, c = op.operands
    kind = MMA_KINDS.get((elem_type(a.type).name, elem_type(c.type).name))
    prec = op.attrs.get("input_precision")
    if elem_type(a.type).name == "f32" and elem_type(c.type).name == "f32" and prec in ("tf32", "tf32x3"):
        kind = (prec, 8)
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


WGMMA_TYPES = {"f16": "f16", "bf16": "bf16", "f8e4nv": "e4m3", "f8e5": "e5m2"}
WGMMA_MAX_ACC = 128  # f32 accumulator registers per thread; more would spill


def wgmma_kinds(op: Operation) -> tuple[str, str] | None:
    """wgmma's types of A and B for a dot with an f32 accumulator: f16, bf16, fp8 (e4m3/e5m2, mixed too),
    and f32 with input_precision tf32 (ieee stays exact on the FMA path; tf32x3 takes mma.sync, which
    splits the operands in registers, where wgmma would need split copies of its shared tiles); fp8
    also with an f16 accumulator (wgmma's .f16 result)."""
    a, b, c = op.operands
    ea, eb = elem_type(a.type).name, elem_type(b.type).name
    if elem_type(c.type).name != "f32" and not (elem_type(c.type).name == "f16" and is_fp8(a.type) and is_fp8(b.type)):
        return None
    if ea == eb == "f32":
        return ("tf32", "tf32") if op.attrs.get("input_precision") == "tf32" else None
    ka, kb = WGMMA_TYPES.get(ea), WGMMA_TYPES.get(eb)
    if ka is None or kb is None or (ka != kb and not {ka, kb} <= {"e4m3", "e5m2"}):
        return None
    return ka, kb


def wgmma_spec(op: Operation, num_warps: int) -> WgmmaSpec | None:
    """The warpgroup-MMA plan of a dot (sm_90a), or None where mma.sync must take it: other dtypes,
    fewer than 4 warps, M not a multiple of 64, K not a multiple of the instruction's (16; 8 for tf32,
    32 for fp8), N under 16 or more than 256 columns (or 128 accumulators) per warpgroup. Warpgroups
    split M first; a split of N keeps 128-byte column blocks."""
    a, _, c = op.operands
    kinds = wgmma_kinds(op)
    (m, k), n = a.type.shape, c.type.shape[1]
    nwg = num_warps // 4
    if kinds is None or nwg < 1 or m % 64 or k % WGMMA_K[kinds[0]] or n % 16:
        return None
    wm = min(nwg, m // 64)
    wn = nwg // wm
    cols = n // wn
    eb = elem_type(op.operands[1].type).bits // 8
    if cols < 16 or cols > 256 or (wn > 1 and cols * eb % 128):
        return None
    mrep = m // (64 * wm)
    if mrep * cols // 2 > WGMMA_MAX_ACC:
        return None
    acc = elem_type(c.type).name
    return WgmmaSpec(kinds[0], wm, wn, mrep, cols, kinds[1] if kinds[1] != kinds[0] else "", acc)


# ops that combine a tile's elements across threads
_COMBINING = frozenset({"reduce", "reduce_with", "scan", "sort", "gather", "histogram"})


@dataclass
class _Assignment(LayoutPlan):
    """The plan being built, with what only the pass needs: the values whose layout an access or a
    dot chose (others follow them) and the axis analysis."""

    axis: dict[Value, AxisInfo] = field(default_factory=dict)
    uses: dict[Value, list[Operation]] = field(default_factory=dict)
    # (for op, carried index) -> the layout its users after the loop read it in (_preferences)
    prefer: dict[tuple[Operation, int], Layout] = field(default_factory=dict)
    combines: bool = False  # the function reduces, scans, sorts or gathers across a tile's threads


@dataclass(frozen=True)
class GpuLayoutPass:
    """Gives every tile value a natural layout and every load/store/atomic a coalesced access layout.

    Accesses are blocked along the pointer tile's most contiguous dimension, with up to 16 bytes per
    thread there; other values inherit layouts from their operands (reductions take the slice of
    their operand's layout), so elementwise code between accesses needs no conversion. A dot that
    the tensor cores can take (sm >= 80) leaves its result in the mma accumulator layout; with `wgmma`
    on (the sm_90a target), a dot that warpgroup MMA can take (wgmma_spec) in the wgmma one.
    Guarantees: every function gets gpu.num_warps; every tile value defined by an op, loop or branch
    gets its layout (gpu.layout, gpu.access, gpu.layouts); every tile load/store gets gpu.vec, the
    elements per access that axis analysis proves contiguous, aligned and equally masked (at most 16
    bytes); every dot taken by the tensor cores gets gpu.mma. The IR is otherwise unchanged.
    """

    name = "gpu-layout"
    num_warps: int = 4
    sm: int = 0
    wgmma: bool = False

    def apply(self, module: Module) -> None:
        for fn in module.functions:
            _record(fn, self.assign(fn))

    def assign(self, fn: Function) -> _Assignment:
        """Every value's layout, in program order; then again while a loop-carried tile that nothing in its
        loop gives a layout (a running sum of recomputable values) is read after the loop in a layout of
        its users' choosing: the next round carries it in that layout (at most 3 rounds)."""
        axis, uses = axis_analysis(fn), uses_in(fn.body.block)
        combines = any(u.name in _COMBINING for users in uses.values() for u in users)
        prefer: dict = {}
        for _ in range(3):
            plan = _Assignment(self.num_warps, axis=axis, uses=uses, prefer=dict(prefer), combines=combines)
            for a in fn.args:
                if isinstance(a.type, TileType):
                    plan.natural[a] = plan.default(a.type.shape)
            self._block(fn.body.block.ops, plan)
            found = {k: v for k, v in self._preferences(fn, plan).items() if k not in prefer}
            if not found:
                break
            prefer |= found
        return plan

    def _preferences(self, fn: Function, plan: _Assignment) -> dict:
        """Loop-carried tiles still weak after assignment whose loop result is read, through recomputable
        ops, by a user with a layout of its own: that user's layout, seen from the carried tile."""
        out = {}
        for op in fn.walk():
            if op.name != "for":
                continue
            for i, (a, r) in enumerate(zip(op.regions[0].block.args[1:], op.results, strict=False)):
                if not isinstance(a.type, TileType) or a in plan.strong:
                    continue
                want = self._demand(r, plan, 0)
                if want is None or want.shape != tuple(a.type.shape):
                    continue
                # copies (zero register bases, where the user broadcasts it) are not carried: a register remap
                want = Layout(want.shape, tuple(b for b in want.reg if any(b)), want.lane, want.warp)
                if want != plan.natural.get(a):
                    out[(op, i)] = want
        return out

    def _demand(self, v: Value, plan: _Assignment, depth: int) -> Layout | None:
        """The layout the first user of `v` with a layout of its own reads it in: a store's access, or a
        recomputable op with another operand of fixed layout (not itself computed from `v`), followed
        through recomputable ops as the lowering computes them (lower.py lazy_operands); None when there
        is none within a few ops."""
        derived, todo = {v}, [v]
        while todo and len(derived) < 64:
            for use in plan.uses.get(todo.pop(), []):
                if use.results and isinstance(use.results[0].type, TileType) and is_lazy(use):
                    if use.results[0] not in derived:
                        derived.add(use.results[0])
                        todo.append(use.results[0])
        return self._demand_from(v, plan, derived, depth)

    def _demand_from(self, v: Value, plan: _Assignment, derived: set, depth: int) -> Layout | None:
        for use in plan.uses.get(v, []):
            if use.name == "store" and use.operands[0] is not v and use in plan.access:
                return plan.access[use]
            if not use.results or not isinstance(use.results[0].type, TileType) or not is_lazy(use):
                continue
            r = use.results[0]
            anchors = [o for o in use.operands if o not in derived and o in plan.strong
                       and isinstance(o.type, TileType) and tuple(o.type.shape) == tuple(r.type.shape)]  # fmt: skip
            lay = plan.natural[anchors[0]] if anchors else None
            if lay is None and depth < 8:
                lay = self._demand_from(r, plan, derived, depth + 1)
            if lay is None:
                continue
            name = use.name
            if name == "broadcast":
                return lay.project(shape_of(v.type))
            if name == "expand_dims":
                return lay.without_dim(use.attrs["axis"])
            if name == "trans":
                order = use.attrs["order"]
                return lay.permute([order.index(k) for k in range(len(order))])
            if name in ("splat", "constant", "make_range", "reshape", "desc_box"):
                continue
            return lay
        return None

    def _block(self, ops: list[Operation], plan: _Assignment) -> None:
        for op in ops:
            self._op(op, plan)

    def _access_layout(self, ptr: Value, plan: _Assignment) -> Layout:
        shape = shape_of(ptr.type)
        info = plan.axis.get(ptr)
        ebytes = elem_type(ptr.type).pointee.bytes
        if info is None or not shape:
            return plan.default(shape)
        dim = max(range(len(shape)), key=lambda d: (info.contiguity[d], d))
        contig = info.contiguity[dim]
        # as Triton's coalescing: no wider than the address is known to be aligned (a row at a runtime stride
        # gets one element a thread, so that a warp's scalar accesses are consecutive, not 16 bytes apart)
        align = max(1, info.divisibility[dim] // max(1, ebytes))
        vec = max(1, min(contig, align, max(1, 16 // ebytes), shape[dim]))
        numel = 1
        for n in shape:
            numel *= n
        per_thread = numel // (32 * self.num_warps)
        if per_thread >= 2 or (per_thread == 1 and not plan.combines):
            # as Triton's coalescing caps it: a tile with at least two elements for every thread but fewer
            # than a 16-byte vector each spreads over all threads (narrower vectors) rather than leaving
            # replicated warps to load the same addresses again ([1024] fp16 over 8 warps: 4 a thread, v2).
            # At one element a thread, where nothing combines values across threads: FlagGems' rotary
            # embedding ([128] fp16 heads on 4 warps) had 16 threads' work repeated by the other 112. A
            # function that reduces keeps the wide vector there: a 128-column row in one warp reduces
            # with shuffles alone, not through shared memory across warps.
            vec = min(vec, per_thread)
        if vec == 1 and ptr in plan.strong and contig < 2:
            return plan.natural[ptr]  # a gather: keep the layout the offsets came in
        order = (dim,) + tuple(d for d in range(len(shape) - 1, -1, -1) if d != dim)
        return blocked(shape, self.num_warps, vec, order)

    def _scan_access(self, op: Operation, plan: _Assignment) -> Layout | None:
        """The scan layout, for a load whose one use is a `scan` of it (or a store of a scan's result) along
        the pointers' contiguous dimension: each thread's chunk of the scanned axis is consecutive in memory,
        so the access stays vectorised and the tile never crosses shared memory whole (a [64, 1024] f32
        cumsum over 4 warps converted through 262 KB of it, more than a block has)."""
        if op.name == "load":
            users = plan.uses.get(op.results[0], [])
            scan = users[0] if len(users) == 1 and users[0].name == "scan" else None
        elif op.name == "store":
            scan = defining_op(op.operands[1])
            scan = scan if scan is not None and scan.name == "scan" else None
        else:
            return None
        info = plan.axis.get(op.operands[0])
        if scan is None or info is None:
            return None
        shape = shape_of(op.operands[0].type)
        axis = scan.attrs["axis"]
        if max(range(len(shape)), key=lambda d: (info.contiguity[d], d)) != axis or info.contiguity[axis] < 2:
            return None
        return self._scan_layout(scan)

    def _scan_layout(self, scan: Operation) -> Layout:
        """A `scan`'s layout: a thread's chunk of the axis at most 16 bytes of its element, the rest of the axis
        in segments over higher registers, so that its loads and stores coalesce (reduce.py scan_values)."""
        res = scan.results[0]
        ebytes = max(max(1, elem_type(r.type).bytes) for r in scan.results)  # scan_with: its widest operand's
        return scan_layout(tuple(res.type.shape), scan.attrs["axis"], self.num_warps, max_chunk=max(1, 16 // ebytes))

    def _carry_addresses(self, args: list[Value], lays: list, plan: _Assignment) -> None:
        """A carried address tile that a load or store in the loop reads directly (a pointer tile advanced
        each iteration, as Triton's tutorials write them) is carried in that access's layout, as Triton's
        coalescing gives the loop's argument the load's layout: the init is converted once before the loop
        instead of the addresses every iteration (through shared memory, 8 bytes an element)."""
        for i, a in enumerate(args):
            if lays[i] is None or not isinstance(elem_type(a.type), PointerType):
                continue
            users = [u for u in plan.uses.get(a, []) if u.name in ("load", "store") and u.operands[0] is a]
            if users:
                lays[i] = self._access_layout(a, plan)
                self._set(plan, a, lays[i], True)

    def _adopt_yielded(self, op: Operation, args: list[Value], lays: list, plan: _Assignment) -> bool:
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

    def _set(self, plan: _Assignment, v: Value, lay: Layout, strong: bool) -> None:
        """`v` takes `lay`, strong or not: a loop's body is assigned again after one of its carried tiles
        took the layout its body yields, and a value strong in the earlier round must not stay strong in a
        layout it no longer has (a nested loop's accumulator then kept its default layout and converted
        every iteration's product through shared memory)."""
        plan.natural[v] = lay
        if strong:
            plan.strong.add(v)
        else:
            plan.strong.discard(v)

    def _op(self, op: Operation, plan: _Assignment) -> None:  # noqa: C901 - one case per op family
        name = op.name
        if name in ("load", "store", "atomic_rmw", "atomic_cas"):
            ptr = op.operands[0]
            if isinstance(ptr.type, TileType):
                lay = self._scan_access(op, plan) or self._access_layout(ptr, plan)
                plan.access[op] = lay
                for r in op.results:
                    self._set(plan, r, lay, True)
            return
        if name in ("for", "while"):
            inits = op.operands[3:] if name == "for" else op.operands
            lays = [plan.natural.get(v) for v in inits]
            body = op.regions[0].block
            args = body.args[1:] if name == "for" else body.args
            for i, init in enumerate(inits):
                if name == "for" and init not in plan.strong and (op, i) in plan.prefer:
                    lays[i] = plan.prefer[(op, i)]
            for i, (a, lay, init) in enumerate(zip(args, lays, inits, strict=False)):
                if lay is not None:
                    self._set(plan, a, lay, init in plan.strong or (op, i) in plan.prefer)
            if name == "for":
                self._carry_addresses(args, lays, plan)
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
        if name in ("reduce_with", "scan_with"):  # every result in one layout, the combine inline
            strong = [v for v in op.operands if v in plan.strong]
            src_lay = plan.natural[strong[0] if strong else op.operands[0]]
            shape = op.results[0].type.shape
            axis = op.attrs["axis"]
            lay = (src_lay.without_dim(axis) if name == "reduce_with"
                   else self._scan_layout(op))
            for r in op.results:
                self._set(plan, r, lay, True)
            return
        res = op.results[0]
        shape = res.type.shape
        src = op.operands[0] if op.operands else None
        if name == "reduce":
            self._set(plan, res, plan.natural[src].without_dim(op.attrs["axis"]), True)
        elif name == "scan":
            self._set(plan, res, self._scan_layout(op), True)
        elif name == "sort":  # where the operand sits, when its layout carries the axis bit by bit
            self._set(plan, res, sort_layout(plan.natural[src], op.attrs["axis"], self.num_warps), True)
        elif name == "gather":  # where the indices sit; the source goes through shared memory
            self._set(plan, res, plan.natural[op.operands[1]], True)
        elif name == "dot":
            wg = wgmma_spec(op, self.num_warps) if self.wgmma and self.sm >= 90 else None
            spec = mma_spec(op, self.num_warps, self.sm) if wg is None else None
            if wg is not None:
                plan.mma[op] = wg
                self._set(plan, res, wgmma_layout(shape, wg, self.num_warps), True)
            elif spec is not None:
                plan.mma[op] = spec
                self._set(plan, res, mma_layout(shape, spec, self.num_warps), True)
            else:
                self._set(plan, res, blocked(shape, self.num_warps, vec=4), True)
        elif name == "expand_dims":
            self._set(plan, res, plan.natural[src].insert_dim(op.attrs["axis"]), src in plan.strong)
        elif name == "trans":
            self._set(plan, res, plan.natural[src].permute(op.attrs["order"]), src in plan.strong)
        elif name == "reshape":  # the layout in which the reshape moves no data (layout_reshape.py)
            self._set(plan, res, reshape_layout(plan.natural[src], shape) or plan.default(shape), src in plan.strong)
        elif is_lazy(op) and name not in ("broadcast", "splat", "constant", "make_range"):
            tiles = [v for v in op.operands if isinstance(v.type, TileType) and v.type.shape == shape]
            strong = [v for v in tiles if v in plan.strong]
            pick = strong[0] if strong else (tiles[0] if tiles else None)
            lay = plan.natural[pick] if pick is not None else plan.default(shape)
            self._set(plan, res, lay, bool(strong))
        else:
            self._set(plan, res, plan.default(shape), name not in LAZY_OPS)


# ---- the record -------------------------------------------------------------------------------------

_OWN = (LAYOUT, ACCESS, VEC, LAYOUTS, BEFORE_LAYOUTS, MMA, STRONG)
MULTI_RESULT = ("for", "if", "while", "reduce_with", "scan_with")  # layouts and strong flags as lists


def _record(fn: Function, plan: _Assignment) -> None:
    fn.attrs[NUM_WARPS] = plan.num_warps
    for p, a in zip(fn.params, fn.args, strict=True):
        if a in plan.natural:
            p.attrs[LAYOUT] = format_layout(plan.natural[a])
        if a in plan.strong:
            p.attrs[STRONG] = True
    for op in fn.walk():
        for k in _OWN:
            op.attrs.pop(k, None)
        if op in plan.access:
            op.attrs[ACCESS] = format_layout(plan.access[op])
            if op.name in ("load", "store"):
                op.attrs[VEC] = _vec(op, plan.access[op], plan.axis)
        elif op.name in MULTI_RESULT:
            _record_list(op, LAYOUTS, op.results, plan)
            if op.name == "while":
                _record_list(op, BEFORE_LAYOUTS, op.regions[0].block.args, plan)
        elif op.results and isinstance(op.results[0].type, TileType) and op.results[0] in plan.natural:
            op.attrs[LAYOUT] = format_layout(plan.natural[op.results[0]])
        if op in plan.mma:
            op.attrs[MMA] = format_mma(plan.mma[op])
        _record_strong(op, plan)


def _record_strong(op: Operation, plan: _Assignment) -> None:
    if op.name in MULTI_RESULT:
        flags = [r in plan.strong for r in op.results]
        if any(flags):
            op.attrs[STRONG] = flags
    elif op.results and op.results[0] in plan.strong:
        op.attrs[STRONG] = True


def _record_list(op: Operation, key: str, values: list[Value], plan: _Assignment) -> None:
    texts = [format_layout(plan.natural[v]) if v in plan.natural else "" for v in values]
    if any(texts):
        op.attrs[key] = texts


def _vec(op: Operation, lay: Layout, axis: dict[Value, AxisInfo]) -> int:
    """Elements per access of a tile load/store in layout `lay`: consecutive registers along the layout's
    first register dimension that are contiguous, aligned to the access size and under one mask bit."""
    ptr = op.operands[0]
    if not lay.reg or not any(lay.reg[0]):
        return 1
    dim = next(i for i, x in enumerate(lay.reg[0]) if x)
    w = lay.contiguous_vec(dim)
    eb = elem_type(ptr.type).pointee.bytes
    info = axis.get(ptr)
    contig = info.contiguity[dim] if info else 1
    div = info.divisibility[dim] if info else 1
    mask_index = 1 if op.name == "load" else 2
    mconst = w
    if mask_index < len(op.operands):
        minfo = axis.get(op.operands[mask_index])
        mconst = minfo.constancy[dim] if minfo else 1
    while w > 1 and (w > contig or w * eb > 16 or div % (w * eb) or mconst < w):
        w //= 2
    return w
