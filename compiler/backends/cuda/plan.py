"""What the cuda passes decide, kept in the tile IR as `gpu.*` attributes (they print and parse, so every
decision is golden-testable as text), and the plans the lowering reads back from there:

  kernel               gpu.num_warps = 4
  tile-valued op       gpu.layout = "<layout>"     the layout its result is materialised in
  tile load/store/...  gpu.access = "<layout>"     the access (and result) layout; gpu.vec = N elements per access
  for / if / while     gpu.layouts = ["<layout>" or "" per result]; a for's iter args and a while's after-region
  reduce_with/scan_with  args have the same; a while's before-region args have gpu.before_layouts
  tile param (helper)  gpu.layout = "<layout>"
  strong tile values   gpu.strong = true on the op (a list of one bool per result on the ops above) or param:
                       the layout came from memory, a reduction or a carried value, not from index math
  dot on tensor cores  gpu.mma = "f16 k=16 warps=2x2 reps=2x4" (mma.sync; fp8 operands run as f16), or
                       gpu.mma = "wgmma f16 warpgroups=2x1 reps=1 n=256" (warpgroup MMA, sm_90a; the
                       kind is f16, bf16, tf32, e4m3, e5m2, or e4m3.e5m2 / e5m2.e4m3 for A.B;
                       "acc=f16" at the end for fp8 operands with an f16 accumulator)
  pipelined for        gpu.stages = S; each load it copies into its cp.async ring has gpu.ring_offset and
                       gpu.ring_stride (bytes in a stage) and gpu.copy_width (elements per cp.async);
                       a swizzled tile (every one wgmma reads, those mma.sync's ldmatrix reads) also has
                       gpu.ring_swizzle (bytes) and gpu.ring_contig (the tile dimension stored contiguously); gpu.mma_pending = 1 on the loop when its
                       wgmma group stays in flight into the next iteration; gpu.ring_late on a loop whose
                       mma.sync ring is refilled at the end of an iteration (S slots, S iterations ahead)

A layout is written `reg=(0,1)(0,2) lane=(0,4)(0,8)(1,0)(2,0)(4,0) warp=(8,0)(16,0)`: the basis vector of
each register, lane and warp bit (layouts.py), `-` where a kind has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ...errors import CompileError
from ...ir.core import Block, Function, Operation, Value, error_location, uses_in
from ...ir.ops import OPS
from ...ir.types import TileType, elem_type, shape_of
from .layouts import Basis, Layout, MmaSpec, WgmmaSpec, blocked
from .swizzle import SwizzledTile

NUM_WARPS = "gpu.num_warps"
LAYOUT = "gpu.layout"
ACCESS = "gpu.access"
VEC = "gpu.vec"
LAYOUTS = "gpu.layouts"
BEFORE_LAYOUTS = "gpu.before_layouts"
MMA = "gpu.mma"
STAGES = "gpu.stages"
RING_OFFSET = "gpu.ring_offset"
RING_STRIDE = "gpu.ring_stride"
COPY_WIDTH = "gpu.copy_width"
RING_SWIZZLE = "gpu.ring_swizzle"
RING_CONTIG = "gpu.ring_contig"
MMA_PENDING = "gpu.mma_pending"
RING_LATE = "gpu.ring_late"  # an mma.sync ring refilled at the end of an iteration (LoopPipeline.late)
STRONG = "gpu.strong"

LAZY_OPS = frozenset(
    {
        "make_range",
        "splat",
        "constant",
        "broadcast",
        "expand_dims",
        "trans",
        "reshape",
        "multiple_of",
        "max_contiguous",
        "desc_box",
    }
)


def is_lazy(op: Operation) -> bool:
    """Pure ops recomputed in whatever layout a user asks for (no conversion through shared memory)."""
    return op.name in LAZY_OPS or (OPS[op.name].has("elementwise") and OPS[op.name].has("pure"))


PAD = 16  # bytes after each staged row: the 8 rows an ldmatrix phase reads fall in distinct banks
PAD_TF32_B = 32  # tf32 B is read with 32-bit loads (lanes: 4 rows x 8 columns): 8 words keep them apart


def operand_stride(kind: str, operand: int, shape: tuple[int, ...], ebytes: int) -> int:
    """Bytes between the rows of a dot operand staged row-major in shared memory (A: M x K, B: K x N)."""
    pad = PAD_TF32_B if kind in ("tf32", "tf32x3") and operand == 1 else PAD
    return shape[1] * ebytes + pad


# ---- the text of a layout and of an mma plan ----------------------------------------------------------


@lru_cache(maxsize=4096)
def format_layout(lay: Layout) -> str:
    def bases(bs: tuple[Basis, ...]) -> str:
        return "".join("(" + ",".join(map(str, b)) + ")" for b in bs) or "-"

    return f"reg={bases(lay.reg)} lane={bases(lay.lane)} warp={bases(lay.warp)}"


_LAYOUT_RE = re.compile(r"reg=(\S+) lane=(\S+) warp=(\S+)")
_BASES_RE = re.compile(r"(?:\(\d+(?:,\d+)*\))+|-")


@lru_cache(maxsize=4096)
def _layout(text: str, shape: tuple[int, ...]) -> Layout | None:
    m = _LAYOUT_RE.fullmatch(text)
    if m is None or not all(_BASES_RE.fullmatch(g) for g in m.groups()):
        return None
    reg, lane, warp = (
        tuple(tuple(int(x) for x in b.split(",")) for b in re.findall(r"\(([\d,]+)\)", g)) for g in m.groups()
    )
    if len(lane) != 5 or any(len(b) != len(shape) for b in (*reg, *lane, *warp)):
        return None
    return Layout(shape, reg, lane, warp)


def parse_layout(text: object, shape: tuple[int, ...], op: Operation | None = None) -> Layout:
    """The layout `text` names for a tile of `shape`; a CompileError at `op` when it names none."""
    lay = _layout(text, tuple(shape)) if isinstance(text, str) else None
    if lay is None:
        raise CompileError(f"cuda: {text!r} is not a layout of a {'x'.join(map(str, shape))} tile "
                           "(reg=(..).. lane=5 bases warp=(..)..)", **error_location(op.loc if op else None))  # fmt: skip
    return lay


def format_mma(spec: MmaSpec | WgmmaSpec) -> str:
    if isinstance(spec, WgmmaSpec):
        kind = spec.kind + (f".{spec.b_kind}" if spec.b_kind else "")
        acc = f" acc={spec.acc}" if spec.acc != "f32" else ""
        return f"wgmma {kind} warpgroups={spec.wm}x{spec.wn} reps={spec.mrep} n={spec.n}{acc}"
    return f"{spec.kind} k={spec.k} warps={spec.wm}x{spec.wn} reps={spec.mrep}x{spec.nrep}"


_MMA_RE = re.compile(r"(f16|bf16|tf32x3|tf32|s8|u8) k=(\d+) warps=(\d+)x(\d+) reps=(\d+)x(\d+)")
_WGMMA_RE = re.compile(
    r"wgmma (f16|bf16|tf32|e4m3|e5m2)(?:\.(e4m3|e5m2))? warpgroups=(\d+)x(\d+) reps=(\d+) n=(\d+)(?: acc=(f16))?"
)


def parse_mma(text: object, op: Operation) -> MmaSpec | WgmmaSpec:
    m = _MMA_RE.fullmatch(text) if isinstance(text, str) else None
    if m is not None:
        kind, *nums = m.groups()
        return MmaSpec(kind, *map(int, nums))
    m = _WGMMA_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise CompileError(f"cuda: {text!r} is not an mma plan (like \"f16 k=16 warps=2x2 reps=2x4\" or "
                           "\"wgmma f16 warpgroups=2x1 reps=1 n=256\")", **error_location(op.loc))  # fmt: skip
    kind, b_kind, *nums, acc = m.groups()
    if b_kind is not None and (kind not in ("e4m3", "e5m2") or b_kind == kind):
        raise CompileError(f"cuda: wgmma mixes operand types only for e4m3 with e5m2, not {kind}.{b_kind}",
                           **error_location(op.loc))  # fmt: skip
    if acc is not None and kind not in ("e4m3", "e5m2"):
        raise CompileError(f"cuda: wgmma accumulates in f16 here only for fp8 operands, not {kind}",
                           **error_location(op.loc))  # fmt: skip
    spec = WgmmaSpec(kind, *map(int, nums), b_kind or "", acc or "f32")
    if spec.n % 8 or not 8 <= spec.n <= 256:
        raise CompileError(f"cuda: wgmma takes N from 8 to 256 in steps of 8, not {spec.n}", **error_location(op.loc))
    return spec


# ---- the layout plan ----------------------------------------------------------------------------------


@dataclass
class LayoutPlan:
    """The layout each tile value is materialised in, the layout and vector width of each memory access,
    and the mma plan of each tensor-core dot."""

    num_warps: int
    natural: dict[Value, Layout] = field(default_factory=dict)
    access: dict[Operation, Layout] = field(default_factory=dict)
    vec: dict[Operation, int] = field(default_factory=dict)
    mma: dict[Operation, MmaSpec | WgmmaSpec] = field(default_factory=dict)
    strong: set[Value] = field(default_factory=set)

    def default(self, shape: tuple[int, ...]) -> Layout:
        return blocked(shape, self.num_warps)


def read_layouts(fn: Function) -> LayoutPlan:
    """The gpu-layout pass's decisions for `fn`, read from its attributes."""
    nw = fn.attrs.get(NUM_WARPS)
    if not isinstance(nw, int) or isinstance(nw, bool):
        raise CompileError(f"cuda: @{fn.name} has no {NUM_WARPS} attribute: run the gpu-layout pass first",
                           **error_location(fn.loc))  # fmt: skip
    plan = LayoutPlan(nw)
    for p, a in zip(fn.params, fn.args, strict=True):
        if LAYOUT in p.attrs and isinstance(a.type, TileType):
            plan.natural[a] = parse_layout(p.attrs[LAYOUT], a.type.shape)
        if p.attrs.get(STRONG) is True:
            plan.strong.add(a)
    for op in fn.walk():
        if op.attrs:
            _read_op(op, plan)
    return plan


