"""trans-load: a transposed tile load becomes a load of transposed pointers.

`trans(load(p, mask, other))` reads the same elements as `load(trans(p), trans(mask), trans(other))`; the
second form is a plain load, which is what the cuda target's pipeline planner can copy asynchronously into
a ring that feeds a dot (an operand loaded N x K and used as `b.T` then reaches the dot as a K x N load,
contiguous along K, the way a K-major operand given through strides does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.types import TileType
from .ir_utils import set_ops


@dataclass(frozen=True)
class TransLoadPass:
    """Rewrite each `trans` of a tile `load` that has no other use.

    Guarantees: the values are unchanged (a load is elementwise over its pointers, mask and other); the new
    load stands where the old one stood, so no memory access moves past another; a volatile load, a load
    whose result has any other use (it would be read twice) and a load in another block than its `trans`
    are left alone.
    """

    name: ClassVar[str] = "trans-load"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            uses: dict[Value, int] = {}
            for op in f.walk():
                for v in op.operands:
                    uses[v] = uses.get(v, 0) + 1
            subst: dict[Value, Value] = {}
            _block(f.body.block, uses, subst)
            if subst:
                _rename(f, subst)


def _block(b: Block, uses: dict[Value, int], subst: dict[Value, Value]) -> None:
    loads = {op.results[0]: op for op in b.ops if op.name == "load" and len(op.results) == 1}
    rewrite: dict[Operation, Operation] = {}  # old load -> the trans that reads it
    for op in b.ops:
        for r in op.regions:
            _block(r.block, uses, subst)
        if op.name != "trans":
            continue
        ld = loads.get(op.operands[0])
        if ld is None or ld.attrs.get("volatile") or uses.get(ld.results[0], 0) != 1:
            continue
        if not isinstance(ld.operands[0].type, TileType):
            continue
        rewrite[ld] = op
    if not rewrite:
        return
    out: list[Operation] = []
    for op in b.ops:
        tr = rewrite.get(op)
        if tr is None:
            if any(op is t for t in rewrite.values()):
                continue  # the trans, replaced by the new load
            out.append(op)
            continue
        order = tr.attrs["order"]
        operands = []
        for v in op.operands:
            if isinstance(v.type, TileType):
                t = TileType(tuple(v.type.shape[i] for i in order), v.type.elem)
                moved = Operation("trans", [v], [t], {"order": list(order)}, loc=tr.loc)
                out.append(moved)
                v = moved.results[0]
            operands.append(v)
        new = Operation("load", operands, [tr.results[0].type], dict(op.attrs), loc=op.loc)
        out.append(new)
        subst[tr.results[0]] = new.results[0]
    set_ops(b, out)


def _rename(f: Function, subst: dict[Value, Value]) -> None:
    for op in f.walk():
        op.operands = [subst.get(v, v) for v in op.operands]
