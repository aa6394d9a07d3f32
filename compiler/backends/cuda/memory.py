"""Global loads/stores/atomics and layout conversions through shared memory, for the cuda lowering.

Accesses are vectorised by the width the gpu-layout pass recorded (gpu.vec: up to 16 bytes where the
axis analysis proves contiguity, alignment and an equal mask across the vector). Shared memory is scratch
owned by one op at a time, handed out by the lowering's allocator (`self.shm`, smem.py): a conversion
claims its bytes (a barrier first only where the previous user's reads may be in flight), syncs between
its writes and its reads, and releases them.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import TileType, elem_type
from ..llvm.asmcall import returning_call
from ..llvm.volatile import volatile_load
from . import atomics, ops
from .layouts import Layout

_ORDER = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}


class MemoryLowering:
    # ---- shared memory -------------------------------------------------------------------------

    def smem_at(self, byte_offset):
        """Scratch byte `byte_offset`: scratch starts past the rings of the pipelined loops being lowered."""
        if self.shm.base:
            byte_offset = self.b.add(byte_offset, ir.Constant(ops.I32, self.shm.base))
        return self.b.gep(self.smem_ptr, [byte_offset], source_etype=ops.I8)

    @staticmethod
    def smem_type(e) -> ir.Type:
        t = ops.reg_type(e)
        return ops.I8 if t == ops.I1 else t

    @staticmethod
    def smem_bytes_of(t: ir.Type) -> int:
        if isinstance(t, ir.PointerType):
            return 8
        if isinstance(t, ir.IntType):
            return max(1, t.width // 8)
        return {ops.F16: 2, ops.F32: 4, ops.F64: 8}[t]

    def smem_store(self, byte_off, v, e) -> None:
        if ops.reg_type(e) == ops.I1:
            v = self.b.zext(v, ops.I8)
        self.b.store(v, self.smem_at(byte_off))

    def smem_load(self, byte_off, e):
        t = self.smem_type(e)
        v = self.b.load(self.smem_at(byte_off), typ=t)
        return self.b.trunc(v, ops.I1) if ops.reg_type(e) == ops.I1 else v

    def _strides(self, shape: tuple[int, ...], pad: int) -> tuple[list[int], int]:
        """Row-major element strides with `pad` elements after each innermost row; total elements."""
        return padded_strides(shape, pad)

    def _base_index(self, lay: Layout, strides: list[int]):
        tc = self.thread_coord(lay)
        acc = ir.Constant(ops.I32, 0)
        for c, s in zip(tc, strides, strict=False):
            acc = self.pb.add(acc, self.pb.mul(c, ir.Constant(ops.I32, s)))
        return acc

    def _reg_index(self, lay: Layout, r: int, strides: list[int]) -> int:
        return sum(c * s for c, s in zip(lay.reg_coord(r), strides, strict=False))

    def convert(self, vals: list, src: Layout, dst: Layout, e) -> list:
        """The same tile in another layout: a register remap when the threads agree, else through smem."""
        if src == dst:
            return vals
        if src.lane == dst.lane and src.warp == dst.warp:
            where = {}
            for r in range(src.num_regs - 1, -1, -1):
                where[src.reg_coord(r)] = r
            picks = [where.get(dst.reg_coord(r)) for r in range(dst.num_regs)]
            if None not in picks:
                return [vals[r] for r in picks]
        return self.through_smem(vals, src, dst, e)

    def through_smem(self, vals: list, src: Layout, dst: Layout, e, only_owner: bool = False) -> list:
        """The tile written in `src`'s layout and read back in `dst`'s, row-major with padded rows. Where a
        thread's consecutive registers hold consecutive elements of a row, they move as one vector access
        (up to 16 bytes, aligned); the padding is chosen, among 4, 8 and 16 bytes, for the fewest shared
        memory wavefronts of the two sides (bank conflicts counted on warp 0), the smaller on a tie."""
        st = self.smem_type(e)
        nbytes = self.smem_bytes_of(st)
        base_align = (self.shm.base & -self.shm.base) if self.shm.base else 16
        vec_ok = st in (ops.F16, ops.F32, ops.F64) or (isinstance(st, ir.IntType) and ops.reg_type(e) != ops.I1)
        pad, (run_s, run_d) = choose_padding(src, dst, nbytes, min(16, base_align) if vec_ok else nbytes)
        strides, total = self._strides(src.shape, pad)
        self.shm.claim(total * nbytes)
        base = self.pb.mul(self._base_index(src, strides), ir.Constant(ops.I32, nbytes))
        owner = self.owner_pred(src) if only_owner else None
        for r, group in vector_groups(src, self.unique_regs(src), run_s):
            off = self.b.add(base, ir.Constant(ops.I32, self._reg_index(src, r, strides) * nbytes))
            if owner is None:
                self._smem_store_run(off, [vals[g] for g in group], e, st, nbytes)
            else:
                with self.b.if_then(owner):
                    self._smem_store_run(off, [vals[g] for g in group], e, st, nbytes)
        self.barrier()
        base = self.pb.mul(self._base_index(dst, strides), ir.Constant(ops.I32, nbytes))
        out: list = [None] * dst.num_regs
        for r, group in vector_groups(dst, range(dst.num_regs), run_d):
            off = self.b.add(base, ir.Constant(ops.I32, self._reg_index(dst, r, strides) * nbytes))
            for g, v in zip(group, self._smem_load_run(off, len(group), e, st, nbytes), strict=True):
                out[g] = v
        self.shm.released()
        return out

    def _smem_store_run(self, off, vs: list, e, st, nbytes: int) -> None:
        if len(vs) == 1:
            self.smem_store(off, vs[0], e)
            return
        vt = ir.VectorType(st, len(vs))
        vec = ir.Constant(vt, None)
        for i, v in enumerate(vs):
            vec = self.b.insert_element(vec, v, ir.Constant(ops.I32, i))
        self.b.store(vec, self.smem_at(off), align=len(vs) * nbytes)

    def _smem_load_run(self, off, n: int, e, st, nbytes: int) -> list:
        if n == 1:
            return [self.smem_load(off, e)]
        vec = self.b.load(self.smem_at(off), typ=ir.VectorType(st, n), align=n * nbytes)
        return [self.b.extract_element(vec, ir.Constant(ops.I32, i)) for i in range(n)]

    def broadcast_scalar(self, v, e, pred):
        """A value computed where `pred` holds (one thread), made visible to every thread."""
        st = self.smem_type(e)
        self.shm.claim(self.smem_bytes_of(st))
        with self.b.if_then(pred):
            self.smem_store(ir.Constant(ops.I32, 0), v, e)
        self.barrier()
        out = self.smem_load(ir.Constant(ops.I32, 0), e)
        self.shm.released()
        return out

    # ---- global memory -------------------------------------------------------------------------

    def op_load(self, op: Operation) -> None:
        ptr = op.operands[0]
        e = elem_type(op.result.type)
        mt = ops.mem_type(e)
        if not isinstance(ptr.type, TileType):
            self.define(op.result, None, self._scalar_load(op, e, mt))
            return
        lay = self.plan.access[op]
        ptrs = self.get(ptr, lay)
        mask = self.get(op.operands[1], lay) if len(op.operands) > 1 else None
        other = self.get(op.operands[2], lay) if len(op.operands) > 2 else None
        w = self.plan.vec.get(op, 1)
        eb = self.smem_bytes_of(mt)
        out = []
        for r0 in range(0, lay.num_regs, w):
            vt = mt if w == 1 else ir.VectorType(mt, w)
            alt = self._pack([ops.to_mem(self.b, e, other[r0 + i]) for i in range(w)], vt) if other else ir.Constant(vt, None)
            if mask is None:
                v = self._load(ptrs[r0], vt, w * eb, op)
            elif (w * eb) % 4 == 0 and not op.attrs.get("volatile"):
                v = self._pred_load(ptrs[r0], mask[r0], alt, vt, w * eb)
            elif w * eb < 4 and not op.attrs.get("volatile"):
                v = self._pred_load_narrow(ptrs[r0], mask[r0], alt, vt, w * eb)
            else:
                v = self._masked(mask[r0], lambda p=ptrs[r0], vt=vt: self._load(p, vt, w * eb, op), alt)
            out.extend(ops.from_mem(self.b, e, x) for x in self._unpack(v, w))
        self.define(op.result, lay, out)

    @staticmethod
    def _words(nbytes: int) -> tuple[int, ir.Type, str]:
        n = nbytes // 4
        return n, (ops.I32 if n == 1 else ir.VectorType(ops.I32, n)), ("" if n == 1 else f".v{n}") + ".b32"

    def _pred_load(self, p, pred, alt, vt, nbytes: int):
        """A predicated load (inline PTX, as Triton emits): lanes where `pred` is false keep `alt`, and
        no branch splits the block, so many loads stay in flight."""
        n, wt, suffix = self._words(nbytes)
        b = self.b
        alt_w = b.bitcast(alt, wt) if alt.type != wt else alt
        alts = [alt_w] if n == 1 else [b.extract_element(alt_w, ir.Constant(ops.I32, i)) for i in range(n)]
        regs = ", ".join(f"${i}" for i in range(n))
        text = f"@${n + 1} ld.global{suffix} {{ {regs} }}, [ ${n} + 0 ];" if n > 1 else f"@$2 ld.global{suffix} $0, [ $1 + 0 ];"
        cons = ",".join(["=r"] * n + ["l", "b"] + [str(i) for i in range(n)])
        ret = ops.I32 if n == 1 else ir.LiteralStructType([ops.I32] * n)
        asm = ir.InlineAsm(ir.FunctionType(ret, [ops.GPTR, ops.I1] + [ops.I32] * n), text, cons, side_effect=True)
        out = returning_call(b, asm, [p, pred, *alts])
        if n == 1:
            words = out
        else:
            words = ir.Constant(wt, None)
            for i in range(n):
                words = b.insert_element(words, b.extract_value(out, i), ir.Constant(ops.I32, i))
        return b.bitcast(words, vt) if vt != wt else words

    def _pred_load_narrow(self, p, pred, alt, vt, nbytes: int):
        """A predicated load of 1 or 2 bytes into a 16-bit register (as Triton emits for fp16 and int8 tiles
        loaded one element a thread): the register holds `alt` and the load overwrites it where `pred`
        holds; no branch around each element."""
        b = self.b
        it = ir.IntType(8 * nbytes)
        alt_i = b.bitcast(alt, it) if alt.type != it else alt
        alt16 = b.zext(alt_i, ops.I16) if nbytes == 1 else alt_i
        text = f"@$2 ld.global.b{8 * nbytes} $0, [ $1 + 0 ];"
        asm = ir.InlineAsm(ir.FunctionType(ops.I16, [ops.GPTR, ops.I1, ops.I16]), text, "=h,l,b,0", side_effect=True)
        out = returning_call(b, asm, [p, pred, alt16])
        out = b.trunc(out, it) if nbytes == 1 else out
        return b.bitcast(out, vt) if vt != it else out

    def _pred_store(self, p, pred, v, nbytes: int) -> None:
        n, wt, suffix = self._words(nbytes)
        b = self.b
        vw = b.bitcast(v, wt) if v.type != wt else v
        vals = [vw] if n == 1 else [b.extract_element(vw, ir.Constant(ops.I32, i)) for i in range(n)]
        regs = ", ".join(f"${i + 2}" for i in range(n))
        text = f"@$1 st.global{suffix} [ $0 + 0 ], {{ {regs} }};" if n > 1 else "@$1 st.global.b32 [ $0 + 0 ], $2;"
        cons = ",".join(["l", "b"] + ["r"] * n + ["~{memory}"])
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [ops.GPTR, ops.I1] + [ops.I32] * n), text, cons, side_effect=True)
        returning_call(b, asm, [p, pred, *vals])

    def _load(self, p, vt, align: int, op: Operation):
        if not op.attrs.get("volatile"):
            return self.b.load(p, typ=vt, align=align)
        return volatile_load(self.b, p, vt, align)  # ld.volatile.global: read from memory every time

    def _masked(self, pred, emit, alt):
        cur = self.b.block
        then_bb = self.b.append_basic_block("ld.then")
        merge = self.b.append_basic_block("ld.end")
        self.b.cbranch(pred, then_bb, merge)
        self.b.position_at_end(then_bb)
        v = emit()
        then_end = self.b.block
        self.b.branch(merge)
        self.b.position_at_end(merge)
        phi = self.b.phi(v.type)
        phi.add_incoming(v, then_end)
        phi.add_incoming(alt, cur)
        return phi

    def _pack(self, xs: list, vt):
        if len(xs) == 1:
            return xs[0]
        v = ir.Constant(vt, None)
        for i, x in enumerate(xs):
            v = self.b.insert_element(v, x, ir.Constant(ops.I32, i))
        return v

    def _unpack(self, v, w: int) -> list:
        if w == 1:
            return [v]
        return [self.b.extract_element(v, ir.Constant(ops.I32, i)) for i in range(w)]

    def _scalar_load(self, op: Operation, e, mt):
        """A load of one element; a volatile one stays volatile (a spin on a flag another program sets, as in a
        decoupled look-back, must read memory each time, not once)."""
        p = self.scalar(op.operands[0])
        eb = self.smem_bytes_of(mt)
        if len(op.operands) == 1:
            return ops.from_mem(self.b, e, self._load(p, mt, eb, op))
        mask = self.scalar(op.operands[1])
        alt = ops.to_mem(self.b, e, self.scalar(op.operands[2])) if len(op.operands) > 2 else ir.Constant(mt, None)
        if len(op.operands) == 2:
            alt = ir.Constant(mt, 0) if isinstance(mt, ir.IntType) else ir.Constant(mt, 0.0)
        return ops.from_mem(self.b, e, self._masked(mask, lambda: self._load(p, mt, eb, op), alt))

    def op_store(self, op: Operation) -> None:
        ptr, val = op.operands[:2]
        e = elem_type(val.type)
        mt = ops.mem_type(e)
        if not isinstance(ptr.type, TileType):
            pred = self.b.icmp_unsigned("==", self.tid, ir.Constant(ops.I32, 0))
            if len(op.operands) > 2:
                pred = self.b.and_(pred, self.scalar(op.operands[2]))
            with self.b.if_then(pred):
                self.b.store(ops.to_mem(self.b, e, self.scalar(val)), self.scalar(ptr))
            return
        lay = self.plan.access[op]
        ptrs, vals = self.get(ptr, lay), self.get(val, lay)
        mask = self.get(op.operands[2], lay) if len(op.operands) > 2 else None
        w = self.plan.vec.get(op, 1)
        eb = self.smem_bytes_of(mt)
        owner = self.owner_pred(lay)
        replicated = not (isinstance(owner, ir.Constant))
        unique = set(self.unique_regs(lay))
        for r0 in range(0, lay.num_regs, w):
            if r0 not in unique:
                continue
            vt = mt if w == 1 else ir.VectorType(mt, w)
            v = self._pack([ops.to_mem(self.b, e, vals[r0 + i]) for i in range(w)], vt)
            pred = mask[r0] if mask is not None else None
            if replicated:
                pred = owner if pred is None else self.b.and_(pred, owner)
            if pred is None:
                self.b.store(v, ptrs[r0], align=w * eb)
            elif (w * eb) % 4 == 0:
                self._pred_store(ptrs[r0], pred, v, w * eb)
            else:
                with self.b.if_then(pred):
                    self.b.store(v, ptrs[r0], align=w * eb)

    # ---- atomics -------------------------------------------------------------------------------

    def _rmw_name(self, kind: str, e) -> str:
        if e.name in ("bf16", "i1"):
            raise CompileError(f"cuda: atomics on {e.name} are not supported")
        if e.is_float:
            if kind in ("add", "max", "min"):
                return {"add": "fadd", "max": "fmax", "min": "fmin"}[kind]
            if kind == "xchg":
                return "xchg"
            raise CompileError(f"cuda: atomic {kind} needs an integer type, got {e.name}")
        if kind in ("max", "min") and not e.is_signed:
            return "u" + kind
        return kind

    def op_atomic_rmw(self, op: Operation) -> None:
        ptr, val = op.operands[:2]
        e = elem_type(val.type)
        kind = self._rmw_name(op.attrs["kind"], e)
        order = _ORDER.get(op.attrs.get("sem", "acq_rel"), "acq_rel")

        def one(p, v, pred):
            got = atomics.atomic_rmw(self.b, op.attrs["kind"], e, p, v, pred, op.attrs)
            if got is not None:
                return got
            return self._masked(pred, lambda: self.b.atomic_rmw(kind, p, v, order), ir.Constant(v.type, None))

        self._atomic(op, e, lambda p, xs, pred: one(p, xs[0], pred), 1)

    def op_atomic_cas(self, op: Operation) -> None:
        e = elem_type(op.operands[1].type)
        order = _ORDER.get(op.attrs.get("sem", "acq_rel"), "acq_rel")
        fail_order = "acquire" if order in ("acquire", "acq_rel") else "monotonic"
        rt = ops.reg_type(e)
        it = ir.IntType(self.smem_bytes_of(rt) * 8)

        def one(p, xs, pred):
            got = atomics.atomic_cas(self.b, e, p, xs[0], xs[1], pred, op.attrs)
            if got is not None:
                return got
            c, v = (x if rt == it else self.b.bitcast(x, it) for x in xs)

            def emit():
                pair = self.b.cmpxchg(p, c, v, order, fail_order)
                return self.b.extract_value(pair, 0)

            old = self._masked(pred, emit, ir.Constant(it, None))
            return old if rt == it else self.b.bitcast(old, rt)

        self._atomic(op, e, one, 1)

    def _atomic(self, op: Operation, e, one, first_val: int) -> None:
        ptr = op.operands[0]
        nvals = 2 if op.name == "atomic_cas" else 1
        if not isinstance(ptr.type, TileType):
            pred = self.b.icmp_unsigned("==", self.tid, ir.Constant(ops.I32, 0))
            if op.name == "atomic_rmw" and len(op.operands) > 2:
                pred = self.b.and_(pred, self.scalar(op.operands[2]))
            xs = [self.scalar(v) for v in op.operands[first_val : first_val + nvals]]
            old = one(self.scalar(ptr), xs, pred)
            self.define(op.result, None, self.broadcast_scalar(old, e, self.b.icmp_unsigned("==", self.tid, ir.Constant(ops.I32, 0))))
            return
        lay = self.plan.access[op]
        ptrs = self.get(ptr, lay)
        vals = [self.get(v, lay) for v in op.operands[first_val : first_val + nvals]]
        mask = self.get(op.operands[2], lay) if op.name == "atomic_rmw" and len(op.operands) > 2 else None
        owner = self.owner_pred(lay)
        unique = set(self.unique_regs(lay))
        out = []
        for r in range(lay.num_regs):
            if r not in unique:
                out.append(ir.Constant(ops.reg_type(e), None))
                continue
            pred = owner if mask is None else self.b.and_(mask[r], owner)
            out.append(one(ptrs[r], [v[r] for v in vals], pred))
        if len(unique) != lay.num_regs or not isinstance(owner, ir.Constant):
            out = self.through_smem(out, lay, lay, e, only_owner=True)
        self.define(op.result, lay, out)


# ---- conversions through shared memory: vector runs and padding ---------------------------------------


def padded_strides(shape: tuple[int, ...], pad: int) -> tuple[list[int], int]:
    """Row-major element strides with `pad` elements after each innermost row (of a 2-D or higher tile);
    the total in elements."""
    strides, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d] + (pad if d == len(shape) - 1 and len(shape) > 1 else 0)
    return strides, max(acc, 1)


def vector_run(lay: Layout, nbytes: int, limit: int, pitch: int | None) -> int:
    """How many consecutive registers of `lay` hold consecutive elements of a row, each run starting at an
    element index that is a multiple of its length: a power of two of at most `limit` bytes. `pitch`: the
    row stride in elements (None for a 1-D tile)."""
    last = len(lay.shape) - 1
    k = 0
    while k < len(lay.reg) and (2 << k) * nbytes <= limit:
        if lay.reg[k] != tuple((1 << k) if d == last else 0 for d in range(len(lay.shape))):
            break
        k += 1
    run = 1 << k
    while run > 1:
        rest = [*lay.reg[run.bit_length() - 1:], *lay.lane, *lay.warp]
        if all(b[last] % run == 0 for b in rest) and (pitch is None or pitch % run == 0):
            return run
        run //= 2
    return 1


def vector_groups(lay: Layout, regs, run: int) -> list[tuple[int, list[int]]]:
    """The registers `regs` (each group's first, then the run it starts), `run` consecutive ones at a time."""
    regs = list(regs)
    if run == 1:
        return [(r, [r]) for r in regs]
    return [(r, list(range(r, r + run))) for r in regs if r % run == 0]


def wavefronts(lay: Layout, strides: list[int], nbytes: int, run: int) -> int:
    """Shared-memory wavefronts of warp 0 reading (or writing) every register of `lay` in runs of `run`:
    an access of w bytes a lane is served 128 bytes at a time (32, 16 or 8 lanes), and each part takes as
    many wavefronts as the most distinct 4-byte words any one bank holds; lanes on the same word share it."""
    width = run * nbytes
    lanes_per = 32 if width <= 4 else 128 // width
    lane_off = [sum(x * s for x, s in zip(lay.thread_coord(lane), strides, strict=True)) for lane in range(32)]
    zero = sum(1 << i for i, bs in enumerate(lay.reg) if not any(bs))
    total = 0
    for r in range(0, lay.num_regs, run):
        if r & zero:
            continue
        reg_off = sum(x * s for x, s in zip(lay.reg_coord(r), strides, strict=True))
        for p in range(0, 32, lanes_per):
            banks: dict[int, set[int]] = {}
            for lane in range(p, p + lanes_per):
                start = (lane_off[lane] + reg_off) * nbytes
                for word in range(start // 4, (start + max(width, 1) - 1) // 4 + 1):
                    banks.setdefault(word % 32, set()).add(word)
            total += max(len(w) for w in banks.values())
    return total


def choose_padding(src: Layout, dst: Layout, nbytes: int, limit: int) -> tuple[int, tuple[int, int]]:
    """Padding (elements after each row) and the vector runs of the write (`src`) and the read (`dst`):
    of 4, 8 and 16 bytes of padding (at least one element), the one with the fewest wavefronts, the
    smallest on a tie. A 1-D tile has no rows to pad."""
    if len(src.shape) < 2:
        return 1, (vector_run(src, nbytes, limit, None), vector_run(dst, nbytes, limit, None))
    best = None
    for pad_bytes in (4, 8, 16):
        pad = max(1, pad_bytes // nbytes)
        if best is not None and pad == best[1]:
            continue
        pitch = src.shape[-1] + pad
        strides, _ = padded_strides(src.shape, pad)
        runs = (vector_run(src, nbytes, limit, pitch), vector_run(dst, nbytes, limit, pitch))
        cost = wavefronts(src, strides, nbytes, runs[0]) + wavefronts(dst, strides, nbytes, runs[1])
        if best is None or cost < best[0]:
            best = (cost, pad, runs)
    return best[1], best[2]
