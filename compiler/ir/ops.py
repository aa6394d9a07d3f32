"""Every op of the tile IR, declared in one table: operands, attributes, regions, traits, verifier.
An attribute whose name has a dot (`gpu.layout`) belongs to a backend, which records its decisions in
them: any op may carry one, and the backend that reads it checks it.

Semantics (the reference interpreter, compiler/interp, is the executable statement of them):
- Integer arithmetic wraps modulo 2^bits. `div`/`rem` on integers truncate toward zero and take the
  sign of the dividend (C and Triton); division by zero is undefined (the interpreter yields 0).
  On floats `div` is IEEE division and `rem` is C fmod. A target may compute an f32 `div` without
  `precise = true` as Triton's `/` does (cuda: div.full.f32, within 2 ulp); with it (tl.math.div_rn) the
  quotient is correctly rounded everywhere. Likewise `sqrt` (tl.sqrt may approximate; `precise = true`,
  tl.math.sqrt_rn, is correctly rounded).
- `shr` is arithmetic on signed and logical on unsigned types; shift amounts >= bits are undefined.
- `maximum`/`minimum` (and the max/min reductions): with `propagate_nan = false` (the default, as
  tl.maximum) a NaN operand loses to a number (IEEE maxNum); with `propagate_nan = true` NaN wins.
  argmax/argmin ignore NaN unless every element is NaN (then index 0); ties go to the lowest index.
- `cmp` predicates eq ne lt le gt ge; signedness comes from the operand type; float compares are
  ordered except `ne` (NaN != x is true), as in C.
- `cast` converts values: float→int truncates toward zero (out of range: undefined, the
  interpreter saturates, NaN → 0), int→float and float→float round to nearest even, int→int
  truncates or extends by the source signedness, anything→i1 is `!= 0`; a pointer converts to and
  from a 64-bit integer (its address) only.
- `reduce_with` folds each line along `axis` with its combiner region as a balanced tree: element i of the
  first half with element i of the second (lhs from the first half), an odd leftover carried, until one
  is left. `scan_with` is the inclusive scan out[0] = x[0], out[i] = combine(out[i-1], x[i]); reversed,
  the same from the end (out[i] = combine(out[i+1], x[i])). Both take several tiles of one shape as one
  tuple per element. The combiner should be associative: the cuda target reduces in its own tree order.
- `load`/`store`/atomics with a mask never touch memory where the mask is false; masked-off load
  lanes take `other` (or 0 when absent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import VerifyError
from .core import OPS, Operation, error_location
from .types import (
    PointerType,
    ScalarType,
    TileType,
    Type,
    elem_type,
    i1,
    i32,
    i64,
    is_float,
    is_fp8,
    is_int,
    is_ptr,
    make_type,
    shape_of,
    with_elem,
)

PURE = "pure"
COMMUTATIVE = "commutative"
TERMINATOR = "terminator"
ELEMENTWISE = "elementwise"


@dataclass(frozen=True)
class OpSpec:
    name: str
    operands: tuple[int, int]  # (min, max); max -1 means variadic
    results: tuple[int, int]
    attrs: dict[str, type | tuple] = field(default_factory=dict)  # required attrs and their python types
    optional_attrs: dict[str, type | tuple] = field(default_factory=dict)
    regions: int = 0
    traits: frozenset[str] = frozenset()
    verify: Callable[[Operation], None] | None = None
    doc: str = ""

    def has(self, trait: str) -> bool:
        return trait in self.traits




def _op(name: str, operands, results=(1, 1), *, attrs=None, optional=None, regions=0, traits=(), verify=None, doc=""):
    if isinstance(operands, int):
        operands = (operands, operands)
    if isinstance(results, int):
        results = (results, results)
    OPS[name] = OpSpec(name, operands, results, attrs or {}, optional or {}, regions, frozenset(traits), verify, doc)


def fail(op: Operation, msg: str) -> None:
    raise VerifyError(f"'{op.name}' {msg}", **error_location(op.loc))


# ---- verifiers ---------------------------------------------------------------------------------


def _same_types(op: Operation) -> None:
    t = op.results[0].type
    for v in op.operands:
        if v.type != t:
            fail(op, f"operand type {v.type} differs from result type {t}")


def _int_binary(op: Operation) -> None:
    _same_types(op)
    if not is_int(op.results[0].type):
        fail(op, f"needs integer operands, got {op.results[0].type}")


def _float_unary(op: Operation) -> None:
    _same_types(op)
    if not is_float(op.results[0].type):
        fail(op, f"needs float operands, got {op.results[0].type}")


def _num_elementwise(op: Operation) -> None:
    _same_types(op)
    if is_ptr(op.results[0].type):
        fail(op, "does not take pointers (use addptr)")


def _cmp(op: Operation) -> None:
    a, b = op.operands
    if a.type != b.type:
        fail(op, f"compares {a.type} with {b.type}")
    if op.attrs["pred"] not in ("eq", "ne", "lt", "le", "gt", "ge"):
        fail(op, f"unknown predicate {op.attrs['pred']!r}")
    if op.results[0].type != with_elem(a.type, i1):
        fail(op, f"result must be {with_elem(a.type, i1)}")


def _select(op: Operation) -> None:
    c, a, b = op.operands
    r = op.results[0].type
    if a.type != r or b.type != r:
        fail(op, f"branches {a.type} and {b.type} must both be {r}")
    if elem_type(c.type) != i1 or shape_of(c.type) not in ((), shape_of(r)):
        fail(op, f"condition must be i1 of shape {list(shape_of(r))}, got {c.type}")


def _constant(op: Operation) -> None:
    v, t = op.attrs["value"], op.results[0].type
    e = elem_type(t)
    if isinstance(e, PointerType):
        fail(op, "cannot make pointer constants")
    if e.is_float and not isinstance(v, (int, float)):
        fail(op, f"float constant needs a number, got {v!r}")
    if e.is_int and (not isinstance(v, int) or isinstance(v, bool)):
        fail(op, f"integer constant needs an integer, got {v!r}")
    if e.is_int and not -(1 << (e.bits - 1)) <= v < (1 << e.bits):  # signed or unsigned, it must fit the bits
        fail(op, f"integer constant {_short(v)} does not fit in {e.name}")


def _short(v: int) -> str:
    """A number as an error message shows it: a long one by its first digits and its length."""
    digits = str(v) if v.bit_length() < 14000 else None  # under int()'s 4300-digit limit
    if digits is not None and len(digits) <= 40:
        return digits
    return f"of {len(digits)} digits" if digits is not None else f"of about {int(v.bit_length() * 0.30103) + 1} digits"


def _make_range(op: Operation) -> None:
    s, e = op.attrs["start"], op.attrs["end"]
    n = e - s
    if n <= 0 or n & (n - 1):
        fail(op, f"range length {n} must be a positive power of two")
    if op.results[0].type != TileType((n,), i32):
        fail(op, f"result must be tile<{n}xi32>")


def _axis_attr(op: Operation) -> None:
    if op.attrs["axis"] not in (0, 1, 2):
        fail(op, "axis must be 0, 1 or 2")
    if op.results[0].type != i32:
        fail(op, "result must be i32")


def _splat(op: Operation) -> None:
    (s,) = op.operands
    r = op.results[0].type
    if isinstance(s.type, TileType) or not isinstance(r, TileType) or r.elem != s.type:
        fail(op, f"splats a scalar to a tile of it, not {s.type} to {r}")


def _broadcast(op: Operation) -> None:
    (x,) = op.operands
    r = op.results[0].type
    if not isinstance(x.type, TileType) or not isinstance(r, TileType) or x.type.elem != r.elem:
        fail(op, f"cannot broadcast {x.type} to {r}")
    if len(x.type.shape) != len(r.shape) or any(a not in (1, b) for a, b in zip(x.type.shape, r.shape, strict=False)):
        fail(op, f"cannot broadcast shape {list(x.type.shape)} to {list(r.shape)}")


def _expand_dims(op: Operation) -> None:
    (x,) = op.operands
    s, ax = list(shape_of(x.type)), op.attrs["axis"]
    if not 0 <= ax <= len(s):
        fail(op, f"axis {ax} out of range for rank {len(s)}")
    s.insert(ax, 1)
    if op.results[0].type != TileType(tuple(s), elem_type(x.type)):
        fail(op, f"result must be {TileType(tuple(s), elem_type(x.type))}")


def _reshape(op: Operation) -> None:
    (x,) = op.operands
    r = op.results[0].type
    if not isinstance(x.type, TileType) or not isinstance(r, TileType):
        fail(op, "reshapes tiles")
    if x.type.numel != r.numel or x.type.elem != r.elem:
        fail(op, f"cannot reshape {x.type} to {r}")


def _trans(op: Operation) -> None:
    (x,) = op.operands
    order = op.attrs["order"]
    s = shape_of(x.type)
    if not all(type(i) is int for i in order) or sorted(order) != list(range(len(s))):
        fail(op, f"order {order} is not a permutation of {len(s)} axes")
    want = TileType(tuple(s[i] for i in order), elem_type(x.type))
    if op.results[0].type != want:
        fail(op, f"result must be {want}")


def _cast(op: Operation) -> None:
    (x,) = op.operands
    r = op.results[0].type
    if shape_of(x.type) != shape_of(r):
        fail(op, f"changes shape {x.type} -> {r}")
    addr = (ScalarType("i64"), ScalarType("u64"))  # a pointer converts to and from a 64-bit integer only
    if is_ptr(x.type) != is_ptr(r) and not (elem_type(r) in addr or elem_type(x.type) in addr):
        fail(op, f"cannot cast {x.type} to {r}")


def _bitcast(op: Operation) -> None:
    (x,) = op.operands
    r = op.results[0].type
    if shape_of(x.type) != shape_of(r) or elem_type(x.type).bits != elem_type(r).bits:
        fail(op, f"bitcast needs equal shapes and widths: {x.type} -> {r}")


def _addptr(op: Operation) -> None:
    p, off = op.operands
    r = op.results[0].type
    if not is_ptr(p.type) or not is_int(off.type) or p.type != r or shape_of(off.type) != shape_of(r):
        fail(op, f"adds an integer offset to pointers of the same shape, got {p.type} + {off.type}")


def _mask_ok(op: Operation, mask, shape) -> None:
    if elem_type(mask.type) != i1 or shape_of(mask.type) != shape:
        fail(op, f"mask must be i1 of shape {list(shape)}, got {mask.type}")


def _load(op: Operation) -> None:
    p = op.operands[0]
    if not is_ptr(p.type):
        fail(op, f"loads through pointers, got {p.type}")
    want = with_elem(p.type, elem_type(p.type).pointee)
    if op.results[0].type != want:
        fail(op, f"result must be {want}")
    if len(op.operands) > 1:
        _mask_ok(op, op.operands[1], shape_of(p.type))
    if len(op.operands) > 2 and op.operands[2].type != want:
        fail(op, f"other must be {want}, got {op.operands[2].type}")


def _store(op: Operation) -> None:
    p, v = op.operands[:2]
    if not is_ptr(p.type):
        fail(op, f"stores through pointers, got {p.type}")
    want = with_elem(p.type, elem_type(p.type).pointee)
    if v.type != want:
        fail(op, f"value must be {want}, got {v.type}")
    if len(op.operands) > 2:
        _mask_ok(op, op.operands[2], shape_of(p.type))


ATOMIC_KINDS = ("add", "max", "min", "xchg", "and", "or", "xor")
ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")  # Triton's memory orders (default acq_rel)
ATOMIC_SCOPES = ("gpu", "cta", "sys")  # Triton's scopes (default gpu)


def _atomic_order(op: Operation) -> None:
    """An atomic's memory order and scope are Triton's words for them (the cuda lowering writes them into PTX)."""
    if op.attrs.get("sem", "acq_rel") not in ATOMIC_SEMS:
        fail(op, f"sem must be one of {', '.join(ATOMIC_SEMS)}, got {op.attrs['sem']!r}")
    if op.attrs.get("scope", "gpu") not in ATOMIC_SCOPES:
        fail(op, f"scope must be one of {', '.join(ATOMIC_SCOPES)}, got {op.attrs['scope']!r}")


def _atomic_rmw(op: Operation) -> None:
    if op.attrs["kind"] not in ATOMIC_KINDS:
        fail(op, f"unknown atomic kind {op.attrs['kind']!r}")
    _atomic_order(op)
    _store(op)
    if op.results[0].type != op.operands[1].type:
        fail(op, "returns the old values, of the value's type")


def _atomic_cas(op: Operation) -> None:
    _atomic_order(op)
    p, c, v = op.operands
    want = with_elem(p.type, elem_type(p.type).pointee) if is_ptr(p.type) else None
    if want is None or c.type != want or v.type != want or op.results[0].type != want:
        fail(op, f"needs pointers and compare/value of their pointee, got {p.type}, {c.type}, {v.type}")


def _dot(op: Operation) -> None:
    a, b, acc = op.operands
    r = op.results[0].type
    for x in (a, b, acc):
        if not isinstance(x.type, TileType) or x.type.rank != 2:
            fail(op, f"needs 2-D tiles, got {x.type}")
    (m, k), (k2, n) = a.type.shape, b.type.shape
    if k != k2:
        fail(op, f"inner dimensions differ: {list(a.type.shape)} x {list(b.type.shape)}")
    if acc.type.shape != (m, n) or r != acc.type:
        fail(op, f"accumulator and result must be [{m}, {n}] of the same type")
    if a.type.elem != b.type.elem and not (is_fp8(a.type) and is_fp8(b.type)):  # fp8 formats mix
        fail(op, f"operands must share a dtype, got {a.type.elem} and {b.type.elem}")
    if is_fp8(acc.type):
        fail(op, f"the accumulator cannot be fp8, got {acc.type}")
    if op.attrs.get("input_precision", "ieee") not in ("ieee", "tf32", "tf32x3"):
        fail(op, f"unknown input precision {op.attrs['input_precision']!r}")


REDUCE_KINDS = ("sum", "prod", "max", "min", "argmax", "argmin", "and", "or", "xor")
SCAN_KINDS = ("sum", "prod", "max", "min")


def _reduce(op: Operation) -> None:
    (x,) = op.operands
    kind, ax = op.attrs["kind"], op.attrs["axis"]
    if kind not in REDUCE_KINDS:
        fail(op, f"unknown reduction {kind!r}")
    s = list(shape_of(x.type))
    if not 0 <= ax < len(s):
        fail(op, f"axis {ax} out of range for {x.type}")
    del s[ax]
    e = i32 if kind in ("argmax", "argmin") else elem_type(x.type)
    if op.results[0].type != make_type(tuple(s), e):
        fail(op, f"result must be {make_type(tuple(s), e)}")


def _scan(op: Operation) -> None:
    (x,) = op.operands
    if op.attrs["kind"] not in SCAN_KINDS:
        fail(op, f"unknown scan {op.attrs['kind']!r}")
    if not 0 <= op.attrs["axis"] < len(shape_of(x.type)):
        fail(op, f"axis out of range for {x.type}")
    _same_types(op)


def _sort(op: Operation) -> None:
    (x,) = op.operands
    n = shape_of(x.type)
    if not 0 <= op.attrs["axis"] < len(n):
        fail(op, f"axis out of range for {x.type}")
    if n[op.attrs["axis"]] & (n[op.attrs["axis"]] - 1):
        fail(op, f"sort needs a power-of-two axis, got {x.type}")
    _same_types(op)


def _gather(op: Operation) -> None:
    src, idx = op.operands
    s, i, a = shape_of(src.type), shape_of(idx.type), op.attrs["axis"]
    if not isinstance(idx.type, TileType) or not idx.type.elem.is_int or len(i) != len(s) or not 0 <= a < len(s):
        fail(op, f"gather needs an integer index tile of the source's rank, got {src.type} and {idx.type}")
    if any(p != q for d, (p, q) in enumerate(zip(s, i, strict=True)) if d != a):
        fail(op, f"gather's index and source must agree off the axis: {src.type} and {idx.type}")
    t = op.results[0].type
    if not isinstance(t, TileType) or t.shape != i or t.elem != src.type.elem:
        fail(op, f"gather's result must be the index's shape in the source's type, got {t}")


def _combine_operands(op: Operation) -> list[Type]:
    """The shared shape of a reduce_with/scan_with's operands and the element type of each."""
    shape = shape_of(op.operands[0].type)
    for v in op.operands:
        if not isinstance(v.type, TileType) or v.type.shape != shape:
            fail(op, f"operands must be tiles of one shape, got {[str(x.type) for x in op.operands]}")
        if is_ptr(v.type):
            fail(op, "does not take pointers")
    if not 0 <= op.attrs["axis"] < len(shape):
        fail(op, f"axis {op.attrs['axis']} out of range for {op.operands[0].type}")
    return [elem_type(v.type) for v in op.operands]


