"""`dot` on the tensor cores (mma.sync, sm_80+) for the cuda lowering: f16/bf16 -> f32 (m16n8k16),
f32 with input_precision tf32 -> f32 (m16n8k8, operands rounded with cvt.rna.tf32), f32 with tf32x3 ->
f32 (each operand split into a tf32 big part and the tf32 rounding of the rest, three m16n8k8 products
small*big + big*small + big*big, as Triton defines it) and s8/u8 -> s32 (m16n8k32). fp8 (e4m3, e5m2, either for
A and B) runs as an f16 dot (the plan says f16; f16 holds every fp8 value exactly): operands staged from registers
are stored as f16; operands that a pipelined loop's ring holds stay bytes there (A M x K, B N x K) and are
converted after ldmatrix (_fp8_from_ring).

Both operands sit row-major in shared memory (staged from registers here, each row padded
(gpu_pipeline.operand_stride) so the rows a fragment read touches fall in distinct banks; or copied by
cp.async into a pipelined loop's ring, pipelined.py, swizzled instead where ldmatrix reads them: _Reads), and
are read into the instruction's fragments
with ldmatrix (16-bit B with ldmatrix.trans; 8-bit B is staged transposed, N x K, because ldmatrix
only transposes 16-bit elements, and so is 16-bit B whose registers run along K, as a B loaded K-contiguous
does, so that its stores stay vectors; tf32 B with 32-bit loads). The accumulator never leaves the mma layout (gpu_layout.mma_layout):
register 4 * (ni + nrep * mi) + c holds element c of the warp's instruction tile (mi, ni).
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation, error_location
from ...ir.types import ScalarType, elem_type
from . import ops
from .layouts import Layout, MmaSpec, log2
from .plan import operand_stride
from .swizzle import SwizzledTile, constant_delta, swizzled

F16 = ScalarType("f16")
TF32_KINDS = ("tf32", "tf32x3")
PRODUCTS = {"tf32x3": ((1, 0), (0, 1), (0, 0))}  # small*big + big*small first, then big*big (as Triton)


def _c(x: int) -> ir.Constant:
    return ir.Constant(ops.I32, x)


def stored_elem(v) -> ScalarType:
    """The type a dot operand is staged in: fp8 as f16 (exact), others as they are."""
    e = elem_type(v.type)
    return F16 if e.is_fp8 else e


def lane_origin(spec: MmaSpec, operand: int, bt: bool, eb: int, lane, warp) -> tuple:
    """(row, byte in the row) of the stored operand tile that this lane addresses in its warp's first
    fragment read (mi, ni, ks = 0); `lane` and `warp` are ints or ops.Expr (the same formula either way).
    A: lanes 0-7 / 8-15 / 16-23 / 24-31 address rows 0-7 / 8-15 / 0-7 / 8-15, bytes +0 / +0 / +16 / +16
    (f16: columns +8; tf32: columns +4, the a2/a3 registers of m16n8k8). tf32 B (K x N words): row k =
    lane % 4, column n = lane / 4. B^T (N x K): rows n, 16 bytes of k; lanes 8-15 take k + 16 bytes,
    lanes 16-31 rows + 8. B (K x N): rows k as A's rows, columns n (+8 for lanes 16-31)."""
    l8, l3, l4 = lane & 7, (lane >> 3) & 1, lane >> 4
    if operand == 0:
        wrow = ((warp >> log2(spec.wn)) & (spec.wm - 1)) * (16 * spec.mrep)
        return wrow + l8 + l3 * 8, l4 * 16
    wcol = (warp & (spec.wn - 1)) * (8 * spec.nrep)
    if spec.kind in TF32_KINDS:
        return lane & 3, (wcol + (lane >> 2)) * 4
    if bt:
        return wcol + l8 + l4 * 8, l3 * 16
    return l8 + l3 * 8, (wcol + l4 * 8) * eb


