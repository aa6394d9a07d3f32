"""Reductions for the cuda lowering, and the combines and shuffles that scans (scan.py) share.

Reductions combine within a thread's registers, then across lanes with butterfly shuffles
(llvm.nvvm.shfl.sync.bfly), then across warps through shared memory; the result is left in the
slice of the operand's layout, replicated across the reduced threads. reduce_with takes the same path
with its combiner region lowered inline, one register per operand moving together.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import ScalarType, TileType, elem_type
from . import ops
from .layouts import Layout


class ReduceLowering:
    # ---- combine functions ---------------------------------------------------------------------

    def combine(self, kind: str, e, a, b, nan: bool):
        """Combine two partial results; for argmax/argmin a and b are (value, index) pairs."""
        bld = self.b
        if kind in ("argmax", "argmin"):
            return self._arg_combine(kind, e, a, b)
        if kind == "sum":
            return ops.binary(bld, "add", e, a, b, {}, self.cg.fp_fusion)
        if kind == "prod":
            return ops.binary(bld, "mul", e, a, b, {}, self.cg.fp_fusion)
        if kind in ("max", "min"):
            return ops.binary(bld, "maximum" if kind == "max" else "minimum", e, a, b, {"propagate_nan": nan}, self.cg.fp_fusion)
        if kind in ("and", "or", "xor"):
            return ops.binary(bld, kind, e, a, b, {}, self.cg.fp_fusion)
        raise CompileError(f"cuda: unknown reduction {kind!r}")

    def _arg_combine(self, kind: str, e, a, b):
        """(value, index) pairs ordered by value, then index, as Triton's argmax combine: floats come here
        without NaN (arg_reduce_values marks a NaN partial by its index first)."""
        bld = self.b
        (av, ai), (bv, bi) = a, b
        better = ">" if kind == "argmax" else "<"
        lower_idx = bld.icmp_signed("<", bi, ai)
        if e.is_float:
            take = bld.or_(bld.fcmp_ordered(better, bv, av), bld.and_(bld.fcmp_ordered("==", bv, av), lower_idx))
        else:
            cmp = bld.icmp_signed if e.is_signed else bld.icmp_unsigned
            take = bld.or_(cmp(better, bv, av), bld.and_(cmp("==", bv, av), lower_idx))
        return bld.select(take, bv, av), bld.select(take, bi, ai)

    def _arg_combine_later(self, kind: str, e, a, b):
        """The argmax/argmin combine where b's index is known to be above a's: a tie keeps a, so b is taken
        only when strictly better; for floats, a NaN b never, and any number replaces a NaN a."""
        bld = self.b
        (av, ai), (bv, bi) = a, b
        better = ">" if kind == "argmax" else "<"
        if e.is_float:  # unordered-or-better, and b a number
            take = bld.and_(bld.fcmp_unordered(better, bv, av), bld.fcmp_ordered("ord", bv, bv))
        else:
            take = (bld.icmp_signed if e.is_signed else bld.icmp_unsigned)(better, bv, av)
        return bld.select(take, bv, av), bld.select(take, bi, ai)

    # ---- shuffles ------------------------------------------------------------------------------

    def shfl_xor(self, v, mask: int):
        return self.shfl(v, "bfly", mask)

    def shfl(self, v, mode: str, arg: int):
        """shfl.sync of any register type (split into 32-bit words): mode bfly (lane ^ arg), up (lane - arg,
        a lane below the start keeps its own) or down (lane + arg, one past the end keeps its own)."""
        bld = self.b
        t = v.type
        fn = ops.intrinsic(self.module, f"llvm.nvvm.shfl.sync.{mode}.i32", ops.I32, [ops.I32] * 4)
        clamp = 0 if mode == "up" else 31

        def sh(x32):
            return bld.call(fn, [ir.Constant(ops.I32, -1), x32, ir.Constant(ops.I32, arg), ir.Constant(ops.I32, clamp)])

        if t == ops.I32:
            return sh(v)
        if t in (ops.F32,):
            return bld.bitcast(sh(bld.bitcast(v, ops.I32)), t)
        if t == ops.F16:
            return bld.bitcast(bld.trunc(sh(bld.zext(bld.bitcast(v, ops.I16), ops.I32)), ops.I16), t)
        if isinstance(t, ir.IntType) and t.width < 32:
            return bld.trunc(sh(bld.zext(v, ops.I32)), t)
        as64 = bld.bitcast(v, ops.I64) if t == ops.F64 else v
        lo = sh(bld.trunc(as64, ops.I32))
        hi = sh(bld.trunc(bld.lshr(as64, ir.Constant(ops.I64, 32)), ops.I32))
        r = bld.or_(bld.zext(lo, ops.I64), bld.shl(bld.zext(hi, ops.I64), ir.Constant(ops.I64, 32)))
        return bld.bitcast(r, t) if t == ops.F64 else r

    # ---- reduce --------------------------------------------------------------------------------
    # An element being reduced is a tuple of registers (the value; the value and its index for argmax;
    # one per operand for reduce_with) that moves through shuffles and shared memory together, and
    # `fn(a, b) -> tuple` combines two of them.

    def op_reduce(self, op: Operation) -> None:
        x = op.operands[0]
        kind, axis = op.attrs["kind"], op.attrs["axis"]
        nan = op.attrs.get("propagate_nan", False)
        e = elem_type(x.type)
        lay = self.layout_of(x)
        twins, done = self._arg_twins()
        if op in done:
            return  # reduced together with its twin (below)
        twin = twins.get(op)
        if kind in ("argmax", "argmin") or twin is not None:
            arg_op = op if kind in ("argmax", "argmin") else twin
            value_op = twin if arg_op is op else op
            self._arg_reduce(arg_op, value_op, lay, e)
            return
        vals = self.get(x, lay)
        out = self._reduce_parts(lay, axis, [(v,) for v in vals],
                                 lambda a, b: (self.combine(kind, e, a[0], b[0], nan),), [e])
        self._define_reduced(op.results, lay.without_dim(axis), [[p[0] for p in out]])

    def _arg_twins(self) -> tuple[dict, set]:
        """Pairs of reductions of one operand along one axis in one block, a max (min) that does not propagate
        NaN and an argmax (argmin): `tl.max(x, 1, return_indices=True)`, or both written out. Each is mapped
        to its twin; the later of a pair is also in the set returned. One reduction of (value, index) pairs
        gives both: the value at the first index of the maximum is the maximum, NaN only where all are."""
        known = getattr(self, "_twins", None)
        if known is not None:
            return known
        twins: dict = {}
        done: set = set()
        blocks, stack = [], [self.src.body.block]
        while stack:
            blk = stack.pop()
            blocks.append(blk)
            stack.extend(r.block for o in blk.ops for r in o.regions)
        for blk in blocks:
            seen: dict = {}
            for o in blk.ops:
                if o.name != "reduce" or o.attrs.get("propagate_nan"):
                    continue
                kind = o.attrs["kind"]
                base = kind[3:] if kind in ("argmax", "argmin") else kind
                if base not in ("max", "min"):
                    continue
                key = (o.operands[0], o.attrs["axis"], base, kind != base)
                other = seen.get((key[0], key[1], base, kind == base))
                if other is not None and other not in twins:
                    twins[other], twins[o] = o, other
                    done.add(o)
                    continue
                seen.setdefault(key, o)
        self._twins = (twins, done)
        return self._twins

    def _arg_reduce(self, arg_op: Operation, value_op: Operation | None, lay: Layout, e) -> None:
        """argmax/argmin as one reduction of (value, index) pairs; `value_op`, the twin max/min, if any, takes
        the values. Within a thread the registers are combined in index order (a tree of neighbours), so a tie
        keeps the earlier side and only a strictly better number replaces it (NaN never does, and is replaced by
        any number); across lanes and warps the plain combine orders by value, then index, a partial that is
        all NaN marked to lose (arg_nan_mark)."""
        kind, axis = arg_op.attrs["kind"], arg_op.attrs["axis"]
        out = self.arg_reduce_values(kind, e, lay, axis, self.get(arg_op.operands[0], lay))
        res_lay = lay.without_dim(axis)
        self._define_reduced(arg_op.results[:1], res_lay, [[p[1] for p in out]])
        if value_op is not None:
            self._define_reduced(value_op.results[:1], res_lay, [[p[0] for p in out]])

    def arg_reduce_values(self, kind: str, e, lay: Layout, axis: int, vals: list) -> list:
        """The (value, index) pairs of an argmax/argmin of registers `vals` (in `lay`) along `axis`, one per
        register of the result's layout."""
        tc = self.thread_coord(lay)[axis]
        idx = [self.b.add(tc, ir.Constant(ops.I32, lay.reg_coord(r)[axis])) for r in range(lay.num_regs)]
        parts = list(zip(vals, idx, strict=False))
        fn = lambda a, b: self._arg_combine(kind, e, a, b)  # noqa: E731
        seq = lambda a, b: self._arg_combine_later(kind, e, a, b)  # noqa: E731
        if not e.is_float:
            return self._reduce_parts(lay, axis, parts, fn, [e, I32_T], seq=seq, tree=True)

        def within(group: list[int]):  # CudaOptions.argmax_passes == 2 and four registers or more
            if self.cg.argmax_passes != 2 or len(group) < 4:
                return None
            return self._arg_two_passes(kind, e, [vals[r] for r in group], [lay.reg_coord(r)[axis] for r in group], tc)

        marked = [self.arg_nan_mark(kind, e, v, i) for v, i in self._reduce_regs(lay, axis, parts, seq, True, within)]
        return [self.arg_nan_unmark(e, v, i) for v, i in self._reduce_across(lay, axis, marked, fn, [e, I32_T])]

    def arg_nan_mark(self, kind: str, e, v, i):
        """A float argmax/argmin partial as it travels across lanes and warps: if all NaN, the worst value with
        NAN_MARK in its index, so that the plain combine lets it lose to every number and to an earlier NaN
        partial."""
        bld = self.b
        nan = bld.fcmp_unordered("uno", v, v)
        worst = ir.Constant(ops.reg_type(e), float("-inf") if kind == "argmax" else float("inf"))
        return bld.select(nan, worst, v), bld.select(nan, bld.or_(i, ir.Constant(ops.I32, NAN_MARK)), i)

    def arg_nan_unmark(self, e, v, i):
        bld = self.b
        nan = bld.icmp_unsigned(">=", i, ir.Constant(ops.I32, NAN_MARK))
        return bld.select(nan, ir.Constant(ops.reg_type(e), float("nan")), v), bld.and_(i, ir.Constant(ops.I32, NAN_MARK - 1))

    def _arg_two_passes(self, kind: str, e, vals: list, coords: list[int], tc):
        """A thread's float argmax/argmin of `vals` (in order along the axis, at `coords` past `tc`) in two
        passes: the extreme by max/min (a tree; NaN loses to any number, all NaN gives NaN), then the first
        register equal to it (a chain of selects from the last register back; none equal, all NaN: the
        first). The value is the extreme itself, so of a row's zeros it may carry the other zero's sign."""
        bld = self.b
        top = neighbour_tree(vals, lambda x, y: self.combine(kind[3:], e, x, y, False))
        first = ir.Constant(ops.I32, coords[0])
        for v, c in reversed(list(zip(vals, coords, strict=True))):
            first = bld.select(bld.fcmp_ordered("==", v, top), ir.Constant(ops.I32, c), first)
        return top, bld.add(tc, first)

    def op_reduce_with(self, op: Operation) -> None:
        axis = op.attrs["axis"]
        src = next((v for v in op.operands if v in self.plan.strong), op.operands[0])
        lay = self.layout_of(src)
        parts = list(zip(*(self.get(x, lay) for x in op.operands), strict=True))
        elems = [elem_type(x.type) for x in op.operands]
        fn = lambda a, b: tuple(self.combine_region(op, a, b))  # noqa: E731
        out = self._reduce_parts(lay, axis, parts, fn, elems, ordered=True)
        self._define_reduced(op.results, lay.without_dim(axis), [list(c) for c in zip(*out, strict=True)])

    def combine_region(self, op: Operation, lhs, rhs) -> list:
        """The combiner region of a reduce_with/scan_with lowered inline on scalar registers (lhs, rhs)."""
        block = op.regions[0].block
        self.scopes.append({})
        try:
            for a, v in zip(block.args, [*lhs, *rhs], strict=True):
                self.define(a, None, v)
            self.lower_block([o for o in block.ops if o is not block.terminator])
            return [self.scalar(v) for v in block.terminator.operands]
        finally:
            self.scopes.pop()

    def _define_reduced(self, results, res_lay: Layout, outs: list[list]) -> None:
        for r, out in zip(results, outs, strict=True):
            if isinstance(r.type, TileType):
                self.define(r, res_lay, out)
                self.plan.natural[r] = res_lay
            else:
                self.define(r, None, out[0])

    def _reduce_parts(self, lay: Layout, axis: int, parts: list, fn, elems: list, ordered: bool = False,
                      seq=None, tree: bool = False):
        """Registers, then lanes (butterfly shuffles), then warps (shared memory), in that tree order. A
        thread's registers are folded in order along the axis, each into the one before, as Triton 3.6 folds
        them (so float sums round as its do); with `tree` (argmax's pairs) as a balanced tree of neighbours.
        `ordered`: each lane pair combines (lower lane's, upper lane's), so every lane computes the same
        result even for a combine that is not commutative bit for bit (Welford's, in floating point).
        `seq`, if given, combines a thread's registers instead of `fn`: everything folded into its second
        operand comes later along the axis than everything folded into the first."""
        return self._reduce_across(lay, axis, self._reduce_regs(lay, axis, parts, seq or fn, tree=tree), fn, elems, ordered)

    def _reduce_across(self, lay: Layout, axis: int, parts: list, fn, elems: list, ordered: bool = False):
        """_reduce_parts past a thread's registers: lanes (the highest lane bit first, as Triton shuffles),
        then warps."""
        for i, basis in reversed(list(enumerate(lay.lane))):
            if not basis[axis]:
                continue
            upper = self.pb.icmp_unsigned("!=", self.pb.and_(self.lane, ir.Constant(ops.I32, 1 << i)),
                                          ir.Constant(ops.I32, 0)) if ordered else None
            out = []
            for p in parts:
                other = tuple(self.shfl_xor(x, 1 << i) for x in p)
                if upper is None:
                    out.append(fn(p, other))
                    continue
                lo = tuple(self.b.select(upper, o, x) for x, o in zip(p, other, strict=True))
                hi = tuple(self.b.select(upper, x, o) for x, o in zip(p, other, strict=True))
                out.append(fn(lo, hi))
            parts = out
        if any(b[axis] for b in lay.warp):
            parts = self._reduce_warps(lay, lay.without_dim(axis), axis, parts, fn, elems)
        return parts

    def _reduce_regs(self, lay: Layout, axis: int, parts: list, fn, tree: bool = False, within=None) -> list:
        """One part per group of a thread's registers that differ only along `axis`, folded in order along
        it, or with `tree` as a balanced tree of neighbours (pairs, then pairs of pairs); `within(registers)`,
        if given, may reduce a group (its registers in order along the axis) its own way (None: it does not)."""
        groups: dict[int, list[int]] = {}
        along = sum(1 << i for i, bs in enumerate(lay.reg) if bs[axis])
        for r in range(lay.num_regs):
            groups.setdefault(r & ~along, []).append(r)
        out = []
        for key in sorted(groups):
            group = sorted(groups[key], key=lambda r: lay.reg_coord(r)[axis])
            done = within(group) if within is not None else None
            if done is not None:
                out.append(done)
                continue
            level = [parts[r] for r in group]
            if tree:
                out.append(neighbour_tree(level, fn))
                continue
            acc = level[0]
            for p in level[1:]:
                acc = fn(acc, p)
            out.append(acc)
        return out

    def _warp_planes(self, res_lay: Layout, nw: int, elems: list):
        """Shared memory for one partial per warp and element of `res_lay`, one plane per tuple member
        (16-byte aligned), reserved after a barrier when earlier users may still read it: the element count,
        the row-major strides, this thread's base index and `at(member, slot)`, a slot's byte offset."""
        bld = self.b
        numel = max(1, _numel(res_lay.shape))
        strides, _ = self._strides(res_lay.shape, 0)
        sizes = [self.smem_bytes_of(self.smem_type(e)) for e in elems]
        bases, end = [], 0
        for k, vb in enumerate(sizes):
            base = ((end + 15) // 16) * 16 if k else 0
            bases.append(base)
            end = base + nw * numel * vb
        self.shm.claim(end if len(elems) > 1 else ((end + 15) // 16) * 16)
        base = self._base_index(res_lay, strides) if res_lay.shape else ir.Constant(ops.I32, 0)

        def at(k: int, slot):
            return bld.add(ir.Constant(ops.I32, bases[k]), bld.mul(slot, ir.Constant(ops.I32, sizes[k])))

        return numel, strides, base, at

    def _store_partials(self, writer, widx, numel: int, at, elems: list, items) -> list:
        """Each item (element offset, its values): where `writer` holds, the values to warp `widx`'s slot of that
        element (one plane per tuple member); the offsets, in order. `items` may be lazy: each offset is built
        just before its store, as the IR had it."""
        bld = self.b
        offs = []
        for el, values in items:
            offs.append(el)
            with bld.if_then(writer):
                slot = bld.add(bld.mul(widx, ir.Constant(ops.I32, numel)), el)
                for k, (x, e) in enumerate(zip(values, elems, strict=True)):
                    self.smem_store(at(k, slot), x, e)
        return offs

    def _reduce_warps(self, lay: Layout, res_lay: Layout, axis: int, parts, fn, elems: list):
        """Each warp's partial results to shared memory (one plane per register of the tuple), then every
        thread combines the warps' partials: warp w with warp w + nw/2, then those halves again, down to one
        (the pairs of Triton's butterfly across warps)."""
        bld = self.b
        wbits = [i for i, bs in enumerate(lay.warp) if bs[axis]]
        nw = 1 << len(wbits)
        lane_mask = sum(1 << i for i, bs in enumerate(lay.lane) if bs[axis])
        numel, strides, base, at = self._warp_planes(res_lay, nw, elems)
        widx = ir.Constant(ops.I32, 0)
        for j, i in enumerate(wbits):
            bit = bld.and_(bld.lshr(self.warp, ir.Constant(ops.I32, i)), ir.Constant(ops.I32, 1))
            widx = bld.or_(widx, bld.shl(bit, ir.Constant(ops.I32, j)))
        writer = bld.icmp_unsigned("==", bld.and_(self.lane, ir.Constant(ops.I32, lane_mask)), ir.Constant(ops.I32, 0))

        offs = self._store_partials(writer, widx, numel, at, elems,
                                    ((bld.add(base, ir.Constant(ops.I32, self._reg_index(res_lay, r, strides))), p)
                                     for r, p in enumerate(parts)))  # fmt: skip
        self.barrier()
        out = []
        for el in offs:
            level = [tuple(self.smem_load(at(k, bld.add(el, ir.Constant(ops.I32, w * numel))), e) for k, e in enumerate(elems))
                     for w in range(nw)]  # fmt: skip
            while len(level) > 1:  # warp w with warp w + half, halves down to one, as Triton's shuffles pair them
                half = len(level) // 2
                level = [fn(level[w], level[w + half]) for w in range(half)]
            out.append(level[0])
        self.shm.released()
        return out


I32_T = ScalarType("i32")
NAN_MARK = 1 << 30  # added to the index of a float argmax/argmin partial that is all NaN (arg_reduce_values)


def neighbour_tree(items: list, fn):
    """`items` folded as a balanced tree of neighbours: pairs, then pairs of pairs, an odd last one carried up."""
    level = list(items)
    while len(level) > 1:
        pairs = [fn(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + level[len(pairs) * 2 :]
    return level[0]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
