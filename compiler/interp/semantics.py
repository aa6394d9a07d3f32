"""What each data op of the tile IR computes: one handler per op, `handler(op, operands, machine)`.

Operands arrive as NumPy arrays of their IR type (0-d for scalars); a handler returns the result
array, a list of them, or None. Control flow (for, if, while, call) lives in machine.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType, elem_type, f32, shape_of
from . import numerics as nx
from .errors import InterpAssertionError, InterpError, located
from .memory import AddressSpace

Array = np.ndarray


class Machine(Protocol):
    """What a handler may read of the running program (machine.py's Machine provides it)."""

    pid: tuple[int, ...]
    grid: tuple[int, ...]
    memory: AddressSpace


Handler = Callable[[Operation, list[Array], Machine], "Array | list[Array] | None"]
SEMANTICS: dict[str, Handler] = {}


def _sem(*names: str):
    def register(fn: Handler) -> Handler:
        for n in names:
            SEMANTICS[n] = fn
        return fn

    return register


def _elem(op: Operation) -> ScalarType:
    return elem_type(op.results[0].type)  # type: ignore[return-value]


def _operand_elem(op: Operation, i: int = 0) -> ScalarType | PointerType:
    return elem_type(op.operands[i].type)


# ---- values out of nothing ----------------------------------------------------------------------


@_sem("constant")
def _constant(op, xs, m):
    t = op.results[0].type
    e, v = elem_type(t), op.attrs["value"]
    if e.is_float:
        try:
            f = float(v)
        except OverflowError:
            f = math.inf if v > 0 else -math.inf
        scalar = nx.to_float(np.asarray(f), e.name)
    else:
        scalar = nx.wrap_int(int(v), e.np_dtype)
    return np.full(shape_of(t), scalar, scalar.dtype)


@_sem("splat")
def _splat(op, xs, m):
    return np.broadcast_to(xs[0], shape_of(op.results[0].type))


@_sem("make_range")
def _make_range(op, xs, m):
    return np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32)


@_sem("program_id")
def _program_id(op, xs, m):
    return np.asarray(m.pid[op.attrs["axis"]], np.int32)


@_sem("num_programs")
def _num_programs(op, xs, m):
    return np.asarray(m.grid[op.attrs["axis"]], np.int32)


# ---- elementwise arithmetic ---------------------------------------------------------------------


def _binary(float_fn: Callable, int_fn: Callable | None = None) -> Handler:
    def handler(op, xs, m):
        a, b = xs
        if _elem(op).is_float:
            return float_fn(a, b)
        return nx.int_bool_op(int_fn or float_fn, a, b)

    return handler


SEMANTICS["add"] = _binary(np.add)
SEMANTICS["sub"] = _binary(np.subtract)
SEMANTICS["mul"] = _binary(np.multiply)
SEMANTICS["div"] = _binary(np.true_divide, nx.c_div)
SEMANTICS["rem"] = _binary(np.fmod, nx.c_rem)
SEMANTICS["and"] = _binary(np.bitwise_and)
SEMANTICS["or"] = _binary(np.bitwise_or)
SEMANTICS["xor"] = _binary(np.bitwise_xor)


@_sem("shl", "shr")
def _shift(op, xs, m):
    fn = nx.shl if op.name == "shl" else nx.shr
    bits = _elem(op).bits
    return nx.int_bool_op(lambda a, b: fn(a, b, bits), *xs)


@_sem("maximum", "minimum")
def _extremum(op, xs, m):
    big = op.name == "maximum"
    if _elem(op).is_float and not op.attrs.get("propagate_nan", False):
        return (np.fmax if big else np.fmin)(*xs)  # IEEE maxNum/minNum: NaN loses to a number
    return (np.maximum if big else np.minimum)(*xs)


def _via_f64(fn: Callable) -> Handler:
    """Transcendentals: evaluated in float64 and rounded once to the IR type (the most accurate reference)."""

    def handler(op, xs, m):
        return nx.to_float(fn(*(x.astype(np.float64) for x in xs)), _elem(op).name)

    return handler


