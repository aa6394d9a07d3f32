"""Lowering of load, store and atomics for the cpu target.

Tile accesses are masked (llvm.masked.load/store per run of consecutive addresses, or masked.gather/scatter
over a vector of addresses), so a masked-off lane never touches memory; scalar accesses with a mask branch around the access. Atomics go lane by
lane through atomicrmw, or a cmpxchg loop where atomicrmw has no matching operation (float max/min,
bf16), so they are atomic across the threads that run programs in parallel.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...ir.core import Operation
from ...ir.types import PointerType, ScalarType, TileType, elem_type
from ..llvm import fp8
from ..llvm.loops import counted_loop, entry_alloca
from ..llvm.tables import BINARY
from ..llvm.types import (
    I1,
    I8,
    I32,
    PTR,
    bf16_to_bits,
    bits_to_bf16,
    intrinsic,
    like,
    mem_ll,
    round_bf16,
    scalar_ll,
    splat_const,
)
from ..llvm.volatile import volatile_load
from .buffers import (
    CHUNK_PLANS,
    Big,
    ChunkPlan,
    as_big,
    chunk_width,
    const64,
    fill,
    from_buffer,
    load_chunk,
    new_buffer,
    slot_type,
    store_chunk,
)
from .contig import contiguous_address, last_axis_run
from .lower import HANDLERS, FunctionLowering, lowering_error

_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


def pointee(op: Operation) -> ScalarType:
    p = elem_type(op.operands[0].type)
    assert isinstance(p, PointerType)
    return p.pointee


def to_mem(b: ir.IRBuilder, e: ScalarType, v: ir.Value) -> ir.Value:
    """Register value -> in-memory representation (bf16 bits, i1 as a byte)."""
    if e.name == "bf16":
        return bf16_to_bits(b, v)
    if e.is_fp8:
        return fp8.f32_to_bits(b, v, e.name)
    if e.name == "i1":
        return b.zext(v, like(v.type, I8))
    return v


def from_mem(b: ir.IRBuilder, e: ScalarType, v: ir.Value) -> ir.Value:
    if e.name == "bf16":
        return bits_to_bf16(b, v)
    if e.is_fp8:
        return fp8.bits_to_f32(b, v, e.name)
    if e.name == "i1":
        return b.icmp_unsigned("!=", v, splat_const(v.type, 0))
    return v


def _as_ptrs(b: ir.IRBuilder, addr: ir.Value) -> ir.Value:
    return b.inttoptr(addr, like(addr.type, PTR))


def _operand(lw: FunctionLowering, op: Operation, i: int) -> ir.Value | None:
    return lw.get(op.operands[i]) if len(op.operands) > i else None


def _load(lw: FunctionLowering, op: Operation) -> list:
    b, e = lw.b, pointee(op)
    addr, mask, other = lw.get(op.operands[0]), _operand(lw, op, 1), _operand(lw, op, 2)
    if isinstance(addr, Big) or isinstance(addr.type, ir.VectorType):
        return [_load_tile(lw, op, e)]
    mty = mem_ll(e)
    fallback = to_mem(b, e, other) if other is not None else ir.Constant(mty, 0)
    ptr = _as_ptrs(b, addr)
    load = volatile_load if op.attrs.get("volatile") else lambda b, p, t: b.load(p, typ=t)
    if mask is None:
        return [from_mem(b, e, load(b, ptr, mty))]
    with b.if_else(mask) as (then, otherwise):
        with then:
            loaded = load(b, ptr, mty)
            then_bb = b.block
        with otherwise:
            else_bb = b.block
    phi = b.phi(mty)
    phi.add_incoming(loaded, then_bb)
    phi.add_incoming(fallback, else_bb)
    return [from_mem(b, e, phi)]


def _load_tile(lw: FunctionLowering, op: Operation, e: ScalarType):
    """A small 1-D contiguous tile is one masked.load, other small tiles without runs one gather; the rest
    go chunk by chunk: a masked.load per run of consecutive addresses, or a gather per chunk."""
    b = lw.b
    addr, mask, other = lw.get(op.operands[0]), _operand(lw, op, 1), _operand(lw, op, 2)
    run = chunk_width(op.operands[0].type.shape[-1], chunk_width(last_axis_run(lw, op.operands[0])))
    if not isinstance(addr, Big):
        mty = like(addr.type, mem_ll(e))
        mask = mask if mask is not None else splat_const(like(addr.type, I1), 1)
        fallback = to_mem(b, e, other) if other is not None else splat_const(mty, 0)
        align = ir.Constant(I32, e.bytes)
        first = contiguous_address(lw, op.operands[0])
        if first is not None:
            v = intrinsic(b, "masked.load", [first, align, mask, fallback], ret=mty, overload=[mty, PTR])
            return from_mem(b, e, v)
        if run < 2:
            ptrs = _as_ptrs(b, addr)
            v = intrinsic(
                b, "masked.gather", [ptrs, align, mask, fallback], ret=mty, overload=[mty, ptrs.type]
            )
            return from_mem(b, e, v)
    t = op.results[0].type
    srcs = [as_big(lw, v) for v in op.operands]
    w = run if run >= 2 else chunk_width(t.numel)
    base = contiguous_address(lw, op.operands[0])  # 1-D contiguous: the address tile is not needed
    out = new_buffer(lw, t)
    with counted_loop(b, 0, t.numel // w, "ld") as c:
        off = b.mul(c, const64(w))
        v = _load_chunk(b, e, run, base, off, w, _chunks(b, srcs, off, w))
        store_chunk(b, out, t, off, v)
    return from_buffer(lw, t, out)


def _load_chunk(b: ir.IRBuilder, e: ScalarType, run: int, base, off, w: int, chunks: list) -> ir.Value:
    """Elements [off, off + w) of a big load, from the chunks of its address, mask and other tiles."""
    a, m, o = chunks
    if w == 1:
        a, m, o = (_vec1(b, x) for x in (a, m, o))
    mty = ir.VectorType(mem_ll(e), w)
    m = m if m is not None else splat_const(ir.VectorType(I1, w), 1)
    fb = to_mem(b, e, o) if o is not None else splat_const(mty, 0)
    align = ir.Constant(I32, e.bytes)
    if run >= 2:
        first = _run_start(b, base, off, a, e)
        v = intrinsic(b, "masked.load", [first, align, m, fb], ret=mty, overload=[mty, PTR])
    else:
        ptrs = _as_ptrs(b, a)
        v = intrinsic(b, "masked.gather", [ptrs, align, m, fb], ret=mty, overload=[mty, ptrs.type])
    return from_mem(b, e, v if w > 1 else b.extract_element(v, ir.Constant(I32, 0)))


def _load_plan(lw: FunctionLowering, op: Operation) -> ChunkPlan | None:
    """A big load as one op of a fused chunk loop (cpu_buffers.ChunkFusion); volatile loads stay alone."""
    if op.attrs.get("volatile"):
        return None
    e, b = pointee(op), lw.b
    ptr = op.operands[0]
    run = chunk_width(ptr.type.shape[-1], chunk_width(last_axis_run(lw, ptr)))
    w = run if run >= 2 else chunk_width(op.results[0].type.numel)
    base = contiguous_address(lw, ptr)

    def emit(off: ir.Value, chunks: list) -> ir.Value:
        return _load_chunk(b, e, run, base, off, w, chunks + [None] * (3 - len(chunks)))

    return ChunkPlan(w, emit, spill=True)


CHUNK_PLANS["load"] = _load_plan


def _run_start(b: ir.IRBuilder, base, off, addrs, e: ScalarType) -> ir.Value:
    """The address of a run's first element: base + off elements when the whole tile is contiguous, else
    the first lane of the address chunk."""
    if base is not None:
        return b.gep(base, [off], source_etype=mem_ll(e))
    return b.inttoptr(b.extract_element(addrs, ir.Constant(I32, 0)), PTR)


def _vec1(b: ir.IRBuilder, x: ir.Value | None) -> ir.Value | None:
    """A scalar as a 1-lane vector, for the masked intrinsics."""
    if x is None:
        return None
    return b.insert_element(ir.Constant(ir.VectorType(x.type, 1), ir.Undefined), x, ir.Constant(I32, 0))


def _chunks(b: ir.IRBuilder, srcs: list, off, w: int) -> list:
    """Chunk `off` of each operand (None for absent optional operands), padded to three."""
    out = [load_chunk(b, s, off, w) for s in srcs]
    return out + [None] * (3 - len(out))


def _store(lw: FunctionLowering, op: Operation) -> list:
    b, e = lw.b, pointee(op)
    addr = lw.get(op.operands[0])
    if isinstance(addr, Big) or isinstance(addr.type, ir.VectorType):
        _store_tile(lw, op, e)
        return []
    val, mask = to_mem(lw.b, e, lw.get(op.operands[1])), _operand(lw, op, 2)
    if mask is None:
        b.store(val, _as_ptrs(b, addr))
        return []
    with b.if_then(mask):
        b.store(val, _as_ptrs(b, addr))
    return []


def _store_tile(lw: FunctionLowering, op: Operation, e: ScalarType) -> None:
    """As _load_tile: one masked.store, one scatter, or chunk by chunk."""
    b = lw.b
    addr = lw.get(op.operands[0])
    run = chunk_width(op.operands[0].type.shape[-1], chunk_width(last_axis_run(lw, op.operands[0])))
    align = ir.Constant(I32, e.bytes)
    if not isinstance(addr, Big):
        val, mask = to_mem(b, e, lw.get(op.operands[1])), _operand(lw, op, 2)
        mask = mask if mask is not None else splat_const(like(addr.type, I1), 1)
        first = contiguous_address(lw, op.operands[0])
        if first is not None:
            intrinsic(
                b, "masked.store", [val, first, align, mask], ret=ir.VoidType(), overload=[val.type, PTR]
            )
            return
        if run < 2:
            ptrs = _as_ptrs(b, addr)
            intrinsic(
                b,
                "masked.scatter",
                [val, ptrs, align, mask],
                ret=ir.VoidType(),
                overload=[val.type, ptrs.type],
            )
            return
    t = op.operands[0].type
    srcs = [as_big(lw, v) for v in op.operands]
    w = run if run >= 2 else chunk_width(t.numel)
    base = contiguous_address(lw, op.operands[0])
    with counted_loop(b, 0, t.numel // w, "st") as c:
        off = b.mul(c, const64(w))
        a, v, m = _chunks(b, srcs, off, w)
        if w == 1:
            a, v, m = (_vec1(b, x) for x in (a, v, m))
        v = to_mem(b, e, v)
        m = m if m is not None else splat_const(ir.VectorType(I1, w), 1)
        if run >= 2:
            first = _run_start(b, base, off, a, e)
            intrinsic(b, "masked.store", [v, first, align, m], ret=ir.VoidType(), overload=[v.type, PTR])
        else:
            ptrs = _as_ptrs(b, a)
            intrinsic(
                b, "masked.scatter", [v, ptrs, align, m], ret=ir.VoidType(), overload=[v.type, ptrs.type]
            )


# ---- atomics -------------------------------------------------------------------------------------

_RMW_INT = {"add": "add", "xchg": "xchg", "and": "and", "or": "or", "xor": "xor"}
_RMW_MINMAX = {
    ("max", "sint"): "max",
    ("min", "sint"): "min",
    ("max", "uint"): "umax",
    ("min", "uint"): "umin",
}


def _cas_loop(b: ir.IRBuilder, ptr, e: ScalarType, update: Callable[[ir.Value], ir.Value], order: str):
    """old = *ptr; do { new = update(old) } until cmpxchg(ptr, old, new) succeeds; returns old."""
    mty = mem_ll(e)
    ity = ir.IntType(mty.width) if isinstance(mty, ir.IntType) else ir.IntType(e.bits)
    first = b.load(ptr, typ=ity)
    pre = b.block
    loop = b.append_basic_block("cas.loop")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old_bits = b.phi(ity)
    old_bits.add_incoming(first, pre)
    old = from_mem(b, e, old_bits if e.name in ("bf16", "i1") or not e.is_float else b.bitcast(old_bits, mty))
    new = to_mem(b, e, update(old))
    new_bits = new if new.type == ity else b.bitcast(new, ity)
    pair = b.cmpxchg(ptr, old_bits, new_bits, order, "monotonic")
    old_bits.add_incoming(b.extract_value(pair, 0), b.block)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)
    return old


def _rmw_one(b: ir.IRBuilder, ptr, val, e: ScalarType, kind: str, order: str, op: Operation):
    """One atomic read-modify-write at `ptr`; returns the old value (a register value)."""
    k = "float" if e.is_float else ("uint" if e.is_unsigned else "sint")
    if e.name != "bf16" and e.name != "i1":
        if k != "float" and kind in _RMW_INT:
            return b.atomic_rmw(_RMW_INT[kind], ptr, val, order)
        if (kind, k) in _RMW_MINMAX:
            return b.atomic_rmw(_RMW_MINMAX[(kind, k)], ptr, val, order)
        if k == "float" and kind == "add":
            return b.atomic_rmw("fadd", ptr, val, order)
        if k == "float" and kind == "xchg":
            return b.atomic_rmw("xchg", ptr, val, order)
    name = {"max": "maximum", "min": "minimum"}.get(kind, kind)
    fn = BINARY.get((name, k)) if kind != "xchg" else (lambda _b, _old, v: v)
    if fn is None:
        raise lowering_error(op, f"of kind {kind!r} does not take {e} values")
    return _cas_loop(b, ptr, e, lambda old: _round(b, e, fn(b, old, val)), order)


def _round(b: ir.IRBuilder, e: ScalarType, v):
    return round_bf16(b, v) if e.name == "bf16" else v


def _per_lane(lw: FunctionLowering, op: Operation, operands: list, mask, one) -> ir.Value:
    """Run `one(ptr, *lane values)` for each lane whose mask is set; masked-off lanes give 0. `operands` and
    `mask` are IR values (the mask may be None)."""
    b = lw.b
    if not isinstance(operands[0].type, TileType):
        vals = [lw.get(v) for v in operands]
        if mask is None:
            return one(_as_ptrs(b, vals[0]), *vals[1:])
        rty = scalar_ll(elem_type(op.results[0].type))
        res = entry_alloca(b, rty)
        b.store(ir.Constant(rty, None), res)
        with b.if_then(lw.get(mask)):
            b.store(one(_as_ptrs(b, vals[0]), *vals[1:]), res)
        return b.load(res)
    t = op.results[0].type
    n = t.numel
    bigs = [as_big(lw, v) for v in operands]
    mbig = as_big(lw, mask) if mask is not None else None
    out = new_buffer(lw, t)
    fill(lw, out, t, ir.Constant(slot_type(t), None))
    with counted_loop(b, 0, n, "atomic") as i:
        lanes = [load_chunk(b, x, i, 1) for x in bigs]
        ptr = b.inttoptr(lanes[0], PTR)
        if mbig is None:
            store_chunk(b, out, t, i, one(ptr, *lanes[1:]))
        else:
            m = load_chunk(b, mbig, i, 1)
            with b.if_then(m):
                store_chunk(b, out, t, i, one(ptr, *lanes[1:]))
    return from_buffer(lw, t, out)


def _atomic_rmw(lw: FunctionLowering, op: Operation) -> list:
    e, kind = pointee(op), op.attrs["kind"]
    order = _ORDER.get(op.attrs.get("sem", "acq_rel"), "acq_rel")
    mask = op.operands[2] if len(op.operands) > 2 else None
    return [_per_lane(lw, op, op.operands[:2], mask, lambda p, v: _rmw_one(lw.b, p, v, e, kind, order, op))]


def _atomic_cas(lw: FunctionLowering, op: Operation) -> list:
    e = pointee(op)
    order = _ORDER.get(op.attrs.get("sem", "acq_rel"), "acq_rel")
    b = lw.b

    def one(ptr, cmp, val):
        cmp_m, val_m = to_mem(b, e, cmp), to_mem(b, e, val)
        ity = ir.IntType(max(8, e.bits))
        if cmp_m.type != ity:
            cmp_m, val_m = b.bitcast(cmp_m, ity), b.bitcast(val_m, ity)
        old = b.extract_value(b.cmpxchg(ptr, cmp_m, val_m, order, "monotonic"), 0)
        if e.is_float and e.name != "bf16":
            old = b.bitcast(old, mem_ll(e))
        return from_mem(b, e, old)

    return [_per_lane(lw, op, list(op.operands), None, one)]


HANDLERS.update({"load": _load, "store": _store, "atomic_rmw": _atomic_rmw, "atomic_cas": _atomic_cas})
