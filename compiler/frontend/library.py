"""The triton.language API as a table: `tl.<name>` -> a function of (Semantic, args...) that emits IR.
Arguments arrive evaluated: Tensors for runtime values, Python values for constexprs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ..errors import StaticAssertionError
from ..ir.types import PointerType, ScalarType, TileType, elem_type, i1, i32, make_type
from .literal import cdiv as py_cdiv
from .literal import next_power_of_2
from .semantic import Semantic, Tensor, describe, is_const, is_number
from .types import TL_DTYPE_ALIASES, TL_DTYPES, BlockType, DType

LIB: dict[str, Callable[..., Any]] = {}
MATH_UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "sqrt_rn": "sqrt",
              "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor", "ceil": "ceil",
              "erf": "erf"}
_MATH_PREFIXES = ("math.", "extra.libdevice.", "libdevice.", "extra.cuda.libdevice.")


def api(*names: str):
    def register(fn):
        for n in names:
            LIB[n] = fn
        return fn

    return register


def lookup(qualname: str) -> Any:
    """The API entry (a function or a constant such as a DType) for a canonical dotted name, or None."""
    if qualname in ("triton.cdiv", "triton.language.cdiv"):
        return LIB["cdiv"]
    if qualname == "triton.next_power_of_2":
        return LIB["next_power_of_2"]
    if not qualname.startswith("triton.language."):
        return None
    name = qualname[len("triton.language."):]
    for prefix in _MATH_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    name = TL_DTYPE_ALIASES.get(name, name)
    if name in TL_DTYPES:
        return DType(ScalarType(TL_DTYPES[name]))
    if name in ("PropagateNan.ALL", "PropagateNan.NONE"):
        return name.split(".")[1]
    return LIB.get(name)


# ---- argument checks ---------------------------------------------------------------------------


def cx_int(sem: Semantic, x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise sem.error(f"{what} must be a constexpr integer, got {describe(x)}")
    return x


def tensor(sem: Semantic, x: Any, what: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if is_number(x):
        return sem.to_tensor(x)
    raise sem.error(f"{what} must be a tensor, got {describe(x)}")


def dtype_arg(sem: Semantic, x: Any, what: str = "dtype") -> Any:
    if isinstance(x, BlockType):  # a block type stands for its element type (`x.to(p.dtype.element_ty)`)
        x = x.element_ty
    if not isinstance(x, DType):
        raise sem.error(f"{what} must be a dtype such as tl.float32, got {describe(x)}")
    return x.ir


def shape_arg(sem: Semantic, shape: Any, what: str = "shape") -> tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        d = cx_int(sem, d, f"{what} dimension")
        if d <= 0 or d & (d - 1):
            raise sem.error(f"{what} dimensions must be powers of two, got {list(dims)}")
        out.append(d)
    n = 1
    for d in out:
        n *= d
    if n > sem.b.budgets.max_tile_elements:
        from ..errors import BudgetExceededError

        raise sem.error(f"tile of {n} elements is over the budget of {sem.b.budgets.max_tile_elements}",
                        BudgetExceededError)
    return tuple(out)


def shape_varargs(dims: tuple) -> Any:
    return dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims


def norm_axis(sem: Semantic, axis: Any, rank: int, extra: int = 0) -> int:
    a = cx_int(sem, axis, "axis")
    if not -(rank + extra) <= a < rank + extra:
        raise sem.error(f"axis {a} is out of range for a tile of rank {rank}")
    return a + rank + extra if a < 0 else a


# ---- program, ranges, constants ----------------------------------------------------------------


@api("program_id")
def _program_id(sem: Semantic, axis: Any = 0, *, _name: str = "program_id") -> Tensor:
    a = cx_int(sem, axis, "axis")
    if a not in (0, 1, 2):
        raise sem.error(f"axis must be 0, 1 or 2, got {a}")
    return Tensor(sem.b.op1(_name, [], i32, axis=a))


LIB["num_programs"] = lambda sem, axis=0: _program_id(sem, axis, _name="num_programs")


@api("arange")
def _arange(sem: Semantic, start: Any, end: Any) -> Tensor:
    s, e = cx_int(sem, start, "tl.arange start"), cx_int(sem, end, "tl.arange end")
    n = e - s
    if n <= 0 or n & (n - 1):
        raise sem.error(f"tl.arange length must be a positive power of two, got {n} ({s}..{e})")
    shape_arg(sem, (n,))
    return Tensor(sem.b.make_range(s, e))


@api("full")
def _full(sem: Semantic, shape: Any, value: Any, dtype: Any) -> Tensor:
    dims, t = shape_arg(sem, shape), dtype_arg(sem, dtype)
    if isinstance(value, Tensor):
        return sem.broadcast_to(sem.cast(value, t), dims) if dims else sem.cast(value, t)
    if not is_number(value):
        raise sem.error(f"tl.full value must be a number, got {describe(value)}")
    return sem.const(value, t, dims)


@api("zeros")
def _zeros(sem: Semantic, shape: Any, dtype: Any) -> Tensor:
    return _full(sem, shape, 0, dtype)


@api("zeros_like")
def _zeros_like(sem: Semantic, input: Any) -> Tensor:
    x = tensor(sem, input, "input")
    return sem.const(0, x.elem, x.shape)


@api("full_like")
def _full_like(sem: Semantic, input: Any, value: Any) -> Tensor:
    x = tensor(sem, input, "input")
    return _full(sem, x.shape, value, x.dtype) if x.shape else sem.to_tensor(value, x.elem)


@api("constexpr")
def _constexpr(sem: Semantic, value: Any) -> Any:
    return value


@api("cdiv")
def _cdiv(sem: Semantic, x: Any, div: Any) -> Any:
    if is_const(x) and is_const(div):
        try:
            return py_cdiv(x, div)
        except Exception as exc:  # noqa: BLE001 - turned into a located error
            raise sem.error(str(exc)) from None
    return sem.binop(ast.FloorDiv(), sem.binop(ast.Sub(), sem.binop(ast.Add(), x, div), 1), div)


@api("next_power_of_2")
def _next_pow2(sem: Semantic, n: Any) -> int:
    return next_power_of_2(cx_int(sem, n, "n"))


@api("_log2")
def _log2(sem: Semantic, n: Any) -> int:
    """triton.language.standard._log2 (bitonic sorts use it): floor(log2(n)) of a constexpr, 0 below 2."""
    return max(cx_int(sem, n, "n"), 1).bit_length() - 1


# ---- memory ------------------------------------------------------------------------------------


def _ptr(sem: Semantic, pointer: Any, what: str) -> Tensor:
    if isinstance(pointer, Tensor) and isinstance(pointer.elem, PointerType):
        return pointer
    raise sem.error(f"{what} needs a pointer or a tile of pointers, got {describe(pointer)}")


def _mask(sem: Semantic, mask: Any) -> Tensor | None:
    if mask is None or mask is True:
        return None
    if mask is False:
        return sem.const(0, i1)
    return sem.to_tensor(sem.to_bool(mask))


def _no_block_ptr(sem: Semantic, boundary_check: Any, padding_option: Any) -> None:
    if boundary_check not in ((), None, []) or padding_option not in ("", None):
        raise sem.error("block pointers (boundary_check/padding_option) are not supported")


def _mem_attrs(sem: Semantic, cache_modifier: Any, eviction_policy: Any) -> dict:
    attrs = {}
    for key, v in (("cache", cache_modifier), ("eviction", eviction_policy)):
        if v not in ("", None):
            if not isinstance(v, str):
                raise sem.error(f"{key} modifier must be a string")
            attrs[key] = v
    return attrs


@api("load")
def _load(sem: Semantic, pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
          padding_option: Any = "", cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False) -> Tensor:
    _no_block_ptr(sem, boundary_check, padding_option)
    p = _ptr(sem, pointer, "tl.load")
    m = _mask(sem, mask)
    pointee = p.elem.pointee
    operands = [p]
    if m is not None:
        operands.append(m)
        if other is not None:
            operands.append(sem.to_tensor(other, pointee))
    operands = sem.broadcast_all(*operands)
    attrs = _mem_attrs(sem, cache_modifier, eviction_policy)
    if volatile:
        attrs["volatile"] = True
    t = make_type(operands[0].shape, pointee)
    return Tensor(sem.b.op1("load", [x.value for x in operands], t, **attrs))


@api("store")
def _store(sem: Semantic, pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (),
           cache_modifier: Any = "", eviction_policy: Any = "") -> None:
    _no_block_ptr(sem, boundary_check, None)
    p = _ptr(sem, pointer, "tl.store")
    v = sem.to_tensor(value, p.elem.pointee)
    m = _mask(sem, mask)
    operands = sem.broadcast_all(p, v, *([m] if m is not None else []))
    sem.b.create("store", [x.value for x in operands], [], _mem_attrs(sem, cache_modifier, eviction_policy))


# ---- elementwise -------------------------------------------------------------------------------


@api("where")
def _where(sem: Semantic, condition: Any, x: Any, y: Any) -> Any:
    return sem.where(condition, x, y)


def _float_operand(sem: Semantic, x: Any, what: str) -> Tensor:
    t = tensor(sem, x, what)
    if isinstance(t.elem, PointerType):
        raise sem.error(f"{what} does not take pointers")
    return t if t.elem.is_float else sem.cast(t, ScalarType("f32"))


def _math1(op: str):
    def fn(sem: Semantic, x: Any, **_: Any) -> Tensor:
        t = _float_operand(sem, x, f"tl.{op}")
        return Tensor(sem.b.unary(op, t.value))

    return fn


for _name, _op in MATH_UNARY.items():
    LIB[_name] = _math1(_op)


@api("sqrt_rn")
def _sqrt_rn(sem: Semantic, x: Any, **_: Any) -> Tensor:
    """Correctly rounded square root (Triton's precise_sqrt), where tl.sqrt may approximate."""
    t = _float_operand(sem, x, "tl.sqrt_rn")
    return Tensor(sem.b.op1("sqrt", [t.value], t.value.type, precise=True))


@api("abs")
def _abs(sem: Semantic, x: Any) -> Any:
    if is_const(x):
        return abs(x)
    return Tensor(sem.b.unary("abs", tensor(sem, x, "tl.abs").value))


def _float_common(sem: Semantic, *xs: Any) -> list[Tensor]:
    ts = [x for x in xs if isinstance(x, Tensor)]
    if not ts:
        ts = [sem.to_tensor(float(xs[0]))]
    elem = ts[0].elem
    for t in ts[1:]:
        a, _ = sem.common(Tensor(sem.const(0, elem).value), t)
        elem = a.elem
    if not elem.is_float:
        elem = ScalarType("f32")
    return sem.broadcast_all(*[sem.to_tensor(x, elem) for x in xs])


@api("fma")
def _fma(sem: Semantic, x: Any, y: Any, z: Any) -> Tensor:
    a, b, c = _float_common(sem, x, y, z)
    return Tensor(sem.b.op1("fma", [a.value, b.value, c.value], a.type))


@api("pow")
def _pow(sem: Semantic, x: Any, y: Any) -> Tensor:
    a, b = _float_common(sem, x, y)
    return Tensor(sem.b.binary("pow", a.value, b.value))


@api("atan2")
def _atan2(sem: Semantic, y: Any, x: Any) -> Tensor:
    a, b = _float_common(sem, y, x)
    return Tensor(sem.b.binary("atan2", a.value, b.value))


@api("maximum", "max2")
def _maximum(sem: Semantic, x: Any, y: Any, propagate_nan: Any = "NONE") -> Any:
    return sem.minmax(True, x, y, propagate_nan == "ALL")


@api("minimum", "min2")
def _minimum(sem: Semantic, x: Any, y: Any, propagate_nan: Any = "NONE") -> Any:
    return sem.minmax(False, x, y, propagate_nan == "ALL")


def _arith(node: ast.operator):
    def fn(sem: Semantic, x: Any, y: Any, sanitize_overflow: Any = True) -> Any:
        """tl.add/tl.sub/tl.mul: the operator's arithmetic (sanitize_overflow adds overflow checks only in
        Triton's debug mode; tilec's debug build does not check these)."""
        return sem.binop(node, x, y)

    return fn


LIB["add"], LIB["sub"], LIB["mul"] = _arith(ast.Add()), _arith(ast.Sub()), _arith(ast.Mult())


@api("clamp")
def _clamp(sem: Semantic, x: Any, min: Any, max: Any, propagate_nan: Any = "NONE") -> Any:
    return sem.minmax(False, sem.minmax(True, x, min, propagate_nan == "ALL"), max, propagate_nan == "ALL")


@api("sigmoid")
def _sigmoid(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "tl.sigmoid")
    e = Tensor(sem.b.unary("exp", sem.unary(ast.USub(), t).value))
    return sem.truediv(1.0, sem.binop(ast.Add(), 1.0, e))


@api("fdiv")
def _fdiv(sem: Semantic, x: Any, y: Any, ieee_rounding: Any = False) -> Any:
    return sem.binop(ast.Div(), x, y)


@api("div_rn")
def _div_rn(sem: Semantic, x: Any, y: Any) -> Any:
    """Correctly rounded division (Triton's precise_divf), where `/` may approximate."""
    if is_const(x) and is_const(y):
        return sem.binop(ast.Div(), x, y)
    return sem.truediv(x, y, precise=True)


@api("log1p")
def _log1p(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "tl.log1p")
    return Tensor(sem.b.unary("log", sem.binop(ast.Add(), t, 1.0).value))


@api("umulhi")
def _umulhi(sem: Semantic, x: Any, y: Any) -> Tensor:
    """The high half of the double-width product of two integers of one type."""
    a, b = sem.common(tensor(sem, x, "tl.umulhi"), y)
    if not (isinstance(a.elem, ScalarType) and a.elem.is_int and a.elem.bits in (32,)):
        raise sem.error(f"tl.umulhi needs 32-bit integers, got {describe(a)}")
    wide = ScalarType("i64" if a.elem.is_signed else "u64")
    prod = sem.binop(ast.Mult(), sem.cast(a, wide), sem.cast(b, wide))
    return sem.cast(sem.binop(ast.RShift(), prod, 32), a.elem)


@api("swizzle2d")
def _swizzle2d(sem: Semantic, i: Any, j: Any, size_i: Any, size_j: Any, size_g: Any) -> tuple:
    """Renumber an (i, j) grid in column-major groups of size_g rows (better L2 reuse in matmuls)."""
    linear = sem.binop(ast.Add(), sem.binop(ast.Mult(), i, size_j), j)
    per_group = sem.binop(ast.Mult(), size_g, size_j)
    first_i = sem.binop(ast.Mult(), sem.binop(ast.FloorDiv(), linear, per_group), size_g)
    rows = sem.minmax(False, sem.binop(ast.Sub(), size_i, first_i), size_g)
    within = sem.binop(ast.Mod(), linear, per_group)
    return (sem.binop(ast.Add(), first_i, sem.binop(ast.Mod(), within, rows)),
            sem.binop(ast.FloorDiv(), within, rows))


@api("isnan")
def _isnan(sem: Semantic, x: Any) -> Tensor:
    t = _float_operand(sem, x, "isnan")
    return Tensor(sem.b.cmp("ne", t.value, t.value))


@api("cast")
def cast(sem: Semantic, input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False) -> Tensor:
    t = tensor(sem, input, "the value to cast")
    target = dtype_arg(sem, dtype)
    if fp_downcast_rounding is not None and not bitcast:
        _downcast_rounding(sem, t, target, fp_downcast_rounding)
    return sem.bitcast(t, target) if bitcast else sem.cast(t, target)


def _downcast_rounding(sem: Semantic, t: Tensor, target: Any, mode: Any) -> None:
    """Triton's checks of `fp_downcast_rounding`, and a refusal of "rtz" (round toward zero), which tilec's
    conversions do not do: a located error (under the drop-in, Triton's own build) instead of other bits."""
    if mode not in ("rtne", "rtz"):
        raise sem.error(f"Invalid rounding mode: {mode!r}. Supported rounding modes are 'rtne' and 'rtz'.")
    src = t.elem
    if not (isinstance(src, ScalarType) and isinstance(target, ScalarType) and src.is_float and target.is_float
            and target.bits < src.bits):  # fmt: skip
        raise sem.error(f"fp_downcast_rounding should be set only for truncating fp conversions (from {src} to "
                        f"{target})")  # fmt: skip
    if mode == "rtz":
        raise sem.error(f"fp_downcast_rounding='rtz' (round toward zero, {src} to {target}) is not supported")


# ---- compiler hints, assertions ----------------------------------------------------------------


def _hint(name: str):
    def fn(sem: Semantic, input: Any, values: Any) -> Any:
        if is_const(input):
            return input
        vals = list(values) if isinstance(values, (list, tuple)) else [values]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vals):
            raise sem.error(f"tl.{name} values must be positive constexpr integers")
        return Tensor(sem.b.op1(name, [input.value], input.type, values=vals))

    return fn