SEMANTICS["pow"] = _via_f64(np.power)
SEMANTICS["atan2"] = _via_f64(np.arctan2)
SEMANTICS["exp"] = _via_f64(np.exp)
SEMANTICS["exp2"] = _via_f64(np.exp2)
SEMANTICS["log"] = _via_f64(np.log)
SEMANTICS["log2"] = _via_f64(np.log2)
SEMANTICS["sqrt"] = _via_f64(np.sqrt)  # float64 then one rounding: correctly rounded
SEMANTICS["rsqrt"] = _via_f64(lambda x: 1.0 / np.sqrt(x))
SEMANTICS["sin"] = _via_f64(np.sin)
SEMANTICS["cos"] = _via_f64(np.cos)
SEMANTICS["tanh"] = _via_f64(np.tanh)
SEMANTICS["erf"] = _via_f64(lambda x: np.asarray(np.frompyfunc(math.erf, 1, 1)(x), np.float64))
SEMANTICS["floor"] = lambda op, xs, m: np.floor(xs[0])
SEMANTICS["ceil"] = lambda op, xs, m: np.ceil(xs[0])


@_sem("neg")
def _neg(op, xs, m):
    return np.negative(xs[0]) if _elem(op).is_float else nx.int_bool_op(np.negative, xs[0])


@_sem("abs")
def _abs(op, xs, m):
    e = _elem(op)
    if e.is_float or e.is_signed:
        return np.abs(xs[0])  # |MIN| wraps to MIN
    return xs[0]


@_sem("fma")
def _fma(op, xs, m):
    return nx.fma(*xs, _elem(op).name)


_PREDICATES = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@_sem("cmp")
def _cmp(op, xs, m):
    return _PREDICATES[op.attrs["pred"]](*xs)  # NaN: ordered compares false, `ne` true (C)


@_sem("select")
def _select(op, xs, m):
    c, a, b = xs
    return np.where(c, a, b)


@_sem("cast")
def _cast(op, xs, m):
    return nx.cast(xs[0], _operand_elem(op), _elem(op))


@_sem("bitcast")
def _bitcast(op, xs, m):
    return nx.from_bits(nx.to_bits(xs[0], _operand_elem(op)), _elem(op))


# ---- shapes -------------------------------------------------------------------------------------


@_sem("broadcast")
def _broadcast(op, xs, m):
    return np.broadcast_to(xs[0], shape_of(op.results[0].type))


@_sem("expand_dims")
def _expand_dims(op, xs, m):
    return np.expand_dims(xs[0], op.attrs["axis"])


@_sem("reshape")
def _reshape(op, xs, m):
    return np.reshape(xs[0], shape_of(op.results[0].type))  # row-major


@_sem("trans")
def _trans(op, xs, m):
    return np.transpose(xs[0], op.attrs["order"])


@_sem("multiple_of", "max_contiguous", "desc_box")
def _hint(op, xs, m):
    return xs[0]


# ---- memory -------------------------------------------------------------------------------------


@_sem("addptr")
def _addptr(op, xs, m):
    p, off = xs
    size = _operand_elem(op).pointee.bytes
    return p + off.astype(np.int64) * np.int64(size)


def _active(xs: list[Array], mask_index: int, shape: tuple[int, ...]) -> Array | None:
    if len(xs) <= mask_index:
        return None
    return np.broadcast_to(xs[mask_index], shape).reshape(-1)


@_sem("load")
def _load(op, xs, m):
    ptr, elem = xs[0], _elem(op)
    mask = _active(xs, 1, ptr.shape)
    addrs = ptr.reshape(-1)
    if mask is None:
        return m.memory.read(addrs, elem).reshape(ptr.shape)
    if len(xs) > 2:
        out = np.array(np.broadcast_to(xs[2], ptr.shape)).reshape(-1)
    else:
        out = np.zeros(addrs.shape, nx.value_dtype(elem))
    out[mask] = m.memory.read(addrs[mask], elem)
    return out.reshape(ptr.shape)


@_sem("store")
def _store(op, xs, m):
    ptr, val = xs[0], xs[1]
    mask = _active(xs, 2, ptr.shape)
    addrs, vals = ptr.reshape(-1), np.broadcast_to(val, ptr.shape).reshape(-1)
    if mask is not None:
        addrs, vals = addrs[mask], vals[mask]
    m.memory.write(addrs, vals, _operand_elem(op, 1))
    return None