def _combiner(op: Operation, elems: list[Type]) -> None:
    """The combiner region: (lhs elements..., rhs elements...) -> yield of one element per operand, in
    pure scalar code (pure ops, if/for/while, calls of helpers the verifier checks the same way)."""
    _region_types(op, 0, [*elems, *elems], "combiner")
    _terminated(op, 0, "yield", elems)
    for inner in op.regions[0].block.ops:
        check_combiner_op(op, inner)


def check_combiner_op(owner: Operation, inner: Operation, via: str = "") -> None:
    """One op of a combiner (or of a helper `via` that a combiner calls), and those nested in it: pure
    scalar ops, calls, control flow on scalars; no memory access, no asserts, no tiles."""
    where = f"the combiner of '{owner.name}'" + (f" (through @{via})" if via else "")
    if inner.name in ("if", "for", "while"):
        for r in inner.regions:
            for nested in r.block.ops:
                check_combiner_op(owner, nested, via)
    elif inner.name not in ("yield", "condition", "return", "call") and not OPS[inner.name].has(PURE):
        fail(inner, f"cannot be in {where}: pure scalar code only")
    for v in (*inner.operands, *inner.results):
        if isinstance(v.type, TileType):
            fail(inner, f"cannot take or make the tile {v.type} in {where}: scalars only")