def _read_op(op: Operation, plan: LayoutPlan) -> None:
    attrs = op.attrs
    if LAYOUT in attrs:
        plan.natural[op.results[0]] = parse_layout(attrs[LAYOUT], shape_of(op.results[0].type), op)
    if ACCESS in attrs:
        lay = plan.access[op] = parse_layout(attrs[ACCESS], shape_of(op.operands[0].type), op)
        for r in op.results:
            plan.natural[r] = lay
        plan.vec[op] = int(attrs.get(VEC, 1))
    if MMA in attrs:
        plan.mma[op] = parse_mma(attrs[MMA], op)
    if LAYOUTS in attrs:
        _read_list(op, attrs[LAYOUTS], [op.results, _twins(op)], plan)
    if BEFORE_LAYOUTS in attrs:
        _read_list(op, attrs[BEFORE_LAYOUTS], [op.regions[0].block.args], plan)
    strong = attrs.get(STRONG)
    if strong is True and op.results:
        plan.strong.add(op.results[0])
    elif isinstance(strong, list):
        for values in (op.results, _twins(op)):
            plan.strong.update(v for v, s in zip(values, strong, strict=False) if s is True)


def _twins(op: Operation) -> list[Value]:
    """The block arguments that hold what a loop's results hold: a for's iter args, a while's after-region args."""
    if op.name == "for":
        return op.regions[0].block.args[1:]
    if op.name == "while":
        return op.regions[1].block.args
    return []