class _Reads:
    """The shared addresses (i32) of one dot operand's fragment reads: `reads(drow, dbyte)` is this lane's
    address for the read `drow` rows and `dbyte` bytes past its warp's first (lane_origin). In rows of
    `stride` bytes that is one per-lane base plus a constant. In a swizzled tile (a pipelined ring's,
    swizzle.py) each read's offset is swizzled in full, unless it lies a constant away from one swizzled
    before in every lane and warp (rows 8 apart, or whole swizzle blocks): then that one plus the constant.
    The per-lane offsets depend on the lane and warp alone, so they are computed once, before any loop."""

    def __init__(self, low, spec: MmaSpec, operand: int, bt: bool, eb: int, base, stride: int,
                 tile: SwizzledTile | None) -> None:  # fmt: skip
        self.b, self.base, self.stride = low.b, base, stride
        origin = lane_origin(spec, operand, bt, eb, ops.Expr(low.pb, low.lane), ops.Expr(low.pb, low.warp))
        self.tile = None if tile is None else tile.in_bytes()
        if self.tile is None:
            self.first = self.b.add(base, (origin[0] * stride + origin[1]).v)
            return
        self.origin = origin
        self.lanes = [lane_origin(spec, operand, bt, eb, lane, warp) for warp in range(spec.wm * spec.wn) for lane in range(32)]
        self.made: list[tuple[int, int, ir.Value]] = []

    def __call__(self, drow: int, dbyte: int):
        bld = self.b
        if self.tile is None:
            return bld.add(self.first, _c(drow * self.stride + dbyte))
        t = self.tile
        for r0, b0, addr in self.made:
            d = constant_delta(t, self.lanes, 1, (r0, b0), (drow, dbyte))
            if d is not None:
                return bld.add(addr, _c(d)) if d else addr
        r, b = self.origin
        addr = bld.add(self.base, swizzled(t, r + drow, b + dbyte).v)
        self.made.append((drow, dbyte, addr))
        return addr


