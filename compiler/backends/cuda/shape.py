"""`reshape` for the cuda lowering: a lazy op, computed in whatever layout its user asks for.

The source is fetched in the layout that reshape_layout maps onto the asked one, so the registers move
unchanged (no instruction at all); where the source lives in another layout, get() converts it, through
shared memory when the threads differ. Only an asked layout the algebra cannot carry goes through the
source's blocked layout and an explicit conversion.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import elem_type
from .layout_reshape import reshape_layout
from .layouts import Layout


class ShapeLowering:
    def reshape_source_layout(self, op: Operation, lay: Layout) -> Layout:
        """The layout reshape `op` reads its source in, to give its result in `lay`."""
        src_lay = reshape_layout(lay, op.operands[0].type.shape)
        return src_lay if src_lay is not None else self.plan.default(op.operands[0].type.shape)

    def lazy_reshape(self, op: Operation, lay: Layout) -> list:
        src = op.operands[0]
        src_lay = reshape_layout(lay, src.type.shape)
        if src_lay is not None:
            return list(self.get(src, src_lay))
        base = self.plan.default(src.type.shape)
        moved = reshape_layout(base, op.result.type.shape)
        if moved is None:
            raise CompileError(f"cuda: internal: cannot reshape the blocked layout of {src.type}")
        return self.convert(list(self.get(src, base)), moved, lay, elem_type(src.type))
