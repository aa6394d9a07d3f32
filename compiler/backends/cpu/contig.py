"""Contiguity of pointer tiles. 1-D: `addptr(splat(p), splat(s) + make_range(a, b))` addresses consecutive
elements from p + s + a, so its load/store can be one llvm.masked.load/store instead of a gather/scatter.
Any rank: runs of consecutive addresses along the last axis (axis analysis) give per-run vector loads.
"""

from __future__ import annotations

from math import gcd

from llvmlite import ir

from ...ir.core import Operation, Value
from ...ir.types import PointerType, TileType, elem_type
from ...passes.ir_utils import const_value, defining_op
from ..llvm.tables import cast
from ..llvm.types import I64, PTR, kind_of, splat_const

MAX_ADDS = 32


def _splat_source(v: Value) -> Value | None:
    op = defining_op(v)
    if op is not None and op.name == "splat":
        return op.operands[0]
    return None


def _contiguous_start(lw, v: Value) -> ir.Value | None:
    """The scalar first element of a 1-D integer tile known to be start, start+1, ...; else None: a
    make_range plus splats of scalars (or uniform constants) through a chain of adds, walked in a loop
    (an unrolled `offs = offs + 1` must not recurse once per add) and at most MAX_ADDS deep: every access
    walks its own chain, so deeper walks would cost time quadratic in the length of the kernel (past it,
    the access takes its address from its address tile)."""
    shifts: list[Value | int] = []
    while len(shifts) <= MAX_ADDS:
        op = defining_op(v)
        if op is None:
            return None
        if op.name == "make_range":
            break
        if op.name != "add":
            return None
        a, b = op.operands
        shift = _uniform_int(lw, b)
        v, shift = (a, shift) if shift is not None else (b, _uniform_int(lw, a))
        if shift is None:
            return None
        shifts.append(shift)
    else:
        return None
    start = ir.Constant(I64, op.attrs["start"])
    for shift in reversed(shifts):  # innermost add first
        if isinstance(shift, int):
            start = lw.b.add(start, ir.Constant(I64, shift))
        else:
            start = lw.b.add(start, cast(lw.b, lw.get(shift), kind_of(shift.type), "sint", I64))
    return start


def _uniform_int(lw, v: Value) -> Value | int | None:
    """The scalar every element of `v` equals: the source of a splat (once lowered), or a constant's value."""
    scalar = _splat_source(v)
    if scalar is not None:
        return scalar if scalar in lw.values else None
    value = const_value(v)
    signed = getattr(elem_type(v.type), "is_signed", False)  # an unsigned tile wraps where i64 would not
    return value if signed and isinstance(value, int) else None


def contiguous_address(lw, ptr: Value) -> ir.Value | None:
    """An LLVM `ptr` to the first element when the 1-D pointer tile `ptr` is contiguous; else None."""
    t = ptr.type
    if not isinstance(t, TileType) or t.rank != 1:
        return None
    op = defining_op(ptr)
    if op is None or op.name != "addptr":
        return None
    base = _splat_source(op.operands[0])
    if base is None or base not in lw.values:
        return None
    start = _contiguous_start(lw, op.operands[1])
    if start is None:
        return None
    pointee = elem_type(t)
    assert isinstance(pointee, PointerType)
    offset = lw.b.mul(start, splat_const(I64, pointee.pointee.bytes))
    return lw.b.inttoptr(lw.b.add(lw.get(base), offset), PTR)


def last_axis_run(lw, v: Value) -> int:
    """Length of the aligned runs of consecutive elements along the last axis of the pointer tile `v`, from
    compiler.passes.axis_analysis; a `for`-carried pointer advanced by amounts constant along that axis keeps
    its initial value's runs (the analysis itself knows nothing of loop-carried values)."""
    t = v.type
    if not isinstance(t, TileType):
        return 1
    arg = _for_carried(v)
    if arg is not None:
        loop, i = arg
        return _carried_run(lw, v, loop, i)
    info = lw.axis_info(v)
    return info.contiguity[-1] if info is not None else 1


def _for_carried(v: Value) -> tuple[Operation, int] | None:
    """(the for op, position among the carried values) when `v` is a carried block argument of a for."""
    owner = v.owner
    if isinstance(owner, Operation):
        return None
    for_op = getattr(getattr(owner, "parent", None), "parent", None)
    if not isinstance(for_op, Operation) or for_op.name != "for":
        return None
    args = for_op.regions[0].block.args
    for i, a in enumerate(args[1:]):
        if a is v:
            return for_op, i
    return None


def _carried_run(lw, v: Value, loop: Operation, i: int) -> int:
    init = loop.operands[3 + i]
    term = loop.regions[0].block.ops[-1]
    step = term.operands[i] if term.name == "yield" and len(term.operands) > i else None
    op = defining_op(step) if step is not None else None
    if op is None or op.name != "addptr" or op.operands[0] is not v:
        return 1
    off = lw.axis_info(op.operands[1])
    if off is None:
        return 1
    return gcd(last_axis_run(lw, init), off.constancy[-1])
