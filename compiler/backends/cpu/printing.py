"""tl.device_print on the cpu target: each element of each operand is one printf line,
`pid (x, y, z) idx (i, ...) prefix: value` (the reference interpreter prints the same), then stdout is flushed
so the lines come before what the host prints next. The runtime gives the JIT printf and fflush."""

from __future__ import annotations

from llvmlite import ir

from ...errors import CompileError
from ...ir.core import Operation
from ...ir.types import PointerType, TileType, elem_type
from ..llvm.loops import counted_loop, load_elem
from ..llvm.types import I8, I32, I64, bits_to_bf16, kind_of, mem_ll, scalar_ll
from .buffers import Big

F64 = ir.DoubleType()


def lower_print(lw, op: Operation) -> list:  # noqa: ANN001 - lower.FunctionLowering (a cycle to import)
    b = lw.b
    module = b.module
    printf = _extern(module, "printf", ir.FunctionType(I32, [ir.PointerType(I8)], var_arg=True))
    fflush = _extern(module, "fflush", ir.FunctionType(I32, [ir.PointerType(I8)]))
    for k, v in enumerate(op.operands):
        label = op.attrs["prefix"] + (f" (operand {k})" if len(op.operands) > 1 else "")
        shape = v.type.shape if isinstance(v.type, TileType) else ()
        elem = elem_type(v.type)
        conv, spec = _format(elem, op.attrs.get("hex", False))
        idx = ", ".join(["%lld"] * len(shape))
        text = f"pid (%d, %d, %d) idx ({idx}) {label.replace('%', '%%')}: {spec}\n"
        fmt = _cstring(module, text)
        value = lw.get(v)
        n = 1
        for d in shape:
            n *= d
        with counted_loop(b, 0, n, "print") as i:
            x = _element(b, value, elem, i)
            coords, rest = [], i
            for d in reversed(shape):
                coords.append(b.urem(rest, ir.Constant(I64, d)))
                rest = b.udiv(rest, ir.Constant(I64, d))
            b.call(printf, [fmt, *lw.grid[:3], *reversed(coords), conv(b, x)])
    b.call(fflush, [ir.Constant(ir.PointerType(I8), None)])
    return []


def _element(b: ir.IRBuilder, value, elem, i: ir.Value) -> ir.Value:  # noqa: ANN001 - a register or a Big
    if isinstance(value, Big):
        if value.scalar is not None:
            return value.scalar
        if getattr(elem, "is_fp8", False):
            raise CompileError(
                "cpu target: tl.device_print of an fp8 tile of more than 64 elements is not supported"
            )
        mem = mem_ll(elem) if not isinstance(elem, PointerType) else I64
        x = load_elem(b, value.ptr, mem, i)
        if getattr(elem, "name", "") == "bf16":
            return bits_to_bf16(b, x)
        if mem == I8 and scalar_ll(elem) != I8:  # an i1 byte (fp8 bytes are refused in _format)
            return b.trunc(x, scalar_ll(elem))
        return x
    if isinstance(value.type, ir.VectorType):
        return b.extract_element(value, b.trunc(i, I32))
    return value


def _format(elem, hexa: bool):  # noqa: ANN001, ANN202 - (converter to a printf argument, its % spec)
    if isinstance(elem, PointerType):
        return (lambda b, x: x), "0x%llx"
    kind = kind_of(elem)
    if kind == "float":
        return (lambda b, x: x if x.type == F64 else b.fpext(x, F64)), "%f"
    if kind == "bool":
        return (lambda b, x: b.zext(x, I32)), "%d"
    signed = kind == "sint" and not hexa

    def widen(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        if x.type == I64:
            return x
        return b.sext(x, I64) if signed else b.zext(x, I64)

    return widen, ("0x%llx" if hexa else "%lld" if signed else "%llu")


def _extern(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, fnty, name)


def _cstring(module: ir.Module, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8")) + b"\0"
    arr = ir.ArrayType(I8, len(data))
    name = f".print.{len(module.globals)}"
    g = ir.GlobalVariable(module, arr, name)
    g.linkage = "private"
    g.global_constant = True
    g.initializer = ir.Constant(arr, data)
    return g.bitcast(ir.PointerType(I8))