def _reduce_with(op: Operation) -> None:
    elems = _combine_operands(op)
    s = list(shape_of(op.operands[0].type))
    del s[op.attrs["axis"]]
    want = [make_type(tuple(s), e) for e in elems]
    if [r.type for r in op.results] != want:
        fail(op, f"results must be {[str(t) for t in want]}")
    _combiner(op, elems)


def _scan_with(op: Operation) -> None:
    elems = _combine_operands(op)
    if [r.type for r in op.results] != [v.type for v in op.operands]:
        fail(op, "results must have the types of the operands")
    _combiner(op, elems)


def _region_types(op: Operation, region_index: int, want: list[Type], what: str) -> None:
    got = [a.type for a in op.regions[region_index].block.args]
    if got != want:
        fail(op, f"{what} arguments {[str(t) for t in got]} must be {[str(t) for t in want]}")


def _terminated(op: Operation, region_index: int, term: str, want: list[Type]) -> None:
    block = op.regions[region_index].block
    t = block.terminator
    if t is None or t.name != term:
        fail(op, f"region {region_index} must end with '{term}'")
    got = [v.type for v in (t.operands[1:] if term == "condition" else t.operands)]
    if got != want:
        fail(t, f"yields {[str(x) for x in got]}, the op expects {[str(x) for x in want]}")


