"""gpu-pipeline: plans cp.async software pipelining for the cuda target: which `for` loops feed tensor-core
dots from global loads, and how the ring of shared buffers that runs num_stages-1 iterations ahead is laid
out. It records the plan as gpu.* attributes (plan.py); the IR is otherwise unchanged, and
compiler/backends/cuda/pipelined.py emits the prologue, the ring and the waits from it.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass
from math import gcd

from ....ir.core import Block, Function, Module, Operation, Value, uses_in
from ....ir.types import TileType, elem_type, shape_of
from ....passes.axis_analysis import RULES, AxisInfo, axis_analysis, unknown
from ..layouts import blocked
from ..plan import (
    COPY_WIDTH,
    RING_OFFSET,
    RING_STRIDE,
    STAGES,
    LayoutPlan,
    LoopPipeline,
    PipeLoad,
    address_slice,
    loop_pipeline,
    operand_stride,
    read_layouts,
)

MAX_RING = 160 * 1024  # shared bytes the ring may take; the rest stays for conversions in the loop
PIPELINED_KINDS = ("f16", "bf16", "tf32")


@dataclass(frozen=True)
class GpuPipelinePass:
    """Plans cp.async software pipelining of `for` loops over `num_stages` (>= 2; 1 turns it off).

    Guarantees, for each planned loop: its step is a positive constant; every planned load is in the
    body's top level, is not volatile, has `other` absent or zero, and its one use is operand A or B
    of a tensor-core dot (f16, bf16, tf32) of the same body; its pointer, mask and `other` depend only
    on the induction variable, loop invariants and carried tiles whose next values are computed by pure
    ops of the same kind (`slice_ops`); each copy moves 4, 8 or 16 contiguous, aligned bytes under one
    mask bit (axis analysis, with carried address tiles given the meet of their init and next value);
    the ring fits in MAX_RING. Loops that do not match are left to the plain lowering. Each planned
    loop gets gpu.stages, each load it copies gpu.ring_offset, gpu.ring_stride and gpu.copy_width;
    it reads the layouts and mma plans gpu-layout recorded (run that first).
    """

    name = "gpu-pipeline"
    num_stages: int = 3

    def apply(self, module: Module) -> None:
        for fn in module.functions:
            for op in fn.walk():
                for k in (STAGES, RING_OFFSET, RING_STRIDE, COPY_WIDTH):
                    op.attrs.pop(k, None)
            if self.num_stages >= 2:
                for pipe in self.plan(fn):
                    _record(pipe)

    def plan(self, fn: Function) -> list[LoopPipeline]:
        """The pipelines of the `for` loops of `fn` that match, outer before inner."""
        layouts = read_layouts(fn)
        if not layouts.mma:
            return []
        axis = axis_analysis(fn)
        return [got for op in fn.walk() if op.name == "for" and (got := self._loop(op, layouts, axis)) is not None]

    # ---- matching ------------------------------------------------------------------------------

    def _loop(self, op: Operation, layouts: LayoutPlan, axis: dict[Value, AxisInfo]) -> LoopPipeline | None:
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
        sl = address_slice(body, [v for ld, _, _ in loads for v in ld.operands])
        if sl is None:
            return None
        slice_ops, args = sl
        info = self._address_info(op, body, slice_ops, args, axis)
        return self._layout_ring(op, layouts, loads, ChainMap(info, axis))

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
    def _address_info(op: Operation, body: Block, slice_ops: list, args: list[int], base: dict[Value, AxisInfo]) -> dict:
        """Axis info of the slice with each carried address tile given what holds for its init and for
        every next value (a fixpoint of the meet, from the init's info)."""
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

    def _layout_ring(self, op: Operation, layouts: LayoutPlan, loads: list, info: ChainMap) -> LoopPipeline | None:
        pls, offset = [], 0
        for ld, dot, i in loads:
            shape = shape_of(ld.result.type)
            eb = elem_type(ld.result.type).bits // 8
            width = _copy_width(ld, shape, eb, info)
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
        return loop_pipeline(op, stages, pls, layouts)  # the address slice of the loads kept, as the lowering reads it


def _record(pipe: LoopPipeline) -> None:
    pipe.loop.attrs[STAGES] = pipe.stages
    for pl in pipe.loads:
        pl.load.attrs.update({RING_OFFSET: pl.offset, RING_STRIDE: pl.stride, COPY_WIDTH: pl.width})


def _copy_width(ld: Operation, shape: tuple[int, ...], eb: int, info: ChainMap) -> int | None:
    """Elements per cp.async along the rows (4, 8 or 16 bytes), or None when no such copy is provable."""
    ptr = ld.operands[0]
    pi = info.get(ptr)
    if pi is None or len(shape) != 2:
        return None
    mconst = shape[1]
    if len(ld.operands) > 1:
        mi = info.get(ld.operands[1])
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