def _rmw_update(op: Operation, elem: ScalarType) -> Callable[[Array, Array], Array]:
    kind = op.attrs["kind"]
    if kind in ("and", "or", "xor") and elem.is_float:
        raise located(InterpError, op, f"atomic '{kind}' needs integers, got {elem}")
    fns: dict[str, Callable[[Array, Array], Array]] = {
        "add": lambda old, v: nx.int_bool_op(np.add, old, v) if not elem.is_float else np.add(old, v),
        "max": np.fmax if elem.is_float else np.maximum,
        "min": np.fmin if elem.is_float else np.minimum,
        "xchg": lambda old, v: v,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }
    fn = fns[kind]
    if elem.name == "bf16":
        return lambda old, v: nx.round_bf16(fn(old, v))
    return fn


@_sem("atomic_rmw")
def _atomic_rmw(op, xs, m):
    ptr, val, elem = xs[0], xs[1], _elem(op)
    mask = _active(xs, 2, ptr.shape)
    addrs, vals = ptr.reshape(-1), np.broadcast_to(val, ptr.shape).reshape(-1)
    lanes = np.arange(addrs.size) if mask is None else np.flatnonzero(mask)
    fn = _rmw_update(op, elem)
    old = np.zeros(addrs.shape, nx.value_dtype(elem))  # masked-off lanes return 0
    active_vals = vals[lanes]
    old[lanes] = m.memory.atomic(addrs[lanes], elem, lambda cur, sel: fn(cur, active_vals[sel]))
    return old.reshape(ptr.shape)


@_sem("atomic_cas")
def _atomic_cas(op, xs, m):
    ptr, cmp, val = (np.broadcast_to(x, xs[0].shape).reshape(-1) for x in xs)
    elem = _elem(op)
    want = nx.to_bits(np.ascontiguousarray(cmp), elem)  # compares bit patterns, as the hardware does

    def update(cur: Array, sel: Array) -> Array:
        return np.where(nx.to_bits(np.ascontiguousarray(cur), elem) == want[sel], val[sel], cur)

    return m.memory.atomic(ptr, elem, update).reshape(xs[0].shape)


# ---- dot, reductions, scans ---------------------------------------------------------------------


@_sem("dot")
def _dot(op, xs, m):
    a, b, acc = xs
    e = _elem(op)
    if not e.is_float:
        return np.matmul(a.astype(acc.dtype), b.astype(acc.dtype)) + acc  # wraps in the accumulator type
    if e.name == "f64":
        return np.matmul(a.astype(np.float64), b.astype(np.float64)) + acc
    # f16/bf16/f32 (and tf32, computed as ieee f32): exact products, float32 accumulation
    s = np.matmul(a.astype(np.float32), b.astype(np.float32)) + acc.astype(np.float32)
    return nx.cast(s, f32, e)


