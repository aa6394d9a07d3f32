"""Software-pipelined `for` loops for the cuda lowering (the plan comes from backends/cuda/passes/gpu_pipeline.py).

The planned loads are copied by cp.async into a ring of `stages` shared buffers: a prologue issues
iterations 0..A-1 (A = pipe.ahead), and iteration i waits for its own group, syncs the block and runs its dots
straight from slot i % S. Rings that wgmma reads (A = S-1) are refilled before that: the sync also frees the
slot read in iteration i-1, and iteration i+A goes into it. Rings that only mma.sync reads (A = S, one slot
fewer for the same depth; pipe.late) are refilled after the body, behind a second sync, with iteration
i+A into the slot just read, as Triton does. The address state of iteration i+A (induction variable and carried
address tiles) is carried in extra phis; copies of iterations past the end are not issued.

Rings that wgmma reads hold swizzled tiles (swizzle.py) and each thread fences its copies into the
async proxy before the block syncs; mma.sync's ldmatrix reads swizzled tiles too, with no fence. A loop with one wgmma dot has that dot issue the copies, after its
wgmma group so that the tensor cores start first: before waiting for the group, or, where the loop
leaves the group in flight (pipe.pending), after waiting for the previous one and syncing the block
(the slot it refills is the one that group read); the accumulator is waited for after the loop.
A wgmma operand defined before the loop that would be staged from registers every iteration (flash
attention's Q) is staged once instead, into a swizzled tile after the ring (wgmma.py stage_invariants),
and a later loop of the same block that would stage the same value at the same place reads it from there
when no shared memory was reserved in between (the causal attention's second loop).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Operation
from ...ir.types import elem_type
from . import ops
from .layouts import WgmmaSpec
from .plan import LoopPipeline, PipeLoad
from .swizzle import align, constant_delta, swizzled


def thread_coords(lay) -> list[tuple[int, ...]]:
    """Every thread's coordinate contribution (Layout.thread_coord), over every lane and warp of the layout."""
    return sorted({lay.thread_coord(lane, warp) for warp in range(1 << len(lay.warp)) for lane in range(1 << len(lay.lane))})


I64 = ir.IntType(64)


def _c(x: int) -> ir.Constant:
    return ir.Constant(ops.I32, x)


