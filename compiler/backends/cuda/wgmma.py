"""`dot` on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) for the cuda lowering: f16/bf16 -> f32
(m64nNk16), f32 with input_precision tf32 -> f32 (m64nNk8) and fp8 -> f32 (m64nNk32, e4m3 and e5m2 for
A and B independently); both operands read from swizzled shared-memory tiles (swizzle.py) through
matrix descriptors.

Operands come from a pipelined loop's ring (pipelined.py copies them there, stored along the dimension
that is contiguous in memory: K-major or MN-major) or are staged here from registers (A K-major,
B N-major). wgmma transposes 16-bit types only, so tf32 and fp8 operands are K-major throughout: the
ring takes them only where K is contiguous in memory, and B is staged transposed (rows N). tf32 takes
the f32 bits as they are (the tensor cores use their tf32 part, as Triton's Hopper path does), not
rounded with cvt.rna as the mma.sync path does. Each warpgroup (4 consecutive warps) issues one
instruction per m64 tile and K step (32 bytes of K) over its columns; the accumulator stays in the wgmma layout (layouts.wgmma_layout): register
(n/2) * mi + 4 * j + c of a thread holds element c of its 16-row slice of the m16n8 fragment j of
m64 tile mi. The issue is fenced (wgmma.fence), committed as one group and waited for at once, or,
in a loop planned with gpu.mma_pending = 1, with one group left in flight; in a loop of several wgmma
dots (flash attention) the last one's group may run on into the next iteration, where the first dot's
wait also waits for it (pipelined.py _chained_wgmma).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Operation
from ...ir.types import elem_type
from . import ops
from .layouts import Layout, WgmmaSpec, log2, wgmma_layout
from .swizzle import SwizzledTile, align, swizzle_width

I64 = ir.IntType(64)


def _c(x: int) -> ir.Constant:
    return ir.Constant(ops.I32, x)


def _desc_plus(bld, desc, offset: int):
    """The descriptor of the sub-tile `offset` bytes (a multiple of 16) past `desc`'s start."""
    assert offset % 16 == 0, offset
    return bld.add(desc, ir.Constant(I64, offset >> 4)) if offset else desc


def staged_tile(spec: WgmmaSpec, v, index: int) -> tuple[SwizzledTile, int]:
    """The swizzled tile that dot operand `index` (`v`) is staged into from registers, and the operand
    dimension stored contiguously: A K-major (rows M); B N-major (rows K), or K-major (rows N) where
    wgmma takes only K-major operands (spec.k_major)."""
    shape, eb = v.type.shape, elem_type(v.type).bits // 8
    d = 0 if index == 1 and spec.k_major else 1
    return SwizzledTile(shape[1 - d], shape[d], eb, swizzle_width(shape[d], eb)), d


def a_fragment_layout(op: Operation, spec: WgmmaSpec, num_warps: int) -> Layout | None:
    """The layout in which A (M x K) feeds wgmma from registers: per warpgroup and m64 tile, m64nNk16's
    A fragment for each K step of 16 (rows g and g+8, columns 2t, 2t+1 and those +8) is the accumulator
    fragment of an m64nKk16 over the same rows, in register order; so a dot whose result has N == K of
    this one (with the same warpgroup split of M) hands its result over as is. None where A cannot come
    from registers: warpgroups split along N, or a type other than f16/bf16 (their fragments differ)."""
    if spec.wn != 1 or spec.k_major:
        return None
    m, k = op.operands[0].type.shape
    return wgmma_layout((m, k), WgmmaSpec(spec.kind, spec.wm, 1, spec.mrep, k), num_warps)


