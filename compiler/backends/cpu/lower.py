"""Lowers one tile-IR function to an LLVM function: the walker, its op table, and the elementwise ops.

Each op name maps to a handler `(FunctionLowering, op) -> list of LLVM values` (one per result);
handlers for memory, tile-shape, reduction and control ops live in memory.py, tiles.py,
reduce.py and control.py and register themselves into HANDLERS. Big tiles: buffers.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ...errors import CompileError
from ...ir.core import Block, Function, Operation, Value, error_location, uses_in
from ...ir.ops import ELEMENTWISE_BINARY, MATH_UNARY, TERMINATORS
from ...ir.types import PointerType, TileType, Type, elem_type
from ..llvm import fp8
from ..llvm.loops import counted_loop, entry_alloca, load_elem
from ..llvm.tables import BINARY, CMP, UNARY, cast, fma
from ..llvm.types import (
    I8,
    I16,
    I32,
    I64,
    PTR,
    bf16_to_bits,
    bits_to_bf16,
    const_of,
    fp8_name,
    intrinsic,
    is_bf16,
    kind_of,
    like,
    ll_type,
    round_bf16,
    scalar_ll,
    splat_const,
)
from .buffers import STACK_LIMIT, Big, ChunkFusion, copy, is_big, make_range_big
from .printing import lower_print

Handler = Callable[["FunctionLowering", Operation], list | None]
HANDLERS: dict[str, Handler] = {}
N_GRID_ARGS = 6  # pid0..2, nprog0..2 appended to every lowered function
SEGMENT_BLOCKS = 24  # basic blocks (about a dozen tile loops) one LLVM function of a kernel body holds
SEGMENT_SUFFIX = ".seg"  # names the LLVM functions that continue a long kernel body (cpu.optimise reads it)


def lowering_error(op: Operation, msg: str) -> CompileError:
    return CompileError(f"cpu target: '{op.name}' {msg}", **error_location(op.loc))


class FunctionLowering:
    """State while lowering one function: the builder, the value map, grid arguments, assert sites."""

    def __init__(self, fn: Function, ll_fn: ir.Function, functions: dict[str, ir.Function], asserts: list):
        self.fn = fn
        self.ll_fn = ll_fn
        self._root_name = ll_fn.name
        self.functions = functions
        self.asserts = asserts
        self.values: dict[Value, ir.Value | Big] = {}
        self.lanes: int | None = None  # while lowering a chunk of a big tile: its lanes (0: scalar)
        self.buffer_bytes = 0
        self._axis: dict | None = None
        self._users: dict[Value, list[Operation]] | None = None
        self._last_use: dict[Value, int] | None = None
        entry = ll_fn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        n = len(fn.params)
        for v, a in zip(fn.args, ll_fn.args[:n], strict=False):
            self.values[v] = Big(v.type, ptr=a) if is_big(v.type) else a
        self.grid = list(ll_fn.args[n : n + N_GRID_ARGS])
        self.out_params = list(ll_fn.args[n + N_GRID_ARGS :])

    def get(self, v: Value):
        return self.values[v]

    def reg_type(self, t: Type) -> ir.Type:
        """The LLVM type of a value of `t` here: the whole tile, or one chunk of it inside a chunk loop."""
        if self.lanes is None or not isinstance(t, TileType):
            return ll_type(t)
        e = scalar_ll(elem_type(t))
        return e if self.lanes == 0 else ir.VectorType(e, self.lanes)

    def axis_info(self, v: Value):
        """tilec.compiler.passes.axis_analysis's AxisInfo of `v` (None when it is not tracked)."""
        if self._axis is None:
            from ...passes.axis_analysis import axis_analysis

            self._axis = axis_analysis(self.fn)
        return self._axis.get(v)

    def lower(self) -> None:
        term = self.lower_block(self.fn.body.block, top=True)
        self.lower_return(term)
        if self.buffer_bytes > STACK_LIMIT:
            raise CompileError(
                f"cpu target: @{self.fn.name} needs {self.buffer_bytes} bytes of tile buffers, more than the "
                f"{STACK_LIMIT} a program may use; use smaller tiles"
            )

    def lower_block(self, block: Block, top: bool = False) -> Operation | None:
        """Lower every op but the terminator, which is returned for the caller to handle. Consecutive
        chunked ops on big tiles share one loop (cpu_buffers.ChunkFusion); a long kernel body goes on in
        a new LLVM function once the current one is full (see _next_segment)."""
        fusion = ChunkFusion(self, HANDLERS)
        for i, op in enumerate(block.ops):
            if op.name in TERMINATORS:
                fusion.flush()
                return op
            handler = HANDLERS.get(op.name)
            if handler is None:
                raise lowering_error(op, "is not supported")
            if fusion.take(op):
                continue
            if not fusion.can_precede(op):
                fusion.flush()
            if top and not fusion.ops and self._segment_full():
                self._next_segment(block, i)
            out = handler(self, op) or []
            for r, v in zip(op.results, out, strict=False):
                self.values[r] = v
        fusion.flush()
        return None

    def _segment_full(self) -> bool:
        return self.fn.kernel and len(self.ll_fn.blocks) >= SEGMENT_BLOCKS

    def _next_segment(self, block: Block, index: int) -> None:
        """End the current LLVM function with a call to a new one that lowers the rest of the kernel body,
        from op `index` of its top-level `block` on. LLVM's loop and scheduling passes cost time
        superlinear in the loops and memory ops of one function, so a long unrolled kernel is compiled as
        a chain of bounded functions (noinline, so LLVM keeps them apart). The values the rest reads are
        passed in (buffers as pointers into the caller's frame, which lives on during the call)."""
        if self._last_use is None:
            self._last_use = {v: j for j, o in enumerate(block.ops) for op in o.walk() for v in op.operands}
        live = [v for v in self.values if self._last_use.get(v, -1) >= index]
        vals = [self.values[v] for v in live]
        args = [(x.ptr if x.ptr is not None else x.scalar) if isinstance(x, Big) else x for x in vals]
        args += self.grid
        module = self.ll_fn.module
        fnty = ir.FunctionType(I32, [a.type for a in args])
        seg = ir.Function(module, fnty, module.get_unique_name(self._root_name + SEGMENT_SUFFIX))
        seg.linkage = "internal"
        seg.attributes.add("noinline")
        self.b.ret(self.b.call(seg, args))
        self.ll_fn = seg
        self.b = ir.IRBuilder(seg.append_basic_block("entry"))
        self.values = {v: _rebind(x, a) for v, x, a in zip(live, vals, seg.args, strict=False)}
        self.grid = list(seg.args[len(live) :])

    def users(self) -> dict[Value, list[Operation]]:
        """The ops (nested ones too) that use each value of the function, computed once."""
        if self._users is None:
            self._users = uses_in(self.fn.body.block)
        return self._users

    def lower_return(self, term: Operation | None) -> None:
        """Big results are copied into the caller's buffers (the out-params); the rest are returned."""
        vals = []
        outs = iter(self.out_params)
        for v in term.operands if term is not None else []:
            x = self.get(v)
            if isinstance(x, Big):
                copy(self, next(outs), v.type, x)
            else:
                vals.append(x)
        if self.fn.kernel:
            self.b.ret(ir.Constant(I32, 0))
        elif not vals:
            self.b.ret_void()
        elif len(vals) == 1:
            self.b.ret(vals[0])
        else:
            agg = ir.Constant(self.ll_fn.return_value.type, ir.Undefined)
            for i, v in enumerate(vals):
                agg = self.b.insert_value(agg, v, i)
            self.b.ret(agg)


