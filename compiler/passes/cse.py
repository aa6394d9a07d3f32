"""cse: common subexpression elimination of pure ops, scoped by regions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Block, Module, Operation, Value
from ..ir.ops import COMMUTATIVE, OPS
from .ir_utils import is_pure, resolve, set_ops


@dataclass(frozen=True)
class CSEPass:
    """Merge identical pure computations within their scope.

    Guarantees: two pure ops with the same name, attributes, result types and operands (in any order for
    commutative ops) become one, the first; a value computed inside a region is reused only within that
    region (and regions nested in it), never outside it or in a sibling region.
    """

    name: ClassVar[str] = "cse"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            _cse_block(f.body.block, {}, {})


def _key(op: Operation) -> tuple:
    ids = [id(v) for v in op.operands]
    if OPS[op.name].has(COMMUTATIVE):
        ids.sort()
    attrs = tuple(sorted((k, _hashable(v)) for k, v in op.attrs.items()))
    return (op.name, tuple(ids), attrs, tuple(r.type for r in op.results))


def _hashable(v):
    if isinstance(v, list):
        return ("list", tuple(_hashable(x) for x in v))
    if isinstance(v, float):
        return ("float", repr(v))  # 0.0 and -0.0 differ; nan equals nan
    return (type(v).__name__, v)


def _cse_block(b: Block, seen: dict[tuple, Operation], subst: dict[Value, Value]) -> None:
    scope = dict(seen)  # the parent's values are visible; ours are not visible to the parent
    out: list[Operation] = []
    for op in b.ops:
        op.operands = [resolve(v, subst) for v in op.operands]
        for r in op.regions:
            _cse_block(r.block, scope, subst)
        if not is_pure(op):
            out.append(op)
            continue
        k = _key(op)
        first = scope.get(k)
        if first is None:
            scope[k] = op
            out.append(op)
            continue
        for old, new in zip(op.results, first.results, strict=True):
            subst[old] = new
    set_ops(b, out)
