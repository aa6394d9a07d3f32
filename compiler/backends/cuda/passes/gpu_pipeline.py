"""Software-pipelining plan for the cuda target: which `for` loops feed tensor-core dots from global
loads, and how the cp.async ring of shared buffers that runs num_stages-1 iterations ahead is laid out.

The pass only plans (the IR is unchanged); compiler/backends/cuda/pipelined.py emits the prologue, the
ring and the waits from the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd

from ....ir.core import Block, Function, Operation, Value, uses_in
from ....ir.types import TileType, elem_type, shape_of
from ....passes.axis_analysis import RULES, AxisInfo, unknown
from .gpu_layout import Layout, LayoutPlan, blocked, is_lazy

PAD = 16  # bytes after each staged row: the 8 rows an ldmatrix phase reads fall in distinct banks
PAD_TF32_B = 32  # tf32 B is read with 32-bit loads (lanes: 4 rows x 8 columns): 8 words keep them apart
MAX_RING = 160 * 1024  # shared bytes the ring may take; the rest stays for conversions in the loop
PIPELINED_KINDS = ("f16", "bf16", "tf32")


def operand_stride(kind: str, operand: int, shape: tuple[int, ...], ebytes: int) -> int:
    """Bytes between the rows of a dot operand staged row-major in shared memory (A: M x K, B: K x N)."""
    pad = PAD_TF32_B if kind == "tf32" and operand == 1 else PAD
    return shape[1] * ebytes + pad


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


@dataclass(frozen=True)
class LoopPipeline:
    loop: Operation
    stages: int
    loads: tuple[PipeLoad, ...]
    address_args: tuple[int, ...]  # body.args indices (>= 1) of carried tiles the addresses recur through
    address_layouts: tuple[Layout | None, ...]
    slice_ops: tuple[Operation, ...]  # body ops computing addresses, masks and next address state
    stage_bytes: int

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

    def describe(self, names: dict[Value, str] | None = None) -> str:
        lines = []
        for p in self.loops.values():
            lines.append(f"for: {p.stages} stages of {p.stage_bytes} bytes, address args {list(p.address_args)}, "
                         f"{len(p.slice_ops)} slice ops")  # fmt: skip
            for pl in p.loads:
                shape = shape_of(pl.load.result.type)
                lines.append(f"  {'AB'[pl.operand]} {'x'.join(map(str, shape))}: {pl.width} x "
                             f"{elem_type(pl.load.result.type).name} per copy, offset {pl.offset}, stride {pl.stride}")  # fmt: skip
        return "\n".join(lines) if lines else "no pipelined loops"


@dataclass(frozen=True)
class GpuPipelinePass:
    """Plans cp.async software pipelining of `for` loops over `num_stages` (>= 2; 1 turns it off).

    Guarantees, for each planned loop: its step is a positive constant; every planned load is in the
    body's top level, is not volatile, has `other` absent or zero, and its one use is operand A or B
    of a tensor-core dot (f16, bf16, tf32) of the same body; its pointer, mask and `other` depend only
    on the induction variable, loop invariants and carried tiles whose next values are computed by pure
    ops of the same kind (`slice_ops`); each copy moves 4, 8 or 16 contiguous, aligned bytes under one
    mask bit (axis analysis, with carried address tiles given the meet of their init and next value);
    the ring fits in MAX_RING. Loops that do not match are left to the plain lowering.
    """

    name = "gpu-pipeline"
    num_stages: int = 3

    def run(self, fn: Function, layouts: LayoutPlan) -> PipelinePlan:
        plan = PipelinePlan()
        if self.num_stages < 2:
            return plan
        for op in fn.walk():
            if op.name == "for":
                got = self._loop(op, layouts)
                if got is not None:
                    plan.loops[op] = got
                    for pl in got.loads:
                        plan.by_load[pl.load] = (got, pl)
        return plan

    # ---- matching ------------------------------------------------------------------------------

    def _loop(self, op: Operation, layouts: LayoutPlan) -> LoopPipeline | None:
        step = op.operands[2].owner
        if not isinstance(step, Operation) or step.name != "constant" or not int(step.attrs["value"]) > 0:
            return None
        body = op.regions[0].block
        uses = uses_in(body)
        cands = [(inner, i) for inner in body.ops if inner.name == "dot" for i in (0, 1)
                 if layouts.mma.get(inner) is not None and layouts.mma[inner].kind in PIPELINED_KINDS]  # fmt: skip
        loads = [(v.owner, d, i) for d, i in cands if self._feeds_only(v := d.operands[i], d, body, uses)]
        loads = [x for x in loads if self._plain_load(x[0])]
        if not loads:
            return None
        sl = self._slice(body, [v for ld, _, _ in loads for v in ld.operands])
        if sl is None:
            return None
        slice_ops, args = sl
        info = self._address_info(op, body, slice_ops, args, layouts)
        return self._layout_ring(op, layouts, loads, slice_ops, args, info)

    @staticmethod
    def _feeds_only(v: Value, dot: Operation, body: Block, uses: dict) -> bool:
        owner = v.owner
        if not isinstance(owner, Operation) or owner.name != "load" or owner not in body.ops:
            return False
        return len(uses.get(v, [])) == 1 and sum(x is v for x in dot.operands[:2]) == 1

    @staticmethod
    def _plain_load(ld: Operation) -> bool:
        if ld.attrs.get("volatile") or not isinstance(ld.operands[0].type, TileType):
            return False
        if len(ld.operands) < 3:
            return True
        other = ld.operands[2].owner
        while isinstance(other, Operation) and other.name == "splat":
            other = other.operands[0].owner
        return isinstance(other, Operation) and other.name == "constant" and float(other.attrs["value"]) == 0.0

    @staticmethod
    def _slice(body: Block, roots: list[Value]) -> tuple[list[Operation], list[int]] | None:
        """Body ops the roots depend on (pure, region-free) and the carried args they recur through."""
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

    @staticmethod
    def _address_info(op: Operation, body: Block, slice_ops: list, args: list[int], layouts: LayoutPlan) -> dict:
        """Axis info of the slice with each carried address tile given what holds for its init and for
        every next value (a fixpoint of the meet, from the init's info)."""
        base = layouts.axis
        info: dict[Value, AxisInfo] = {}
        for j in args:
            a = body.args[j]
            info[a] = base.get(op.operands[2 + j]) or unknown(a)
        for _ in range(8):
            for o in slice_ops:
                for r in o.results:
                    rule = RULES.get(o.name)
                    ins = [info.get(v) or base.get(v) or unknown(v) for v in o.operands]
                    got = rule(o, ins) if rule and all(x is not None for x in ins) else None
                    info[r] = _clamp(r, got) if got is not None else unknown(r)
            changed = False
            for j in args:
                a = body.args[j]
                nxt = info.get(body.terminator.operands[j - 1]) or base.get(body.terminator.operands[j - 1]) or unknown(a)
                met = _meet(info[a], nxt)
                if met != info[a]:
                    info[a], changed = met, True
            if not changed:
                return info
        return {body.args[j]: unknown(body.args[j]) for j in args}

    # ---- the ring ------------------------------------------------------------------------------

    def _layout_ring(self, op, layouts: LayoutPlan, loads, slice_ops, args, info) -> LoopPipeline | None:
        pls, offset = [], 0
        for ld, dot, i in loads:
            shape = shape_of(ld.result.type)
            eb = elem_type(ld.result.type).bits // 8
            width = _copy_width(ld, shape, eb, info, layouts)
            if width is None:
                continue  # this operand is loaded and staged the plain way
            stride = operand_stride(layouts.mma[dot].kind, i, shape, eb)
            lay = blocked(shape, layouts.num_warps, width, (1, 0))
            pls.append(PipeLoad(ld, dot, i, lay, width, offset, stride))
            offset += shape[0] * stride
        if not pls:
            return None
        stages = self.num_stages
        while stages > 2 and stages * offset > MAX_RING:
            stages -= 1
        if stages * offset > MAX_RING:
            return None
        body = op.regions[0].block
        arg_lays = tuple(next((pl.layout for pl in pls if pl.load.operands[0] is body.args[j]),
                              layouts.natural.get(body.args[j])) for j in args)  # fmt: skip
        return LoopPipeline(op, stages, tuple(pls), tuple(args), arg_lays, tuple(slice_ops), offset)


def _copy_width(ld: Operation, shape: tuple[int, ...], eb: int, info: dict, layouts: LayoutPlan) -> int | None:
    """Elements per cp.async along the rows (4, 8 or 16 bytes), or None when no such copy is provable."""
    ptr = ld.operands[0]
    pi = info.get(ptr) or layouts.axis.get(ptr)
    if pi is None or len(shape) != 2:
        return None
    mconst = shape[1]
    if len(ld.operands) > 1:
        mi = info.get(ld.operands[1]) or layouts.axis.get(ld.operands[1])
        mconst = mi.constancy[1] if mi else 1
    w = min(16 // eb, shape[1])
    while w > 1 and (w > pi.contiguity[1] or pi.divisibility[1] % (w * eb) or mconst < w):
        w //= 2
    return w if w * eb >= 4 else None


def _meet(x: AxisInfo, y: AxisInfo) -> AxisInfo:
    return AxisInfo(tuple(map(min, x.contiguity, y.contiguity)), tuple(map(gcd, x.divisibility, y.divisibility)),
                    tuple(map(min, x.constancy, y.constancy)))  # fmt: skip


def _clamp(v: Value, x: AxisInfo) -> AxisInfo:
    s = shape_of(v.type) or (1,)
    return AxisInfo(tuple(max(1, min(c, n)) for c, n in zip(x.contiguity, s, strict=True)),
                    tuple(max(1, d) for d in x.divisibility),
                    tuple(max(1, min(c, n)) for c, n in zip(x.constancy, s, strict=True)))  # fmt: skip