def _rebind(x, arg: ir.Value):
    """Value `x` of the caller as the argument `arg` of a kernel segment."""
    if not isinstance(x, Big):
        return arg
    return Big(x.type, ptr=arg) if x.ptr is not None else Big(x.type, scalar=arg)


# ---- elementwise ---------------------------------------------------------------------------------


def _finish(lw: FunctionLowering, op: Operation, v: ir.Value) -> list:
    """Round results to bf16 when the op makes bf16 values (held in f32 registers)."""
    if op.results and is_bf16(op.results[0].type):
        v = round_bf16(lw.b, v)
    return [v]


def _binary(lw: FunctionLowering, op: Operation) -> list:
    x, y = (lw.get(v) for v in op.operands)
    kind = kind_of(op.results[0].type)
    name = op.name + ("_nan" if op.attrs.get("propagate_nan") else "")
    fn = BINARY.get((name, kind))
    if fn is None:
        raise lowering_error(op, f"does not take {elem_type(op.results[0].type)} operands")
    return _finish(lw, op, fn(lw.b, x, y))


def _unary(lw: FunctionLowering, op: Operation) -> list:
    x = lw.get(op.operands[0])
    fn = UNARY.get((op.name, kind_of(op.results[0].type)))
    if fn is None:
        raise lowering_error(op, f"does not take {elem_type(op.results[0].type)} operands")
    return _finish(lw, op, fn(lw.b, x))


