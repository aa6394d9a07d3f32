"""tl.device_print on cuda: vprintf from the thread that holds each element (one copy of replicated ones),
one line per element, `pid (x, y, z) idx (i, ...) prefix: value` as the cpu target and the interpreter
print it (lines of different threads come in the order the GPU runs them)."""

from __future__ import annotations

from llvmlite import ir

from ...ir.core import Operation
from ...ir.types import TileType
from . import ops

I8, I32, I64 = ops.I8, ops.I32, ir.IntType(64)
F64 = ir.DoubleType()
GENERIC = ir.PointerType()


def lower_print(lw, op: Operation) -> None:  # noqa: ANN001 - lower.CudaLowering
    b = lw.b
    vprintf = lw.module.globals.get("vprintf") or ir.Function(
        lw.module, ir.FunctionType(I32, [GENERIC, GENERIC]), "vprintf")  # fmt: skip
    pid = [lw._sreg(b, f"ctaid.{a}") for a in "xyz"]
    for k, v in enumerate(op.operands):
        label = op.attrs["prefix"] + (f" (operand {k})" if len(op.operands) > 1 else "")
        hexa = op.attrs.get("hex", False)
        elem = v.type.elem if isinstance(v.type, TileType) else v.type
        spec = _spec(elem, hexa)
        if not isinstance(v.type, TileType):
            first = b.and_(b.icmp_unsigned("==", lw.lane, ir.Constant(I32, 0)),
                           b.icmp_unsigned("==", lw.warp, ir.Constant(I32, 0)))  # fmt: skip
            fmt = _cstring(lw.module, f"pid (%d, %d, %d) idx () {_esc(label)}: {spec}\n")
            with b.if_then(first):
                _call(lw, vprintf, fmt, [*pid, _widen(b, lw.get(v), elem, hexa)])
            continue
        lay = lw.layout_of(v)
        regs = lw.get(v, lay)
        coord = lw.thread_coord(lay)
        idx = ", ".join(["%d"] * len(lay.shape))
        fmt = _cstring(lw.module, f"pid (%d, %d, %d) idx ({idx}) {_esc(label)}: {spec}\n")
        with b.if_then(lw.owner_pred(lay)):
            for r in lw.unique_regs(lay):
                at = [b.or_(c, ir.Constant(I32, o)) for c, o in zip(coord, lay.reg_coord(r), strict=True)]
                _call(lw, vprintf, fmt, [*pid, *at, _widen(b, regs[r], elem, hexa)])


def _esc(text: str) -> str:
    return text.replace("%", "%%")


def _spec(elem, hexa: bool) -> str:  # noqa: ANN001 - an element type
    if getattr(elem, "is_float", False):
        return "%f"
    if getattr(elem, "name", "") == "i1":
        return "%d"
    if hexa or not getattr(elem, "is_int", False):
        return "0x%llx"  # pointers too
    return "%lld" if elem.is_signed else "%llu"


def _widen(b: ir.IRBuilder, x: ir.Value, elem, hexa: bool) -> ir.Value:  # noqa: ANN001
    if isinstance(x.type, ir.PointerType):
        return b.ptrtoint(x, I64)
    if isinstance(x.type, (ir.HalfType, ir.FloatType)):
        return b.fpext(x, F64)
    if isinstance(x.type, ir.DoubleType):
        return x
    if getattr(elem, "name", "") == "i1":
        return b.zext(x, I32)
    if x.type.width < 64:
        return b.sext(x, I64) if getattr(elem, "is_signed", False) and not hexa else b.zext(x, I64)
    return x


def _call(lw, vprintf: ir.Function, fmt: ir.Value, args: list[ir.Value]) -> None:  # noqa: ANN001
    """vprintf(format, a buffer of the arguments, each at its natural alignment; the buffer is allocated in
    the prologue, as local memory should be)."""
    b = lw.b
    struct = ir.LiteralStructType([a.type for a in args])
    buf = lw.pb.alloca(struct)
    for i, a in enumerate(args):
        b.store(a, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True))
    b.call(
        vprintf,
        [b.addrspacecast(fmt, GENERIC), b.addrspacecast(buf, GENERIC) if buf.type != GENERIC else buf],
    )


def _cstring(module: ir.Module, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8")) + b"\0"
    arr = ir.ArrayType(I8, len(data))
    g = ir.GlobalVariable(module, arr, f".print.{len(module.globals)}", addrspace=1)
    g.linkage = "private"
    g.global_constant = True
    g.initializer = ir.Constant(arr, data)
    return g


def lower_assert(lw, op: Operation) -> None:  # noqa: ANN001 - lower.CudaLowering
    """tl.device_assert in debug mode: where an element of the condition is false, the thread that holds it
    calls __assertfail(message, file, line, function, 1): the kernel stops and the launch fails."""
    b = lw.b
    fail = lw.module.globals.get("__assertfail") or ir.Function(
        lw.module, ir.FunctionType(ir.VoidType(), [GENERIC, GENERIC, I32, GENERIC, I64]), "__assertfail")  # fmt: skip
    loc = op.loc
    msg = _cstring(lw.module, op.attrs["message"] or "device assertion failed")
    file = _cstring(lw.module, str(getattr(loc, "file", "") or "<kernel>"))
    func = _cstring(lw.module, lw.src.name)
    line = ir.Constant(I32, int(getattr(loc, "line", 0) or 0))
    v = op.operands[0]
    if isinstance(v.type, TileType):
        lay = lw.layout_of(v)
        regs = [lw.get(v, lay)[r] for r in lw.unique_regs(lay)]
    else:
        regs = [lw.get(v)]
    for c in regs:
        ok = c if c.type == ir.IntType(1) else b.icmp_unsigned("!=", c, ir.Constant(c.type, 0))
        with b.if_then(b.not_(ok), likely=False):
            args = [b.addrspacecast(g, GENERIC) for g in (msg, file)]
            b.call(fail, [*args, line, b.addrspacecast(func, GENERIC), ir.Constant(I64, 1)])