class PipelineLowering:
    def op_load(self, op: Operation) -> None:
        if op in self.pipes.by_load:
            return  # lives in a ring; its dot reads it from there
        super().op_load(op)

    def ring_operand(self, op: Operation, index: int):
        got = self.ring_entry(op, index)
        if got is None:
            return None
        base, pl = got
        return base, pl.stride, pl.tile() if pl.swizzle else None, pl.contig

    def ring_entry(self, op: Operation, index: int) -> tuple[ir.Value, PipeLoad] | None:
        """The shared address (i32) of dot operand `index`'s tile in the slot of this iteration, and its
        ring entry; None when the operand comes from registers."""
        got = self.pipes.operand(op, index)
        if got is None:
            return None
        pipe, pl = got
        slot, ring_base = self._rings[pipe.loop]
        base = self.b.add(self._slot_start(pipe, pl, slot, ring_base), _c(pl.offset))
        return self.b.add(self.pb.ptrtoint(self.smem, ops.I32), base), pl

    def _apart(self, pipe: LoopPipeline) -> bool:
        return self.cg.rings_apart and not any(pl.load in self.tma for pl in pipe.loads)

    def _slot_start(self, pipe: LoopPipeline, pl: PipeLoad, slot, ring_base: int):
        """Where `slot` of the ring begins for `pl`, less pl.offset (i32, from the shared base): stage after stage,
        each holding every load's tile at its offset; or, with CudaOptions.rings_apart, each load's slots in
        a region of their own (the same bytes in all: the region of the load at offset o starts at S * o)."""
        if not self._apart(pipe):
            return self.b.add(self.b.mul(slot, _c(pipe.stage_bytes)), _c(ring_base))
        span = min((q.offset for q in pipe.loads if q.offset > pl.offset), default=pipe.stage_bytes) - pl.offset
        return self.b.add(self.b.mul(slot, _c(span)), _c(ring_base + (pipe.stages - 1) * pl.offset))

    # ---- instructions --------------------------------------------------------------------------

    def _asm(self, text: str, cons: str, args: list) -> None:
        fnty = ir.FunctionType(ir.VoidType(), [a.type for a in args])
        self.b.call(ir.InlineAsm(fnty, text, cons, side_effect=True), args)

    def cp_async(self, dst, src, nbytes: int, src_bytes, pred) -> None:
        """Copy `nbytes` global -> shared where `pred` holds (None: always); bytes past `src_bytes` are
        zero-filled."""
        kind = "cg" if nbytes == 16 else "ca"  # .cg (L2 only) exists for 16 bytes alone
        if pred is None:
            self._asm(f"cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,r,~{memory}", [dst, src, src_bytes])
            return
        self._asm(f"@$3 cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,r,b,~{memory}", [dst, src, src_bytes, pred])

    def _copy(self, dst, src, nbytes: int, mask, valid) -> None:
        """One chunk of a pipelined load: `mask` (None: all) zero-fills; an iteration past the loop's end
        (`valid` false) either copies nothing (predicated off) or, with CudaOptions.zero_fill_past_end,
        copies 0 bytes into its slot, never read, as Triton's pipeliner issues it: no predicate for ptxas to
        rebuild before every copy."""
        if self.cg.zero_fill_past_end:
            keep = valid if mask is None else self.b.and_(mask, valid)
            self.cp_async(dst, src, nbytes, self.b.select(keep, _c(nbytes), _c(0)), None)
            return
        size = _c(nbytes) if mask is None else self.b.select(mask, _c(nbytes), _c(0))
        self.cp_async(dst, src, nbytes, size, valid)

    def cp_commit(self) -> None:
        self._asm("cp.async.commit_group;", "~{memory}", [])

    def cp_wait(self, pending: int) -> None:
        self._asm(f"cp.async.wait_group {pending};", "~{memory}", [])

    def fence_async_shared(self) -> None:
        """Order this thread's shared-memory writes before later reads by the async proxy (wgmma)."""
        self._asm("fence.proxy.async.shared::cta;", "~{memory}", [])

    def swizzled_offset(self, tile, r, c):
        """Byte offset (i32) of element (r, c) of a SwizzledTile, from i32 row and column values."""
        bld = self.b
        return swizzled(tile, ops.Expr(bld, r), ops.Expr(bld, c) * tile.ebytes).v

    def _regs(self, v, lay) -> list:
        got = self.get(v, lay)
        return list(got) if lay is not None else [got]

    # ---- the loop ------------------------------------------------------------------------------

    def _issue(self, pipe: LoopPipeline, slot, valid, ring_base: int) -> None:
        """cp.async the planned loads of the iteration whose values the current scope holds into `slot`."""
        bld, pb = self.b, self.pb
        smem = pb.ptrtoint(self.smem, ops.I32)
        self.tma_expect(pipe, slot, valid)
        for pl in pipe.loads:
            stage = bld.add(smem, self._slot_start(pipe, pl, slot, ring_base))
            if self.cg.commit_per_load and pl is not pipe.loads[0]:
                self.cp_commit()  # the group of the load before (the last one's, by the caller)
            if pl.load in self.tma:  # a host descriptor's box: one TMA copy per swizzle block (tma.py)
                self.tma_copy(pipe, pl, stage, slot, valid)
                continue
            if pl.swizzle:
                self._issue_swizzled(pl, stage, valid)
                continue
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
                self._copy(dst, ptrs[r0], nbytes, None if mask is None else mask[r0], valid)

    def _issue_swizzled(self, pl: PipeLoad, stage, valid) -> None:
        """cp.async one load into its swizzled tile: 16-byte chunks along the contiguous dimension."""
        lay, ld, d = pl.layout, pl.load, pl.contig
        tile = pl.tile()
        ptrs = self.get(ld.operands[0], lay)
        mask = self.get(ld.operands[1], lay) if len(ld.operands) > 1 else None
        tc = self.thread_coord(lay)
        bld = self.b
        base = bld.add(stage, _c(pl.offset))
        nbytes = pl.width * tile.ebytes
        unique = set(self.unique_regs(lay))
        threads = thread_coords(lay)
        made: list[tuple[int, int, ir.Value]] = []  # chunks whose swizzled offset was computed in full
        for r0 in range(0, lay.num_regs, pl.width):
            if r0 not in unique:
                continue
            coord = lay.reg_coord(r0)
            cr, cc = coord[1 - d], coord[d]
            # a chunk a constant away from one computed already, in every thread (rows a swizzle period
            # apart, or whole swizzle blocks): that one plus the constant, which ptxas folds into the
            # address (Triton's [r + 0x800]); else the swizzle in full
            dst = next((bld.add(ref, _c(delta)) for rr, rc, ref in made
                        if (delta := constant_delta(tile, threads, d, (rr, rc), (cr, cc))) is not None), None)  # fmt: skip
            if dst is None:
                row = bld.add(tc[1 - d], _c(cr))
                col = bld.add(tc[d], _c(cc))
                dst = bld.add(base, self.swizzled_offset(tile, row, col))
                made.append((cr, cc, dst))
            self._copy(dst, ptrs[r0], nbytes, None if mask is None else mask[r0], valid)

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

    @staticmethod
    def _uniform_advance(pipe: LoopPipeline, j: int) -> tuple[int, int] | None:
        """For carried address tile `j` (a body argument index) that every iteration advances by one
        constant for all its elements (`addptr arg, c`, the tutorials' `a_ptrs += BLOCK_K * stride_ak` with
        a unit stride): (c, its pointee's bytes); else None. A step known only at run time is left to LLVM,
        which already shares one induction variable among the tile's pointers there (and hiding it cost
        flash attention registers)."""
        body = pipe.loop.regions[0].block
        y = body.terminator.operands[j - 1].owner
        if not isinstance(y, Operation) or y.name != "addptr" or y.operands[0] is not body.args[j]:
            return None
        v = y.operands[1]
        while isinstance(v.owner, Operation) and v.owner.name in ("broadcast", "expand_dims"):
            v = v.owner.operands[0]
        o = v.owner if isinstance(v.owner, Operation) else None
        if o is None or o.name != "constant" or not isinstance(o.attrs.get("value"), int):
            return None
        return o.attrs["value"], max(8, elem_type(body.args[j].type).pointee.bits) // 8  # i1 is a byte in memory

    def _advanced(self, regs: list, d) -> list:
        """Each pointer of `regs` plus byte offset `d` (i64)."""
        return [self.b.gep(r, [d], source_etype=ops.I8) for r in regs]

    def _opaque_step(self, d, adv):
        """d + the advance's bytes, through an identity asm. Seen through, LLVM's loop strength reduction
        turns `base + d` back into one induction variable per pointer, each advanced every iteration and
        each copy's address rebuilt from it (the batched matmul's loop: 199 SASS instructions, 178 with
        this; Triton's 165); hidden, ptxas keeps one running offset and a base per copy, as Triton's."""
        step = ir.Constant(I64, adv[0] * adv[1])
        fnty = ir.FunctionType(I64, [I64])
        return self.b.call(ir.InlineAsm(fnty, "mov.b64 $0, $1;", "=l,l"), [self.b.add(d, step)])

    def pipelined_for(self, op: Operation, pipe: LoopPipeline) -> None:  # noqa: PLR0915 - one loop, in order
        lb, ub, step = (self.scalar(v) for v in op.operands[:3])
        body = op.regions[0].block
        iters = body.args[1:]
        lays = self._lays(iters)
        init = self._flat(op.operands[3:], lays)
        signed = elem_type(op.operands[0].type).is_signed
        outer = list(self.scopes)
        saved_base = self.shm.base
        ring_base = align(saved_base) if any(pl.swizzle for pl in pipe.loads) else saved_base  # swizzle period
        invariant = self.invariant_operands(op)  # wgmma operands staged once, after the ring (wgmma.py)
        ring_end = ring_base + (align(pipe.ring_bytes) if invariant else pipe.ring_bytes)
        end = ring_end + sum(align(t.nbytes) for _, _, t in invariant)
        reuse = self.staged_still_there(invariant, ring_end)  # before this loop's own reservation
        bars, end = end, end + self.tma_barrier_bytes(pipe)  # TMA's mbarriers, one per stage (tma.py)
        self.shm.claim(end - saved_base)  # earlier scratch users may still read what the copies (or staging) overwrite
        self.stage_invariants(invariant, ring_end, reuse)
        self.tma_init(op, pipe, bars)
        with self.shm.scoped(end):  # the body's scratch lies past the rings, staged tiles and mbarriers
            state = (lb, [self._regs(op.operands[2 + j], lay) for j, lay in zip(pipe.address_args, pipe.address_layouts, strict=True)])
            for s in range(pipe.ahead):
                state = self._step(pipe, outer, state, _c(s), ub, step, signed, ring_base)
                self.cp_commit()
            n = len(init)
            # an address tile every iteration advances uniformly is its entry registers plus one carried
            # byte offset; any other, its registers
            advs = [self._uniform_advance(pipe, j) if self.cg.uniform_advance_offset else None for j in pipe.address_args]
            carried = [[ir.Constant(I64, 0)] if adv is not None else regs for adv, regs in zip(advs, state[1], strict=True)]
            first = [lb, *init, _c(0), state[0], *(x for regs in carried for x in regs)]  # iv, carried, slot, issue state
            heads, header, loop, exit_ = self.enter_loop(("pfor.header", "pfor.body", "pfor.exit"), first)
            iv, phis, slot, f_iv = heads[0], heads[1 : n + 1], heads[n + 1], heads[n + 2]
            rest = iter(heads[n + 3 :])
            f_phis = [[next(rest) for _ in regs] for regs in carried]
            cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
            self.b.cbranch(cmp("<", iv, ub), loop, exit_)
            self.b.position_at_end(loop)
            f_addr = [self._advanced(entry, ps[0]) if adv is not None else ps
                      for adv, entry, ps in zip(advs, state[1], f_phis, strict=True)]  # fmt: skip
            self.scopes.append({})
            self._unflat([iv, *phis], body.args, [None, *lays])
            self.cp_wait((pipe.ahead - 1) * (len(pipe.loads) if self.cg.commit_per_load else 1))
            self.tma_wait(pipe, slot, iv, lb, step)
            if any(isinstance(self.plan.mma.get(pl.dot), WgmmaSpec) for pl in pipe.loads):
                self.fence_async_shared()
            self.barrier()
            last = _c(pipe.stages - 1)
            over = self.b.add(slot, _c(pipe.ahead))  # (slot + ahead) % stages, ahead < stages
            write = self.b.select(self.b.icmp_unsigned("<", over, _c(pipe.stages)), over, self.b.sub(over, _c(pipe.stages)))
            issued: list = []

            def issue() -> None:
                issued.append(self._step(pipe, outer, (f_iv, f_addr), write, ub, step, signed, ring_base))
                self.cp_commit()

            for pl in pipe.loads:
                self._pending[pl.dot] = pipe.pending
            wg_dots = {pl.dot for pl in pipe.loads if isinstance(self.plan.mma.get(pl.dot), WgmmaSpec)}
            chained = self._chained_wgmma(op) if len(wg_dots) > 1 and self.cg.issue_after_last_dot else None
            if len(wg_dots) == 1:  # issued by the dot right after its wgmma group (the tensor cores start first)
                self._deferred_issue[wg_dots.pop()] = issue
            elif chained is not None:
                first_dot, last_dot, carried = chained
                self._deferred_issue[last_dot] = issue  # each group of iteration i-1 was waited before
                if carried is not None:  # the last group runs on into the next iteration, waited with the first
                    self._pending[last_dot] = 1
                    self._wait_also[first_dot] = carried
            elif not pipe.late:
                issue()
            self._rings[op] = (slot, ring_base)
            self.lower_block([o for o in body.ops if o is not body.terminator])
            if not issued:
                if pipe.late:  # every warp has read this iteration's slot before its copies refill it
                    self.barrier()
                issue()
            nxt_state = issued[0]
            nxt = self._flat(body.terminator.operands, lays)
            self.scopes.pop()
            back = [(iv, self.b.add(iv, step)), *zip(phis, nxt, strict=True)]
            back.append((slot, self.b.select(self.b.icmp_unsigned("==", slot, last), _c(0), self.b.add(slot, _c(1)))))
            back.append((f_iv, nxt_state[0]))
            for adv, ps, regs in zip(advs, f_phis, nxt_state[1], strict=True):
                back.extend([(ps[0], self._opaque_step(ps[0], adv))] if adv is not None else zip(ps, regs, strict=True))
            self.close_loop(header, exit_, back)
            self.cp_wait(0)
            self.tma_done(pipe)
        self.remember_staged(invariant, ring_end)
        if pipe.pending or (chained is not None and chained[2] is not None):
            phis = self._drain_mma(op, phis, lays)
        self._unflat(phis, op.results, lays)

    def _chained_wgmma(self, op: Operation):
        """For a pipelined loop whose body runs several wgmma dots (flash attention: S = Q K^T, then
        O += P V): (first, last, carried) with the first and last of them in body order, or None when
        there are fewer than two. The copies are issued after the last dot's group. `carried` is the
        loop-carried value (a body argument) that the last dot's result becomes, when that result only
        goes to the yield and the argument is read only by ops after the first dot: then the last group
        may stay in flight into the next iteration and be waited for by the first dot's wait (its
        registers pass through it), as Triton's schedule does; None when it may not."""
        body = op.regions[0].block
        dots = [o for o in body.ops if o.name == "dot" and isinstance(self.plan.mma.get(o), WgmmaSpec)]
        f16_acc = any(self.plan.mma[o].acc != "f32" for o in dots)  # packed halves: never read in flight
        if len(dots) < 2 or not self.cg.mma_in_flight_across or f16_acc:
            return (dots[0], dots[-1], None) if len(dots) >= 2 else None
        first, last = dots[0], dots[-1]
        term = body.terminator
        uses = [u for o in op.walk() if o is not op for u in o.operands if u is last.result]
        at = [i for i, v in enumerate(term.operands) if v is last.result]
        if len(at) != 1 or len(uses) != 1:
            return first, last, None
        arg = body.args[at[0] + 1]
        order = {o: n for n, o in enumerate(body.ops)}
        for o in op.walk():
            if o is op or not any(u is arg for u in o.operands):
                continue
            top = o
            while top.parent is not body:  # the op of the body that holds the use
                top = top.parent.parent.parent
            if order[top] <= order[first]:
                return first, last, None
        return first, last, (arg, self.layout_of(arg))

    def _drain_mma(self, op: Operation, flat: list, lays: list) -> list:
        """The loop results with the in-flight wgmma group waited for: the carried accumulator's
        registers are passed through wgmma.wait_group 0, so nothing reads them before it."""
        body = op.regions[0].block
        dots = {pl.dot for pl in self.pipes.loops[op].loads}
        out, at = list(flat), 0
        for v, lay in zip(body.terminator.operands, lays, strict=True):
            n = lay.num_regs if lay is not None else 1
            if v.owner in dots:
                out[at : at + n] = self.wgmma_wait(out[at : at + n], 0)
            at += n
        return out
