"""The rest of the tl.* / libdevice surface that kernels in the wild reach for, composed from existing IR
ops: rounding (trunc, round, rint), classification (isinf, isfinite, signbit), expm1, tan and inverse
trigonometry, tl.split / tl.join / tl.interleave, tl.histogram; and the reasons behind what stays out.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir.types import PointerType, ScalarType, i32
from .library import LIB, _float_operand, cx_int, dtype_arg, expand_dims, reshape, tensor
from .reductions import reduce
from .semantic import Semantic, Tensor, describe
from .types import DType

INF = float("inf")

# Functions we refuse, with why and what to write instead (shown in the error message).
UNSUPPORTED_WHY = {
    "inline_asm_elementwise": "inline assembly is not supported (kernels compile for several targets)",
}


def _b(sem: Semantic, op: ast.operator, a: Any, b: Any) -> Any:
    return sem.binop(op, a, b)


def _un(sem: Semantic, name: str, x: Tensor) -> Tensor:
    return Tensor(sem.b.unary(name, x.value))


def _lt(sem: Semantic, a: Any, b: Any) -> Tensor:
    return sem.compare(ast.Lt(), a, b)


def _trunc(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "trunc")
    return sem.where(sem.compare(ast.GtE(), t, 0.0), _un(sem, "floor", t), _un(sem, "ceil", t))


def _round(sem: Semantic, x: Any) -> Tensor:
    """Half away from zero; x - trunc(x) is exact in binary floating point."""
    t = _float_operand(sem, x, "round")
    whole = _trunc(sem, t)
    frac = _un(sem, "abs", _b(sem, ast.Sub(), t, whole))
    step = sem.where(_lt(sem, t, 0.0), -1.0, 1.0)
    return _b(sem, ast.Add(), whole, sem.where(sem.compare(ast.GtE(), frac, 0.5), step, 0.0))


def _rint(sem: Semantic, x: Any) -> Tensor:
    """Half to even (IEEE round-to-nearest)."""
    t = _float_operand(sem, x, "rint")
    low = _un(sem, "floor", t)
    frac = _b(sem, ast.Sub(), t, low)
    half_low = _un(sem, "floor", _b(sem, ast.Mult(), low, 0.5))
    odd = sem.compare(ast.NotEq(), _b(sem, ast.Sub(), low, _b(sem, ast.Mult(), half_low, 2.0)), 0.0)
    up = sem.logical(False, sem.compare(ast.Gt(), frac, 0.5),
                     sem.logical(True, sem.compare(ast.Eq(), frac, 0.5), odd))
    return sem.where(up, _b(sem, ast.Add(), low, 1.0), low)


def _isinf(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "isinf")
    return sem.compare(ast.Eq(), _un(sem, "abs", t), INF)


def _isfinite(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "isfinite")
    return _lt(sem, _un(sem, "abs", t), INF)


def _signbit(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "signbit")
    bits = sem.bitcast(t, ScalarType(f"i{t.elem.bits}"))
    return _lt(sem, bits, 0)


def _copysign(sem: Semantic, x: Any, y: Any) -> Tensor:
    mag = _un(sem, "abs", _float_operand(sem, x, "copysign"))
    return sem.where(_signbit(sem, y), sem.unary(ast.USub(), mag), mag)


def _expm1(sem: Semantic, x: Any) -> Tensor:
    """Kahan's expm1: (u - 1) * x / log(u) with u = exp(x) keeps the digits exp(x) - 1 loses near 0."""
    t = _float_operand(sem, x, "expm1")
    u = _un(sem, "exp", t)
    um1 = _b(sem, ast.Sub(), u, 1.0)
    kahan = sem.truediv(_b(sem, ast.Mult(), um1, t), _un(sem, "log", u))
    near_zero = sem.compare(ast.Eq(), u, 1.0)
    plain = sem.logical(False, sem.compare(ast.Eq(), um1, -1.0), sem.compare(ast.Gt(), t, 20.0))
    return sem.where(near_zero, t, sem.where(plain, um1, kahan))


def _tan(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "tan")
    return sem.truediv(_un(sem, "sin", t), _un(sem, "cos", t))


def _atan2(sem: Semantic, y: Any, x: Any) -> Tensor:
    return LIB["atan2"](sem, y, x)


def _atan(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "atan")
    return _atan2(sem, t, sem.const(1.0, t.elem, t.shape))


def _cathetus(sem: Semantic, t: Tensor) -> Tensor:
    return _un(sem, "sqrt", _b(sem, ast.Sub(), 1.0, _b(sem, ast.Mult(), t, t)))


def _asin(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "asin")
    return _atan2(sem, t, _cathetus(sem, t))


def _acos(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "acos")
    return _atan2(sem, _cathetus(sem, t), t)


def _hyperbolic(sign: float):
    def fn(sem: Semantic, x: Any) -> Tensor:
        t = _float_operand(sem, x, "sinh/cosh")
        e, inv = _un(sem, "exp", t), _un(sem, "exp", sem.unary(ast.USub(), t))
        return _b(sem, ast.Mult(), _b(sem, ast.Add(), e, _b(sem, ast.Mult(), inv, sign)), 0.5)

    return fn


def _log10(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "log10")
    return _b(sem, ast.Mult(), _un(sem, "log2", t), 0.30102999566398120)


