"""Scans for the cuda lowering: an inclusive scan in three levels over scan_layout's shape (a thread's
registers, the lanes along the axis with shuffles, the warps through shared memory), with a built-in combine
(tl.cumsum, tl.cumprod) or the user's combine region (tl.associative_scan), one register per operand.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import elem_type
from . import ops
from .layouts import Layout


class ScanLowering:
    def op_scan(self, op: Operation) -> None:
        kind, e = op.attrs["kind"], elem_type(op.operands[0].type)
        self._scan(op, lambda a, b: (self.combine(kind, e, a[0], b[0], False),))

    def op_scan_with(self, op: Operation) -> None:
        self._scan(op, lambda a, b: tuple(self.combine_region(op, a, b)))

    def _scan(self, op: Operation, fn) -> None:
        """Inclusive scan in three levels over scan_layout's shape: each thread scans its chunk of
        registers; the chunk totals are scanned across the lanes along the axis (Hillis-Steele with
        shfl.up, or shfl.down when reversed); the warps' totals go through shared memory and each thread
        folds those of the warps before its own. A thread's prefix (earlier warps, then earlier lanes) is
        combined on the left of each of its values, so a combine need only be associative. Reversed
        scans run the same steps mirrored (later elements count as earlier)."""
        axis, rev = op.attrs["axis"], bool(op.attrs.get("reverse"))
        lay = self.layout_of(op.results[0])
        vals = [list(self.get(x, lay)) for x in op.operands]
        elems = [elem_type(x.type) for x in op.operands]
        vals = self.scan_values(lay, axis, rev, vals, elems, fn)
        for res, v in zip(op.results, vals, strict=True):
            self.define(res, lay, v)

    def scan_values(self, lay: Layout, axis: int, rev: bool, vals: list[list], elems: list, fn) -> list[list]:
        """_scan's levels on registers: `vals` per operand (in `lay`), scanned in place and returned.

        A layout may hold the axis in segments (scan_layout with `max_chunk`: a thread's chunk, then the lanes,
        then the warps, then again, as Triton's blocked layout does, so that accesses coalesce): register bits
        along the axis above every lane and warp step. Each segment is scanned by the three levels as a
        group of its own; then each takes the totals of the segments before it on its left (level 4)."""
        bld = self.b
        lane_bits = _axis_bits(lay.lane, axis)
        warp_bits = _axis_bits(lay.warp, axis)
        if lane_bits is None or warp_bits is None:
            raise CompileError("cuda: internal: scan layout splits the axis over non-contiguous lanes or warps")
        steps = [b[axis] for b in (*lay.lane, *lay.warp) if b[axis]]
        along = sum(1 << i for i, bs in enumerate(lay.reg) if bs[axis] and (not steps or bs[axis] < min(steps)))
        seg = sum(1 << i for i, bs in enumerate(lay.reg) if bs[axis] and steps and bs[axis] > min(steps))
        if seg and any(lay.reg[i][axis] < max(steps) for i in range(len(lay.reg)) if seg >> i & 1):
            raise CompileError("cuda: internal: scan layout interleaves registers with lanes or warps")
        off_axis = sum(1 << i for i, bs in enumerate(lay.reg) if not bs[axis])
        groups: dict[int, list[int]] = {}
        for r in range(lay.num_regs):
            groups.setdefault(r & ~along, []).append(r)
        keys = sorted(groups)
        # level 1: each thread's chunk, in scan order
        totals = []
        for key in keys:
            regs = sorted(groups[key], key=lambda r: lay.reg_coord(r)[axis], reverse=rev)
            acc = tuple(v[regs[0]] for v in vals)
            for r in regs[1:]:
                acc = fn(acc, tuple(v[r] for v in vals))
                for v, x in zip(vals, acc, strict=True):
                    v[r] = x
            totals.append(acc)
        prefix = [None] * len(keys)  # per group: (valid i1, tuple) of everything before this thread
        # level 2: lanes
        if lane_bits[1]:
            first, count = lane_bits
            pos = self._axis_pos(self.lane, first, count, rev)
            mode = "down" if rev else "up"
            incl = list(totals)
            for j in range(count):
                d = 1 << j
                take = bld.icmp_unsigned(">=", pos, ir.Constant(ops.I32, d))
                for g, t in enumerate(incl):
                    other = tuple(self.shfl(x, mode, d << first) for x in t)
                    both = fn(other, t)
                    incl[g] = tuple(bld.select(take, x, y) for x, y in zip(both, t, strict=True))
            has = bld.icmp_unsigned(">=", pos, ir.Constant(ops.I32, 1))
            for g, t in enumerate(incl):
                prefix[g] = (has, tuple(self.shfl(x, mode, 1 << first) for x in t))
            totals = incl  # the last lane along the axis holds its warp's total
        # level 3: warps
        seg_totals = None
        if warp_bits[1]:
            seg_totals = self._scan_warps(lay, axis, rev, lane_bits, warp_bits, totals, prefix, elems, fn,
                                          [(_packed(k, off_axis), _packed(k, seg)) for k in keys], seg)  # fmt: skip
        elif seg:
            seg_totals = [self._last_lanes(t, lane_bits, rev) for t in totals]
        # each value with its thread's prefix on the left
        for g, key in enumerate(keys):
            if prefix[g] is None:
                continue
            has, p = prefix[g]
            for r in groups[key]:
                mine = tuple(v[r] for v in vals)
                both = fn(p, mine)
                for v, x, y in zip(vals, both, mine, strict=True):
                    v[r] = bld.select(has, x, y)
        if seg:
            self._carry_segments(lay, axis, rev, vals, fn, keys, groups, seg, seg_totals)
        return vals

    def _last_lanes(self, t: tuple, lane_bits, rev: bool) -> tuple:
        """`t` of the last lane along the axis (in scan order), in every lane: each lane bit along the axis in
        turn, a lane short of it takes its partner's."""
        bld = self.b
        first, count = lane_bits
        for j in range(count):
            mine = bld.and_(bld.lshr(self.lane, ir.Constant(ops.I32, first + j)), ir.Constant(ops.I32, 1))
            pull = bld.icmp_unsigned("==", mine, ir.Constant(ops.I32, 1 if rev else 0))
            t = tuple(bld.select(pull, self.shfl_xor(x, 1 << (first + j)), x) for x in t)
        return t

    def _carry_segments(self, lay: Layout, axis: int, rev: bool, vals, fn, keys, groups, seg: int, seg_totals):
        """Level 4: each segment takes the totals of the segments before it (in scan order) on its left."""
        by_other: dict[int, list[int]] = {}
        for g, key in enumerate(keys):
            by_other.setdefault(key & ~seg, []).append(g)
        for gs in by_other.values():
            running = None
            for g in sorted(gs, key=lambda g: lay.reg_coord(keys[g])[axis], reverse=rev):
                if running is not None:
                    for r in groups[keys[g]]:
                        both = fn(running, tuple(v[r] for v in vals))
                        for v, x in zip(vals, both, strict=True):
                            v[r] = x
                running = seg_totals[g] if running is None else fn(running, seg_totals[g])

    def _axis_pos(self, src, first: int, count: int, rev: bool):
        """A thread's position along the scanned axis among `count` lane (or warp) bits from bit `first`,
        counted from the end when reversed."""
        bld = self.b
        pos = bld.and_(bld.lshr(src, ir.Constant(ops.I32, first)), ir.Constant(ops.I32, (1 << count) - 1))
        return bld.sub(ir.Constant(ops.I32, (1 << count) - 1), pos) if rev else pos

    def _scan_warps(self, lay: Layout, axis: int, rev: bool, lane_bits, warp_bits, totals, prefix, elems, fn,
                    slots: list[tuple[int, int]], seg: int = 0):
        """The last lane along the axis of each warp stores its warp's total per group (one shared-memory
        plane per tuple member); after a barrier every thread folds the totals of the warps before it, in
        scan order, and puts them on the left of its lane prefix. `slots`: per group, its register of the
        reduced layout and its segment (`seg`: the segment bits). With segments, returns each group's total
        (every warp's, folded in scan order); else None."""
        bld = self.b
        res_lay = lay.without_dim(axis)
        nw = 1 << warp_bits[1]
        nseg = 1 << bin(seg).count("1")
        numel, strides, base, at = self._warp_planes(res_lay, nw * nseg, elems)
        wpos = self._axis_pos(self.warp, warp_bits[0], warp_bits[1], rev)
        phys = self._axis_pos(self.warp, warp_bits[0], warp_bits[1], False)
        last_lane = ir.Constant(ops.I32, (1 << lane_bits[1]) - 1)
        lpos = self._axis_pos(self.lane, lane_bits[0], lane_bits[1], rev) if lane_bits[1] else last_lane
        writer = bld.icmp_unsigned("==", lpos, last_lane)
        offs = self._store_partials(
            writer, phys, numel, at, elems,
            ((bld.add(base, ir.Constant(ops.I32, self._reg_index(res_lay, reg, strides) + s * nw * numel)), t)
             for t, (reg, s) in zip(totals, slots, strict=True)))  # fmt: skip
        self.barrier()
        seg_totals = [] if seg else None
        for g, el in enumerate(offs):
            acc = None  # (valid, tuple) of the warps before this one so far
            whole = None  # every warp's total, folded in scan order (segments only)
            for w in reversed(range(nw)) if rev else range(nw):
                before = bld.icmp_unsigned("<", ir.Constant(ops.I32, nw - 1 - w if rev else w), wpos)
                slot = bld.add(el, ir.Constant(ops.I32, w * numel))
                t = tuple(self.smem_load(at(k, slot), e) for k, e in enumerate(elems))
                if seg:
                    whole = t if whole is None else fn(whole, t)
                if acc is None:
                    acc = (before, t)
                    continue
                has, a = acc
                both = fn(a, t)
                merged = tuple(bld.select(has, x, y) for x, y in zip(both, t, strict=True))
                acc = (bld.or_(has, before), tuple(bld.select(before, m, x) for m, x in zip(merged, a, strict=True)))
            if seg:
                seg_totals.append(whole)
            has_w, wp = acc
            if prefix[g] is None:
                prefix[g] = acc
                continue
            has_l, lp = prefix[g]
            both = fn(wp, lp)
            p = tuple(bld.select(has_w, bld.select(has_l, x, w), y) for x, w, y in zip(both, wp, lp, strict=True))
            prefix[g] = (bld.or_(has_w, has_l), p)
        self.shm.released()
        return seg_totals


def _axis_bits(bases, axis: int) -> tuple[int, int] | None:
    """(first bit, count) of the bits whose basis steps along `axis`, when they are consecutive bits with
    doubling steps (lane or warp bits of scan_layout); (0, 0) when none do; None otherwise."""
    bits = [i for i, b in enumerate(bases) if b[axis]]
    if not bits:
        return (0, 0)
    steps = [bases[i][axis] for i in bits]
    if bits != list(range(bits[0], bits[0] + len(bits))) or any(b != steps[0] << j for j, b in enumerate(steps)):
        return None
    if any(x for i in bits for d, x in enumerate(bases[i]) if d != axis):
        return None
    return (bits[0], len(bits))


def _packed(key: int, mask: int) -> int:
    """The bits of `key` that `mask` selects, packed in order: a group's register of the reduced layout (the
    bits off the axis), or its segment (the segment bits)."""
    out, j = 0, 0
    for i in range(mask.bit_length()):
        if mask >> i & 1:
            out |= (key >> i & 1) << j
            j += 1
    return out