def _fma(lw: FunctionLowering, op: Operation) -> list:
    return _finish(lw, op, fma(lw.b, *(lw.get(v) for v in op.operands)))


def _cmp(lw: FunctionLowering, op: Operation) -> list:
    x, y = (lw.get(v) for v in op.operands)
    return [CMP[(op.attrs["pred"], kind_of(op.operands[0].type))](lw.b, x, y)]


def _select(lw: FunctionLowering, op: Operation) -> list:
    c, x, y = (lw.get(v) for v in op.operands)
    return [lw.b.select(c, x, y)]


def _constant(lw: FunctionLowering, op: Operation) -> list:
    t = op.results[0].type
    if is_big(t):
        return [Big(t, scalar=const_of(elem_type(t), op.attrs["value"]))]
    return [const_of(t, op.attrs["value"], lw.reg_type(t))]


def _cast(lw: FunctionLowering, op: Operation) -> list:
    src_t, dst_t = op.operands[0].type, op.results[0].type
    x = lw.get(op.operands[0])
    fmt = fp8_name(dst_t)
    if fmt is not None and fmt != fp8_name(src_t):
        if kind_of(src_t) == "float":
            x = fp8.to_f32(lw.b, x)  # from f64 by round-to-odd: one rounding in all
        out = cast(lw.b, x, kind_of(src_t), "float", lw.reg_type(dst_t))
        return [fp8.round_f32(lw.b, out, fmt)]
    out = cast(lw.b, x, kind_of(src_t), kind_of(dst_t), lw.reg_type(dst_t))
    if is_bf16(dst_t) and not is_bf16(src_t):
        out = round_bf16(lw.b, out)
    return [out]


def _bitcast(lw: FunctionLowering, op: Operation) -> list:
    src_t, dst_t = op.operands[0].type, op.results[0].type
    x, b = lw.get(op.operands[0]), lw.b
    if is_bf16(src_t):
        x = bf16_to_bits(b, x)
    if fp8_name(src_t):
        x = fp8.f32_to_bits(b, x, fp8_name(src_t))
    if fp8_name(dst_t):
        return [fp8.bits_to_f32(b, b.bitcast(x, like(x.type, I8)), fp8_name(dst_t))]
    if is_bf16(dst_t):
        return [bits_to_bf16(b, b.bitcast(x, like(x.type, I16)))]
    want = lw.reg_type(dst_t)
    return [x if x.type == want else b.bitcast(x, want)]


def _addptr(lw: FunctionLowering, op: Operation) -> list:
    p, off = (lw.get(v) for v in op.operands)
    pointee = elem_type(op.operands[0].type)
    assert isinstance(pointee, PointerType)
    size = pointee.pointee.bytes
    off64 = cast(lw.b, off, kind_of(op.operands[1].type), "sint", like(off.type, I64))
    if size != 1:
        off64 = lw.b.mul(off64, splat_const(off64.type, size))
    return [lw.b.add(p, off64)]


