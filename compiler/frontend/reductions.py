"""Reductions and scans of the Triton language (tl.sum, tl.max, tl.min, argmax/argmin, xor_sum, reduce_or,
cumsum, cumprod, item, softmax) with the types Triton computes them in: narrow integers summed in i32 or u32,
tl.max/tl.min of a type narrower than 32 bits in f32 or i32. Registered in library.LIB on import (codegen.py).
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir.types import PointerType, ScalarType, i32, make_type
from .library import LIB, _float_operand, api, dtype_arg, expand_dims, norm_axis, tensor
from .semantic import Semantic, Tensor


def _sum_type(elem: ScalarType) -> ScalarType | None:
    """The type tl.sum and tl.cumsum widen an integer narrower than 32 bits to (Triton's `_pick_sum_dtype`:
    i32 for signed ones and i1, u32 for unsigned ones); None for every other type."""
    if not elem.is_int or elem.bits >= 32:
        return None
    return i32 if elem.is_signed or elem.is_bool else ScalarType("u32")


def reduce(sem: Semantic, x: Any, axis: Any, kind: str, keep_dims: Any = False, dtype: Any = None,
           propagate_nan: bool = False, widen: bool = False) -> Tensor:
    """`widen`: tl.max/tl.min without indices, which Triton computes on a type narrower than 32 bits in f32
    (floats) or i32 (integers, unsigned and i1 too), and returns in it."""
    t = tensor(sem, x, f"tl.{kind}")
    if not t.shape:
        raise sem.error(f"tl.{kind} needs a tile, got a scalar")
    if isinstance(t.elem, PointerType):
        raise sem.error(f"tl.{kind} does not take pointers")
    if kind in ("xor", "or") and t.elem.is_float:
        raise sem.error(f"tl.{'xor_sum' if kind == 'xor' else 'reduce_or'} only takes integers, got {t.dtype}")
    if dtype is not None:
        t = sem.cast(t, dtype_arg(sem, dtype))
    elif kind in ("sum", "prod") and (wide := _sum_type(t.elem)) is not None:
        t = sem.cast(t, wide)
    elif widen and t.elem.bits < 32:
        t = sem.cast(t, ScalarType("f32") if t.elem.is_float else i32)
    rank = len(t.shape)
    if axis is None:
        n = 1
        for d in t.shape:
            n *= d
        t = t if rank == 1 else Tensor(sem.b.reshape(t.value, (n,)))
        ax = 0
    else:
        ax = norm_axis(sem, axis, rank)
    shape = list(t.shape)
    del shape[ax]
    elem = i32 if kind in ("argmax", "argmin") else t.elem
    attrs = {"propagate_nan": True} if propagate_nan and kind in ("max", "min") and t.elem.is_float else {}
    r = Tensor(sem.b.op1("reduce", [t.value], make_type(tuple(shape), elem), kind=kind, axis=ax, **attrs))
    if keep_dims:
        if axis is None:
            return sem.broadcast_to(r, (1,) * rank)
        return expand_dims(sem, r, ax)
    return r


def _reduction(kind: str):
    def fn(sem: Semantic, input: Any, axis: Any = None, keep_dims: Any = False, dtype: Any = None,
           return_indices: Any = False, return_indices_tie_break_left: Any = True, tie_break_left: Any = True,
           propagate_nan: Any = "NONE") -> Any:
        nan = propagate_nan in ("ALL", True)
        if return_indices:
            return (reduce(sem, input, axis, kind, keep_dims, propagate_nan=nan),
                    reduce(sem, input, axis, "arg" + kind, keep_dims))
        return reduce(sem, input, axis, kind, keep_dims, dtype, propagate_nan=nan, widen=kind in ("max", "min"))

    return fn


for _k in ("sum", "max", "min", "argmax", "argmin", "xor_sum"):
    LIB[_k] = _reduction("xor" if _k == "xor_sum" else _k)
LIB["reduce_or"] = _reduction("or")


@api("item")
def _item(sem: Semantic, input: Any) -> Tensor:
    """A one-element tile as a scalar (Triton's `x.item()`); a scalar as it is."""
    t = tensor(sem, input, "item()")
    if not t.shape:
        return t
    if t.type.numel != 1:
        raise sem.error(f"item() takes a one-element tile, got shape {list(t.shape)}")
    return reduce(sem, t, None, "max")


@api("to_tensor")
def _to_tensor(sem: Semantic, x: Any) -> Tensor:
    return tensor(sem, x, "tl.to_tensor")


def scan(sem: Semantic, x: Any, axis: Any, kind: str, reverse: Any = False, dtype: Any = None) -> Tensor:
    """tl.cumsum/tl.cumprod: in `dtype` where given, else an integer narrower than 32 bits in i32 or u32 (as
    tl.sum; Triton 3.9 widens cumprod's so too)."""
    t = tensor(sem, x, f"tl.cum{kind}")
    if not t.shape:
        raise sem.error("a scan needs a tile, got a scalar")
    if dtype is not None:
        t = sem.cast(t, dtype_arg(sem, dtype))
    elif kind in ("sum", "prod") and (wide := _sum_type(t.elem)) is not None:
        t = sem.cast(t, wide)
    ax = norm_axis(sem, axis, len(t.shape))
    attrs = {"reverse": True} if reverse else {}
    return Tensor(sem.b.op1("scan", [t.value], t.type, kind=kind, axis=ax, **attrs))


LIB["cumsum"] = lambda sem, input, axis=0, reverse=False, dtype=None: scan(sem, input, axis, "sum", reverse, dtype)
LIB["cumprod"] = lambda sem, input, axis=0, reverse=False, dtype=None: scan(sem, input, axis, "prod", reverse, dtype)


@api("softmax")
def _softmax(sem: Semantic, x: Any, dim: Any = None, keep_dims: Any = None, ieee_rounding: Any = False) -> Tensor:
    """Along `dim` (0 by default), the reduced axis kept (Triton 3.9 ignores keep_dims); the max as tl.max
    takes it, so a 16-bit input is normalised in f32."""
    t = _float_operand(sem, x, "tl.softmax")
    axis = 0 if dim is None else dim
    z = sem.binop(ast.Sub(), t, reduce(sem, t, axis, "max", keep_dims=True, widen=True))
    num = Tensor(sem.b.unary("exp", z.value))
    return sem.truediv(num, reduce(sem, num, axis, "sum", keep_dims=True))
