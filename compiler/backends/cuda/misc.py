"""Atomics on the element types the hardware has no direct instruction for, for the cuda lowering.

bf16 lives in f32 registers but in 16 bits of memory: xchg and cas work on those 16 bits, and
add/max/min run a compare-and-swap loop on them (the new value rounded to bf16, as the interpreter
does). i1 lives in a byte holding 0 or 1: add is xor (arithmetic modulo 2), max is or, min is and.
Everything else goes to MemoryLowering's atomics.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import ScalarType, elem_type
from . import ops

_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_BOOL_RMW = {"add": "xor", "max": "or", "min": "and", "xchg": "xchg", "and": "and", "or": "or", "xor": "xor"}
BF16 = ScalarType("bf16")


def _orders(op: Operation) -> tuple[str, str]:
    order = _ORDER.get(op.attrs.get("sem", "acq_rel"), "acq_rel")
    return order, ("acquire" if order in ("acquire", "acq_rel") else "monotonic")


class MiscLowering:
    def op_atomic_rmw(self, op: Operation) -> None:
        e = elem_type(op.operands[1].type)
        if e.name == "bf16":
            self._atomic(op, e, self._bf16_rmw(op), 1)
        elif e.name == "i1":
            self._atomic(op, e, self._bool_rmw(op), 1)
        else:
            super().op_atomic_rmw(op)  # type: ignore[misc]

    def op_atomic_cas(self, op: Operation) -> None:
        e = elem_type(op.operands[1].type)
        if e.name not in ("bf16", "i1"):
            super().op_atomic_cas(op)  # type: ignore[misc]
            return
        order, fail = _orders(op)
        mt = ops.mem_type(e)

        def one(p, xs, pred):
            c, v = (ops.to_mem(self.b, e, x) for x in xs)

            def emit():
                return self.b.extract_value(self.b.cmpxchg(p, c, v, order, fail), 0)

            return ops.from_mem(self.b, e, self._masked(pred, emit, ir.Constant(mt, None)))

        self._atomic(op, e, one, 1)

    def _bool_rmw(self, op: Operation):
        kind = _BOOL_RMW[op.attrs["kind"]]
        order, _ = _orders(op)

        def one(p, xs, pred):
            v = ops.to_mem(self.b, ScalarType("i1"), xs[0])
            old = self._masked(pred, lambda: self.b.atomic_rmw(kind, p, v, order), ir.Constant(ops.I8, None))
            return ops.from_mem(self.b, ScalarType("i1"), old)

        return one

    def _bf16_rmw(self, op: Operation):
        kind = op.attrs["kind"]
        if kind not in ("add", "max", "min", "xchg"):
            raise CompileError(f"cuda: atomic {kind} needs an integer type, got bf16")
        order, fail = _orders(op)
        name = {"add": "add", "max": "maximum", "min": "minimum"}.get(kind)

        def one(p, xs, pred):
            v = xs[0]
            if name is None:
                bits = ops.to_mem(self.b, BF16, v)
                emit = lambda: self.b.atomic_rmw("xchg", p, bits, order)  # noqa: E731
            else:
                emit = lambda: self._cas_loop(p, lambda old: self._bf16_update(name, old, v), order, fail)  # noqa: E731
            return ops.from_mem(self.b, BF16, self._masked(pred, emit, ir.Constant(ops.I16, None)))

        return one

    def _bf16_update(self, name: str, old_bits, v):
        b = self.b
        new = ops.binary(b, name, BF16, ops.from_mem(b, BF16, old_bits), v, {}, self.cg.fp_fusion)
        return ops.to_mem(b, BF16, new)

    def _cas_loop(self, p, update, order: str, fail: str):
        """Retry a 16-bit compare-and-swap of update(old) until no other thread wrote in between; the old bits."""
        b = self.b
        start = b.block
        first = b.load(p, typ=ops.I16)
        loop = b.append_basic_block("cas.loop")
        done = b.append_basic_block("cas.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(ops.I16)
        old.add_incoming(first, start)
        pair = b.cmpxchg(p, old, update(old), order, fail)
        seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
        old.add_incoming(seen, b.block)
        b.cbranch(ok, done, loop)
        b.position_at_end(done)
        return seen