LIB["multiple_of"] = _hint("multiple_of")
LIB["max_contiguous"] = _hint("max_contiguous")
LIB["max_constancy"] = lambda sem, input, values: input


@api("debug_barrier")
def _barrier(sem: Semantic) -> None:
    sem.b.create("barrier", [], [])


@api("static_assert")
def _static_assert(sem: Semantic, cond: Any, msg: Any = "") -> None:
    if isinstance(cond, Tensor):
        raise sem.error("tl.static_assert needs a condition known at compile time")
    if not cond:
        raise sem.error(f"static assertion failed{': ' + str(msg) if msg else ''}", StaticAssertionError)


@api("device_assert")
def device_assert(sem: Semantic, cond: Any, msg: Any = "", mask: Any = None) -> None:
    if is_const(cond) and mask is None:
        if not cond:
            raise sem.error(f"assertion is always false{': ' + str(msg) if msg else ''}")
        return
    c = sem.to_tensor(sem.to_bool(cond))
    if mask is not None:  # lanes where the mask is false always pass
        c = sem.logical(False, c, sem.logical_not(sem.to_tensor(sem.to_bool(mask))))
    sem.b.create("assert", [c.value], [], {"message": str(msg)})


@api("assume")
def _assume(sem: Semantic, cond: Any) -> None:
    """A hint to the optimiser; the tile IR has no op for it, so it is checked for shape and dropped."""
    if isinstance(cond, Tensor) and cond.shape:
        raise sem.error("tl.assume needs a scalar condition")


