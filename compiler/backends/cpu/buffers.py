"""Big tiles on the cpu target: a tile of more than VECTOR_LIMIT elements lives in a stack buffer (row-major,
one slot per element, i1 as a byte) or is a uniform value, never one huge LLVM vector; elementwise ops on
them run as a loop over CHUNK-lane vectors, so the LLVM IR stays small however large the tile.

A buffer is written once, by the op that defines its value (values are immutable); loops and ifs copy
carried values into buffers of their own (control.py), so no op ever reads a buffer it is writing.
Consecutive chunked ops of one block share one loop (ChunkFusion): long unrolled code stays a few loops
(LLVM's loop passes cost time superlinear in the loops of a function) and keeps its temporaries in registers.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from math import gcd

from llvmlite import ir

from ...ir.core import Operation, Value
from ...ir.ops import ELEMENTWISE, OPS, PURE
from ...ir.types import TileType, Type, elem_type
from ..llvm.loops import counted_loop, elem_ptr, entry_alloca
from ..llvm.types import I1, I8, I32, I64, PTR, declare, scalar_ll, splat_const

VECTOR_LIMIT = 64  # tiles up to this many elements stay one LLVM vector (bench/cpu_compile_time.py: larger
# vectors, 2-D ones with masks above all, make LLVM codegen slow: 16x16 f16 dot tiles take 1.4 s at 256)
CHUNK = 16  # lanes per vector in the loops over big tiles
STACK_LIMIT = 4 << 20  # bytes of big-tile buffers one function may use


@dataclass(frozen=True)
class Big:
    """A big tile: every element in the buffer `ptr`, or every element equal to the scalar `scalar`."""

    type: TileType
    ptr: ir.Value | None = None
    scalar: ir.Value | None = None

    def retyped(self, t: TileType) -> Big:
        return replace(self, type=t)


def is_big(t: Type) -> bool:
    return isinstance(t, TileType) and t.numel > VECTOR_LIMIT


def is_elementwise(op: Operation) -> bool:
    spec = OPS.get(op.name)
    return spec is not None and spec.has(ELEMENTWISE)


def slot_type(t: Type) -> ir.Type:
    """The type of one buffer slot: the register type, with i1 widened to a byte (vectors of i1 pack bits)."""
    reg = scalar_ll(elem_type(t))
    return I8 if reg == I1 else reg


def chunk_width(n: int, cap: int = CHUNK) -> int:
    return gcd(n, cap)


def numel(t: Type) -> int:
    return t.numel if isinstance(t, TileType) else 1


def const64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def new_buffer(lw, t: Type) -> ir.Value:
    """A fresh stack buffer for the elements of `t` (counted against STACK_LIMIT)."""
    ty = slot_type(t)
    lw.buffer_bytes += numel(t) * _align(ty)
    return entry_alloca(lw.b, ty, numel(t))


def vec_type(ety: ir.Type, w: int) -> ir.Type:
    """w lanes of `ety`; one lane is a plain scalar (1-lane vectors trip LLVM's loop passes)."""
    return ety if w == 1 else ir.VectorType(ety, w)


def splat(b: ir.IRBuilder, x: ir.Value, w: int) -> ir.Value:
    if w == 1:
        return x
    vty = ir.VectorType(x.type, w)
    one = b.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(I32, w), None))


def load_chunk(b: ir.IRBuilder, big: Big, off: ir.Value, w: int) -> ir.Value:
    """Elements [off, off + w) of a big tile as a w-lane register vector (a scalar when w is 1)."""
    if big.scalar is not None:
        return splat(b, big.scalar, w)
    sty = slot_type(big.type)
    v = b.load(elem_ptr(b, big.ptr, sty, off), typ=vec_type(sty, w), align=_align(sty))
    if scalar_ll(elem_type(big.type)) == I1:
        return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
    return v


def store_chunk(b: ir.IRBuilder, ptr: ir.Value, t: Type, off: ir.Value, v: ir.Value) -> None:
    sty = slot_type(t)
    if isinstance(v.type, ir.VectorType) and v.type.element == I1:
        v = b.zext(v, ir.VectorType(I8, v.type.count))
    elif v.type == I1:
        v = b.zext(v, I8)
    b.store(v, elem_ptr(b, ptr, sty, off), align=_align(sty))


def load_slot(b: ir.IRBuilder, ptr: ir.Value, t: Type, index) -> ir.Value:
    sty = slot_type(t)
    v = b.load(elem_ptr(b, ptr, sty, index), typ=sty)
    return b.trunc(v, I1) if scalar_ll(elem_type(t)) == I1 else v


def _align(sty: ir.Type) -> int:
    """The bytes of one slot (slots are at least a byte: i1 is stored as i8)."""
    return sty.width // 8 if isinstance(sty, ir.IntType) else {"half": 2, "float": 4, "double": 8}[str(sty)]


