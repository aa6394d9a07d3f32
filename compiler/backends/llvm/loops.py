"""Small llvmlite helpers for lowering: counted loops with phis, entry-block stack buffers, lane maps.

Tiles whose ops cannot be one vector instruction (reductions, dot, scans, libm calls) are spilled to a
stack buffer and processed by loops that LLVM can vectorise.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from llvmlite import ir

from .types import I64, PTR

_UNROLL_LANES = 16


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, count: int = 1, align: int = 64) -> ir.Value:
    """A stack buffer of `count` elements of `ty`, allocated once in the function's entry block."""
    saved = b.block
    entry = b.function.entry_basic_block
    if entry.instructions:
        b.position_before(entry.instructions[0])
    else:
        b.position_at_start(entry)
    buf = b.alloca(ty, size=ir.Constant(I64, count))
    buf.align = align
    buf.type = PTR  # the IR is printed with opaque pointers; keep llvmlite's type checks in step
    b.position_at_end(saved)
    return buf


@contextmanager
def counted_loop(b: ir.IRBuilder, start, end, name: str = "i"):
    """`for (i = start; i < end; ++i)` over i64; yields the induction value, leaves b after the loop.

    The loop is emitted already rotated (a guard, then a body that tests at its bottom), so LLVM's
    loop-rotate pass has nothing to do: rotating hundreds of loops in one function (long unrolled
    kernels on big tiles) costs it time quadratic in their number. A constant trip count of at
    least one needs no guard.
    """
    start = start if isinstance(start, ir.Value) else ir.Constant(I64, start)
    end = end if isinstance(end, ir.Value) else ir.Constant(I64, end)
    pre = b.block
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    if _known_positive_trip(start, end):
        b.branch(body)
    else:
        b.cbranch(b.icmp_signed("<", start, end), body, done)
    b.position_at_end(body)
    iv = b.phi(I64, name=name)
    iv.add_incoming(start, pre)
    yield iv
    nxt = b.add(iv, ir.Constant(I64, 1))
    iv.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, end), body, done)
    b.position_at_end(done)


def _known_positive_trip(start: ir.Value, end: ir.Value) -> bool:
    consts = isinstance(start, ir.Constant) and isinstance(end, ir.Constant)
    return (
        consts
        and isinstance(start.constant, int)
        and isinstance(end.constant, int)
        and start.constant < end.constant
    )


def spill(b: ir.IRBuilder, vec: ir.Value) -> ir.Value:
    """Store a vector into a fresh stack buffer of its elements; returns the buffer."""
    buf = entry_alloca(b, vec.type.element, vec.type.count)
    b.store(vec, buf, align=64)
    return buf


def reload(b: ir.IRBuilder, buf: ir.Value, vty: ir.VectorType) -> ir.Value:
    return b.load(buf, typ=vty, align=64)


def elem_ptr(b: ir.IRBuilder, buf: ir.Value, ety: ir.Type, index) -> ir.Value:
    index = index if isinstance(index, ir.Value) else ir.Constant(I64, index)
    return b.gep(buf, [index], source_etype=ety)


def load_elem(b: ir.IRBuilder, buf: ir.Value, ety: ir.Type, index) -> ir.Value:
    return b.load(elem_ptr(b, buf, ety, index), typ=ety)


def map_lanes(b: ir.IRBuilder, x: ir.Value, ret: ir.Type, fn: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """Apply a scalar function to each lane of `x` (or to `x` itself when it is a scalar)."""
    if not isinstance(x.type, ir.VectorType):
        return fn(x)
    n = x.type.count
    out_ty = ir.VectorType(ret, n)
    if n <= _UNROLL_LANES:
        out = ir.Constant(out_ty, ir.Undefined)
        for i in range(n):
            lane = fn(b.extract_element(x, ir.Constant(I64, i)))
            out = b.insert_element(out, lane, ir.Constant(I64, i))
        return out
    src = spill(b, x)
    dst = entry_alloca(b, ret, n)
    with counted_loop(b, 0, n, "lane") as i:
        v = load_elem(b, src, x.type.element, i)
        b.store(fn(v), elem_ptr(b, dst, ret, i))
    return reload(b, dst, out_ty)