def _read_list(op: Operation, texts: object, targets: list, plan: LayoutPlan) -> None:
    if not isinstance(texts, list) or any(len(t) != len(texts) for t in targets if t):
        raise CompileError(
            f"cuda: '{op.name}' needs one layout per value in its gpu layout lists", **error_location(op.loc)
        )
    for i, text in enumerate(texts):
        if text == "":
            continue
        for values in targets:
            if values:
                plan.natural[values[i]] = parse_layout(text, shape_of(values[i].type), op)


# ---- the pipelining plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipeLoad:
    """One load copied into the ring: its tile lands row-major at `offset` of each stage."""

    load: Operation
    dot: Operation
    operand: int  # 0: A (M x K), 1: B (K x N)
    layout: Layout  # the copy layout: `width` consecutive elements of a row per cp.async
    width: int
    offset: int
    stride: int
    swizzle: int = 0  # bytes: the tile is a SwizzledTile (wgmma, or mma.sync's ldmatrix, reads it); 0: rows of `stride` bytes
    contig: int = 1  # the tile dimension that is contiguous in memory and stored as the tile's rows

    def tile(self) -> SwizzledTile:
        shape = shape_of(self.load.result.type)
        eb = elem_type(self.load.result.type).bits // 8
        return SwizzledTile(shape[1 - self.contig], shape[self.contig], eb, self.swizzle)