class WgmmaLowering:
    def op_dot(self, op: Operation) -> None:
        spec = self.plan.mma.get(op)
        if not isinstance(spec, WgmmaSpec):
            super().op_dot(op)  # mma.sync (mma.py) or the FMA path (reduce.py)
            return
        c = op.operands[2]
        k = op.operands[0].type.shape[1]
        lay = self.layout_of(op.result)
        tiles = [self._ring_tile(op, i) or self._hoisted.get((op, i)) for i in (0, 1)]
        a_frag = a_fragment_layout(op, spec, self.num_warps) if tiles[0] is None else None
        if a_frag is not None and (not self.cg.a_from_registers or self.layout_of(op.operands[0]) != a_frag):
            a_frag = None  # A is not already in the fragment: staged (a conversion would cost as much)
        staged = [i for i in (0, 1) if tiles[i] is None and not (i == 0 and a_frag is not None)]
        lays = {i: self.layout_of(op.operands[i]) for i in staged}
        vals = {i: self.get(op.operands[i], lays[i]) for i in staged}  # every register before staging begins
        a_regs = self._pack_fragment(op.operands[0], a_frag) if a_frag is not None else None
        acc = self._acc_words(spec, list(self.get(c, lay)))
        if staged:
            tiles = self._stage_wgmma(op, staged, vals, lays, tiles)
        b_base, b_tile, b_mn = tiles[1]
        pb, bld = self.pb, self.b
        wg = pb.lshr(self.warp, _c(2))
        wg_m = pb.and_(wg, _c(spec.wm - 1))
        wg_n = pb.lshr(wg, _c(log2(spec.wm)))
        b_desc = ir.Constant(I64, b_tile.descriptor(b_mn))
        b_wg = bld.add(b_base, self._wg_start(b_tile, b_mn, pb.mul(wg_n, _c(spec.n))))
        if a_regs is None:  # this warpgroup's first A row, as the address of the unswizzled start
            a_base, a_tile, a_mn = tiles[0]
            a_desc = ir.Constant(I64, a_tile.descriptor(a_mn))
            a_wg = bld.add(a_base, self._wg_start(a_tile, a_mn, pb.mul(wg_m, _c(64 * spec.mrep))))
        # one descriptor per operand from its (16-byte aligned) start; a sub-tile's is that plus its static
        # offset in 16-byte units, as the start field (bits 0-13, shared addresses under 256 KiB) cannot carry
        b_desc = bld.add(b_desc, bld.zext(bld.lshr(b_wg, _c(4)), I64))
        if a_regs is None:
            a_desc = bld.add(a_desc, bld.zext(bld.lshr(a_wg, _c(4)), I64))
        self.wgmma_fence()
        per = len(acc) // spec.mrep  # accumulator registers per m64 tile
        for ks in range(k // spec.k):
            bd = _desc_plus(bld, b_desc, self._static_start(b_tile, b_mn, 0, ks * spec.k))
            for mi in range(spec.mrep):
                if a_regs is not None:  # m64 tile mi, K step ks: 4 words, in register order
                    a = a_regs[mi * k // 4 + 4 * ks : mi * k // 4 + 4 * ks + 4]
                else:
                    a = _desc_plus(bld, a_desc, self._static_start(a_tile, a_mn, mi * 64, ks * spec.k))
                acc[mi * per : (mi + 1) * per] = self.wgmma(spec, a, bd, acc[mi * per : (mi + 1) * per],
                                                            a_regs is None and a_mn, b_mn)  # fmt: skip
        self.wgmma_commit()
        issue = self._deferred_issue.pop(op, None)  # a pipelined loop's copies, issued while the group runs
        pending = self._pending.get(op, 0)
        if pending and issue is not None:
            acc = self.wgmma_wait(acc, pending)  # the previous group is done: its slot may be refilled...
            if self.num_warps > 4 or self.cg.refill_barrier:
                self.barrier()  # ...once every warpgroup's is
            issue()
            self.define(op.result, lay, acc)
            return
        if issue is not None:
            issue()
        also = self._wait_also.pop(op, None)  # a carried accumulator whose group is still in flight
        if also is None:
            acc = self.wgmma_wait(acc, pending)
        else:  # one wait for both groups; the carried registers pass through it, so none is read before
            arg, arg_lay = also
            waited = self.wgmma_wait([*acc, *self.get(arg, arg_lay)], pending)
            acc = waited[: len(acc)]
            self.define(arg, arg_lay, waited[len(acc) :])
        self.define(op.result, lay, acc)

    def _acc_words(self, spec: WgmmaSpec, acc: list) -> list:
        """The accumulator as wgmma takes it: f32 registers as they are; an f16 accumulator two halves per
        32-bit word (lower column low), unpacked again by wgmma_wait."""
        if spec.acc != "f16":
            return acc
        bld, words = self.b, []
        for r in range(0, len(acc), 2):
            vec = ir.Constant(ir.VectorType(ops.F16, 2), None)
            for i in (0, 1):
                vec = bld.insert_element(vec, acc[r + i], _c(i))
            words.append(bld.bitcast(vec, ops.I32))
        return words

    def _pack_fragment(self, v, frag: Layout) -> list:
        """The registers of A in its fragment layout, two 16-bit elements per 32-bit word (lower column low)."""
        e = elem_type(v.type)
        vals = self.get(v, frag)
        bld = self.b
        words = []
        for r in range(0, len(vals), 2):
            vec = ir.Constant(ir.VectorType(ops.mem_type(e), 2), None)
            for i in (0, 1):
                vec = bld.insert_element(vec, ops.to_mem(bld, e, vals[r + i]), _c(i))
            words.append(bld.bitcast(vec, ops.I32))
        return words

    # ---- loop-invariant operands, staged once before a pipelined loop ---------------------------

    def invariant_operands(self, loop: Operation) -> list:
        """(dot, index, tile) of every operand of a wgmma dot at the top of `loop`'s body that would be
        staged from registers and is defined outside the loop (flash attention's Q): such a tile is
        stored once, before the loop, rather than every iteration."""
        if not self.cg.stage_invariants_once:
            return []
        body = loop.regions[0].block
        inside = {r for o in loop.walk() if o is not loop for r in o.results} | set(body.args)
        out = []
        for dot in body.ops:
            spec = self.plan.mma.get(dot)
            if dot.name != "dot" or not isinstance(spec, WgmmaSpec):
                continue
            for i in (0, 1):
                v = dot.operands[i]
                if v in inside or self.pipes.operand(dot, i) is not None:
                    continue
                frag = a_fragment_layout(dot, spec, self.num_warps) if i == 0 else None
                if frag is not None and self.cg.a_from_registers and self.layout_of(v) == frag:
                    continue  # read from registers
                out.append((dot, i, staged_tile(spec, v, i)[0]))
        return out

    def stage_invariants(self, found: list, at: int, reuse: frozenset = frozenset()) -> int:
        """Store the tiles `invariant_operands` found from byte `at` of shared memory (1024-aligned,
        below scratch); they are read through self._hoisted. Those at positions in `reuse` are already
        there (staged_still_there) and are not stored again. Returns the bytes they take."""
        vals = [None if n in reuse else self.get(dot.operands[i]) for n, (dot, i, _) in enumerate(found)]
        smem = self.pb.ptrtoint(self.smem, ops.I32)
        off = at
        with self.shm.scoped(0):  # `at` is an absolute offset
            for n, ((dot, i, tile), regs) in enumerate(zip(found, vals, strict=True)):
                v = dot.operands[i]
                d = staged_tile(self.plan.mma[dot], v, i)[1]
                if n not in reuse:
                    self._stage_swizzled(v, regs, self.layout_of(v), tile, off, d)
                self._hoisted[(dot, i)] = (self.pb.add(smem, _c(off)), tile, i == 1 and d == 1)
                off = align(off + tile.nbytes)
        if len(reuse) < len(found):
            self.fence_async_shared()
        return off - at

    def staged_still_there(self, found: list, at: int) -> frozenset:
        """Positions in `found` whose value an earlier loop of an enclosing block staged as the same tile
        at the same offset, with no shared memory reserved since that loop ended (`remember_staged`):
        the tile is still there. So the causal attention's second loop reads the Q its first staged, and
        Q's registers need not live across the first loop."""
        out, off = set(), at
        for n, (dot, i, tile) in enumerate(found if self.cg.reuse_staged else []):
            got = self.lookup(("wgmma.staged", dot.operands[i]))
            if got == (off, tile, self.shm.epoch):
                out.add(n)
            off = align(off + tile.nbytes)
        return frozenset(out)

    def remember_staged(self, found: list, at: int) -> None:
        """After a loop: its staged tiles stay valid for later loops of this block until shared memory is
        next reserved (every reservation bumps self.shm.epoch)."""
        off = at
        for dot, i, tile in found:
            self.scopes[-1][("wgmma.staged", dot.operands[i])] = (off, tile, self.shm.epoch)
            off = align(off + tile.nbytes)

    # ---- operand tiles -------------------------------------------------------------------------

    def _ring_tile(self, op: Operation, index: int):
        """(shared address, SwizzledTile, MN-major?) of an operand in a pipelined loop's ring, or None."""
        got = self.ring_entry(op, index)
        if got is None or not got[1].swizzle:
            return None
        base, pl = got
        mn_major = pl.contig == (1 if index == 1 else 0)  # B stored along N, or A stored along M
        return base, pl.tile(), mn_major

    def _stage_wgmma(self, op: Operation, staged: list, vals: dict, lays: dict, tiles: list) -> list:
        """Store register operands into swizzled scratch tiles (staged_tile), then fence them into the
        async proxy and sync the block."""
        out = list(tiles)
        spec = self.plan.mma[op]
        offs, total, shapes, dims = {}, 0, {}, {}
        for i in staged:
            shapes[i], dims[i] = staged_tile(spec, op.operands[i], i)
            offs[i], total = total, align(total + shapes[i].nbytes)
        base = align(self.shm.base) - self.shm.base  # scratch offsets are relative to the scratch base
        self.shm.claim(base + total)
        for i in staged:
            self._stage_swizzled(op.operands[i], vals[i], lays[i], shapes[i], base + offs[i], dims[i])
        self.fence_async_shared()
        self.barrier()
        self.shm.released()
        smem = self.pb.ptrtoint(self.smem, ops.I32)
        for i in staged:
            out[i] = (
                self.pb.add(smem, _c(self.shm.base + base + offs[i])),
                shapes[i],
                i == 1 and dims[i] == 1,
            )
        return out

    def _stage_swizzled(
        self, v, vals: list, lay: Layout, tile: SwizzledTile, byte_base: int, d: int = 1
    ) -> None:
        """Write tile `v` (registers `vals` in `lay`) into `tile` at scratch `byte_base`, its dimension `d`
        along the stored rows, in vectors of the registers consecutive along d (at most 16 bytes: a
        vector never leaves its chunk)."""
        e = elem_type(v.type)
        w = min(lay.contiguous_vec(d), 16 // tile.ebytes, tile.cols)
        tc = self.thread_coord(lay)
        mt = ops.mem_type(e)
        bld = self.b
        unique = set(self.unique_regs(lay))
        for r0 in range(0, lay.num_regs, w):
            if r0 not in unique:
                continue
            coord = lay.reg_coord(r0)
            off = self.swizzled_offset(
                tile, bld.add(tc[1 - d], _c(coord[1 - d])), bld.add(tc[d], _c(coord[d]))
            )
            ptr = self.smem_at(bld.add(off, _c(byte_base)))
            xs = [ops.to_mem(bld, e, vals[r0 + i]) for i in range(w)]
            if w == 1:
                bld.store(xs[0], ptr, align=tile.ebytes)
                continue
            vec = ir.Constant(ir.VectorType(mt, w), None)
            for i, x in enumerate(xs):
                vec = bld.insert_element(vec, x, _c(i))
            if w * tile.ebytes >= 4:  # as 32-bit words: the backend keeps those one vector store
                nw = w * tile.ebytes // 4
                vec = bld.bitcast(vec, ir.VectorType(ops.I32, nw) if nw > 1 else ops.I32)
            bld.store(vec, ptr, align=w * tile.ebytes)

    # ---- descriptors ---------------------------------------------------------------------------

    @staticmethod
    def _static_start(tile: SwizzledTile, mn_major: bool, mn: int, k: int) -> int:
        """Byte offset of the unswizzled start of the sub-tile at (mn, k) of the operand (M or N, K)."""
        return tile.plain(k, mn) if mn_major else tile.plain(mn, k)

    def _wg_start(self, tile: SwizzledTile, mn_major: bool, mn0):
        """Byte offset of the operand's M or N index `mn0` (i32; a multiple of 64 rows, or of a swizzle
        block's columns when the tile is MN-major, so offsets of the sub-tiles after it just add)."""
        pb = self.pb
        if mn_major:
            per_block = tile.sw // tile.ebytes
            return pb.mul(pb.udiv(mn0, _c(per_block)), _c(tile.block_bytes))
        return pb.mul(mn0, _c(tile.sw))

    # ---- instructions --------------------------------------------------------------------------

    def wgmma_fence(self) -> None:
        self._asm("wgmma.fence.sync.aligned;", "~{memory}", [])

    def wgmma_commit(self) -> None:
        self._asm("wgmma.commit_group.sync.aligned;", "~{memory}", [])

    def wgmma_wait(self, acc: list, pending: int) -> list:
        """wgmma.wait_group `pending`, passing the accumulator registers through it so that no read of
        them is scheduled before the wait; an f16 accumulator's words (_acc_words) come back as halves."""
        n = len(acc)
        t = acc[0].type if acc else ops.F32
        text = f"wgmma.wait_group.sync.aligned {pending};"
        cons = ",".join(["=f" if t == ops.F32 else "=r"] * n + [str(i) for i in range(n)] + ["~{memory}"])
        asm = ir.InlineAsm(ir.FunctionType(ir.LiteralStructType([t] * n), [t] * n), text, cons, side_effect=True)
        res = self.b.call(asm, acc)
        out = [self.b.extract_value(res, i) for i in range(n)]
        if t != ops.I32:
            return out
        halves = [self.b.bitcast(w, ir.VectorType(ops.F16, 2)) for w in out]
        return [self.b.extract_element(h, _c(i)) for h in halves for i in (0, 1)]

    def wgmma(self, spec: WgmmaSpec, a, b_desc, acc: list, a_mn: bool, b_mn: bool) -> list:
        """One m64nNkK wgmma accumulating into `acc` (n/2 f32 registers, or n/4 words of two f16 for an
        f16 accumulator); `a` is A's descriptor, or its
        4 fragment words when A comes from registers (no transpose flag for A then). Types other than
        f16/bf16 take no transpose flags at all (their operands are K-major)."""
        n = len(acc)
        regs = ", ".join(f"${i}" for i in range(n))
        ta, tb = spec.kinds
        if isinstance(a, list):  # A's fragment words
            a_text, a_cons, a_types, args = "{" + ", ".join(f"${n + i}" for i in range(4)) + "}", ["r"] * 4, [ops.I32] * 4, a  # fmt: skip
        else:  # A's descriptor
            a_text, a_cons, a_types, args = f"${n}", ["l"], [I64], [a]
        trans = (
            "" if spec.k_major else (f" {int(b_mn)}" if isinstance(a, list) else f" {int(a_mn)}, {int(b_mn)}")
        )
        trans = trans and "," + trans
        na = len(args)
        text = (f"{{ .reg .pred p; setp.ne.b32 p, ${n + na + 1}, 0; wgmma.mma_async.sync.aligned.m64n{spec.n}k{spec.k}.{spec.acc}.{ta}.{tb} "
                f"{{{regs}}}, {a_text}, ${n + na}, p, 1, 1{trans}; }}")  # fmt: skip
        at = ops.F32 if spec.acc == "f32" else ops.I32
        cons = ",".join(["=f" if spec.acc == "f32" else "=r"] * n + a_cons + ["l", "r"] + [str(i) for i in range(n)])
        fnty = ir.FunctionType(ir.LiteralStructType([at] * n), [*a_types, I64, ops.I32] + [at] * n)
        res = self.b.call(ir.InlineAsm(fnty, text, cons, side_effect=True), [*args, b_desc, _c(1), *acc])
        return [self.b.extract_value(res, i) for i in range(n)]
