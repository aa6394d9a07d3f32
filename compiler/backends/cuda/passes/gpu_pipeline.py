"""gpu-pipeline: plans cp.async software pipelining for the cuda target: which `for` loops feed tensor-core
dots from global loads, and how the ring of shared buffers that runs num_stages-1 iterations ahead is laid
out (num_stages slots for wgmma's rings, num_stages-1 for mma.sync's, refilled at the end of an iteration). It
records the plan as gpu.* attributes (plan.py); the IR is otherwise unchanged, and
compiler/backends/cuda/pipelined.py emits the prologue, the ring and the waits from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ....ir.core import Block, Function, Module, Operation, Value, uses_in
from ....ir.types import TileType, elem_type, shape_of
from ....passes.axis_analysis import AxisInfo, axis_analysis
from ..layouts import WgmmaSpec, blocked
from ..plan import (
    COPY_WIDTH,
    MMA_PENDING,
    PAD,
    RING_CONTIG,
    RING_LATE,
    RING_OFFSET,
    RING_STRIDE,
    RING_SWIZZLE,
    STAGES,
    LayoutPlan,
    LoopPipeline,
    PipeLoad,
    address_slice,
    loop_pipeline,
    operand_stride,
    read_layouts,
)
from ..swizzle import align, swizzle_width

MAX_RING = 160 * 1024  # shared bytes the ring may take; the rest stays for conversions in the loop
PIPELINED_KINDS = ("f16", "bf16", "tf32", "tf32x3")  # mma.sync kinds; every wgmma kind is pipelined


def _ringable(spec, dot: Operation, i: int, swizzle: bool) -> bool:
    """Whether a dot planned as `spec` may read operand `i` from a ring: every wgmma kind; mma.sync kinds
    whose operand is stored as it is loaded; fp8 operands of an f16 mma.sync where both are fp8 and the tile's
    K is a multiple of 32 (swizzled rings only): their bytes stay fp8 in the ring and are converted after
    ldmatrix (mma.py), else they are converted on staging."""
    if spec is None:
        return False
    if isinstance(spec, WgmmaSpec):
        return True
    if not any(elem_type(v.type).is_fp8 for v in dot.operands[:2]):
        return spec.kind in PIPELINED_KINDS
    return swizzle and _fp8_pair(dot)


def _fp8_pair(dot: Operation) -> bool:
    """A dot whose operands are both fp8, with a K tile of whole 32-byte ldmatrix rows."""
    return all(elem_type(v.type).is_fp8 for v in dot.operands[:2]) and shape_of(dot.operands[0].type)[1] % 32 == 0


@dataclass(frozen=True)
class GpuPipelinePass:
    """Plans cp.async software pipelining of `for` loops over `num_stages` (>= 2; 1 turns it off).

    Guarantees, for each planned loop: its step is a positive constant; every planned load is in the
    body's top level, is not volatile, has `other` absent or zero, and its one use is operand A or B
    of a tensor-core dot (f16, bf16, tf32, tf32x3; on wgmma fp8 too) of the same body; its pointer, mask and `other` depend only
    on the induction variable, loop invariants and carried tiles whose next values are computed by pure
    ops of the same kind (`slice_ops`); each copy moves 4, 8 or 16 contiguous, aligned bytes under one
    mask bit (axis analysis, which gives carried address tiles the meet of their init and next value);
    the ring fits in MAX_RING. Loops that do not match are left to the plain lowering. Each planned
    loop gets gpu.stages, each load it copies gpu.ring_offset, gpu.ring_stride and gpu.copy_width;
    it reads the layouts and mma plans gpu-layout recorded (run that first).

    Operands of a warpgroup-MMA dot (wgmma) are copied into swizzled tiles (swizzle.py) along
    whichever tile dimension is contiguous in memory (gpu.ring_swizzle, gpu.ring_contig), each tile
    and stage on 1024 bytes; tf32 and fp8 operands only where that dimension is K (wgmma reads them
    K-major only), others are loaded and staged K-major by the lowering. Operands of an mma.sync dot
    that ldmatrix reads (all but tf32 B) are copied row by row into swizzled tiles too (rows of 32 bytes
    or more; mma_swizzle), read at per-lane swizzled addresses, a 16-bit B along whichever dimension is
    contiguous in memory (stored N x K when K is: ldmatrix then reads it without .trans), fp8 operands as
    bytes along K and only in pairs (_ringable; the lowering converts them after the read); the others into
    tiles whose rows are padded (gpu.ring_stride) so that an ldmatrix phase's rows fall in distinct banks.

    With `wgmma_pending` 1, a loop whose one wgmma dot reads both operands from the ring and carries
    its accumulator straight back into itself gets gpu.mma_pending = 1:
    that dot's MMA group stays in flight into the next iteration (the lowering issues the loop's
    copies once the previous group is done, so they still run stages-1 iterations ahead).
    """

    name = "gpu-pipeline"
    num_stages: int = 3
    wgmma_pending: int = 1
    mma_late: bool = True  # mma.sync rings refilled at the end of an iteration (gpu.ring_late), num_stages - 1 slots
    mma_pad: int = 16  # bytes after each row of an f16/bf16 mma.sync ring tile not swizzled (plan.PAD)
    mma_swizzle: bool = True  # mma.sync ring tiles that ldmatrix reads are swizzled (gpu.ring_swizzle), not padded

    def apply(self, module: Module) -> None:
        for fn in module.functions:
            for op in fn.walk():
                for k in (STAGES, RING_OFFSET, RING_STRIDE, COPY_WIDTH, RING_SWIZZLE, RING_CONTIG, MMA_PENDING, RING_LATE):
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
                 if _ringable(layouts.mma.get(inner), inner, i, self.mma_swizzle)]  # fmt: skip
        loads = [(v.owner, d, i) for d, i in cands if self._feeds_only(v := d.operands[i], d, body, uses)]
        loads = [x for x in loads if self._plain_load(x[0])]
        if not loads:
            return None
        if address_slice(body, [v for ld, _, _ in loads for v in ld.operands]) is None:
            return None
        # axis_analysis gives carried address tiles the meet of their init and next values (a fixpoint)
        pipe = self._layout_ring(op, layouts, loads, axis)
        if pipe is not None and self.wgmma_pending and _async_mma(pipe, layouts, body, uses):
            pipe = replace(pipe, pending=1)
        return pipe

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

    # ---- the ring ------------------------------------------------------------------------------

    def _layout_ring(self, op: Operation, layouts: LayoutPlan, loads: list, info: Mapping[Value, AxisInfo]) -> LoopPipeline | None:
        pls, offset = [], 0
        for ld, dot, i in loads:
            shape = shape_of(ld.result.type)
            eb = elem_type(ld.result.type).bits // 8
            if isinstance(layouts.mma[dot], WgmmaSpec):
                k_dim = (1 - i) if layouts.mma[dot].k_major else None  # tf32 and fp8: K contiguous only
                got = _swizzled(ld, dot, i, shape, eb, info, layouts.num_warps, offset, k_dim)
                if got is not None:
                    pls.append(got)
                    offset = align(offset + got.tile().nbytes)
                continue  # else this operand is loaded and staged the plain way
            kind = layouts.mma[dot].kind
            if elem_type(ld.result.type).is_fp8:  # bytes along K: A M x K, B N x K (both or neither)
                got = _swizzled(ld, dot, i, shape, eb, info, layouts.num_warps, align(offset), 1 - i)
                if got is None:
                    rest = [x for x in loads if x[1] is not dot]
                    return self._layout_ring(op, layouts, rest, info) if rest else None
                pls.append(got)
                offset = got.offset + got.tile().nbytes
                continue
            if self.mma_swizzle and i == 1 and kind in ("f16", "bf16"):
                # B along whichever dimension is contiguous: K x N, or N x K (B^T, read without .trans)
                got = _swizzled(ld, dot, i, shape, eb, info, layouts.num_warps, align(offset))
                if got is not None:
                    pls.append(got)
                    offset = got.offset + got.tile().nbytes
                    continue
            width = _copy_width(ld, shape, eb, info)
            if width is None:
                continue  # this operand is loaded and staged the plain way
            lay = blocked(shape, layouts.num_warps, width, (1, 0))
            sw = swizzle_width(shape[1], eb) if self.mma_swizzle and not (kind in ("tf32", "tf32x3") and i == 1) else 0
            if sw:  # read by ldmatrix: a swizzled tile, rows unpadded (tf32 B is read by 32-bit loads)
                offset = align(offset)
                pls.append(PipeLoad(ld, dot, i, lay, width, offset, sw, sw, 1))
                offset += shape[0] * shape[1] * eb
                continue
            stride = operand_stride(kind, i, shape, eb)
            if kind in ("f16", "bf16"):
                stride += self.mma_pad - PAD
            pls.append(PipeLoad(ld, dot, i, lay, width, offset, stride))
            offset += shape[0] * stride
        pairs = {pl.dot for pl in pls if elem_type(pl.load.result.type).is_fp8 and not isinstance(layouts.mma[pl.dot], WgmmaSpec)}
        if any(sum(pl.dot is d for pl in pls) != 2 for d in pairs):  # mma.sync: an fp8 operand without its partner
            rest = [x for x in loads if x[1] not in pairs or sum(pl.dot is x[1] for pl in pls) == 2]
            return self._layout_ring(op, layouts, rest, info) if rest else None
        if not pls:
            return None
        if any(pl.swizzle for pl in pls):
            offset = align(offset)
        # mma.sync rings: num_stages - 1 slots, as Triton's (LoopPipeline.late), but two for num_stages 2, so
        # that its copies still overlap an iteration's dots; wgmma's: num_stages. Never fewer than two.
        late = self.mma_late and not any(isinstance(layouts.mma[pl.dot], WgmmaSpec) for pl in pls)
        stages = max(2, self.num_stages - 1) if late else self.num_stages
        while stages > 2 and stages * offset > MAX_RING:
            stages -= 1
        if stages * offset > MAX_RING:
            return None
        pipe = loop_pipeline(op, stages, pls, layouts)  # the address slice of the loads kept, as the lowering reads it
        return None if pipe is None else replace(pipe, late=late)


def _record(pipe: LoopPipeline) -> None:
    pipe.loop.attrs[STAGES] = pipe.stages
    if pipe.late:
        pipe.loop.attrs[RING_LATE] = True
    if pipe.pending:
        pipe.loop.attrs[MMA_PENDING] = pipe.pending
    for pl in pipe.loads:
        pl.load.attrs.update({RING_OFFSET: pl.offset, RING_STRIDE: pl.stride, COPY_WIDTH: pl.width})
        if pl.swizzle:
            pl.load.attrs.update({RING_SWIZZLE: pl.swizzle, RING_CONTIG: pl.contig})


def _swizzled(ld: Operation, dot: Operation, i: int, shape: tuple, eb: int, info: Mapping[Value, AxisInfo], num_warps: int,
              offset: int, only: int | None = None) -> PipeLoad | None:  # fmt: skip
    """The ring entry of a wgmma operand: 16-byte copies along the dimension that is contiguous in
    memory (dimension `only` where given), into a swizzled tile at `offset`; None when no dimension
    allows such copies."""
    best = None
    for d in (1, 0) if only is None else (only,):
        w = _copy_width(ld, shape, eb, info, d)
        sw = swizzle_width(shape[d], eb)
        if w is not None and w * eb == 16 and sw and (best is None or w > best[0]):
            best = (w, d, sw)
    if best is None:
        return None
    w, d, sw = best
    lay = blocked(shape, num_warps, w, (d, 1 - d))
    return PipeLoad(ld, dot, i, lay, w, offset, sw, sw, d)


def _async_mma(pipe: LoopPipeline, layouts: LayoutPlan, body: Block, uses: dict) -> bool:
    """Whether the loop's one wgmma dot may leave its MMA group in flight into the next iteration: it
    reads both operands from the ring, and its result goes only to the yield whose carried value only
    it reads (as its accumulator), so no other instruction touches the registers it is writing."""
    dots = [o for o in body.ops if o.name == "dot" and o in layouts.mma]
    if len(dots) != 1 or not isinstance(layouts.mma[dots[0]], WgmmaSpec) or layouts.mma[dots[0]].acc != "f32":
        return False  # an f16 accumulator is packed into words: its halves may not be touched in flight
    dot = dots[0]
    if sum(pl.dot is dot for pl in pipe.loads) != 2:
        return False
    users = uses.get(dot.result, [])
    term = body.terminator
    if len(users) != 1 or users[0] is not term or term.operands.count(dot.result) != 1:
        return False
    carried = body.args[1 + term.operands.index(dot.result)]
    return dot.operands[2] is carried and len(uses.get(carried, [])) == 1


def _copy_width(ld: Operation, shape: tuple[int, ...], eb: int, info: Mapping[Value, AxisInfo], dim: int = 1) -> int | None:
    """Elements per cp.async along `dim` (4, 8 or 16 bytes), or None when no such copy is provable."""
    ptr = ld.operands[0]
    pi = info.get(ptr)
    if pi is None or len(shape) != 2:
        return None
    mconst = shape[dim]
    if len(ld.operands) > 1:
        mi = info.get(ld.operands[1])
        mconst = mi.constancy[dim] if mi else 1
    w = min(16 // eb, shape[dim])
    while w > 1 and (w > pi.contiguity[dim] or pi.divisibility[dim] % (w * eb) or mconst < w):
        w //= 2
    return w if w * eb >= 4 else None