@api("device_print")
def device_print(sem: Semantic, prefix: Any = "", *args: Any, hex: Any = False) -> None:
    """tl.device_print(prefix, *values): a print op; each element prints as `pid (x, y, z) idx (i, ...) prefix: v`
    (the cpu target and the reference interpreter print; cuda drops it)."""
    if not isinstance(prefix, str):
        args, prefix = (prefix, *args), ""
    values = [sem.to_tensor(a) for a in args if not isinstance(a, str)]
    if not values:
        print(prefix, *(a for a in args if isinstance(a, str)), flush=True)  # nothing at run time: say it now
        return
    label = " ".join([prefix.strip(), *(a for a in args if isinstance(a, str))]).strip()
    sem.b.create("print", [v.value for v in values], [], {"prefix": label, **({"hex": True} if hex else {})})


@api("print")
def _builtin_print(sem: Semantic, *args: Any, **kwargs: Any) -> None:
    """Python's print in a kernel, as Triton takes it: tl.device_print of its arguments."""
    device_print(sem, "", *args)


@api("static_print")
def _static_print(sem: Semantic, *args: Any, sep: Any = " ", end: Any = "\n", file: Any = None,
                  flush: Any = False) -> None:  # fmt: skip
    """tl.static_print: printed while the kernel compiles (once per specialisation), as Triton does; a tensor
    prints as its type, since its values exist only at run time."""
    print(*(describe(a) if isinstance(a, Tensor) else a for a in args), sep=str(sep), end=str(end), flush=True)


