"""dce: dead code elimination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Module, Operation
from .ir_utils import has_side_effects, is_pure, remove_dead


@dataclass(frozen=True)
class DCEPass:
    """Remove computations nobody uses.

    Guarantees: no pure op, non-volatile load, or side-effect-free `for`/`if`/`reduce_with`/`scan_with` is
    left whose results are all unused. Stores, atomics, asserts, barriers, calls and volatile loads stay;
    so does every `while` (it may not terminate). Runs to a fixpoint, so whole dead chains go; dead ops
    inside a combiner region go too (its yield keeps what the combine needs).
    """

    name: ClassVar[str] = "dce"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            remove_dead(f, _removable)


def _removable(op: Operation) -> bool:
    if is_pure(op):
        return True
    if op.name == "load":
        return not op.attrs.get("volatile", False)
    if op.name in ("for", "if", "reduce_with", "scan_with"):
        return not has_side_effects(op)
    return False