def _fmod(sem: Semantic, x: Any, y: Any) -> Any:
    return sem.binop(ast.Mod(), x, y)


# ---- split / join / interleave, histogram -----------------------------------------------------------


def _split(sem: Semantic, a: Any) -> tuple[Tensor, Tensor]:
    """(..., 2) -> two (...) tiles. Picks each half with a NaN-propagating max over a masked last axis."""
    t = tensor(sem, a, "tl.split")
    if not t.shape or t.shape[-1] != 2:
        raise sem.error(f"tl.split needs a tile whose last dimension is 2, got {describe(t)}")
    if isinstance(t.elem, PointerType):
        raise sem.error("tl.split does not take pointers")
    lane = sem.broadcast_to(Tensor(sem.b.make_range(0, 2)), t.shape)
    e = t.elem
    lowest = -INF if e.is_float else (0 if not e.is_signed else -(1 << (e.bits - 1)))
    halves = []
    for k in (0, 1):
        picked = sem.where(sem.compare(ast.Eq(), lane, k), t, sem.const(lowest, e, t.shape))
        halves.append(reduce(sem, picked, len(t.shape) - 1, "max", propagate_nan=True))
    return halves[0], halves[1]


def _join(sem: Semantic, a: Any, b: Any) -> Tensor:
    """Two equal-shape tiles -> one with a new last dimension of 2 (a at 0, b at 1)."""
    ta, tb = sem.broadcast_all(*sem.common(tensor(sem, a, "tl.join"), b))
    rank = len(ta.shape)
    shape = (*ta.shape, 2)
    lane = sem.broadcast_to(Tensor(sem.b.make_range(0, 2)), shape)
    xa = sem.broadcast_to(expand_dims(sem, ta, rank), shape)
    xb = sem.broadcast_to(expand_dims(sem, tb, rank), shape)
    return sem.where(sem.compare(ast.Eq(), lane, 0), xa, xb)


def _interleave(sem: Semantic, a: Any, b: Any) -> Tensor:
    j = _join(sem, a, b)
    if len(j.shape) < 2:
        return j
    return reshape(sem, j, *j.shape[:-2], j.shape[-2] * 2)


def _histogram(sem: Semantic, input: Any, num_bins: Any, mask: Any = None) -> Tensor:
    """Counts of the values 0..num_bins-1 in a 1-D integer tile (others are not counted)."""
    t = tensor(sem, input, "tl.histogram")
    bins = cx_int(sem, num_bins, "num_bins")
    if len(t.shape) != 1 or not isinstance(t.elem, ScalarType) or not t.elem.is_int:
        raise sem.error(f"tl.histogram needs a 1-D integer tile, got {describe(t)}")
    if bins <= 0 or bins & (bins - 1):
        raise sem.error(f"tl.histogram num_bins must be a power of two, got {bins}")
    ids = Tensor(sem.b.make_range(0, bins))
    hit = sem.compare(ast.Eq(), expand_dims(sem, t, 1), expand_dims(sem, sem.cast(ids, t.elem), 0))
    if mask is not None:
        hit = sem.logical(True, hit, expand_dims(sem, sem.to_tensor(sem.to_bool(mask)), 1))
    return reduce(sem, sem.cast(hit, i32), 0, "sum")


def _unsupported(name: str):
    def fn(sem: Semantic, *args: Any, **kwargs: Any) -> Any:
        from ..errors import UnsupportedSyntaxError

        raise sem.error(UNSUPPORTED_WHY[name], UnsupportedSyntaxError)

    return fn


LIB.update({
    "trunc": _trunc, "round": _round, "rint": _rint, "nearbyint": _rint, "isinf": _isinf, "isfinited": _isfinite,
    "finitef": _isfinite, "isfinite": _isfinite, "signbit": _signbit, "copysign": _copysign, "expm1": _expm1,
    "tan": _tan, "atan": _atan, "asin": _asin, "acos": _acos, "sinh": _hyperbolic(-1.0), "cosh": _hyperbolic(1.0),
    "log10": _log10, "fmod": _fmod, "fabs": LIB["abs"], "fmax": LIB["maximum"], "fmin": LIB["minimum"],
    "fast_expf": LIB["exp"], "fast_logf": LIB["log"], "fast_log2f": LIB["log2"], "fast_sinf": LIB["sin"],
    "fast_cosf": LIB["cos"], "fast_tanf": _tan, "fast_powf": LIB["pow"], "fast_dividef": LIB["fdiv"],
    "split": _split, "join": _join, "interleave": _interleave, "histogram": _histogram,
})
LIB.update({name: _unsupported(name) for name in UNSUPPORTED_WHY})


def _pointer_type(sem: Semantic, element_ty: Any, address_space: Any = 1, const: Any = False) -> DType:
    """tl.pointer_type(tl.int32): the dtype of a pointer to it, for `ptr.to(...)` and comparisons."""
    if address_space != 1:
        raise sem.error("tl.pointer_type: only the global address space (1) is supported")
    elem = dtype_arg(sem, element_ty, "tl.pointer_type's element type")
    if not isinstance(elem, ScalarType):
        raise sem.error(f"tl.pointer_type takes a scalar dtype, got {describe(element_ty)}")
    return DType(PointerType(elem))


LIB["pointer_type"] = _pointer_type
