"""sort and gather for the cuda lowering.

sort runs the bitonic network (the op's definition, compiler/interp/semantics.py) on the tile where it
sits. Each bit of a position along the sorted axis is carried by one bit of the layout: a register bit
(the compare-exchange partner is another register of the same thread), a lane bit (the partner is in
another lane of the warp: one shfl.sync.bfly per register, both sides compute the same swap and each keeps
its half) or a warp bit (the partner is in another warp: the registers go through shared memory, one
barrier before the reads). A step's direction (bit `stage` of the position) comes from a register bit (a
constant) or from the lane or warp id. So a row that a warp holds sorts without shared memory at all.

gather stores the source tile to shared memory (each element once), syncs, and each thread loads the
elements its indices name; an index out of range reads 0.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import elem_type
from . import ops
from .layouts import Layout, blocked


def axis_bits(lay: Layout, axis: int) -> list[tuple[str, int]] | None:
    """For each bit j of a position along `axis`, where the layout carries it: ("reg" | "lane" | "warp",
    bit index); None when some bit's basis is not the unit step 2^j along `axis` alone."""
    n = lay.shape[axis]
    out = []
    for j in range(n.bit_length() - 1):
        want = tuple((1 << j) if d == axis else 0 for d in range(len(lay.shape)))
        found = [(kind, i) for kind, bases in (("reg", lay.reg), ("lane", lay.lane), ("warp", lay.warp))
                 for i, b in enumerate(bases) if b == want]  # fmt: skip
        if len(found) != 1:
            return None
        out.append(found[0])
    for bases in (lay.reg, lay.lane, lay.warp):
        if any(b[axis] and sum(1 for x in b if x) > 1 for b in bases):
            return None
    return out


def sort_layout(src: Layout, axis: int, num_warps: int) -> Layout:
    """The layout a sort runs in: its operand's when that carries each axis bit on one bit, else blocked
    with the axis in registers first, then lanes, then warps."""
    if axis_bits(src, axis) is not None:
        return src
    rank = len(src.shape)
    order = (axis,) + tuple(d for d in range(rank - 1, -1, -1) if d != axis)
    return blocked(src.shape, num_warps, vec=4, order=order)