def fill(lw, ptr: ir.Value, t: Type, scalar: ir.Value) -> None:
    """Every slot of the buffer `ptr` (of type `t`) set to `scalar`."""
    b, n = lw.b, numel(t)
    w = chunk_width(n)
    vec = splat(b, scalar, w)
    with counted_loop(b, 0, n // w, "fill") as c:
        store_chunk(b, ptr, t, b.mul(c, const64(w)), vec)


def copy(lw, dst: ir.Value, t: Type, src: Big) -> None:
    """dst (a buffer of type `t`) := the elements of `src`."""
    if src.scalar is not None:
        fill(lw, dst, t, src.scalar)
        return
    if src.ptr is dst:
        return
    size = numel(t) * _align(slot_type(t))
    fn = declare(lw.b.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(), [PTR, PTR, I64, I1])
    lw.b.call(fn, [dst, src.ptr, const64(size), ir.Constant(I1, 0)])


def as_big(lw, v: Value) -> Big:
    """`v` as a Big: big tiles as they are, small vectors spilled to a buffer, scalars as uniform tiles."""
    x = lw.get(v)
    if isinstance(x, Big):
        return x
    t = v.type if isinstance(v.type, TileType) else TileType((1,), elem_type(v.type))
    if not isinstance(x.type, ir.VectorType):
        return Big(t, scalar=x)
    ptr = new_buffer(lw, t)
    store_chunk(lw.b, ptr, t, const64(0), x)
    return Big(t, ptr=ptr)


def as_buffer(lw, v: Value) -> ir.Value:
    """A buffer holding the elements of `v` (uniform tiles and scalars materialised)."""
    big = as_big(lw, v)
    if big.ptr is not None:
        return big.ptr
    ptr = new_buffer(lw, big.type)
    fill(lw, ptr, big.type, big.scalar)
    return ptr


def from_buffer(lw, t: Type, ptr: ir.Value):
    """The value of type `t` whose elements are in the buffer `ptr`: a Big when `t` is big, else registers."""
    if is_big(t):
        return Big(t, ptr=ptr)
    if not isinstance(t, TileType):
        return load_slot(lw.b, ptr, t, 0)
    sty = slot_type(t)
    v = lw.b.load(ptr, typ=ir.VectorType(sty, t.numel), align=_align(sty))
    return lw.b.icmp_unsigned("!=", v, splat_const(v.type, 0)) if scalar_ll(elem_type(t)) == I1 else v


@contextmanager
def overlay(lw, mapping: dict, lanes: int):
    """Lower with some values replaced (by chunks or scalars) and lw.lanes set; restores them after."""
    saved = {v: lw.values[v] for v in mapping if v in lw.values}  # a fused temporary has no value outside
    saved_lanes = lw.lanes
    lw.values.update(mapping)
    lw.lanes = lanes
    try:
        yield
    finally:
        for v in mapping:
            lw.values.pop(v, None)
        lw.values.update(saved)
        lw.lanes = saved_lanes


def lower_chunked(lw, op: Operation, handler) -> list:
    """An elementwise op with a big result: its scalar form when every operand is uniform, else a loop over
    chunks of the operands' buffers calling the op's ordinary handler on each chunk."""
    t = op.results[0].type
    ins = {v: lw.get(v) for v in op.operands}
    bigs = {v: x for v, x in ins.items() if isinstance(x, Big)}
    if all(x.scalar is not None for x in bigs.values()):
        with overlay(lw, {v: x.scalar for v, x in bigs.items()}, 0):
            r = handler(lw, op)[0]
        return [Big(t, scalar=r)]
    n = t.numel
    w = chunk_width(n)
    out = new_buffer(lw, t)
    b = lw.b
    with counted_loop(b, 0, n // w, "ew") as c:
        off = b.mul(c, const64(w))
        chunks = {v: load_chunk(b, x, off, w) for v, x in bigs.items()}
        with overlay(lw, chunks, w if w > 1 else 0):
            r = handler(lw, op)[0]
        store_chunk(b, out, t, off, r)
    return [Big(t, ptr=out)]


def iota_of(w: int) -> ir.Constant:
    """0, 1, ..., w-1 as i32 lanes (a scalar 0 when w is 1)."""
    if w == 1:
        return ir.Constant(I32, 0)
    return ir.Constant(ir.VectorType(I32, w), [ir.Constant(I32, i) for i in range(w)])


def make_range_big(lw, t: TileType, start: int) -> Big:
    b, n = lw.b, t.numel
    w = chunk_width(n)
    iota = iota_of(w)
    out = new_buffer(lw, t)
    with counted_loop(b, 0, n // w, "range") as c:
        off = b.mul(c, const64(w))
        first = b.add(b.trunc(off, I32), ir.Constant(I32, start))
        store_chunk(b, out, t, off, b.add(splat(b, first, w), iota))
    return Big(t, ptr=out)


@dataclass
class ChunkPlan:
    """How one op of a fused loop computes chunk `off` (of `width` lanes): `emit(off, chunks)` gets the chunk
    of every operand (None for a scalar one) and returns the result's chunk. Operands from before the loop
    are read from their buffers; `spill` puts scalar and small operands in buffers first (loads need every
    operand as a tile). Anything else `emit` needs outside the loop was emitted when the plan was made."""

    width: int
    emit: Callable[[ir.Value, list], ir.Value]
    spill: bool = False


# ops one fused loop takes at most: its body is one basic block, and LLVM's instruction schedulers take
# time superlinear in the size of a block
MAX_FUSED_OPS = 256
# op name -> plan maker for the non-elementwise ops that can join a fused loop (memory.py: load);
# a maker returns None where the op must be lowered on its own.
CHUNK_PLANS: dict[str, Callable[..., ChunkPlan | None]] = {}


@dataclass
class ChunkFusion:
    """Consecutive ops of one block whose big results are computed chunk by chunk (elementwise ops, loads)
    are collected while they agree on the chunk width and count, then lowered as one loop by flush(). Only
    results used outside the group get a buffer; the others live in registers for one chunk. Memory order
    is kept: only loads and pure ops join a group or run ahead of it (can_precede); any other op flushes
    the group before it runs."""

    lw: object
    handlers: dict
    ops: list[tuple[Operation, ChunkPlan]] = field(default_factory=list)
    pending: set[Value] = field(default_factory=set)

    def take(self, op: Operation) -> bool:
        """Lower `op` here (now or at the next flush) when it is chunked; False leaves it to the caller."""
        if not op.results or not is_big(op.results[0].type):
            return False
        if is_elementwise(op):
            if not any(v in self.pending for v in op.operands) and self._uniform(op):
                self._lower_now(op)
                return True
            plan = self._elementwise_plan(op)
        else:
            maker = CHUNK_PLANS.get(op.name)
            plan = maker(self.lw, op) if maker is not None else None
            if plan is None:
                return False
        if self.ops and (len(self.ops) >= MAX_FUSED_OPS or not self._fits(op, plan)):
            self.flush()
        self.ops.append((op, plan))
        self.pending.update(op.results)
        return True

    def can_precede(self, op: Operation) -> bool:
        """Whether `op`, lowered on its own, may run before the collected group: it reads none of the group's
        results and touches no memory but by loading (loads may pass loads; stores and calls flush)."""
        if op.regions or any(v in self.pending for v in op.operands):
            return False
        return OPS[op.name].has(PURE) or (op.name == "load" and not op.attrs.get("volatile"))

    def _uniform(self, op: Operation) -> bool:
        bigs = [x for x in (self.lw.values.get(v) for v in op.operands) if isinstance(x, Big)]
        return all(x.scalar is not None for x in bigs)

    def _lower_now(self, op: Operation) -> None:
        for r, v in zip(op.results, lower_chunked(self.lw, op, self.handlers[op.name]), strict=False):
            self.lw.values[r] = v

    def _fits(self, op: Operation, plan: ChunkPlan) -> bool:
        first, head = self.ops[0]
        n, m = first.results[0].type.numel, op.results[0].type.numel
        return head.width == plan.width and n // head.width == m // plan.width

    def _elementwise_plan(self, op: Operation) -> ChunkPlan:
        lw, handler = self.lw, self.handlers[op.name]
        w = chunk_width(op.results[0].type.numel)

        def emit(off: ir.Value, chunks: list) -> ir.Value:
            mapping = {v: c for v, c in zip(op.operands, chunks, strict=True) if c is not None}
            with overlay(lw, mapping, w if w > 1 else 0):
                return handler(lw, op)[0]

        return ChunkPlan(w, emit)

    def flush(self) -> None:
        """Emit the collected ops as one loop over their chunks."""
        if not self.ops:
            return
        group, self.ops, self.pending = self.ops, [], set()
        lw, b = self.lw, self.lw.b
        first, head = group[0]
        w = head.width
        inside = {op for op, _ in group}
        srcs = self._sources(group)
        outs = {r: new_buffer(lw, r.type) for op, _ in group for r in op.results if self._escapes(r, inside)}
        with counted_loop(b, 0, first.results[0].type.numel // w, "fused") as c:
            off = b.mul(c, const64(w))
            chunks: dict[Value, ir.Value] = {}
            for op, plan in group:
                for v in op.operands:
                    if v not in chunks and v in srcs:
                        chunks[v] = load_chunk(b, srcs[v], off, w)
                r = plan.emit(off, [chunks.get(v) for v in op.operands])
                res = op.results[0]
                chunks[res] = r
                if res in outs:
                    store_chunk(b, outs[res], res.type, off, r)
        for r, ptr in outs.items():
            lw.values[r] = Big(r.type, ptr=ptr)

    def _sources(self, group: list[tuple[Operation, ChunkPlan]]) -> dict[Value, Big]:
        """The operands the group reads from before it, as buffers (or uniform values)."""
        made = {r for op, _ in group for r in op.results}
        srcs: dict[Value, Big] = {}
        for op, plan in group:
            for v in op.operands:
                if v in made or v in srcs:
                    continue
                x = self.lw.values.get(v)
                if isinstance(x, Big):
                    srcs[v] = x
                elif plan.spill:
                    srcs[v] = as_big(self.lw, v)
        return srcs

    def _escapes(self, v: Value, inside: set[Operation]) -> bool:
        return any(u not in inside for u in self.lw.users().get(v, ()))
