"""A volatile load for llvmlite, whose load instruction has no volatile flag (an attribute set on it is not
printed): without it a spin on a flag that another program stores (`while tl.load(p, volatile=True) == 0`, a
decoupled look-back's wait) was read once and LLVM made the wait an endless loop. NVPTX emits ld.volatile."""

from __future__ import annotations

from llvmlite import ir


class VolatileLoad(ir.LoadInstr):
    def descr(self, buf: list) -> None:
        [val] = self.operands
        align = f", align {self.align}" if self.align is not None else ""
        buf.append(f"load volatile {self.type}, {val.type} {val.get_reference()}{align}"
                   f"{self._stringify_metadata(leading_comma=True)}\n")  # fmt: skip


def volatile_load(b: ir.IRBuilder, ptr: ir.Value, typ: ir.Type, align: int | None = None) -> ir.Instruction:
    """`load volatile typ, ptr` at the builder's position."""
    inst = VolatileLoad(b.block, ptr, typ=typ)
    inst.align = align
    b._insert(inst)
    return inst
