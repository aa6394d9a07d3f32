"""Small helpers the passes share: constants, purity and side effects, cloning ops, rebuilding blocks.

Kept apart from the passes so that each pass file reads as its rewrite rules only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Block, Function, Operation, Region, Value
from ..ir.ops import OPS, PURE
from ..ir.types import ScalarType, Type, elem_type

# ops that touch memory or the outside world: never removed, hoisted or merged
SIDE_EFFECTS = frozenset({"store", "atomic_rmw", "atomic_cas", "assert", "barrier", "call"})


def defining_op(v: Value) -> Operation | None:
    return v.owner if isinstance(v.owner, Operation) else None


def const_value(v: Value) -> int | float | None:
    """The value of a `constant` (scalar or uniform tile), else None."""
    op = defining_op(v)
    if op is None or op.name != "constant":
        return None
    return op.attrs["value"]


def is_pure(op: Operation) -> bool:
    """Pure ops without regions: no memory access, result a function of operands and attributes."""
    return not op.regions and OPS[op.name].has(PURE)


def has_side_effects(op: Operation) -> bool:
    """Whether `op` or anything nested in it writes memory, asserts, synchronises or calls."""
    return any(inner.name in SIDE_EFFECTS or _volatile_load(inner) for inner in op.walk())


def _volatile_load(op: Operation) -> bool:
    return op.name == "load" and bool(op.attrs.get("volatile", False))


def clone_op(op: Operation, mapping: dict[Value, Value]) -> Operation:
    """A deep copy of `op` (regions included) with operands renamed through `mapping`, which it extends."""
    regions = [Region(_clone_block(r.block, mapping)) for r in op.regions]
    new = Operation(op.name, [mapping.get(v, v) for v in op.operands], [r.type for r in op.results],
                    dict(op.attrs), regions, op.loc)
    for old, r in zip(op.results, new.results, strict=True):
        r.hint = old.hint
        mapping[old] = r
    return new


def _clone_block(b: Block, mapping: dict[Value, Value]) -> Block:
    nb = Block()
    for a in b.args:
        mapping[a] = nb.add_arg(a.type, a.hint)
    for op in b.ops:
        nb.append(clone_op(op, mapping))
    return nb


def set_ops(block: Block, ops: list[Operation]) -> None:
    block.ops = ops
    for op in ops:
        op.parent = block


def make_constant(value: int | float, t: Type, like: Operation | None = None) -> Operation:
    """A `constant` op of type `t` holding `value` (normalised: wrapped ints, float for float types)."""
    e = elem_type(t)
    if isinstance(e, ScalarType) and e.is_float:
        value = float(value)
    elif isinstance(e, ScalarType):
        value = wrap_int(int(value), e)
    return Operation("constant", [], [t], {"value": value}, loc=like.loc if like is not None else None)


def wrap_int(v: int, t: ScalarType) -> int:
    """`v` modulo 2^bits, in the signed or unsigned range of `t` (i1 is 0 or 1)."""
    m = 1 << t.bits
    v %= m
    if t.is_signed and v >= m >> 1:
        v -= m
    return v


def resolve(v: Value, subst: dict[Value, Value]) -> Value:
    while v in subst:
        v = subst[v]
    return v


def remove_dead(f: Function, removable: Callable[[Operation], bool]) -> None:
    """Remove ops that `removable` accepts and whose results are unused, until none is left."""
    while True:
        uses: dict[Value, int] = {}
        for op in f.walk():
            for v in op.operands:
                uses[v] = uses.get(v, 0) + 1
        if not _sweep_block(f.body.block, uses, removable):
            return


def _sweep_block(b: Block, uses: dict[Value, int], removable: Callable[[Operation], bool]) -> bool:
    """Walk backwards so that removing a user can free its operands in the same sweep."""
    changed = False
    keep: list[Operation] = []
    for op in reversed(b.ops):
        if removable(op) and all(uses.get(r, 0) == 0 for r in op.results):
            for inner in op.walk():
                for v in inner.operands:
                    uses[v] -= 1
            changed = True
            continue
        for r in op.regions:
            changed |= _sweep_block(r.block, uses, removable)
        keep.append(op)
    set_ops(b, keep[::-1])
    return changed