# ---- shapes --------------------------------------------------------------------------------------


@api("trans", "permute")
def trans(sem: Semantic, input: Any, *dims: Any) -> Tensor:
    t = tensor(sem, input, "tl.trans")
    if not t.shape:
        raise sem.error("tl.trans needs a tile, got a scalar")
    order = list(shape_varargs(dims)) if dims and dims[0] is not None else list(range(len(t.shape)))[::-1]
    order = [norm_axis(sem, d, len(t.shape)) for d in order]
    if sorted(order) != list(range(len(t.shape))):
        raise sem.error(f"{order} is not a permutation of {len(t.shape)} axes")
    shape = tuple(t.shape[i] for i in order)
    return Tensor(sem.b.op1("trans", [t.value], TileType(shape, t.elem), order=order))


@api("reshape", "view")
def reshape(sem: Semantic, input: Any, *shape: Any, can_reorder: Any = False) -> Tensor:
    t = tensor(sem, input, "tl.reshape")
    dims = shape_arg(sem, shape_varargs(shape))
    n = 1
    for d in dims:
        n *= d
    numel = 1
    for d in t.shape:
        numel *= d
    if n != numel:
        raise sem.error(f"cannot reshape shape {list(t.shape)} to {list(dims)}")
    if not t.shape:
        return sem.broadcast_to(t, dims)
    if t.shape == dims:
        return t
    return Tensor(sem.b.reshape(t.value, dims))


