"""mask-simplify: masks decided by integer range analysis (int_ranges.py) are folded away."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.types import elem_type, i1
from .int_ranges import Range, int_ranges
from .ir_utils import make_constant, resolve, set_ops

MASK_POS = {"load": 1, "store": 2, "atomic_rmw": 2}


@dataclass(frozen=True)
class MaskSimplifyPass:
    """Fold comparisons and masks that range analysis decides.

    Guarantees: every `cmp` (and i1 and/or/xor) whose value the ranges prove is the same everywhere becomes
    a constant; a load/store/atomic_rmw whose mask is provably all-true loses the mask (a load its `other`
    too); a load whose mask is all-false becomes its `other` (or 0); a store whose mask is all-false is
    deleted (an all-false atomic stays: what its masked-off lanes return is the target's business).
    """

    name: ClassVar[str] = "mask-simplify"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            _Rewriter(f).block(f.body.block)


class _Rewriter:
    def __init__(self, f: Function) -> None:
        self.ranges = int_ranges(f)
        self.subst: dict[Value, Value] = {}

    def known(self, v: Value) -> int | None:
        r: Range | None = self.ranges.get(v)
        return r[0] if r is not None and r[0] == r[1] else None

    def block(self, b: Block) -> None:
        out: list[Operation] = []
        for op in b.ops:
            op.operands = [resolve(v, self.subst) for v in op.operands]
            for r in op.regions:
                self.block(r.block)
            out.extend(self.rewrite(op))
        set_ops(b, out)

    def rewrite(self, op: Operation) -> list[Operation]:
        """The ops that replace `op` (itself when nothing applies)."""
        if op.name in ("cmp", "and", "or", "xor") and elem_type(op.result.type) == i1:
            k = self.known(op.result)
            if k is not None:
                c = make_constant(k, op.result.type, op)
                self.subst[op.result] = c.result
                self.ranges[c.result] = (k, k)
                return [c]
        pos = MASK_POS.get(op.name)
        if pos is None or len(op.operands) <= pos:
            return [op]
        k = self.known(op.operands[pos])
        if k is None:
            return [op]
        if k:
            op.operands = op.operands[:pos]
            return [op]
        return self._never(op) if op.name != "atomic_rmw" else [op]

    def _never(self, op: Operation) -> list[Operation]:
        if op.name == "store":
            return []
        if len(op.operands) > 2:
            self.subst[op.result] = op.operands[2]
            return []
        c = make_constant(0, op.result.type, op)
        self.subst[op.result] = c.result
        return [c]
