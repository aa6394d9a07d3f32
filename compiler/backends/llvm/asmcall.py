"""A call of inline assembly that LLVM may treat as returning: llvmlite prints no `willreturn` (its attribute
list lacks it), and a call without it ends what LLVM knows is executed on every trip through a loop body, so
nothing after a predicated load (its inline PTX) could be hoisted out of the loop when it may trap (a `srem`
of loop-invariant values, recomputed every iteration of FlagGems' bicubic inner loop)."""

from __future__ import annotations

from llvmlite import ir


class ReturningCall(ir.CallInstr):
    def descr(self, buf: list) -> None:
        line: list = []
        self._descr(line, add_metadata=False)
        buf.append(f"{line[0].rstrip()} nounwind willreturn{self._stringify_metadata(leading_comma=True)}\n")


def returning_call(b: ir.IRBuilder, fn: ir.Value, args: list) -> ir.Instruction:
    """`call fn(args) nounwind willreturn` at the builder's position (`fn`: an InlineAsm that returns)."""
    inst = ReturningCall(b.block, fn, args, "")
    b._insert(inst)
    return inst
