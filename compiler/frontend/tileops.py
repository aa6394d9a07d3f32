"""Data movement within a tile: tl.flip and tl.cat built from existing IR ops (reshape, select, reductions);
tl.sort and tl.topk as the `sort` op (a bitonic network of compare-exchange steps) and tl.gather as the
`gather` op, which each target lowers (cuda directly; cpu through passes/expand_tileops.py).

A size-2 axis is split into its two halves by a select and a sum reduction in the integer bit pattern of
the elements (x + 0 + ... is exact on integers), so NaN payloads and -0.0 survive every move.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir.types import PointerType, ScalarType, make_type
from .library import LIB, cx_int, expand_dims, reshape, tensor
from .semantic import Semantic, Tensor, describe

_BITS = {16: "i16", 32: "i32", 64: "i64", 8: "i8"}


# ---- helpers -----------------------------------------------------------------------------------------


def _movable(sem: Semantic, x: Any, what: str) -> Tensor:
    t = tensor(sem, x, what)
    if not t.shape:
        raise sem.error(f"{what} needs a tile, got {describe(t)}")
    if isinstance(t.elem, PointerType):
        raise sem.error(f"{what} does not take pointers")
    return t


def _to_bits(sem: Semantic, t: Tensor) -> Tensor:
    if t.elem.is_bool:
        return sem.cast(t, ScalarType("i8"))
    if t.elem.is_float:
        return sem.bitcast(t, ScalarType(_BITS[t.elem.bits]))
    return t


def _from_bits(sem: Semantic, t: Tensor, elem: ScalarType) -> Tensor:
    if elem.is_bool:
        return sem.cast(t, elem)
    if elem.is_float:
        return sem.bitcast(t, elem)
    return t


def _axis(sem: Semantic, dim: Any, rank: int) -> int:
    d = rank - 1 if dim is None else cx_int(sem, dim, "dim")
    if not -rank <= d < rank:
        raise sem.error(f"dim {d} is out of range for a tile of rank {rank}")
    return d + rank if d < 0 else d


def _along(sem: Semantic, n: int, axis: int, rank: int) -> Tensor:
    """arange(0, n) shaped to run along `axis` of a rank-`rank` tile (1 elsewhere)."""
    r = Tensor(sem.b.make_range(0, n))
    for i in range(rank):
        if i != axis:
            r = Tensor(sem.b.expand_dims(r.value, i))
    return r


def _sum_out(sem: Semantic, bits: Tensor, axis: int) -> Tensor:
    """Sum over `axis` in the bit domain, keeping it as a size-1 axis."""
    shape = list(bits.shape)
    del shape[axis]
    r = Tensor(sem.b.op1("reduce", [bits.value], make_type(tuple(shape), bits.elem), kind="sum", axis=axis))
    return expand_dims(sem, r, axis)


def _pick(sem: Semantic, bits: Tensor, axis: int, k: int) -> Tensor:
    """Element k of `axis` of a bit-domain tile, as a size-1 axis."""
    lane = _along(sem, bits.shape[axis], axis, len(bits.shape))
    zero = sem.const(0, bits.elem, bits.shape)
    return _sum_out(sem, sem.where(sem.compare(ast.Eq(), lane, k), bits, zero), axis)


def _halves(sem: Semantic, t: Tensor, axis: int) -> tuple[Tensor, Tensor]:
    bits = _to_bits(sem, t)
    return tuple(_from_bits(sem, _pick(sem, bits, axis, k), t.elem) for k in (0, 1))  # type: ignore[return-value]


def _combine(sem: Semantic, first: Tensor, second: Tensor, axis: int) -> Tensor:
    """Two tiles with a size-1 `axis` -> one with a size-2 `axis`: first at 0, second at 1."""
    shape = tuple(2 if i == axis else d for i, d in enumerate(first.shape))
    lane = _along(sem, 2, axis, len(shape))
    return sem.where(sem.compare(ast.Eq(), lane, 0), sem.broadcast_to(first, shape), sem.broadcast_to(second, shape))


def _log2(sem: Semantic, n: int, what: str) -> int:
    if n & (n - 1):
        raise sem.error(f"{what} needs a power-of-two dimension, got {n}")
    return n.bit_length() - 1


# ---- flip, cat -------------------------------------------------------------------------------------


def flip(sem: Semantic, x: Any, dim: Any = None) -> Tensor:
    """Reverse `dim`: split it into log2(n) axes of size 2 and swap the halves of each."""
    t = _movable(sem, x, "tl.flip")
    d = _axis(sem, dim, len(t.shape))
    n = t.shape[d]
    k = _log2(sem, n, "tl.flip")
    if k == 0:
        return t
    pre, post = t.shape[:d], t.shape[d + 1:]
    bits = reshape(sem, _to_bits(sem, t), *pre, *([2] * k), *post)
    for a in range(d, d + k):
        bits = _combine(sem, _pick(sem, bits, a, 1), _pick(sem, bits, a, 0), a)
    return _from_bits(sem, reshape(sem, bits, *t.shape), t.elem)


def cat(sem: Semantic, input: Any, other: Any, can_reorder: Any = False, dim: Any = 0) -> Tensor:
    """Concatenate two tiles of one shape along dim 0 (in order, so can_reorder is not needed)."""
    ta, tb = _movable(sem, input, "tl.cat"), _movable(sem, other, "tl.cat")
    if ta.shape != tb.shape:
        raise sem.error(f"tl.cat needs two tiles of one shape, got {describe(ta)} and {describe(tb)}")
    a, b = sem.common(ta, tb)
    if dim not in (0, None):
        raise sem.error("tl.cat concatenates along dimension 0")
    joined = _combine(sem, expand_dims(sem, a, 0), expand_dims(sem, b, 0), 0)
    return reshape(sem, joined, 2 * a.shape[0], *a.shape[1:])


# ---- sort, topk ------------------------------------------------------------------------------------------


def sort(sem: Semantic, x: Any, dim: Any = None, descending: Any = False) -> Tensor:
    t = _movable(sem, x, "tl.sort")
    if not isinstance(descending, (bool, int)):
        raise sem.error(f"descending must be a constexpr bool, got {describe(descending)}")
    d = _axis(sem, dim, len(t.shape))
    if t.shape[d] == 1:
        return t
    _log2(sem, t.shape[d], "tl.sort")
    return Tensor(sem.b.op1("sort", [t.value], t.type, axis=d, descending=bool(descending)))


def topk(sem: Semantic, x: Any, k: Any, dim: Any = None) -> Tensor:
    """The k largest along dim, largest first: a descending sort, then the first k (k a power of two)."""
    t = _movable(sem, x, "tl.topk")
    d = _axis(sem, dim, len(t.shape))
    kk = cx_int(sem, k, "k")
    n = t.shape[d]
    if kk <= 0 or kk & (kk - 1) or kk > n:
        raise sem.error(f"tl.topk k must be a power of two no larger than {n}, got {kk}")
    s = sort(sem, t, d, True)
    if kk == n:
        return s
    pre, post = t.shape[:d], t.shape[d + 1:]
    view = reshape(sem, _to_bits(sem, s), *pre, n // kk, kk, *post)
    first = _pick(sem, view, d, 0)
    return _from_bits(sem, reshape(sem, first, *pre, kk, *post), t.elem)


# ---- gather ---------------------------------------------------------------------------------------------


def gather(sem: Semantic, src: Any, index: Any, axis: Any) -> Tensor:
    """out[.., i, ..] = src[.., index[.., i, ..], ..] along `axis` (the gather op; an index out of range reads 0)."""
    s = _movable(sem, src, "tl.gather src")
    idx = tensor(sem, index, "tl.gather index")
    if not (isinstance(idx.elem, ScalarType) and idx.elem.is_int) or len(idx.shape) != len(s.shape):
        raise sem.error(f"tl.gather index must be an integer tile of src's rank {len(s.shape)}, got {describe(idx)}")
    a = _axis(sem, axis, len(s.shape))
    for i, (p, q) in enumerate(zip(s.shape, idx.shape, strict=True)):
        if i != a and p != q:
            raise sem.error(f"tl.gather index and src must agree off the gather axis: {list(idx.shape)} vs "
                            f"{list(s.shape)}")
    return Tensor(sem.b.op1("gather", [s.value, idx.value], make_type(idx.shape, s.elem), axis=a))


LIB.update({"flip": flip, "cat": cat, "sort": sort, "topk": topk, "gather": gather})