class MmaLowering:
    def op_dot(self, op: Operation) -> None:
        spec = self.plan.mma.get(op)
        if spec is None:
            super().op_dot(op)  # the FMA path (reduce.py)
            return
        a, c = op.operands[0], op.operands[2]
        k = a.type.shape[1]
        lay = self.layout_of(op.result)
        # (tile base, stride, swizzled tile, contiguous dim) in a pipelined loop's ring
        ring = [self.ring_operand(op, i) for i in (0, 1)]
        staged = [i for i in (0, 1) if ring[i] is None]
        # every register first: a conversion through shared memory must not run once staging began
        lays = {i: self.layout_of(op.operands[i]) for i in staged}
        vals = {i: self.get(op.operands[i], lays[i]) for i in staged}
        acc = list(self.get(c, lay))
        bt = spec.kind in ("s8", "u8") or (  # B in shared memory as N x K (B^T, row-major), read without .trans
            spec.kind in ("f16", "bf16") and (ring[1][3] == 0 if ring[1] is not None else
                                              lays[1].contiguous_vec(0) > lays[1].contiguous_vec(1)))  # fmt: skip
        if staged:
            ring = self._stage_operands(op, spec, staged, vals, lays, ring, bt)
        fp8 = any(elem_type(v.type).is_fp8 for v in op.operands[:2])
        if fp8 and not staged:
            self._fp8_from_ring(op, spec, ring, acc, k)
            self.define(op.result, lay, acc)
            return
        if fp8 and len(staged) == 1:
            raise CompileError("cuda: an fp8 dot on mma.sync reads both operands from its ring or neither",
                               **error_location(op.loc))  # fmt: skip
        eb = stored_elem(a).bits // 8
        a_at, b_at = (_Reads(self, spec, i, bt, eb, *ring[i][:3]) for i in (0, 1))
        for ks in range(k // spec.k):
            afr = [self._tf32(spec, self.ldmatrix(a_at(mi * 16, ks * 32), 4, False)) for mi in range(spec.mrep)]
            bfr = self._b_fragments(spec, b_at, ks, bt)
            for mi in range(spec.mrep):
                for ni in range(spec.nrep):
                    r = 4 * (ni + spec.nrep * mi)
                    for pa, pb in PRODUCTS.get(spec.kind, ((0, 0),)):  # (part of A, part of B)
                        acc[r : r + 4] = self.mma(spec, afr[mi][pa], bfr[ni][pb], acc[r : r + 4])
        self.define(op.result, lay, acc)

    def ring_operand(self, op: Operation, index: int):
        return None  # pipelined.py answers for operands copied into a ring

    def _fp8_from_ring(self, op: Operation, spec: MmaSpec, ring: list, acc: list, k: int) -> None:
        """An fp8 dot whose operands sit in the ring as bytes, A M x K and B N x K (gpu-pipeline): each 32-byte
        K block is read as 8-bit operands are (m16n8k32's fragments: a register holds 4 consecutive K of one
        row), each register converted into two f16 pairs, and run as two m16n8k16 f16 instructions. Within a
        block, f16 fragment slots 2c, 2c+1, 2c+8, 2c+9 then hold K 4c .. 4c+3 in A and in B alike: the same
        products, summed in another order inside the instruction."""
        if ring[0][3] != 1 or ring[1][3] != 0:
            raise CompileError("cuda: an fp8 dot on mma.sync needs A's ring tile M x K and B's N x K",
                               **error_location(op.loc))  # fmt: skip
        names = [elem_type(v.type).name for v in op.operands[:2]]
        a_at, b_at = (_Reads(self, spec, i, i == 1, 1, *ring[i][:3]) for i in (0, 1))
        bld = self.b
        for kb in range(k // 32):
            # per mi: rows g, g + 8 of bytes 0-15, then of bytes 16-31; per ni: bytes 0-15, 16-31 (each an f16 pair
            # of its bytes 0, 1 and one of its bytes 2, 3)
            afr = [[ops.fp8x4_to_f16x2(bld, r, names[0]) for r in self.ldmatrix(a_at(mi * 16, kb * 32), 4, False)]
                   for mi in range(spec.mrep)]  # fmt: skip
            bfr = [[ops.fp8x4_to_f16x2(bld, r, names[1]) for r in parts[0]] for parts in self._b_fragments(spec, b_at, kb, True)]
            for h in (0, 1):  # bytes 16h .. 16h + 15 of the block
                for mi in range(spec.mrep):
                    g0, g8 = afr[mi][2 * h], afr[mi][2 * h + 1]
                    a_regs = [g0[0], g8[0], g0[1], g8[1]]
                    for ni in range(spec.nrep):
                        r = 4 * (ni + spec.nrep * mi)
                        acc[r : r + 4] = self.mma(spec, a_regs, list(bfr[ni][h]), acc[r : r + 4])

    def _stage_operands(self, op: Operation, spec: MmaSpec, staged: list, vals: dict, lays: dict, ring: list, bt: bool):
        """Store the register operands row-major into scratch (B transposed where `bt`); their (base, stride)."""
        a, b, c = op.operands
        (m, k), n = a.type.shape, c.type.shape[1]
        eb = stored_elem(a).bits // 8
        shapes = {0: (m, k), 1: (n, k) if bt else (k, n)}
        strides = {i: operand_stride(spec.kind, i, shapes[i], eb) for i in staged}
        offs, total = {}, 0
        for i in staged:
            offs[i], total = total, total + shapes[i][0] * strides[i]
        self.shm.claim(total)
        for i in staged:
            self._stage(op.operands[i], vals[i], lays[i], offs[i], strides[i], transpose=bt and i == 1)
        self.barrier()
        self.shm.released()
        smem = self.pb.ptrtoint(self.smem, ops.I32)
        out = list(ring)
        for i in staged:
            out[i] = (self.pb.add(smem, _c(self.shm.base + offs[i])), strides[i], None, 1 - (bt and i == 1))
        return out

    def _b_fragments(self, spec: MmaSpec, at: _Reads, ks: int, bt: bool) -> list[list]:
        """Per n8 tile, the parts (_tf32) of its B fragment. B^T (`bt`) is read in bytes as 8-bit B is: an
        instruction's K is 32 bytes of a row for both element sizes, so each 8x8 b16 matrix of N x K rows is
        a fragment register as it stands."""
        if spec.kind in TF32_KINDS:  # no transposing ldmatrix for 32 bits: two words per lane and n8 tile
            rows = [ks * 8, ks * 8 + 4]
            return [self._tf32(spec, [self.ld_shared(at(r, ni * 32)) for r in rows]) for ni in range(spec.nrep)]
        bfr: list[list] = []
        for nj in range(0, spec.nrep, 2):
            count = 4 if nj + 1 < spec.nrep else 2
            regs = self.ldmatrix(at(nj * 8, ks * 32) if bt else at(ks * 16, nj * 16), count, not bt)
            bfr.extend([regs[i : i + 2]] for i in range(0, count, 2))
        return bfr

    # ---- staging -------------------------------------------------------------------------------

    def _stage(self, v, vals: list, lay: Layout, byte_base: int, stride: int, transpose: bool) -> None:
        """Write tile `v` (registers `vals` in layout `lay`) row-major (or transposed) at `byte_base`,
        in the widest vector stores its layout allows."""
        e = stored_elem(v)
        fp8 = elem_type(v.type).is_fp8
        eb = e.bits // 8
        row_d, col_d = (1, 0) if transpose else (0, 1)
        w = min(lay.contiguous_vec(col_d), 16 // eb, v.type.shape[col_d])
        tc = self.thread_coord(lay)
        pb = self.pb
        base = pb.add(pb.mul(tc[row_d], _c(stride)), pb.add(pb.mul(tc[col_d], _c(eb)), _c(byte_base)))
        mt = ops.mem_type(e)
        bld = self.b
        unique = set(self.unique_regs(lay))
        for r0 in range(0, lay.num_regs, w):
            if r0 not in unique:
                continue
            coord = lay.reg_coord(r0)
            ptr = self.smem_at(bld.add(base, _c(coord[row_d] * stride + coord[col_d] * eb)))
            xs = [
                bld.fptrunc(vals[r0 + i], ops.F16) if fp8 else ops.to_mem(bld, e, vals[r0 + i])
                for i in range(w)
            ]
            if w == 1:
                bld.store(xs[0], ptr, align=eb)
                continue
            vt = ir.VectorType(mt, w)
            vec = ir.Constant(vt, None)
            for i, x in enumerate(xs):
                vec = bld.insert_element(vec, x, _c(i))
            if w * eb >= 4:  # as 32-bit words: the backend keeps those one vector store
                vec = bld.bitcast(vec, ir.VectorType(ops.I32, w * eb // 4) if w * eb > 4 else ops.I32)
            bld.store(vec, ptr, align=w * eb)

    # ---- instructions --------------------------------------------------------------------------

    def ldmatrix(self, addr, count: int, trans: bool) -> list:
        """`count` 8x8 b16 matrices from shared memory, one 32-bit fragment register each."""
        regs = ", ".join(f"${i}" for i in range(count))
        text = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 {{{regs}}}, [${count}];"
        cons = ",".join(["=r"] * count + ["r", "~{memory}"])
        ret = ir.LiteralStructType([ops.I32] * count)
        asm = ir.InlineAsm(ir.FunctionType(ret, [ops.I32]), text, cons, side_effect=True)
        out = self.b.call(asm, [addr])
        return [self.b.extract_value(out, i) for i in range(count)]

    def ld_shared(self, addr):
        asm = ir.InlineAsm(ir.FunctionType(ops.I32, [ops.I32]), "ld.shared.b32 $0, [$1];", "=r,r,~{memory}", side_effect=True)
        return self.b.call(asm, [addr])

    def _tf32(self, spec: MmaSpec, regs: list) -> list[list]:
        """The parts of a fragment the products take: f32 operand words rounded to tf32 (to nearest, ties
        away, as cvt.rna does); for tf32x3 also the tf32 rounding of what that leaves (x - big is exact in
        f32); other kinds' words as they are."""
        if spec.kind not in TF32_KINDS:
            return [regs]
        bld = self.b
        asm = ir.InlineAsm(ir.FunctionType(ops.I32, [ops.I32]), "cvt.rna.tf32.f32 $0, $1;", "=r,r")
        big = [bld.call(asm, [r]) for r in regs]
        if spec.kind == "tf32":
            return [big]
        f32 = [(bld.bitcast(r, ops.F32), bld.bitcast(h, ops.F32)) for r, h in zip(regs, big, strict=True)]
        return [big, [bld.call(asm, [bld.bitcast(bld.fsub(x, h), ops.I32)]) for x, h in f32]]

    def mma(self, spec: MmaSpec, a: list, b: list, c: list) -> list:
        if spec.kind in TF32_KINDS:
            shape, out, acc_t = "m16n8k8.row.col.f32.tf32.tf32.f32", "=f", ops.F32
        elif spec.kind in ("f16", "bf16"):
            shape, out, acc_t = f"m16n8k16.row.col.f32.{spec.kind}.{spec.kind}.f32", "=f", ops.F32
        else:
            shape, out, acc_t = f"m16n8k32.row.col.s32.{spec.kind}.{spec.kind}.s32", "=r", ops.I32
        text = f"mma.sync.aligned.{shape} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, {{$10, $11, $12, $13}};"
        cons = ",".join([out] * 4 + ["r"] * 6 + ["0", "1", "2", "3"])
        ret = ir.LiteralStructType([acc_t] * 4)
        asm = ir.InlineAsm(ir.FunctionType(ret, [ops.I32] * 6 + [acc_t] * 4), text, cons)
        res = self.b.call(asm, [*a, *b, *c])
        return [self.b.extract_value(res, i) for i in range(4)]
