"""Tile IR -> LLVM IR for NVPTX: each tile is a list of registers per thread, in a distributed layout.

Cheap pure ops (ranges, splats, broadcasts, elementwise math) are computed on demand in whatever
layout their user asks for; loads, reductions, dots and loop-carried values are materialised once
in the layout the gpu-layout pass chose (read back from the IR's gpu.* attributes, plan.py), and converted
through shared memory when asked for another.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...artifact import CudaOptions
from ...errors import CompileError
from ...ir.core import Function, Operation, Value
from ...ir.types import PointerType, TileType, elem_type, shape_of
from . import ops
from .control import ControlLowering
from .fma_dot import FmaDotLowering
from .layouts import Layout, WgmmaSpec, log2
from .memory import MemoryLowering
from .misc import MiscLowering
from .mma import MmaLowering
from .pipelined import PipelineLowering
from .plan import is_lazy, read_layouts, read_pipeline
from .reduce import ReduceLowering
from .scan import ScanLowering
from .shape import ShapeLowering
from .smem import SharedMemory
from .sort import SortLowering
from .tma import TmaLowering
from .wgmma import WgmmaLowering

MAX_REGS_PER_THREAD = 4096
def _kept_by_shm(self) -> None:
    raise AttributeError("the lowering's shared memory is kept by self.shm (smem.py: claim, released, control_flow, "
                         "scoped, base, epoch, size)")  # fmt: skip


LAYOUT_OPS = frozenset({"broadcast", "expand_dims", "trans", "reshape", "multiple_of", "max_contiguous", "desc_box"})


class CudaLowering(ControlLowering, MiscLowering, PipelineLowering, TmaLowering, WgmmaLowering, MmaLowering,
                   MemoryLowering, ReduceLowering, ScanLowering, FmaDotLowering, ShapeLowering, SortLowering):
    def __init__(self, fn: Function, sm: int, cg: CudaOptions | None = None, debug: bool = False):
        self.src = fn
        self.cg = cg or CudaOptions()  # the codegen choices (compile options), read by every mixin
        self.debug = debug  # CompileOptions.debug: device asserts are checked (Triton's debug mode)
        self.plan = read_layouts(fn)
        self.pipes = read_pipeline(fn, self.plan)
        self._rings: dict = {}
        self._pending: dict = {}  # wgmma dot -> groups it leaves in flight (pipelined.py sets it per loop)
        self._deferred_issue: dict = {}  # wgmma dot -> the copies its loop issues after the dot's group
        self._wait_also: dict = {}  # wgmma dot -> (carried arg, layout) of a group its wait also waits for
        self._hoisted: dict = {}  # (wgmma dot, operand) -> its tile staged before its loop (wgmma.py)
        self._tma_bars: dict = {}  # pipelined loop -> shared byte offset of its mbarriers (tma.py)
        self.sm = sm
        self.num_warps = self.plan.num_warps
        self.module = ir.Module(name=fn.name)
        self.module.triple = "nvptx64-nvidia-cuda"
        self.module.tilec_fp8_cvt = sm >= ops.FP8_CVT_SM  # fp8 conversions in hardware (ops.fp8_value)
        # libdevice's flush-to-zero paths, as Triton links it (nvvm-reflect-ftz = 1; flag behaviour 4: override)
        ftz = self.module.add_metadata([ir.Constant(ops.I32, 4), "nvvm-reflect-ftz", ir.Constant(ops.I32, 1)])
        self.module.add_named_metadata("llvm.module.flags", ftz)
        self.scopes: list[dict] = [{}]
        self.shm = SharedMemory(self.barrier)  # shared memory: reservations, scratch base, epochs, barriers
        self.arg_kinds: list[str] = []
        self._thread_coords: dict[Layout, list] = {}
        self._axis: dict | None = None  # axis analysis of the kernel, on first use (_equal_run)

    # The hand-kept shared-memory state that self.shm replaced: reading or setting these names fails at once,
    # so code written against them cannot leave a barrier out silently.
    smem_dirty = smem_base = smem_epoch = smem_bytes = property(_kept_by_shm)

    # ---- entry ---------------------------------------------------------------------------------

    def lower(self) -> ir.Module:
        params = [self._param_type(p.type) for p in self.src.params]
        params += self.tma_setup()  # tensor maps of the boxes TMA copies, after the IR's parameters
        fnty = ir.FunctionType(ir.VoidType(), params)
        self.fn = ir.Function(self.module, fnty, self.src.name)
        self.fn.calling_convention = "ptx_kernel"
        prologue = self.fn.append_basic_block("prologue")
        body = self.fn.append_basic_block("body")
        self.pb = ir.IRBuilder(prologue)
        self.b = ir.IRBuilder(body)
        self.tma_bind(self.fn.args[len(self.src.params) :])
        self.smem = ir.GlobalVariable(self.module, ir.ArrayType(ops.I8, 0), "tilec_smem", addrspace=3)
        self.smem.linkage = "external"
        self.smem.align = 1024 if any(isinstance(s, WgmmaSpec) for s in self.plan.mma.values()) else 16
        self.smem.type = ops.SPTR  # opaque pointer, so typed loads/stores through byte offsets verify
        self.smem_ptr = self.smem
        tid = self._sreg(self.pb, "tid.x")
        self.lane = self.pb.and_(tid, ir.Constant(ops.I32, 31))
        self._warp = None
        self.tid = tid
        for p, a, la in zip(self.src.params, self.src.args, self.fn.args, strict=False):
            self.scopes[0][(a, None)] = self._param_value(p.type, la)
        self.lower_block(self.src.body.block.ops)
        self.pb.branch(body)
        return self.module

    def _param_type(self, t) -> ir.Type:
        if isinstance(t, TileType):
            raise CompileError("cuda: kernel parameters must be scalars or pointers")
        if isinstance(t, PointerType):
            self.arg_kinds.append("ptr")
            return ops.GPTR
        if t.is_float:
            self.arg_kinds.append("f64" if t.bits == 64 else "f32")
            return ops.F64 if t.bits == 64 else ops.F32
        kind = ("i" if t.is_signed else "u") + str(max(32, t.bits))
        self.arg_kinds.append(kind)
        return ir.IntType(max(32, t.bits))

    def _param_value(self, t, v):
        if isinstance(t, PointerType):
            return v
        if t.name == "f16":
            return self.b.fptrunc(v, ops.F16)
        if t.is_float:
            return v
        if t.bits < 32:
            return self.b.trunc(v, ops.reg_type(t))
        return v

    @property
    def warp(self):
        """The warp index (i32), made in the prologue where first asked for (a kernel whose coordinates all
        come from tid.x needs none): with CudaOptions.uniform_warp read back through shfl.sync.idx, so ptxas
        knows it warp-uniform."""
        if self._warp is None:
            self._warp = self.pb.lshr(self.tid, ir.Constant(ops.I32, 5))
            if self.cg.uniform_warp:
                self._warp = self._uniform(self._warp)
        return self._warp

    def _uniform(self, v):
        """`v` (i32, the same in every lane of a warp) read back from lane 0 by shfl.sync.idx: ptxas then
        knows it is warp-uniform and keeps what is computed from it (the warp index: wgmma descriptors,
        per-warp shared offsets) in uniform registers instead of one register per thread."""
        fn = ops.intrinsic(self.module, "llvm.nvvm.shfl.sync.idx.i32", ops.I32, [ops.I32] * 4)
        c = lambda x: ir.Constant(ops.I32, x)  # noqa: E731
        return self.pb.call(fn, [c(-1), v, c(0), c(31)])

    def _sreg(self, b: ir.IRBuilder, name: str):
        fn = ops.intrinsic(self.module, f"llvm.nvvm.read.ptx.sreg.{name}", ops.I32, [])
        return b.call(fn, [])

    # ---- values --------------------------------------------------------------------------------

    def lookup(self, key):
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def define(self, v: Value, lay: Layout | None, vals) -> None:
        self.scopes[-1][(v, lay)] = vals

    def layout_of(self, v: Value) -> Layout:
        lay = self.plan.natural.get(v)
        if lay is None:
            lay = self.plan.default(v.type.shape)
            self.plan.natural[v] = lay
        return lay

    def scalar(self, v: Value):
        got = self.lookup((v, None))
        if got is None:
            raise CompileError(f"cuda: internal: scalar {v!r} used before it was lowered")
        return got

    def get(self, v: Value, lay: Layout | None = None):
        """The registers of tile `v` in layout `lay` (its natural layout when None); scalars as is."""
        if not isinstance(v.type, TileType):
            return self.scalar(v)
        lay = lay or self.layout_of(v)
        got = self.lookup((v, lay))
        if got is not None:
            return got
        self._lower_lazy_chain(v, lay)
        return self.lookup((v, lay))

    def _lower_lazy_chain(self, v: Value, lay: Layout) -> None:
        """Lower `v` in `lay` and, first, the lazy tiles it reads, deepest first, with an explicit stack:
        a long chain of elementwise ops (an unrolled accumulation) must not recurse once per op."""
        stack: list[tuple[Value, Layout, bool]] = [(v, lay, False)]
        expanded: set[tuple[Value, Layout]] = set()
        while stack:
            x, xl, ready = stack.pop()
            if self.lookup((x, xl)) is not None:
                continue
            op = x.owner
            if ready or not (isinstance(op, Operation) and is_lazy(op)) or self._convert_result(x):
                self._materialise(x, xl)  # every lazy tile it reads is lowered: one level deep at most
                continue
            if (x, xl) in expanded:
                continue
            expanded.add((x, xl))
            stack.append((x, xl, True))
            stack.extend((d, dl, False) for d, dl in reversed(self.lazy_operands(op, xl)))

    def _convert_result(self, v: Value) -> bool:
        """Whether a lazy tile already computed in program order (in its natural layout) is converted as
        it is rather than recomputed from converted operands: when it has no more bits per element than
        the strong operands it reads (a cast of the f32 accumulator to f16 moves half the bytes)."""
        if v not in self.plan.strong or self.lookup((v, self.layout_of(v))) is None:
            return False
        strong = [w for w in v.owner.operands if isinstance(w.type, TileType) and w in self.plan.strong]
        return bool(strong) and elem_type(v.type).bits <= sum(elem_type(w.type).bits for w in strong)

    def _materialise(self, v: Value, lay: Layout) -> None:
        op = v.owner
        if isinstance(op, Operation) and is_lazy(op) and not self._convert_result(v):
            vals = self.lazy(op, lay)
        else:
            nat = self.layout_of(v)
            src = self.lookup((v, nat))
            if src is None:
                raise CompileError(f"cuda: internal: tile {v!r} used before it was lowered")
            vals = self.convert(src, nat, lay, elem_type(v.type))
        self.define(v, lay, vals)

    def thread_coord(self, lay: Layout) -> list:
        """Per dimension, the coordinate contributed by this thread's lane and warp bits (i32)."""
        got = self._thread_coords.get(lay)
        if got is not None:
            return got
        b = self.pb
        out = []
        for d in range(len(lay.shape)):
            if self.cg.coords_from_tid and any(basis[d] for basis in lay.lane):
                out.append(self._coord_from_tid([basis[d] for basis in (*lay.lane, *lay.warp)]))
                continue
            acc = ir.Constant(ops.I32, 0)
            for src, bases in (("lane", lay.lane), ("warp", lay.warp)):
                for i, basis in enumerate(bases):
                    if basis[d]:
                        bit = b.and_(b.lshr(getattr(self, src), ir.Constant(ops.I32, i)), ir.Constant(ops.I32, 1))
                        acc = b.or_(acc, b.shl(bit, ir.Constant(ops.I32, log2(basis[d]))))
            out.append(acc)
        self._thread_coords[lay] = out
        return out

    def _coord_from_tid(self, parts: list[int]):
        """A coordinate that lane bits feed, from the thread index itself: `parts[t]` is what bit t of tid.x
        (lane bits, then warp bits) adds. Bits that land on consecutive powers of two in order are one field
        ((tid >> t) & mask) << p, as Triton's layouts compute it: no warp index (shfl.sync.idx) on the way to
        the first load, and a few instructions for what was a shift, mask and or per bit. Not warp-uniform
        anyway, since lane bits feed it."""
        b, acc, t = self.pb, ir.Constant(ops.I32, 0), 0
        while t < len(parts):
            if not parts[t]:
                t += 1
                continue
            n = 1
            while t + n < len(parts) and parts[t + n] == parts[t] << n:
                n += 1
            field = b.and_(b.lshr(self.tid, ir.Constant(ops.I32, t)), ir.Constant(ops.I32, (1 << n) - 1))
            acc = b.or_(acc, b.shl(field, ir.Constant(ops.I32, log2(parts[t]))))
            t += n
        return acc

    def owner_pred(self, lay: Layout):
        """True in the one thread of each group that holds replicated copies (zero lane/warp bases)."""
        mask_l = sum(1 << i for i, bs in enumerate(lay.lane) if not any(bs))
        mask_w = sum(1 << i for i, bs in enumerate(lay.warp) if not any(bs))
        pred = ir.Constant(ops.I1, 1)
        b = self.pb
        for src, m in (("lane", mask_l), ("warp", mask_w)):
            if m:  # the warp index made only where a warp bit is replicated
                z = b.icmp_unsigned("==", b.and_(getattr(self, src), ir.Constant(ops.I32, m)), ir.Constant(ops.I32, 0))
                pred = b.and_(pred, z)
        return pred

    def unique_regs(self, lay: Layout) -> list[int]:
        """Registers that are not copies of a lower register (bits of zero reg bases clear)."""
        zero = sum(1 << i for i, bs in enumerate(lay.reg) if not any(bs))
        return [r for r in range(lay.num_regs) if not r & zero]

    # ---- lazy ops ------------------------------------------------------------------------------

    def lazy(self, op: Operation, lay: Layout) -> list:  # noqa: C901 - one case per op
        res = op.results[0]
        e = elem_type(res.type)
        n = lay.num_regs
        if n > MAX_REGS_PER_THREAD:
            raise CompileError(f"cuda: tile {res.type} needs {n} registers per thread; use more warps or a smaller tile")
        name = op.name
        if name == "constant":
            v = op.attrs["value"]
            if e.name == "bf16":
                v = float(self._bf16_round(float(v)))
            elif e.is_fp8:
                from ...ir.fp8 import round_to  # NumPy on first use, as _bf16_round

                v = float(round_to(v, e.name, keep_inf=True))
            return [ops.const(e, v)] * n
        if name == "splat":
            return [self.scalar(op.operands[0])] * n
        if name == "make_range":
            tc = self.thread_coord(lay)[0]
            start = op.attrs["start"]
            return [self.b.add(tc, ir.Constant(ops.I32, start + lay.reg_coord(r)[0])) for r in range(n)]
        if name in ("broadcast", "expand_dims", "trans", "multiple_of", "max_contiguous", "desc_box"):
            return list(self.get(*self.lazy_operands(op, lay)[0]))
        if name == "reshape":
            return self.lazy_reshape(op, lay)
        args = [self.get(v, lay) if isinstance(v.type, TileType) else [self.scalar(v)] * n for v in op.operands]
        rep = self._equal_regs(op, lay)  # registers axis analysis proves equal: computed once, at the first
        out: list = []
        for r in range(n):
            out.append(self.elementwise(op, [a[r] for a in args]) if rep[r] == r else out[rep[r]])
        return out

    def _equal_regs(self, op: Operation, lay: Layout) -> list[int]:
        """For each register of `op`'s result in `lay`, the first register proven to hold the same value
        (Triton's constancy, as its elementwise lowering deduplicates: `rows[:, None] < M` over a thread's 8
        rows when M is a multiple of 8, `cols < N` over 4 contiguous columns when N is a multiple of 4). Along
        each dimension the runs of equal values are aligned blocks (axis analysis's constancy, as a power of
        two) that no lane or warp basis cuts: two registers whose coordinates fall in the same block of every
        dimension are equal."""
        n = lay.num_regs
        if self._axis is None:
            from ...passes.axis_analysis import axis_analysis

            self._axis = axis_analysis(self.src)
        info = self._axis.get(op.results[0]) if op.results else None
        if info is None or n == 1:
            return list(range(n))
        runs = []
        for d, k in enumerate(info.constancy):
            run = 1 << (max(k, 1).bit_length() - 1)
            while run > 1 and any(b[d] % run for b in (*lay.lane, *lay.warp)):
                run //= 2
            runs.append(run)
        first: dict[tuple, int] = {}
        return [first.setdefault(tuple(c // k for c, k in zip(lay.reg_coord(r), runs, strict=True)), r) for r in range(n)]

    def lazy_operands(self, op: Operation, lay: Layout) -> list[tuple[Value, Layout]]:
        """The tiles (and their layouts) that lazy op `op` reads to compute its result in `lay`."""
        name = op.name
        if name in ("constant", "splat", "make_range"):
            return []
        src = op.operands[0]
        if name == "broadcast":
            return [(src, lay.project(shape_of(src.type)))]
        if name == "expand_dims":
            return [(src, lay.without_dim(op.attrs["axis"]))]
        if name == "trans":
            order = op.attrs["order"]
            return [(src, lay.permute([order.index(i) for i in range(len(order))]))]
        if name in ("multiple_of", "max_contiguous"):
            return [(src, lay)]
        if name == "reshape":
            return [(src, self.reshape_source_layout(op, lay))]
        return [(v, lay) for v in op.operands if isinstance(v.type, TileType)]

    @staticmethod
    def _bf16_round(x: float) -> float:
        import numpy as np

        bits = np.array([x], dtype=np.float32).view(np.uint32)[0].item()
        if x != x:
            return x
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return float(np.array([bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])

    def elementwise(self, op: Operation, xs: list):
        """One element of an elementwise op (also used for scalars)."""
        b, name = self.b, op.name
        e = elem_type(op.operands[0].type) if op.operands else elem_type(op.results[0].type)
        if name == "cmp":
            return ops.compare(b, op.attrs["pred"], e, *xs)
        if name == "select":
            return b.select(xs[0], xs[1], xs[2])
        if name == "cast":
            return ops.cast(b, e, elem_type(op.results[0].type), xs[0])
        if name == "bitcast":
            return ops.bitcast(b, e, elem_type(op.results[0].type), xs[0])
        if name == "addptr":
            pointee = ops.mem_type(e.pointee)
            return b.gep(xs[0], [xs[1]], source_etype=pointee)
        if name == "fma":
            return ops.fma(b, e, *xs)
        if len(xs) == 2:
            return ops.binary(b, name, e, xs[0], xs[1], op.attrs, self.cg.fp_fusion)
        if len(xs) == 1:
            return ops.unary(b, name, e, xs[0], self.cg.ex2_ftz, op.attrs)
        raise CompileError(f"cuda: no lowering for '{name}'")

    # ---- blocks and ops ------------------------------------------------------------------------

    def lower_block(self, block_ops: list[Operation]) -> None:
        for op in block_ops:
            self.lower_op(op)

    def lower_op(self, op: Operation) -> None:  # noqa: C901 - dispatch
        name = op.name
        tile_result = bool(op.results) and isinstance(op.results[0].type, TileType)
        if is_lazy(op) and tile_result:
            if self._computes_in_order(op):
                self.get(op.results[0])
            return  # else computed on demand, in the layout its user needs
        if is_lazy(op):
            if name == "constant":
                self.define(op.results[0], None, ops.const(elem_type(op.results[0].type), op.attrs["value"]))
            elif name in ("multiple_of", "max_contiguous"):
                self.define(op.results[0], None, self.scalar(op.operands[0]))
            else:
                self.define(op.results[0], None, self.elementwise(op, [self.scalar(v) for v in op.operands]))
            return
        handler = getattr(self, "op_" + name, None)
        if handler is None:
            raise CompileError(f"cuda: op '{name}' is not supported by the cuda backend")
        handler(op)

    def _computes_in_order(self, op: Operation) -> bool:
        """Elementwise math on loaded (reduced, carried...) tiles is computed here, in program order, when
        its loaded operands already sit in its layout: deferred to the user, a long unrolled chain would
        keep every loaded tile live at once (ptxas spills and slows down with their number). No
        conversion is added: index math and constants are recomputed in that layout as before."""
        res = op.results[0]
        if res not in self.plan.strong or op.name in LAYOUT_OPS:
            return False
        lay = self.layout_of(res)
        return all(
            self.lookup((v, lay)) is not None
            for v in op.operands
            if isinstance(v.type, TileType) and v in self.plan.strong
        )

    def op_program_id(self, op: Operation) -> None:
        self.define(op.result, None, self._sreg(self.b, "ctaid." + "xyz"[op.attrs["axis"]]))

    def op_num_programs(self, op: Operation) -> None:
        self.define(op.result, None, self._sreg(self.b, "nctaid." + "xyz"[op.attrs["axis"]]))

    def op_return(self, op: Operation) -> None:
        if op.operands:
            raise CompileError("cuda: a kernel returns nothing")
        self.b.ret_void()

    def op_barrier(self, op: Operation) -> None:
        self.barrier()

    def op_assert(self, op: Operation) -> None:
        if not self.debug:
            return  # device asserts are off, as in Triton without debug
        from .printing import lower_assert

        lower_assert(self, op)

    def op_print(self, op: Operation) -> None:
        from .printing import lower_print

        lower_print(self, op)

    def op_call(self, op: Operation) -> None:
        raise CompileError(f"cuda: call to @{op.attrs['callee']} was not inlined (run the inline pass)")

    def barrier(self) -> None:
        fn = ops.intrinsic(self.module, "llvm.nvvm.barrier0", ir.VoidType(), [])
        self.b.call(fn, [])
        self.shm.synced()


def lower_kernel(fn: Function, sm: int, cg: CudaOptions | None = None, debug: bool = False) -> tuple[ir.Module, dict]:
    """`fn`, annotated by the cuda passes, as an NVVM module (built with the codegen options `cg`); and its
    launch metadata. `debug`: check device asserts (a failing one calls __assertfail, which stops the kernel
    as Triton's debug mode does)."""
    low = CudaLowering(fn, sm, cg, debug)
    module = low.lower()
    info = {
        "num_warps": low.num_warps,
        "threads_per_block": 32 * low.num_warps,
        "shared_bytes": low.shm.size,
        "pipelined_loops": len(low.pipes.loops),
        "arg_kinds": low.arg_kinds,
        "dots": sum(op.name.startswith("dot") for op in fn.walk()),
    }
    if low.tma_maps:
        info["tma"] = [m.metadata() for m in low.tma_maps]
    return module, info
