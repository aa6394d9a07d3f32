"""Software-pipelined `for` loops for the cuda lowering (the plan comes from backends/cuda/passes/gpu_pipeline.py).

The planned loads are copied by cp.async into a ring of `stages` shared buffers: a prologue issues
iterations 0..S-2, and iteration i waits for its own group, syncs the block (which also frees the
slot read in iteration i-1), issues iteration i+S-1 into that slot and then runs its dots straight
from slot i % S. The address state of iteration i+S-1 (induction variable and carried address tiles)
is carried in extra phis; copies of iterations past the end are not issued.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Operation
from ...ir.types import elem_type
from . import ops
from .plan import LoopPipeline


def _c(x: int) -> ir.Constant:
    return ir.Constant(ops.I32, x)


class PipelineLowering:
    def op_load(self, op: Operation) -> None:
        if op in self.pipes.by_load:
            return  # lives in a ring; its dot reads it from there
        super().op_load(op)

    def ring_operand(self, op: Operation, index: int):
        got = self.pipes.operand(op, index)
        if got is None:
            return None
        pipe, pl = got
        slot, ring_base = self._rings[pipe.loop]
        base = self.b.add(self.b.mul(slot, _c(pipe.stage_bytes)), _c(ring_base + pl.offset))
        return self.b.add(self.pb.ptrtoint(self.smem, ops.I32), base), pl.stride

    # ---- instructions --------------------------------------------------------------------------

    def _asm(self, text: str, cons: str, args: list) -> None:
        fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
        self.b.call(ir.InlineAsm(fnty, text, cons, side_effect=True), args)

    def cp_async(self, dst, src, nbytes: int, src_bytes, pred) -> None:
        """Copy `nbytes` global -> shared where `pred` holds; bytes past `src_bytes` are zero-filled."""
        kind = "cg" if nbytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes alone
        self._asm(f"@$3 cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,r,b,~{memory}", [dst, src, src_bytes, pred])

    def cp_commit(self) -> None:
        self._asm("cp.async.commit_group;", "~{memory}", [])

    def cp_wait(self, pending: int) -> None:
        self._asm(f"cp.async.wait_group {pending};", "~{memory}", [])

    def _regs(self, v, lay) -> list:
        got = self.get(v, lay)
        return list(got) if lay is not None else [got]

    # ---- the loop ------------------------------------------------------------------------------

    def _issue(self, pipe: LoopPipeline, slot, valid, ring_base: int) -> None:
        """cp.async the planned loads of the iteration whose values the current scope holds into `slot`."""
        bld, pb = self.b, self.pb
        smem = pb.ptrtoint(self.smem, ops.I32)
        stage = bld.add(smem, bld.add(bld.mul(slot, _c(pipe.stage_bytes)), _c(ring_base)))
        for pl in pipe.loads:
            lay, ld = pl.layout, pl.load
            eb = elem_type(ld.result.type).bits // 8
            ptrs = self.get(ld.operands[0], lay)
            mask = self.get(ld.operands[1], lay) if len(ld.operands) > 1 else None
            tc = self.thread_coord(lay)
            thread = pb.add(pb.mul(tc[0], _c(pl.stride)), pb.mul(tc[1], _c(eb)))
            base = bld.add(stage, bld.add(thread, _c(pl.offset)))
            nbytes = pl.width * eb
            unique = set(self.unique_regs(lay))
            for r0 in range(0, lay.num_regs, pl.width):
                if r0 not in unique:
                    continue
                row, col = lay.reg_coord(r0)
                dst = bld.add(base, _c(row * pl.stride + col * eb))
                size = _c(nbytes) if mask is None else bld.select(mask[r0], _c(nbytes), _c(0))
                self.cp_async(dst, ptrs[r0], nbytes, size, valid)

    def _step(self, pipe: LoopPipeline, outer: list, state: tuple, slot, ub, step, signed: bool, ring_base: int):
        """Issue the copies of the iteration at `state` (iv, address tiles) into `slot`; the next state."""
        body = pipe.loop.regions[0].block
        iv, addr = state
        saved, self.scopes = self.scopes, [*outer, {}]
        natural = {}
        try:
            self.define(body.args[0], None, iv)
            for j, lay, regs in zip(pipe.address_args, pipe.address_layouts, addr, strict=True):
                a = body.args[j]
                natural[a] = self.plan.natural.get(a)
                if lay is not None:
                    self.plan.natural[a] = lay  # other layouts are converted from the one carried here
                self.define(a, lay, regs if lay is not None else regs[0])
            for o in pipe.slice_ops:
                self.lower_op(o)
            valid = (self.b.icmp_signed if signed else self.b.icmp_unsigned)("<", iv, ub)
            self._issue(pipe, slot, valid, ring_base)
            yields = body.terminator.operands
            nxt = [self._regs(yields[j - 1], lay) for j, lay in zip(pipe.address_args, pipe.address_layouts, strict=True)]
            return self.b.add(iv, step), nxt
        finally:
            self.scopes = saved
            for a, lay in natural.items():
                self.plan.natural[a] = lay

    def pipelined_for(self, op: Operation, pipe: LoopPipeline) -> None:  # noqa: PLR0915 - one loop, in order
        lb, ub, step = (self.scalar(v) for v in op.operands[:3])
        body = op.regions[0].block
        iters = body.args[1:]
        lays = self._lays(iters)
        init = self._flat(op.operands[3:], lays)
        signed = elem_type(op.operands[0].type).is_signed
        outer = list(self.scopes)
        ring_base, saved_base = self.smem_base, self.smem_base
        self.reserve(pipe.ring_bytes)
        self.smem_base = ring_base + pipe.ring_bytes
        if self.smem_dirty:
            self.barrier()  # earlier scratch users may still read what the copies overwrite
        state = (lb, [self._regs(op.operands[2 + j], lay) for j, lay in zip(pipe.address_args, pipe.address_layouts, strict=True)])
        for s in range(pipe.stages - 1):
            state = self._step(pipe, outer, state, _c(s), ub, step, signed, ring_base)
            self.cp_commit()
        n = len(init)
        first = [lb, *init, _c(0), state[0], *(x for regs in state[1] for x in regs)]  # iv, carried, slot, issue state
        heads, header, loop, exit_ = self.enter_loop(("pfor.header", "pfor.body", "pfor.exit"), first)
        iv, phis, slot, f_iv = heads[0], heads[1 : n + 1], heads[n + 1], heads[n + 2]
        rest = iter(heads[n + 3 :])
        f_addr = [[next(rest) for _ in regs] for regs in state[1]]
        cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
        self.b.cbranch(cmp("<", iv, ub), loop, exit_)
        self.b.position_at_end(loop)
        self.scopes.append({})
        self._unflat([iv, *phis], body.args, [None, *lays])
        self.cp_wait(pipe.stages - 2)
        self.barrier()
        last = _c(pipe.stages - 1)
        write = self.b.select(self.b.icmp_unsigned("==", slot, _c(0)), last, self.b.sub(slot, _c(1)))
        nxt_state = self._step(pipe, outer, (f_iv, f_addr), write, ub, step, signed, ring_base)
        self.cp_commit()
        self._rings[op] = (slot, ring_base)
        self.lower_block([o for o in body.ops if o is not body.terminator])
        nxt = self._flat(body.terminator.operands, lays)
        self.scopes.pop()
        back = [(iv, self.b.add(iv, step)), *zip(phis, nxt, strict=True)]
        back.append((slot, self.b.select(self.b.icmp_unsigned("==", slot, last), _c(0), self.b.add(slot, _c(1)))))
        back.append((f_iv, nxt_state[0]))
        for ps, regs in zip(f_addr, nxt_state[1], strict=True):
            back.extend(zip(ps, regs, strict=True))
        self.close_loop(header, exit_, back)
        self.cp_wait(0)
        self.smem_base = saved_base
        self._unflat(phis, op.results, lays)
