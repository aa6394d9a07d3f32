"""Lowering of tile-shape ops and dot. Small tiles: splat, broadcast, reshape and trans are one shufflevector
each. Big tiles (buffers.py): splat is a uniform tile, reshape reuses the buffer, broadcast and trans
copy rows through strided loops, and dot is a loop nest over (M, N-chunks, K) with the accumulator chunk
in registers.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...ir.core import Operation
from ...ir.types import TileType, shape_of
from ..llvm.loops import counted_loop, entry_alloca
from ..llvm.tables import BINARY, cast
from ..llvm.types import F32, I32, is_bf16, kind_of, round_bf16, scalar_ll
from .buffers import (
    Big,
    as_big,
    chunk_width,
    const64,
    from_buffer,
    is_big,
    load_chunk,
    load_slot,
    new_buffer,
    splat,
    store_chunk,
    vec_type,
)
from .lower import HANDLERS, FunctionLowering


def _shuffle(b: ir.IRBuilder, x: ir.Value, index: np.ndarray) -> ir.Value:
    if not isinstance(x.type, ir.VectorType):
        x = b.insert_element(ir.Constant(ir.VectorType(x.type, 1), ir.Undefined), x, ir.Constant(I32, 0))
    if index.size == x.type.count and bool((index == np.arange(index.size)).all()):
        return x
    mask = ir.Constant(ir.VectorType(I32, int(index.size)), [ir.Constant(I32, int(i)) for i in index])
    return b.shuffle_vector(x, ir.Constant(x.type, ir.Undefined), mask)


def _splat(lw: FunctionLowering, op: Operation) -> list:
    t = op.results[0].type
    if is_big(t):
        return [Big(t, scalar=lw.get(op.operands[0]))]
    return [_shuffle(lw.b, lw.get(op.operands[0]), np.zeros(t.numel, dtype=np.int64))]


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _strided_copy(lw: FunctionLowering, src: Big, t: TileType, strides: list[int]) -> Big:
    """A big tile of type `t` whose element at index i is src's element at offset sum(i[d] * strides[d])."""
    b = lw.b
    if src.scalar is not None:
        return Big(t, scalar=src.scalar)
    out = new_buffer(lw, t)
    rows_shape, last = t.shape[:-1], t.shape[-1]
    rows = int(np.prod(rows_shape)) if rows_shape else 1
    with counted_loop(b, 0, rows, "row") as r:
        base, rest = const64(0), r
        for d in reversed(range(len(rows_shape))):
            digit = b.urem(rest, const64(rows_shape[d]))
            rest = b.udiv(rest, const64(rows_shape[d]))
            base = b.add(base, b.mul(digit, const64(strides[d])))
        dst = b.mul(r, const64(last))
        _copy_row(lw, src, t, out, base, dst, last, strides[-1])
    return Big(t, ptr=out)


def _copy_row(lw: FunctionLowering, src: Big, t: TileType, out, base, dst, n: int, stride: int) -> None:
    b = lw.b
    if stride in (0, 1):
        w = chunk_width(n)
        one = splat(b, load_slot(b, src.ptr, src.type, base), w) if stride == 0 else None
        with counted_loop(b, 0, n // w, "col") as c:
            off = b.mul(c, const64(w))
            v = one if one is not None else load_chunk(b, src, b.add(base, off), w)
            store_chunk(b, out, t, b.add(dst, off), v)
        return
    with counted_loop(b, 0, n, "col") as j:
        v = load_slot(b, src.ptr, src.type, b.add(base, b.mul(j, const64(stride))))
        store_chunk(b, out, t, b.add(dst, j), v)


def _broadcast(lw: FunctionLowering, op: Operation) -> list:
    src, dst = shape_of(op.operands[0].type), shape_of(op.results[0].type)
    t = op.results[0].type
    if is_big(t):
        big = as_big(lw, op.operands[0])
        if big.type.numel == 1 and big.scalar is None:
            return [Big(t, scalar=load_slot(lw.b, big.ptr, big.type, 0))]
        src_strides = _strides(src)
        strides = [0 if s == 1 and d != 1 else st for s, d, st in zip(src, dst, src_strides, strict=True)]
        return [_strided_copy(lw, big, t, strides)]
    index = np.broadcast_to(np.arange(int(np.prod(src))).reshape(src), dst).ravel()
    return [_shuffle(lw.b, lw.get(op.operands[0]), index)]


def _reshape(lw: FunctionLowering, op: Operation) -> list:
    t = op.results[0].type
    x = lw.get(op.operands[0])
    if isinstance(x, Big):
        return [x.retyped(t)]
    return [_shuffle(lw.b, x, np.arange(t.numel))]


def _trans(lw: FunctionLowering, op: Operation) -> list:
    src = shape_of(op.operands[0].type)
    order = op.attrs["order"]
    x = lw.get(op.operands[0])
    if isinstance(x, Big):
        st = _strides(src)
        return [_strided_copy(lw, x, op.results[0].type, [st[d] for d in order])]
    index = np.arange(int(np.prod(src))).reshape(src).transpose(order).ravel()
    return [_shuffle(lw.b, x, index)]


# ---- dot -----------------------------------------------------------------------------------------


def _dot(lw: FunctionLowering, op: Operation) -> list:
    """acc[m, n] += a[m, k] * b[k, n] over k in order, n in chunks held in registers. Float dots accumulate in
    at least f32 and round to the accumulator's type once at the end; integer dots wrap in its type."""
    b = lw.b
    a_t, b_t, c_t = (v.type for v in op.operands)
    (m_, k_), n_ = a_t.shape, b_t.shape[1]
    av, bv, cv = (as_big(lw, v) for v in op.operands)
    ak, ck = kind_of(a_t), kind_of(c_t)
    ety = scalar_ll(c_t.elem)
    wty = F32 if ck == "float" and str(ety) == "half" else ety
    add, mul = BINARY[("add", ck)], BINARY[("mul", ck)]
    w = chunk_width(n_)
    vw = vec_type(wty, w)
    out = new_buffer(lw, c_t)
    acc = entry_alloca(b, vw)
    with counted_loop(b, 0, m_, "dm") as m:
        with counted_loop(b, 0, n_ // w, "dn") as nc:
            n0 = b.mul(nc, const64(w))
            c_at = b.add(b.mul(m, const64(n_)), n0)
            b.store(cast(b, load_chunk(b, cv, c_at, w), ck, ck, vw), acc)
            with counted_loop(b, 0, k_, "dk") as k:
                a = _scalar_of(b, av, b.add(b.mul(m, const64(k_)), k))
                a = splat(b, cast(b, a, ak, ck, wty), w)
                bb = cast(b, load_chunk(b, bv, b.add(b.mul(k, const64(n_)), n0), w), ak, ck, vw)
                b.store(add(b, b.load(acc), mul(b, a, bb)), acc)
            res = cast(b, b.load(acc), ck, ck, vec_type(ety, w))
            store_chunk(b, out, c_t, c_at, round_bf16(b, res) if is_bf16(c_t) else res)
    return [from_buffer(lw, c_t, out)]


def _scalar_of(b: ir.IRBuilder, big: Big, index) -> ir.Value:
    return big.scalar if big.scalar is not None else load_slot(b, big.ptr, big.type, index)


HANDLERS.update(
    {
        "splat": _splat,
        "broadcast": _broadcast,
        "expand_dims": _reshape,
        "reshape": _reshape,
        "trans": _trans,
        "dot": _dot,
    }
)