class SortLowering:
    def op_sort(self, op: Operation) -> None:
        axis, desc = op.attrs["axis"], bool(op.attrs.get("descending", False))
        x = op.operands[0]
        e = elem_type(x.type)
        lay = self.layout_of(op.results[0])
        self.define(op.results[0], lay, self.sort_values(lay, axis, list(self.get(x, lay)), e, desc))

    def sort_values(self, lay: Layout, axis: int, vals: list, e, desc: bool) -> list:
        """The bitonic network on registers `vals` (in `lay`, which carries the axis bit by bit)."""
        bits = axis_bits(lay, axis)
        if bits is None:
            raise CompileError("cuda: internal: sort's layout does not carry its axis bit by bit")
        n = lay.shape[axis]
        for stage in range(1, n.bit_length()):
            for t in range(stage - 1, -1, -1):
                vals = self._sort_step(lay, vals, e, bits, stage, t, n, desc)
        return vals

    def _bit_of(self, where: tuple[str, int], r: int):
        """Bit `where` of this thread's register `r` position, as an i1 (a constant for register bits)."""
        kind, i = where
        if kind == "reg":
            return ir.Constant(ops.I1, r >> i & 1)
        src = self.lane if kind == "lane" else self.warp
        return self.b.trunc(self.b.lshr(src, ir.Constant(ops.I32, i)), ops.I1)

    def _sort_step(self, lay: Layout, vals: list, e, bits, stage: int, t: int, n: int, desc: bool) -> list:
        bld = self.b
        kind, i = bits[t]

        def down(r: int):  # this pair sorts down: `descending`, flipped in odd runs of 2^stage
            if stage >= len(bits):
                return ir.Constant(ops.I1, int(desc))
            b = self._bit_of(bits[stage], r)
            if isinstance(b, ir.Constant):
                return ir.Constant(ops.I1, int(desc) ^ b.constant)
            return bld.not_(b) if desc else b

        def gt(a, b):
            return ops.compare(bld, "gt", e, a, b)

        out = list(vals)
        if (
            kind == "reg"
        ):  # swap = lo > hi sorting up, hi > lo sorting down: one compare of (lo, hi) or (hi, lo)
            for r in range(lay.num_regs):
                if r >> i & 1:
                    continue
                p = r | 1 << i
                lo, hi = vals[r], vals[p]
                dn = down(r)
                if isinstance(dn, ir.Constant):
                    s = gt(hi, lo) if dn.constant else gt(lo, hi)
                else:
                    s = gt(bld.select(dn, hi, lo), bld.select(dn, lo, hi))
                out[r], out[p] = bld.select(s, hi, lo), bld.select(s, lo, hi)
            return out
        if kind == "lane":
            others = [self.shfl_xor(v, 1 << i) for v in vals]
        else:
            others = self._warp_partner(lay, vals, e, i)
        # Each side keeps `other` when the pair swaps. The lower side of a pair sorting up swaps when
        # mine > other, the upper one when other > mine; sorting down flips both: so one compare, its
        # operands ordered by (upper xor down).
        upper = self._bit_of((kind, i), 0)
        for r, (mine, other) in enumerate(zip(vals, others, strict=True)):
            dn = down(r)
            if isinstance(dn, ir.Constant):
                flip = bld.not_(upper) if dn.constant else upper
            else:
                flip = bld.xor(upper, dn)
            take = gt(bld.select(flip, other, mine), bld.select(flip, mine, other))
            out[r] = bld.select(take, other, mine)
        return out

    def _warp_partner(self, lay: Layout, vals: list, e, wbit: int) -> list:
        """Each register of the thread at warp ^ 2^wbit (same lane), through shared memory."""
        bld = self.b
        st = self.smem_type(e)
        eb = self.smem_bytes_of(st)
        nthreads = 32 << len(lay.warp)
        self.shm.claim(nthreads * lay.num_regs * eb)
        mine = bld.mul(self.tid, ir.Constant(ops.I32, eb))
        for r, v in enumerate(vals):
            self.smem_store(bld.add(mine, ir.Constant(ops.I32, r * nthreads * eb)), v, e)
        self.barrier()
        partner = bld.xor(self.tid, ir.Constant(ops.I32, 32 << wbit))
        theirs = bld.mul(partner, ir.Constant(ops.I32, eb))
        out = [
            self.smem_load(bld.add(theirs, ir.Constant(ops.I32, r * nthreads * eb)), e)
            for r in range(len(vals))
        ]
        self.shm.released()
        return out

    # ---- gather --------------------------------------------------------------------------------

    def op_gather(self, op: Operation) -> None:
        src, idx = op.operands
        axis = op.attrs["axis"]
        bld = self.b
        e, ie = elem_type(src.type), elem_type(idx.type)
        st = self.smem_type(e)
        eb = self.smem_bytes_of(st)
        shape = src.type.shape
        strides, numel = self._strides(shape, 0)
        slay = self.layout_of(src)
        svals = self.get(src, slay)
        self.shm.claim(((numel * eb + 15) // 16) * 16)
        base = bld.mul(self._base_index(slay, strides), ir.Constant(ops.I32, eb))
        for r in self.unique_regs(slay):  # replicas write the same value
            off = bld.add(base, ir.Constant(ops.I32, self._reg_index(slay, r, strides) * eb))
            self.smem_store(off, svals[r], e)
        self.barrier()
        lay = self.layout_of(op.results[0])
        ivals = self.get(idx, lay)
        tc = self.thread_coord(lay)
        n = shape[axis]
        it = ops.reg_type(ie)
        zero = ops.const(e, 0)
        out = []
        for r in range(lay.num_regs):
            rc = lay.reg_coord(r)
            k = ivals[r]
            ok = (
                bld.icmp_unsigned("<", k, ir.Constant(it, n))
                if not ie.is_signed
                else bld.and_(
                    bld.icmp_signed(">=", k, ir.Constant(it, 0)), bld.icmp_signed("<", k, ir.Constant(it, n))
                )
            )
            k32 = bld.trunc(k, ops.I32) if it.width > 32 else (bld.zext(k, ops.I32) if it.width < 32 else k)
            k32 = bld.select(ok, k32, ir.Constant(ops.I32, 0))
            el = ir.Constant(ops.I32, 0)
            for d in range(len(shape)):
                c = k32 if d == axis else bld.add(tc[d], ir.Constant(ops.I32, rc[d]))
                el = bld.add(el, bld.mul(c, ir.Constant(ops.I32, strides[d])))
            v = self.smem_load(bld.mul(el, ir.Constant(ops.I32, eb)), e)
            out.append(bld.select(ok, v, zero))
        self.shm.released()
        self.define(op.results[0], lay, out)