@dataclass(frozen=True)
class LoopPipeline:
    loop: Operation
    stages: int
    loads: tuple[PipeLoad, ...]
    address_args: tuple[int, ...]  # body.args indices (>= 1) of carried tiles the addresses recur through
    address_layouts: tuple[Layout | None, ...]
    slice_ops: tuple[Operation, ...]  # body ops computing addresses, masks and next address state
    stage_bytes: int
    pending: int = 0  # wgmma groups left in flight at the end of an iteration (0 or 1)
    # a ring that only mma.sync reads (no wgmma dot), refilled at the end of an iteration, after a barrier, into
    # the slot the iteration read, as Triton's pipeliner does for them: num_stages - 1 slots with the copies as many
    # iterations ahead, where issuing first needs one slot more (CudaOptions.mma_ring_late)
    late: bool = False

    @property
    def ahead(self) -> int:
        """How many iterations ahead the copies run: every slot when they are issued at the end of the
        iteration (late); else all but the slot read by the running iteration, which they may not refill
        (with a wgmma group in flight, its copies wait for the previous group, so the slot of the previous
        iteration is free again)."""
        return self.stages if self.late else self.stages - 1

    @property
    def ring_bytes(self) -> int:
        return self.stages * self.stage_bytes


@dataclass
class PipelinePlan:
    loops: dict[Operation, LoopPipeline] = field(default_factory=dict)
    by_load: dict[Operation, tuple[LoopPipeline, PipeLoad]] = field(default_factory=dict)

    def operand(self, dot: Operation, index: int) -> tuple[LoopPipeline, PipeLoad] | None:
        """The ring entry that dot operand `index` is read from, or None when it comes from registers."""
        v = dot.operands[index]
        owner = v.owner if isinstance(v.owner, Operation) else None
        got = self.by_load.get(owner) if owner is not None else None
        return got if got is not None and got[1].dot is dot else None

    def describe(self) -> str:
        lines = []
        for p in self.loops.values():
            lines.append(f"for: {p.stages} stages of {p.stage_bytes} bytes, address args {list(p.address_args)}, "
                         f"{len(p.slice_ops)} slice ops")  # fmt: skip
            for pl in p.loads:
                shape = shape_of(pl.load.result.type)
                lines.append(f"  {'AB'[pl.operand]} {'x'.join(map(str, shape))}: {pl.width} x "
                             f"{elem_type(pl.load.result.type).name} per copy, offset {pl.offset}, stride {pl.stride}"
                             + (f", swizzle {pl.swizzle} contiguous dim {pl.contig}" if pl.swizzle else ""))  # fmt: skip
        return "\n".join(lines) if lines else "no pipelined loops"


def address_slice(body: Block, roots: list[Value]) -> tuple[list[Operation], list[int]] | None:
    """Body ops the roots depend on (pure, region-free) and the carried args they recur through; None
    where a root depends on an op that cannot be replayed for a later iteration."""
    defined = {r: o for o in body.ops for r in o.results}
    carried = {a: i for i, a in enumerate(body.args) if i > 0}
    need: set[Operation] = set()
    args: set[int] = set()
    stack = list(roots)
    while stack:
        v = stack.pop()
        if v in carried:
            j = carried[v]
            if j not in args:
                args.add(j)
                stack.append(body.terminator.operands[j - 1])
            continue
        o = defined.get(v)
        if o is None or o in need:
            continue
        if o.regions or not is_lazy(o):
            return None
        need.add(o)
        stack.extend(o.operands)
    return [o for o in body.ops if o in need], sorted(args)