def _for(op: Operation) -> None:
    lb, ub, st = op.operands[:3]
    if not (lb.type == ub.type == st.type) or not isinstance(lb.type, ScalarType) or not lb.type.is_int:
        fail(op, f"bounds must be integer scalars of one type, got {lb.type}, {ub.type}, {st.type}")
    inits = [v.type for v in op.operands[3:]]
    if [r.type for r in op.results] != inits:
        fail(op, "results must have the types of the iter args")
    _region_types(op, 0, [lb.type, *inits], "body")
    _terminated(op, 0, "yield", inits)


def _if(op: Operation) -> None:
    (c,) = op.operands
    if c.type != i1:
        fail(op, f"condition must be i1, got {c.type}")
    rt = [r.type for r in op.results]
    for i in range(2):
        _region_types(op, i, [], "branch")
        _terminated(op, i, "yield", rt)


def _while(op: Operation) -> None:
    inits = [v.type for v in op.operands]
    _region_types(op, 0, inits, "before-region")
    t = op.regions[0].block.terminator
    if t is None or t.name != "condition":
        fail(op, "before-region must end with 'condition'")
    carried = [v.type for v in t.operands[1:]]
    if [r.type for r in op.results] != carried:
        fail(op, "results must have the types passed by 'condition'")
    _region_types(op, 1, carried, "after-region")
    _terminated(op, 1, "yield", inits)