def _identity(lw: FunctionLowering, op: Operation) -> list:
    return [lw.get(op.operands[0])]


def _program_id(lw: FunctionLowering, op: Operation) -> list:
    return [lw.grid[op.attrs["axis"]]]


def _num_programs(lw: FunctionLowering, op: Operation) -> list:
    return [lw.grid[3 + op.attrs["axis"]]]


def _make_range(lw: FunctionLowering, op: Operation) -> list:
    if is_big(op.results[0].type):
        return [make_range_big(lw, op.results[0].type, op.attrs["start"])]
    t = ll_type(op.results[0].type)
    vals = np.arange(op.attrs["start"], op.attrs["end"])
    return [ir.Constant(t, [ir.Constant(I32, int(v)) for v in vals])]


def _barrier(lw: FunctionLowering, op: Operation) -> list:
    return []


def _assert(lw: FunctionLowering, op: Operation) -> list:
    """A false lane returns the assert's code (index + 1) from the kernel; the runtime raises."""
    if not lw.fn.kernel:
        raise lowering_error(op, "inside a called function is not supported on cpu (inline it first)")
    b = lw.b
    cond = lw.get(op.operands[0])
    if isinstance(cond, Big):
        cond = _all_true(lw, cond)
    if isinstance(cond.type, ir.VectorType):
        cond = intrinsic(b, "vector.reduce.and", [cond], ret=cond.type.element)
    lw.asserts.append({"message": op.attrs["message"], "loc": str(op.loc) if op.loc else ""})
    fail = b.append_basic_block("assert.fail")
    ok = b.append_basic_block("assert.ok")
    b.cbranch(cond, ok, fail)
    b.position_at_end(fail)
    b.ret(ir.Constant(I32, len(lw.asserts)))
    b.position_at_end(ok)
    return []


def _all_true(lw: FunctionLowering, cond: Big) -> ir.Value:
    """i1: every element of a big i1 tile is set (the minimum of its bytes is not 0)."""
    if cond.scalar is not None:
        return cond.scalar
    b = lw.b
    acc = entry_alloca(b, I8)
    b.store(ir.Constant(I8, 1), acc)
    with counted_loop(b, 0, cond.type.numel, "all") as i:
        b.store(b.and_(b.load(acc), load_elem(b, cond.ptr, I8, i)), acc)
    return b.icmp_unsigned("!=", b.load(acc), ir.Constant(I8, 0))


for _n in ELEMENTWISE_BINARY:
    HANDLERS[_n] = _binary
for _n in (*MATH_UNARY, "neg", "abs"):
    HANDLERS[_n] = _unary
HANDLERS.update(
    {
        "print": lower_print,
        "fma": _fma,
        "cmp": _cmp,
        "select": _select,
        "constant": _constant,
        "cast": _cast,
        "bitcast": _bitcast,
        "addptr": _addptr,
        "multiple_of": _identity,
        "max_contiguous": _identity,
        "desc_box": _identity,
        "program_id": _program_id,
        "num_programs": _num_programs,
        "make_range": _make_range,
        "barrier": _barrier,
        "assert": _assert,
    }
)


def function_type(fn: Function) -> ir.FunctionType:
    """Kernels return an i32 status (0, or the failing assert's code); helpers return their values. Big
    tiles pass as buffer pointers; big results are written to caller buffers passed after the grid args."""
    params = [PTR if is_big(p.type) else ll_type(p.type) for p in fn.params] + [I32] * N_GRID_ARGS
    if fn.kernel:
        return ir.FunctionType(I32, params)
    params += [PTR for t in fn.result_types if is_big(t)]
    rets = [ll_type(t) for t in fn.result_types if not is_big(t)]
    if not rets:
        return ir.FunctionType(ir.VoidType(), params)
    if len(rets) == 1:
        return ir.FunctionType(rets[0], params)
    return ir.FunctionType(ir.LiteralStructType(rets), params)
