"""Atomics as PTX `atom` with the memory order and scope the kernel asked for (Triton's defaults: acq_rel, gpu),
for the cuda lowering.

LLVM's NVPTX backend (llvmlite's) prints an atomicrmw of any ordering as a relaxed `atom` with no fence, and a
cmpxchg without a syncscope at system scope: a spin lock's release (`tl.atomic_xchg(lock, 0)`, tutorial 05's
layer-norm backward) did not order the stores before it, and its acquire went through system scope. Each
atomic here is one predicated `atom.{sem}.{scope}.global` (no branch around it), as Triton emits it. The kinds
and types PTX has no such instruction for (float max/min, 8/16-bit integers but 16-bit cas, bf16 and i1, which
misc.py lowers) return None and keep LLVM's lowering.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ...ir.types import ScalarType
from ..llvm.asmcall import returning_call
from . import ops

_PTX_OP = {"add": "add", "max": "max", "min": "min", "xchg": "exch", "and": "and", "or": "or", "xor": "xor"}
_CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def rmw_type(kind: str, e: ScalarType) -> str | None:
    """The PTX type of `atom.<kind>` on elements `e`, or None where PTX has no such atom."""
    if not isinstance(e, ScalarType):
        return None
    bits = e.bits
    if e.is_float:
        if kind == "add":
            return {"f16": "noftz.f16", "f32": "f32", "f64": "f64"}.get(e.name)
        return f"b{bits}" if kind == "xchg" and bits in (32, 64) and e.name in ("f32", "f64") else None
    if bits not in (32, 64) or kind not in _PTX_OP:
        return None
    if kind == "add":
        return f"u{bits}"
    if kind in ("max", "min"):
        return f"{'s' if e.is_signed else 'u'}{bits}"
    return f"b{bits}"


def _qualifiers(attrs: dict) -> str:
    sem, scope = attrs.get("sem") or "acq_rel", attrs.get("scope") or "gpu"
    return f"{sem}.{scope}"


def _call(b: ir.IRBuilder, text: str, bits: int, pred, p, xs: list) -> ir.Value:
    """`@pred <text>` with the result in $0 (0 where the predicate is off), [$1] the address, $2.. the values,
    the predicate last; every value bitcast to an integer of `bits`."""
    it = ir.IntType(bits)
    c = _CONSTRAINT[bits]
    n = len(xs)
    cons = ",".join([f"={c}", "l", *([c] * n), "b", "0", "~{memory}"])
    fn = ir.FunctionType(it, [ops.GPTR, *([it] * n), ops.I1, it])
    asm = ir.InlineAsm(fn, f"@${n + 2} {text};", cons, side_effect=True)
    return returning_call(b, asm, [p, *xs, pred, ir.Constant(it, 0)])


def atomic_rmw(b: ir.IRBuilder, kind: str, e: ScalarType, p, v, pred, attrs: dict) -> ir.Value | None:
    """`atom.<kind>` of `v` at `p` where `pred` holds, returning the old value (None: not a PTX atom)."""
    ty = rmw_type(kind, e)
    if ty is None:
        return None
    bits, rt = e.bits, ops.reg_type(e)
    it = ir.IntType(bits)
    x = b.bitcast(v, it) if rt != it else v
    old = _call(b, f"atom.{_qualifiers(attrs)}.global.{_PTX_OP[kind]}.{ty} $0, [$1], $2", bits, pred, p, [x])
    return b.bitcast(old, rt) if rt != it else old


def atomic_cas(b: ir.IRBuilder, e: ScalarType, p, cmp, v, pred, attrs: dict) -> ir.Value | None:
    """`atom.cas` at `p` where `pred` holds, returning the old value (None: not a PTX atom)."""
    if not isinstance(e, ScalarType):
        return None
    bits = e.bits
    if bits not in (16, 32, 64) or e.name in ("bf16", "i1") or e.is_fp8:
        return None
    rt, it = ops.reg_type(e), ir.IntType(bits)
    c, x = (b.bitcast(a, it) if rt != it else a for a in (cmp, v))
    old = _call(b, f"atom.{_qualifiers(attrs)}.global.cas.b{bits} $0, [$1], $2, $3", bits, pred, p, [c, x])
    return b.bitcast(old, rt) if rt != it else old