def _condition(op: Operation) -> None:
    if not op.operands or op.operands[0].type != i1:
        fail(op, "first operand must be an i1 condition")


def _hint(op: Operation) -> None:
    _same_types(op)
    vals = op.attrs["values"]
    if not isinstance(vals, list) or not all(isinstance(v, int) and v > 0 for v in vals):
        fail(op, "values must be a list of positive integers")


def _desc_box(op: Operation) -> None:
    p, *rest = op.operands
    if not isinstance(p.type, TileType) or not is_ptr(p.type) or op.results[0].type != p.type:
        fail(op, f"takes a pointer tile and returns it, not {p.type} -> {op.results[0].type}")
    r = len(p.type.shape)
    coords, recipe = rest[:r], rest[r:]
    if len(coords) != r or any(c.type != i32 for c in coords):
        fail(op, f"needs one i32 start coordinate per dimension of {p.type}")
    if "desc" in op.attrs:
        if recipe:
            fail(op, "of a host descriptor (desc) takes only the pointer tile and the coordinates")
        return
    # a block pointer's box: base, then its shape and strides (outermost first), as the kernel computes them
    if len(recipe) != 1 + 2 * r:
        fail(op, f"of a block pointer needs the base, {r} shape and {r} stride values after the coordinates")
    base, dims = recipe[0], recipe[1:]
    if base.type != elem_type(p.type):
        fail(op, f"base {base.type} is not the scalar pointer of {p.type}")
    if any(d.type != i64 for d in dims):
        fail(op, "shape and strides must be i64 scalars")


