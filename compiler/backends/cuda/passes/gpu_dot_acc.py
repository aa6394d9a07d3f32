"""gpu-dot-acc: folds `add(x, dot(a, b, 0))` into `dot(a, b, x)` before the cuda layouts are chosen, so the
tensor cores accumulate in place (as Triton's combine pass does) instead of a product from zero plus one
add per accumulator element and iteration (`acc += tl.dot(a, b)` in a K loop)."""

from __future__ import annotations

from dataclasses import dataclass

from ....ir.core import Block, Function, Module, Operation, Value, replace_all_uses, uses_in


def _is_zero(v: Value) -> bool:
    op = v.owner if isinstance(v.owner, Operation) else None
    while op is not None and op.name == "splat":
        op = op.operands[0].owner if isinstance(op.operands[0].owner, Operation) else None
    return op is not None and op.name == "constant" and float(op.attrs["value"]) == 0.0


@dataclass(frozen=True)
class GpuDotAccPass:
    """Rewrites `%d = dot %a, %b, %zero` whose only use is `%s = add %x, %d` (either operand order) into
    `%d = dot %a, %b, %x` and replaces %s by %d, where %x has the dot's type and is defined before the
    dot. The result differs from the unfolded one by the rounding of that add at most (the product is
    accumulated in the accumulator's type either way); integer dots are unchanged bit for bit."""

    name = "gpu-dot-acc"

    def apply(self, module: Module) -> None:
        for fn in module.functions:
            self.fold(fn)

    def fold(self, fn: Function) -> int:
        """Fold the dots of `fn`; how many were folded."""
        uses = uses_in(fn.body.block)
        folded = 0
        for block in [fn.body.block] + [r.block for op in fn.walk() for r in op.regions]:
            folded += self._block(fn, block, uses)
        return folded

    def _block(self, fn: Function, block: Block, uses: dict) -> int:
        folded = 0
        for add in [o for o in block.ops if o.name == "add"]:
            for i in (0, 1):
                dot, x = add.operands[i].owner, add.operands[1 - i]
                if self._foldable(block, add, dot, x, uses):
                    dot.operands = [dot.operands[0], dot.operands[1], x]
                    replace_all_uses(fn.body.block, add.result, dot.result)
                    block.ops.remove(add)
                    folded += 1
                    break
        return folded

    @staticmethod
    def _foldable(block: Block, add: Operation, dot, x: Value, uses: dict) -> bool:
        if not isinstance(dot, Operation) or dot.name != "dot" or dot not in block.ops:
            return False
        if x.type != dot.result.type or not _is_zero(dot.operands[2]) or uses.get(dot.result) != [add]:
            return False
        owner = x.owner if isinstance(x.owner, Operation) else None
        return owner is None or owner not in block.ops or block.ops.index(owner) < block.ops.index(dot)
