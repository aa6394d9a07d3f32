"""reduce_with and scan_with on the cpu target: reductions and scans whose combine is a region of scalar
code (ifs and loops included), lowered inline (once per loop that applies it) on scalar registers.

The tile is seen as [outer, red, inner] around the axis, as in reduce.py. reduce_with copies each
[red, inner] plane into scratch buffers and folds it in the interpreter's order: each level combines row i
with row i + h (h = n // 2, an odd last row carried down), which on the row-major plane is one loop over
h * inner consecutive elements. scan_with walks each line in order (or from its end when reversed).
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.core import Operation, Value
from ...ir.types import TileType, elem_type, shape_of
from ..llvm.loops import counted_loop, entry_alloca
from ..llvm.types import I1, I64, PTR, declare
from .buffers import as_buffer, const64, from_buffer, load_slot, new_buffer, slot_type, store_chunk
from .lower import HANDLERS, FunctionLowering, lowering_error
from .reduce import _split


def combine(lw: FunctionLowering, op: Operation, lhs: list, rhs: list) -> list:
    """The combiner region of `op` lowered at the builder's position on scalar registers (lhs, rhs)."""
    block = op.regions[0].block
    lw.values.update(zip(block.args, [*lhs, *rhs], strict=True))
    term = lw.lower_block(block)
    if term is None or term.name != "yield":
        raise lowering_error(op, "has a combiner that does not end with 'yield'")
    out = [lw.get(v) for v in term.operands]
    for a in block.args:  # the region's values mean nothing outside this copy of it
        lw.values.pop(a, None)
    for inner in block.ops:
        for o in inner.walk():
            for v in (*o.results, *(a for r in o.regions for a in r.block.args)):
                lw.values.pop(v, None)
    return out


def _elem_t(v: Value, n: int) -> TileType:
    """A buffer type of n elements of v's element type."""
    return TileType((n,), elem_type(v.type))


def _copy(lw: FunctionLowering, dst, src, t: TileType, dst_at, src_at, n) -> None:
    """dst[dst_at : dst_at + n] := src[src_at : src_at + n] (element offsets and count: i64 values)."""
    b = lw.b
    width = ir.Constant(I64, _slot_bytes(t))
    d = b.gep(dst, [b.mul(dst_at, width)], source_etype=ir.IntType(8))
    s = b.gep(src, [b.mul(src_at, width)], source_etype=ir.IntType(8))
    fn = declare(b.module, "llvm.memcpy.p0.p0.i64", ir.VoidType(), [PTR, PTR, I64, I1])
    b.call(fn, [d, s, b.mul(n, width), ir.Constant(I1, 0)])


def _slot_bytes(t: TileType) -> int:
    sty = slot_type(t)
    return sty.width // 8 if isinstance(sty, ir.IntType) else {"half": 2, "float": 4, "double": 8}[str(sty)]


def _reduce_with(lw: FunctionLowering, op: Operation) -> list:
    b = lw.b
    outer, red, inner = _split(shape_of(op.operands[0].type), op.attrs["axis"])
    plane = red * inner
    srcs = [as_buffer(lw, v) for v in op.operands]
    scratch = [new_buffer(lw, _elem_t(v, plane)) for v in op.operands]
    outs = [new_buffer(lw, _elem_t(v, outer * inner)) for v in op.operands]
    types = [_elem_t(v, 1) for v in op.operands]
    n_at = entry_alloca(b, I64)  # the rows left to fold
    levels = max(0, (red - 1).bit_length())  # n -> ceil(n / 2) reaches 1 after this many levels
    with counted_loop(b, 0, outer, "rwo") as o:
        for src, scr, t in zip(srcs, scratch, types, strict=True):
            _copy(lw, scr, src, t, const64(0), b.mul(o, const64(plane)), const64(plane))
        b.store(const64(red), n_at)
        with counted_loop(b, 0, levels, "rwl"):
            n = b.load(n_at, typ=I64)
            h = b.lshr(n, const64(1))
            span = b.mul(h, const64(inner))
            with counted_loop(b, 0, span, "rwj") as j:
                far = b.add(j, span)
                lhs = [load_slot(b, s, t, j) for s, t in zip(scratch, types, strict=True)]
                rhs = [load_slot(b, s, t, far) for s, t in zip(scratch, types, strict=True)]
                for s, t, v in zip(scratch, types, combine(lw, op, lhs, rhs), strict=True):
                    store_chunk(b, s, t, j, v)
            odd = b.and_(n, const64(1))
            for s, t in zip(scratch, types, strict=True):  # the odd last row moves down to row h
                _copy(lw, s, s, t, span, b.mul(span, const64(2)), b.mul(odd, const64(inner)))
            b.store(b.add(h, odd), n_at)
        for dst, scr, t in zip(outs, scratch, types, strict=True):
            _copy(lw, dst, scr, t, b.mul(o, const64(inner)), const64(0), const64(inner))
    return [from_buffer(lw, r.type, buf) for r, buf in zip(op.results, outs, strict=True)]


def _scan_with(lw: FunctionLowering, op: Operation) -> list:
    b = lw.b
    outer, red, inner = _split(shape_of(op.operands[0].type), op.attrs["axis"])
    rev = bool(op.attrs.get("reverse"))
    srcs = [as_buffer(lw, v) for v in op.operands]
    outs = [new_buffer(lw, v.type) for v in op.operands]
    types = [_elem_t(v, 1) for v in op.operands]
    accs = [new_buffer(lw, t) for t in types]
    with counted_loop(b, 0, outer * inner, "swl") as line:
        o, i = b.udiv(line, const64(inner)), b.urem(line, const64(inner))
        base = b.add(b.mul(o, const64(red * inner)), i)
        first = b.add(base, const64((red - 1) * inner)) if rev else base
        for src, out, acc, t in zip(srcs, outs, accs, types, strict=True):
            v = load_slot(b, src, t, first)
            store_chunk(b, acc, t, const64(0), v)
            store_chunk(b, out, t, first, v)
        with counted_loop(b, 1, red, "swr") as r:
            rr = b.sub(const64(red - 1), r) if rev else r
            at = b.add(base, b.mul(rr, const64(inner)))
            lhs = [load_slot(b, acc, t, 0) for acc, t in zip(accs, types, strict=True)]
            rhs = [load_slot(b, src, t, at) for src, t in zip(srcs, types, strict=True)]
            for acc, out, t, v in zip(accs, outs, types, combine(lw, op, lhs, rhs), strict=True):
                store_chunk(b, acc, t, const64(0), v)
                store_chunk(b, out, t, at, v)
    return [from_buffer(lw, r.type, buf) for r, buf in zip(op.results, outs, strict=True)]


HANDLERS.update({"reduce_with": _reduce_with, "scan_with": _scan_with})