# ---- the table ---------------------------------------------------------------------------------

E = (PURE, ELEMENTWISE)
_op("constant", 0, attrs={"value": (int, float)}, traits=(PURE,), verify=_constant, doc="a scalar, or a tile of one value")
_op("splat", 1, traits=(PURE,), verify=_splat)
_op("make_range", 0, attrs={"start": int, "end": int}, traits=(PURE,), verify=_make_range)
_op("program_id", 0, attrs={"axis": int}, traits=(PURE,), verify=_axis_attr)
_op("num_programs", 0, attrs={"axis": int}, traits=(PURE,), verify=_axis_attr)
for _n in ("add", "mul"):
    _op(_n, 2, traits=(*E, COMMUTATIVE), verify=_num_elementwise)
for _n in ("sub", "rem"):
    _op(_n, 2, traits=E, verify=_num_elementwise)
_op("div", 2, optional={"precise": bool}, traits=E, verify=_num_elementwise)
for _n in ("and", "or", "xor"):
    _op(_n, 2, traits=(*E, COMMUTATIVE), verify=_int_binary)
for _n in ("shl", "shr"):
    _op(_n, 2, traits=E, verify=_int_binary)
for _n in ("maximum", "minimum"):
    _op(_n, 2, optional={"propagate_nan": bool}, traits=(*E, COMMUTATIVE), verify=_num_elementwise)
_op("pow", 2, traits=E, verify=_float_unary)
_op("atan2", 2, traits=E, verify=_float_unary)
_op("cmp", 2, attrs={"pred": str}, traits=E, verify=_cmp)
_op("select", 3, traits=E, verify=_select)
MATH_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "erf")
for _n in MATH_UNARY:
    _op(_n, 1, optional={"precise": bool} if _n == "sqrt" else None, traits=E, verify=_float_unary)
_op("neg", 1, traits=E, verify=_num_elementwise)
_op("abs", 1, traits=E, verify=_num_elementwise)
_op("fma", 3, traits=E, verify=_float_unary)
_op("cast", 1, traits=E, verify=_cast)
_op("bitcast", 1, traits=E, verify=_bitcast)
_op("broadcast", 1, traits=(PURE,), verify=_broadcast)
_op("expand_dims", 1, attrs={"axis": int}, traits=(PURE,), verify=_expand_dims)
_op("reshape", 1, traits=(PURE,), verify=_reshape)
_op("trans", 1, attrs={"order": list}, traits=(PURE,), verify=_trans)
_op("addptr", 2, traits=E, verify=_addptr)
_op("load", (1, 3), optional={"volatile": bool, "cache": str, "eviction": str}, verify=_load)
_op("store", (2, 3), 0, optional={"cache": str, "eviction": str}, verify=_store)
_op("atomic_rmw", (2, 3), attrs={"kind": str}, optional={"sem": str, "scope": str}, verify=_atomic_rmw)
_op("atomic_cas", 3, optional={"sem": str, "scope": str}, verify=_atomic_cas)
_op("dot", 3, optional={"input_precision": str}, traits=(PURE,), verify=_dot)
_op("reduce", 1, attrs={"kind": str, "axis": int}, optional={"propagate_nan": bool}, traits=(PURE,), verify=_reduce)
_op("scan", 1, attrs={"kind": str, "axis": int}, optional={"reverse": bool}, traits=(PURE,), verify=_scan)
_op("sort", 1, attrs={"axis": int}, optional={"descending": bool}, traits=(PURE,), verify=_sort,
    doc="the bitonic sorting network along a power-of-two axis (NaNs never swap, as tl.sort)")