def _combine(kind: str, elem: ScalarType, propagate_nan: bool) -> Callable[[Array, Array], Array]:
    if elem.is_float:
        fns = {
            "sum": np.add,
            "prod": np.multiply,
            "max": np.maximum if propagate_nan else np.fmax,
            "min": np.minimum if propagate_nan else np.fmin,
        }
        fn = fns[kind]
        return (lambda a, b: nx.round_bf16(fn(a, b))) if elem.name == "bf16" else fn
    fns = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
    fns |= {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
    fn = fns[kind]
    return lambda a, b: nx.int_bool_op(fn, a, b)


def _arg_extreme(x: Array, axis: int, largest: bool) -> Array:
    """Index of the first max (min) along `axis`, NaN ignored; all-NaN gives 0."""
    if np.issubdtype(x.dtype, np.floating):
        best = (np.fmax if largest else np.fmin).reduce(x, axis=axis, keepdims=True)
    else:
        best = (np.max if largest else np.min)(x, axis=axis, keepdims=True)
    return np.argmax(x == best, axis=axis).astype(np.int32)


@_sem("reduce")
def _reduce(op, xs, m):
    x, kind, axis = xs[0], op.attrs["kind"], op.attrs["axis"]
    e = _operand_elem(op)
    if kind in ("argmax", "argmin"):
        return _arg_extreme(x, axis, kind == "argmax")
    if e.is_float and kind in ("and", "or", "xor"):
        raise located(InterpError, op, f"reduction '{kind}' needs integers, got {e}")
    return nx.tree_reduce(x, axis, _combine(kind, e, op.attrs.get("propagate_nan", False)))


_ACCUMULATE = {"sum": np.add, "prod": np.multiply, "max": np.fmax, "min": np.fmin}


@_sem("scan")
def _scan(op, xs, m):
    """Inclusive scan, sequential along the axis (each step rounded in the IR type)."""
    x, kind, axis = xs[0], op.attrs["kind"], op.attrs["axis"]
    reverse = op.attrs.get("reverse", False)
    e = _operand_elem(op)
    if reverse:
        x = np.flip(x, axis)
    if e.name == "bf16":
        out = _sequential_scan(x, axis, _combine(kind, e, False))
    elif e.is_bool and kind in ("sum", "prod"):
        out = (_ACCUMULATE[kind].accumulate(x.astype(np.uint8), axis=axis) & np.uint8(1)).astype(np.bool_)
    else:
        ufunc = (
            _ACCUMULATE[kind]
            if e.is_float
            else {"max": np.maximum, "min": np.minimum}.get(kind, _ACCUMULATE[kind])
        )
        out = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


@_sem("sort")
def _sort(op, xs, m):
    """The bitonic network tl.sort runs (so ties, -0.0 and NaNs land where Triton's do): at each step a
    pair (lo, hi) swaps when lo > hi in a run sorted up, lo < hi in a run sorted down."""
    x = np.moveaxis(np.array(xs[0], copy=True), op.attrs["axis"], -1)
    n = x.shape[-1]
    pos = np.arange(n)
    for stage in range(1, n.bit_length()):
        for j in (1 << t for t in range(stage - 1, -1, -1)):
            lo_at = pos[(pos & j) == 0]
            hi_at = lo_at | j
            lo, hi = x[..., lo_at], x[..., hi_at]
            down = ((lo_at >> stage) & 1).astype(np.bool_) ^ bool(op.attrs.get("descending", False))
            swap = np.where(down, lo < hi, lo > hi)
            x[..., lo_at], x[..., hi_at] = np.where(swap, hi, lo), np.where(swap, lo, hi)
    return np.moveaxis(x, -1, op.attrs["axis"])


@_sem("gather")
def _gather(op, xs, m):
    src, idx = xs
    axis = op.attrs["axis"]
    n = src.shape[axis]
    ok = (idx >= 0) & (idx < n)
    picked = np.take_along_axis(src, np.where(ok, idx, 0).astype(np.int64), axis=axis)
    return np.where(ok, picked, np.zeros((), dtype=src.dtype))


def _sequential_scan(x: Array, axis: int, fn: Callable[[Array, Array], Array]) -> Array:
    x = np.moveaxis(x, axis, 0)
    out = np.empty_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = fn(out[i - 1], x[i])
    return np.moveaxis(out, 0, axis)


# ---- misc ---------------------------------------------------------------------------------------


@_sem("barrier")
def _barrier(op, xs, m):
    return None  # programs run one after another: nothing to wait for


@_sem("print")
def _print(op, xs, m):
    """One line per element: `pid (x, y, z) idx (i, ...) prefix: value` (with several operands, the operand's
    number too), as the cpu target prints it."""
    prefix = op.attrs["prefix"]
    hexa = op.attrs.get("hex", False)
    pid = ", ".join(str(p) for p in m.pid)
    for k, x in enumerate(xs):
        a = np.asarray(x)
        label = f"{prefix} (operand {k})" if len(xs) > 1 else prefix
        for idx in np.ndindex(a.shape) if a.ndim else [()]:
            print(f"pid ({pid}) idx ({', '.join(map(str, idx))}) {label}: {format_element(a[idx], hexa)}")
    return None


def format_element(v: Any, hexa: bool = False) -> str:
    """An element as the print op shows it: ints in decimal (hex with hex=True), floats with %f."""
    v = np.asarray(v)
    if v.dtype.kind == "f" or v.dtype.name == "bfloat16":
        return f"{float(v):f}"
    if v.dtype.kind == "b":
        return str(int(v))
    return f"0x{int(v) & ((1 << (8 * v.dtype.itemsize)) - 1):x}" if hexa else str(int(v))


@_sem("assert")
def _assert(op, xs, m):
    cond = np.asarray(xs[0]) != 0
    if cond.all():
        return None
    first = tuple(int(i) for i in np.argwhere(~cond)[0]) if cond.ndim else ()
    where = f" at index {list(first)}" if first else ""
    raise located(InterpAssertionError, op, f"failed: {op.attrs['message']} (program {m.pid}{where})")
