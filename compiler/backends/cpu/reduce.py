"""Lowering of reduce and scan on the cpu target, along any axis of small or big tiles.

The tile is seen as [outer, red, inner] around the axis. With inner > 1 the loops run over chunks of
`inner` (lanes are independent, each folded in order, as the interpreter does); along the last axis
(inner == 1) lanes fold interleaved partial results, combined at the end (argmax/argmin keep the first
index of the best value). 1-D reductions of small tiles are one llvm.vector.reduce call.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from ...ir.core import Operation
from ...ir.types import TileType, shape_of
from ..llvm.loops import counted_loop, entry_alloca
from ..llvm.tables import BINARY, CMP
from ..llvm.types import I32, declare, is_bf16, kind_of, mangle, round_bf16, scalar_ll
from .buffers import (
    Big,
    as_big,
    chunk_width,
    const64,
    from_buffer,
    iota_of,
    load_chunk,
    new_buffer,
    splat,
    store_chunk,
    vec_type,
)
from .lower import HANDLERS, FunctionLowering, lowering_error

_VECTOR_REDUCE = {
    ("sum", "float"): "fadd", ("prod", "float"): "fmul", ("max", "float"): "fmax", ("min", "float"): "fmin",
    ("max_nan", "float"): "fmaximum", ("min_nan", "float"): "fminimum",
    ("sum", "sint"): "add", ("prod", "sint"): "mul", ("max", "sint"): "smax", ("min", "sint"): "smin",
    ("sum", "uint"): "add", ("prod", "uint"): "mul", ("max", "uint"): "umax", ("min", "uint"): "umin",
    ("and", "sint"): "and", ("or", "sint"): "or", ("xor", "sint"): "xor",
    ("and", "uint"): "and", ("or", "uint"): "or", ("xor", "uint"): "xor",
    ("and", "bool"): "and", ("or", "bool"): "or", ("xor", "bool"): "xor",
    ("max", "bool"): "umax", ("min", "bool"): "umin", ("sum", "bool"): "add",
}  # fmt: skip
for (_k, _t), _v in list(_VECTOR_REDUCE.items()):
    if _t != "float" and _k in ("max", "min"):
        _VECTOR_REDUCE[(_k + "_nan", _t)] = _v

_COMBINE_NAME = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum", "and": "and", "or": "or",
                 "xor": "xor"}  # fmt: skip


def combiner(kind: str, ek: str, nan: bool) -> Callable:
    name = _COMBINE_NAME[kind] + ("_nan" if nan and kind in ("max", "min") else "")
    fn = BINARY.get((name, ek)) or BINARY.get((name, "uint"))
    if fn is None:
        raise KeyError(name)
    return fn


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    outer = 1
    for d in shape[:axis]:
        outer *= d
    inner = 1
    for d in shape[axis + 1 :]:
        inner *= d
    return outer, shape[axis], inner


def _reduce_vector(b: ir.IRBuilder, x: ir.Value, key: tuple[str, str]) -> ir.Value:
    name, ety = _VECTOR_REDUCE[key], x.type.element
    if name in ("fadd", "fmul"):
        fn = declare(b.module, f"llvm.vector.reduce.{name}.{mangle(x.type)}", ety, [ety, x.type])
        return b.call(fn, [ir.Constant(ety, 0.0 if name == "fadd" else 1.0), x], fastmath=("reassoc",))
    fn = declare(b.module, f"llvm.vector.reduce.{name}.{mangle(x.type)}", ety, [x.type])
    return b.call(fn, [x])


def _arg_step(kind: str, ek: str) -> Callable:
    """(b, best, cand) -> i1 'take cand': strictly better, or best is NaN and cand is not."""
    pred = "gt" if kind == "argmax" else "lt"

    def take(b: ir.IRBuilder, best, cand):
        better = CMP[(pred, ek)](b, cand, best)
        if ek != "float":
            return better
        nan_best = b.fcmp_unordered("uno", best, best)
        return b.or_(better, b.and_(nan_best, b.fcmp_ordered("ord", cand, cand)))

    return take


def _reduce(lw: FunctionLowering, op: Operation) -> list:
    kind, axis = op.attrs["kind"], op.attrs["axis"]
    nan = bool(op.attrs.get("propagate_nan"))
    src_t, res_t = op.operands[0].type, op.results[0].type
    ek = kind_of(src_t)
    key = (kind + ("_nan" if nan and kind in ("max", "min") else ""), ek)
    x = lw.get(op.operands[0])
    arg = kind in ("argmax", "argmin")
    if len(shape_of(src_t)) == 1 and not isinstance(x, Big) and key in _VECTOR_REDUCE:
        r = _reduce_vector(lw.b, x, key)
        return [round_bf16(lw.b, r) if is_bf16(src_t) else r]
    if arg:
        fn = _arg_step(kind, ek)
    else:
        try:
            fn = combiner(kind, ek, nan)
        except KeyError:
            raise lowering_error(op, f"{kind} does not take {src_t}") from None
    src = as_big(lw, op.operands[0])
    out_t = res_t if isinstance(res_t, TileType) else TileType((1,), res_t)
    out = new_buffer(lw, out_t)
    outer, red, inner = _split(shape_of(src_t), axis)
    fin = (lambda v: round_bf16(lw.b, v)) if is_bf16(src_t) and not arg else (lambda v: v)
    if inner > 1:
        _fold_columns(lw, src, out, out_t, (outer, red, inner), fn, arg, fin)
    else:
        _fold_rows(lw, src, out, out_t, (outer, red), fn, arg, fin)
    return [from_buffer(lw, res_t, out)]


def _fold_columns(lw, src: Big, out, out_t, dims, fn, arg: bool, fin) -> None:
    """out[o, i] = fold over r of src[o, r, i], with i in chunks (each lane folds in order)."""
    b = lw.b
    outer, red, inner = dims
    w = chunk_width(inner)
    acc = entry_alloca(b, vec_type(_reg(src), w))
    idx = entry_alloca(b, vec_type(I32, w))
    with counted_loop(b, 0, outer, "ro") as o:
        with counted_loop(b, 0, inner // w, "ri") as ic:
            i0 = b.mul(ic, const64(w))
            base = b.add(b.mul(o, const64(red * inner)), i0)
            b.store(load_chunk(b, src, base, w), acc)
            b.store(ir.Constant(vec_type(I32, w), None), idx)
            with counted_loop(b, 1, red, "rr") as r:
                v = load_chunk(b, src, b.add(base, b.mul(r, const64(inner))), w)
                _step(b, acc, idx, v, splat(b, b.trunc(r, I32), w), fn, arg)
            res = b.load(idx) if arg else fin(b.load(acc))
            store_chunk(b, out, out_t, b.add(b.mul(o, const64(inner)), i0), res)


def _step(b: ir.IRBuilder, acc, idx, v, at, fn, arg: bool) -> None:
    cur = b.load(acc)
    if not arg:
        b.store(fn(b, cur, v), acc)
        return
    take = fn(b, cur, v)
    b.store(b.select(take, v, cur), acc)
    b.store(b.select(take, at, b.load(idx)), idx)


def _fold_rows(lw, src: Big, out, out_t, dims, fn, arg: bool, fin) -> None:
    """out[o] = fold over r of src[o, r]: w interleaved partial folds, then combined lane by lane."""
    b = lw.b
    outer, red = dims
    w = chunk_width(red)
    iota = iota_of(w)
    acc = entry_alloca(b, vec_type(_reg(src), w))
    idx = entry_alloca(b, vec_type(I32, w))
    with counted_loop(b, 0, outer, "ro") as o:
        base = b.mul(o, const64(red))
        b.store(load_chunk(b, src, base, w), acc)
        b.store(iota, idx)
        with counted_loop(b, 1, red // w, "rr") as rc:
            r0 = b.mul(rc, const64(w))
            v = load_chunk(b, src, b.add(base, r0), w)
            _step(b, acc, idx, v, b.add(splat(b, b.trunc(r0, I32), w), iota), fn, arg)
        res = _combine_lanes(b, b.load(acc), b.load(idx), fn, arg)
        store_chunk(b, out, out_t, o, res if arg else fin(res))


def _combine_lanes(b: ir.IRBuilder, acc, idx, fn, arg: bool) -> ir.Value:
    """Fold the lanes of the partial results; for argmax/argmin, equal values keep the lower index."""
    if not isinstance(acc.type, ir.VectorType):
        return idx if arg else acc
    lane = lambda v, i: b.extract_element(v, ir.Constant(I32, i))  # noqa: E731
    best, best_i = lane(acc, 0), lane(idx, 0)
    for j in range(1, acc.type.count):
        v, i = lane(acc, j), lane(idx, j)
        if not arg:
            best = fn(b, best, v)
            continue
        floaty = isinstance(v.type, (ir.HalfType, ir.FloatType, ir.DoubleType))
        same = b.fcmp_ordered("==", v, best) if floaty else b.icmp_unsigned("==", v, best)
        take = b.or_(fn(b, best, v), b.and_(same, b.icmp_signed("<", i, best_i)))
        best, best_i = b.select(take, v, best), b.select(take, i, best_i)
    return best_i if arg else best


def _reg(big: Big) -> ir.Type:
    return scalar_ll(big.type.elem)


def _scan(lw: FunctionLowering, op: Operation) -> list:
    """out[o, r, i] = fold of src[o, 0..r, i] (or r..red-1 when reversed), i in chunks."""
    b = lw.b
    t = op.operands[0].type
    fn = combiner(op.attrs["kind"], kind_of(t), False)
    outer, red, inner = _split(shape_of(t), op.attrs["axis"])
    rev = bool(op.attrs.get("reverse"))
    src = as_big(lw, op.operands[0])
    out = new_buffer(lw, t)
    w = chunk_width(inner)
    acc = entry_alloca(b, vec_type(_reg(src), w))
    with counted_loop(b, 0, outer, "so") as o:
        with counted_loop(b, 0, inner // w, "si") as ic:
            base = b.add(b.mul(o, const64(red * inner)), b.mul(ic, const64(w)))
            with counted_loop(b, 0, red, "sr") as r:
                rr = b.sub(const64(red - 1), r) if rev else r
                at = b.add(base, b.mul(rr, const64(inner)))
                v = load_chunk(b, src, at, w)
                first = b.icmp_signed("==", r, const64(0))
                nv = b.select(first, v, fn(b, b.load(acc), v))
                if is_bf16(t):
                    nv = round_bf16(b, nv)
                b.store(nv, acc)
                store_chunk(b, out, t, at, nv)
    return [from_buffer(lw, t, out)]


HANDLERS.update({"reduce": _reduce, "scan": _scan})
