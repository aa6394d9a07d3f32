"""`for`, `if` and `while` for the cuda lowering, and the loop scaffolding (header phis, back edge) that the
software-pipelined `for` (pipelined.py) builds on too.

Tiles cross block boundaries flattened to their registers, in the layout gpu-layout gave the loop or
branch (gpu.layouts); scalars as one value each.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Operation, Value
from ...ir.types import TileType, elem_type
from .layouts import Layout


class ControlLowering:
    # ---- values across blocks ------------------------------------------------------------------

    def _flat(self, vals: list[Value], lays: list[Layout | None]) -> list:
        out = []
        for v, lay in zip(vals, lays, strict=False):
            got = self.get(v, lay)
            out.extend(got if isinstance(got, list) else [got])
        return out

    def _unflat(self, flat: list, vals: list[Value], lays: list[Layout | None]) -> None:
        i = 0
        for v, lay in zip(vals, lays, strict=False):
            if lay is None:
                self.define(v, None, flat[i])
                i += 1
            else:
                self.define(v, lay, flat[i : i + lay.num_regs])
                i += lay.num_regs

    def _lays(self, vals: list[Value]) -> list[Layout | None]:
        return [self.layout_of(v) if isinstance(v.type, TileType) else None for v in vals]

    def _region(self, block, args_flat: list | None = None, arg_vals=None, arg_lays=None):
        self.scopes.append({})
        self.shm.control_flow()
        if arg_vals is not None:
            self._unflat(args_flat, arg_vals, arg_lays)
        body = [o for o in block.ops if o is not block.terminator]
        self.lower_block(body)
        return block.terminator

    # ---- loop scaffolding ----------------------------------------------------------------------

    def enter_loop(
        self, names: tuple[str, str, str], first: list
    ) -> tuple[list, ir.Block, ir.Block, ir.Block]:
        """Branch into a new loop header with one phi per value of `first` (its value on entry); the
        phis and the (header, body, exit) blocks, the builder left in the header."""
        pre = self.b.block
        header, body, exit_ = (self.fn.append_basic_block(n) for n in names)
        self.b.branch(header)
        self.b.position_at_end(header)
        phis = []
        for x in first:
            p = self.b.phi(x.type)
            p.add_incoming(x, pre)
            phis.append(p)
        return phis, header, body, exit_

    def close_loop(self, header: ir.Block, exit_: ir.Block, back: list[tuple]) -> None:
        """The back edge from the current block: each (phi, value) pair gets its incoming value, and
        the builder moves on to `exit_`."""
        latch = self.b.block
        for p, x in back:
            p.add_incoming(x, latch)
        self.b.branch(header)
        self.b.position_at_end(exit_)
        self.shm.control_flow()

    # ---- ops -----------------------------------------------------------------------------------

    def op_for(self, op: Operation) -> None:
        pipe = self.pipes.loops.get(op)
        if pipe is not None:
            self.pipelined_for(op, pipe)
            return
        lb, ub, step = (self.scalar(v) for v in op.operands[:3])
        body = op.regions[0].block
        lays = self._lays(body.args[1:])
        init = self._flat(op.operands[3:], lays)
        signed = elem_type(op.operands[0].type).is_signed
        (iv, *phis), header, loop, exit_ = self.enter_loop(
            ("for.header", "for.body", "for.exit"), [lb, *init]
        )
        cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
        up = cmp("<", iv, ub)
        if signed:
            down = self.b.icmp_signed(">", iv, ub)
            up = self.b.select(self.b.icmp_signed(">", step, ir.Constant(step.type, 0)), up, down)
        self.b.cbranch(up, loop, exit_)
        self.b.position_at_end(loop)
        term = self._region(body, [iv, *phis], body.args, [None, *lays])
        nxt = self._flat(term.operands, lays)
        self.scopes.pop()
        self.close_loop(header, exit_, [(iv, self.b.add(iv, step)), *zip(phis, nxt, strict=False)])
        self._unflat(phis, op.results, lays)

    def op_if(self, op: Operation) -> None:
        cond = self.scalar(op.operands[0])
        lays = self._lays(op.results)
        then_bb = self.fn.append_basic_block("if.then")
        else_bb = self.fn.append_basic_block("if.else")
        merge = self.fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb)
        incoming = []
        for bb, region in ((then_bb, op.regions[0]), (else_bb, op.regions[1])):
            self.b.position_at_end(bb)
            term = self._region(region.block)
            flat = self._flat(term.operands, lays)
            self.scopes.pop()
            incoming.append((flat, self.b.block))
            self.b.branch(merge)
        self.b.position_at_end(merge)
        self.shm.control_flow()
        phis = []
        for i, x in enumerate(incoming[0][0]):
            p = self.b.phi(x.type)
            for flat, bb in incoming:
                p.add_incoming(flat[i], bb)
            phis.append(p)
        self._unflat(phis, op.results, lays)

    def op_while(self, op: Operation) -> None:
        before, after = op.regions[0].block, op.regions[1].block
        lays = self._lays(before.args)
        init = self._flat(op.operands, lays)
        phis, header, body, exit_ = self.enter_loop(("while.before", "while.after", "while.exit"), init)
        cond_op = self._region(before, phis, before.args, lays)
        carried_lays = self._lays(after.args)
        carried = self._flat(cond_op.operands[1:], carried_lays)
        cond = self.scalar(cond_op.operands[0])
        self.scopes.pop()
        self.b.cbranch(cond, body, exit_)
        self.b.position_at_end(body)
        term = self._region(after, carried, after.args, carried_lays)
        nxt = self._flat(term.operands, lays)
        self.scopes.pop()
        self.close_loop(header, exit_, list(zip(phis, nxt, strict=False)))
        self._unflat(carried, op.results, self._lays(op.results))
