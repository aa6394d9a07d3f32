"""licm: loop-invariant code motion out of `for` and `while` bodies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Block, Module, Operation, Value
from ..ir.types import is_int
from .ir_utils import const_value, is_pure, set_ops


@dataclass(frozen=True)
class LICMPass:
    """Hoist loop-invariant pure ops out of loops.

    Guarantees: a pure op directly in a loop region whose operands are all defined outside the loop (or
    by ops already hoisted) moves to just before the loop, in its original order. Inner loops are done
    first, so an op can climb several levels. Integer div/rem move only with a non-zero constant divisor:
    a hoisted op runs even when the loop runs zero times, and must not introduce a division by zero.
    """

    name: ClassVar[str] = "licm"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            _licm_block(f.body.block)


def _licm_block(b: Block) -> None:
    out: list[Operation] = []
    for op in b.ops:
        for r in op.regions:
            _licm_block(r.block)
        if op.name in ("for", "while"):
            out.extend(_hoist(op))
        out.append(op)
    set_ops(b, out)


def _hoist(loop: Operation) -> list[Operation]:
    inside: set[Value] = set()
    for r in loop.regions:
        inside.update(r.block.args)
        for op in r.block.ops:
            for inner in op.walk():
                inside.update(inner.results)
    hoisted: list[Operation] = []
    for r in loop.regions:
        keep: list[Operation] = []
        for op in r.block.ops:
            if _movable(op) and not any(v in inside for v in op.operands):
                hoisted.append(op)
                inside.difference_update(op.results)
            else:
                keep.append(op)
        set_ops(r.block, keep)
    return hoisted


def _movable(op: Operation) -> bool:
    if not is_pure(op):
        return False
    if op.name in ("div", "rem") and is_int(op.result.type):
        c = const_value(op.operands[1])
        return c is not None and c != 0
    return True
