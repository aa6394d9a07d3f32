"""dot on the FMA path for the cuda lowering (no mma for these types or shapes): both operands go to shared
memory once and each thread accumulates its outputs over K, in f32/f64 or a 32/64-bit integer.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Operation
from ...ir.types import ScalarType, elem_type
from . import ops


class FmaDotLowering:
    def op_dot(self, op: Operation) -> None:
        a, b, c = op.operands
        (m, k), (_, n) = a.type.shape, b.type.shape
        ea, ec = elem_type(a.type), elem_type(c.type)
        lay = self.layout_of(op.result)
        acc_t = _acc_type(ea, ec)
        acc = [ops.cast(self.b, ec, acc_t, v) for v in self.get(c, lay)]
        st = self.smem_type(ea)
        eb = self.smem_bytes_of(st)
        a_bytes = ((m * k * eb + 15) // 16) * 16
        self.shm.claim(a_bytes + k * n * eb)
        self._to_smem(a, 0, eb)
        self._to_smem(b, a_bytes, eb)
        self.barrier()
        tc = self.thread_coord(lay)
        rows = sorted({lay.reg_coord(r)[0] for r in range(lay.num_regs)})
        cols = sorted({lay.reg_coord(r)[1] for r in range(lay.num_regs)})
        bld = self.b
        row0 = bld.mul(tc[0], ir.Constant(ops.I32, k * eb))
        col0 = bld.mul(tc[1], ir.Constant(ops.I32, eb))
        for kk in range(k):
            av = {}
            for i in rows:
                off = bld.add(row0, ir.Constant(ops.I32, (i * k + kk) * eb))
                av[i] = ops.cast(bld, ea, acc_t, self.smem_load(off, ea))
            bv = {}
            for j in cols:
                off = bld.add(col0, ir.Constant(ops.I32, a_bytes + (kk * n + j) * eb))
                bv[j] = ops.cast(bld, ea, acc_t, self.smem_load(off, ea))
            for r in range(lay.num_regs):
                i, j = lay.reg_coord(r)
                acc[r] = self._mac(acc_t, av[i], bv[j], acc[r])
        self.shm.released()
        self.define(op.result, lay, [ops.cast(bld, acc_t, ec, v) for v in acc])

    def _mac(self, t, x, y, z):
        if t.is_float:
            return ops.call_intr(self.b, "llvm.fma", x, y, z)
        return self.b.add(self.b.mul(x, y), z)

    def _to_smem(self, v, byte_base: int, eb: int) -> None:
        lay = self.layout_of(v)
        vals = self.get(v, lay)
        shape = v.type.shape
        strides = [shape[1], 1]
        base = self.b.add(self.b.mul(self._base_index(lay, strides), ir.Constant(ops.I32, eb)), ir.Constant(ops.I32, byte_base))
        e = elem_type(v.type)
        for r in self.unique_regs(lay):
            off = self.b.add(base, ir.Constant(ops.I32, self._reg_index(lay, r, strides) * eb))
            self.smem_store(off, vals[r], e)


def _acc_type(ea: ScalarType, ec: ScalarType) -> ScalarType:
    if ea.is_float:
        return ScalarType("f64") if "f64" in (ea.name, ec.name) else ScalarType("f32")
    return ScalarType("i64") if ec.bits == 64 else ScalarType("i32") if ec.is_signed else ScalarType("u32")