_op("gather", 2, attrs={"axis": int}, traits=(PURE,), verify=_gather,
    doc="out[.., i, ..] = src[.., index[.., i, ..], ..] along axis (an index out of range reads 0)")
_op("reduce_with", (1, -1), (1, -1), attrs={"axis": int}, regions=1, verify=_reduce_with,
    doc="reduce one or several tiles of one shape along an axis with the combiner region")
_op("scan_with", (1, -1), (1, -1), attrs={"axis": int}, optional={"reverse": bool}, regions=1,
    verify=_scan_with,
    doc="inclusive scan of one or several tiles of one shape along an axis with the combiner region")
_op("multiple_of", 1, attrs={"values": list}, traits=(PURE,), verify=_hint)
_op("max_contiguous", 1, attrs={"values": list}, traits=(PURE,), verify=_hint)
_op("desc_box", (2, 17), optional={"desc": str}, traits=(PURE,), verify=_desc_box,
    doc="a pointer tile, unchanged, that reads a tensor's box: the box's start coordinates (one per "
        "dimension), then either the host descriptor's base parameter (desc) or, for a block pointer, its "
        "base, shape and strides as operands; a target may load it with TMA")
_op("for", (3, -1), (0, -1), optional={"num_stages": int}, regions=1, verify=_for)
_op("if", 1, (0, -1), regions=2, verify=_if)
_op("while", (0, -1), (0, -1), regions=2, verify=_while)
_op("yield", (0, -1), 0, traits=(TERMINATOR,))
_op("condition", (1, -1), 0, traits=(TERMINATOR,), verify=_condition)
_op("call", (0, -1), (0, -1), attrs={"callee": str})
_op("return", (0, -1), 0, traits=(TERMINATOR,))
_op("barrier", 0, 0)
_op("assert", (1, -1), 0, attrs={"message": str})
_op("print", (0, -1), 0, attrs={"prefix": str}, optional={"hex": bool},
    doc="tl.device_print: each element of each operand on its own line, `pid (x, y, z) idx (i, ...) prefix: v`")

TERMINATORS = frozenset(n for n, spec in OPS.items() if spec.has(TERMINATOR))
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "maximum", "minimum", "pow", "atan2")


def verify_op_shape(op: Operation) -> None:
    """Operand/result/region counts and attribute presence and types, from the op's spec."""
    spec = OPS.get(op.name)
    if spec is None:
        fail(op, "is not an op of the tile IR")
    lo, hi = spec.operands
    if len(op.operands) < lo or (hi >= 0 and len(op.operands) > hi):
        want = str(lo) if lo == hi else f"{lo}..{hi if hi >= 0 else 'n'}"
        fail(op, f"takes {want} operands, got {len(op.operands)}")
    lo, hi = spec.results
    if len(op.results) < lo or (hi >= 0 and len(op.results) > hi):
        fail(op, f"has {lo if lo == hi else f'{lo}..n'} results, got {len(op.results)}")
    if len(op.regions) != spec.regions:
        fail(op, f"has {spec.regions} regions, got {len(op.regions)}")
    for k, t in spec.attrs.items():
        if k not in op.attrs:
            fail(op, f"needs attribute '{k}'")
        _check_attr(op, k, t)
    for k in op.attrs:
        if k in spec.optional_attrs:
            _check_attr(op, k, spec.optional_attrs[k])
        elif k not in spec.attrs and "." not in k:  # `gpu.layout`: a backend's, which the backend checks
            fail(op, f"has unknown attribute '{k}'")


def _check_attr(op: Operation, key: str, t: Any) -> None:
    v = op.attrs[key]
    ok = isinstance(v, t) and not (isinstance(v, bool) and t in (int, (int, float)))
    if not ok:
        fail(op, f"attribute '{key}' has the wrong kind: {v!r}")