def loop_pipeline(
    loop: Operation, stages: int, loads: list[PipeLoad], layouts: LayoutPlan
) -> LoopPipeline | None:
    """The pipeline of `loop` copying `loads` (address slice, carried address state, stage size)."""
    body = loop.regions[0].block
    got = address_slice(body, [v for pl in loads for v in pl.load.operands])
    if got is None:
        return None
    slice_ops, args = got
    arg_lays = tuple(next((pl.layout for pl in loads if pl.load.operands[0] is body.args[j]),
                          layouts.natural.get(body.args[j])) for j in args)  # fmt: skip
    stage_bytes = max(pl.offset + (pl.tile().nbytes if pl.swizzle else shape_of(pl.load.result.type)[0] * pl.stride)
                      for pl in loads)  # fmt: skip
    if any(pl.swizzle for pl in loads):
        stage_bytes = -(-stage_bytes // 1024) * 1024  # every stage's tiles on the swizzle's 1024-byte period
    return LoopPipeline(loop, stages, tuple(loads), tuple(args), arg_lays, tuple(slice_ops), stage_bytes)


def read_pipeline(fn: Function, layouts: LayoutPlan) -> PipelinePlan:
    """The gpu-pipeline pass's decisions for `fn`, read from its attributes."""
    plan = PipelinePlan()
    for op in fn.walk():
        if op.name != "for" or STAGES not in op.attrs:
            continue
        body = op.regions[0].block
        uses = uses_in(body)
        loads = [
            _pipe_load(o, uses, layouts) for o in body.ops if o.name == "load" and RING_OFFSET in o.attrs
        ]
        got = loop_pipeline(op, int(op.attrs[STAGES]), loads, layouts) if loads else None
        if got is None:
            raise CompileError("cuda: a pipelined loop copies no load whose addresses can be replayed",
                               **error_location(op.loc))  # fmt: skip
        pending = int(op.attrs.get(MMA_PENDING, 0))
        late = bool(op.attrs.get(RING_LATE, False))
        if late and any(isinstance(layouts.mma.get(pl.dot), WgmmaSpec) for pl in got.loads):
            raise CompileError(f"cuda: {RING_LATE} on a loop whose ring wgmma reads", **error_location(op.loc))
        if pending not in (0, 1) or got.stages < 2:
            raise CompileError(f"cuda: {MMA_PENDING} = {pending} does not fit a loop of {got.stages} stages",
                               **error_location(op.loc))  # fmt: skip
        got = replace(got, pending=pending, late=late)
        plan.loops[op] = got
        for pl in got.loads:
            plan.by_load[pl.load] = (got, pl)
    return plan


def _pipe_load(ld: Operation, uses: dict, layouts: LayoutPlan) -> PipeLoad:
    users = uses.get(ld.result, [])
    dot = users[0] if len(users) == 1 and users[0].name == "dot" else None
    if dot is None or dot.operands[:2].count(ld.result) != 1:
        raise CompileError("cuda: a load copied into a ring must feed operand A or B of one dot",
                           **error_location(ld.loc))  # fmt: skip
    shape = shape_of(ld.result.type)
    width = int(ld.attrs.get(COPY_WIDTH, 1))
    contig = int(ld.attrs.get(RING_CONTIG, 1))
    order = (contig, 1 - contig)
    return PipeLoad(ld, dot, dot.operands.index(ld.result), blocked(shape, layouts.num_warps, width, order), width,
                    int(ld.attrs[RING_OFFSET]), int(ld.attrs.get(RING_STRIDE, 0)), int(ld.attrs.get(RING_SWIZZLE, 0)),
                    contig)  # fmt: skip