@api("ravel")
def _ravel(sem: Semantic, x: Any, can_reorder: Any = False) -> Tensor:
    """Row-major order always (can_reorder lets Triton pick another order; this one is among those allowed)."""
    t = tensor(sem, x, "tl.ravel")
    n = 1
    for d in t.shape:
        n *= d
    return reshape(sem, t, n)


@api("expand_dims")
def expand_dims(sem: Semantic, input: Any, axis: Any) -> Tensor:
    t = tensor(sem, input, "tl.expand_dims")
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    rank = len(t.shape) + len(axes)
    norm = sorted(norm_axis(sem, a, rank) for a in axes)
    for a in norm:
        if not t.shape:
            t = sem.broadcast_to(t, (1,))
            continue
        t = Tensor(sem.b.expand_dims(t.value, a))
    return t


@api("broadcast_to")
def _broadcast_to(sem: Semantic, input: Any, *shape: Any) -> Tensor:
    return sem.broadcast_to(tensor(sem, input, "tl.broadcast_to"), shape_arg(sem, shape_varargs(shape)))


@api("broadcast")
def _broadcast(sem: Semantic, input: Any, other: Any) -> tuple:
    return tuple(sem.broadcast_all(tensor(sem, input, "input"), tensor(sem, other, "other")))


# ---- dot (reductions and scans: reductions.py) --------------------------------------------------------------------


@api("dot")
def _dot(sem: Semantic, input: Any, other: Any, acc: Any = None, input_precision: Any = None, allow_tf32: Any = None,
         max_num_imprecise_acc: Any = None, out_dtype: Any = None) -> Tensor:
    a, b = tensor(sem, input, "tl.dot input"), tensor(sem, other, "tl.dot other")
    for x in (a, b):
        if len(x.shape) != 2:
            raise sem.error(f"tl.dot needs 2-D tiles, got shape {list(x.shape)}")
    if a.shape[1] != b.shape[0]:
        raise sem.error(f"tl.dot inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    fp8_pair = (
        isinstance(a.elem, ScalarType) and isinstance(b.elem, ScalarType) and a.elem.is_fp8 and b.elem.is_fp8
    )
    if a.elem != b.elem and not fp8_pair:  # as Triton: e4m3 x e5m2 is the one mix allowed
        raise sem.error(f"tl.dot operands must have the same dtype, got {a.dtype} and {b.dtype}")
    if isinstance(a.elem, PointerType):
        raise sem.error("tl.dot does not take pointers")
    m, n = a.shape[0], b.shape[1]
    if acc is None:
        out = dtype_arg(sem, out_dtype, "out_dtype") if out_dtype is not None else (
            ScalarType("f32") if a.elem.is_float else i32)
        acc_t = sem.const(0, out, (m, n))
    else:
        acc_t = tensor(sem, acc, "tl.dot acc")
        if acc_t.shape != (m, n):
            raise sem.error(f"tl.dot accumulator must have shape {[m, n]}, got {list(acc_t.shape)}")
    attrs = {}
    if a.elem == ScalarType("f32"):
        prec = input_precision if input_precision is not None else ("ieee" if allow_tf32 is False else "tf32")
        if prec not in ("ieee", "tf32", "tf32x3"):
            raise sem.error(f"input_precision must be ieee, tf32 or tf32x3, got {prec!r}")
        attrs["input_precision"] = prec
    return Tensor(sem.b.op1("dot", [a.value, b.value, acc_t.value], acc_t.type, **attrs))


def elem_of(t: Any):
    return elem_type(t)
