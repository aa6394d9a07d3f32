"""Lowering of the region ops (for, if, while) and calls to LLVM basic blocks with phis.

Big tiles (buffers.py) are not phis: each carried or merged big value gets a buffer of its own, and the
values flowing into it are copied there (so a loop body never overwrites a buffer it still reads).
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.core import Operation, Value
from ..llvm.types import kind_of, splat_const
from .buffers import Big, as_buffer, copy, is_big, new_buffer
from .lower import HANDLERS, FunctionLowering, lowering_error


def _yielded(lw: FunctionLowering, term: Operation | None, op: Operation) -> list:
    if term is None:
        raise lowering_error(op, "has a region without a terminator")
    return [lw.get(v) for v in term.operands]


def _homes(lw: FunctionLowering, values: list[Value]) -> list[Big | None]:
    """A fresh buffer (as a Big) for each big value of `values`, None for the others."""
    return [Big(v.type, ptr=new_buffer(lw, v.type)) if is_big(v.type) else None for v in values]


def _move_in(lw: FunctionLowering, homes: list[Big | None], vals: list) -> None:
    """Copy each big value into its home; values that are other homes of the same set go through a temporary
    first (a loop that swaps its carried tiles must not read a home it already overwrote)."""
    ptrs = {h.ptr for h in homes if h is not None}
    staged = []
    for h, v in zip(homes, vals, strict=False):
        if h is not None and v.ptr is not None and v.ptr in ptrs and v.ptr is not h.ptr:
            tmp = new_buffer(lw, h.type)
            copy(lw, tmp, h.type, v)
            v = Big(h.type, ptr=tmp)
        staged.append(v)
    for h, v in zip(homes, staged, strict=False):
        if h is not None:
            copy(lw, h.ptr, h.type, v)


def _for(lw: FunctionLowering, op: Operation) -> list:
    b = lw.b
    lb, ub, step = (lw.get(v) for v in op.operands[:3])
    inits = [lw.get(v) for v in op.operands[3:]]
    body_ir = op.regions[0].block
    homes = _homes(lw, op.operands[3:])
    _move_in(lw, homes, inits)
    pre = b.block
    head = b.append_basic_block("for.head")
    body = b.append_basic_block("for.body")
    done = b.append_basic_block("for.done")
    b.branch(head)
    b.position_at_end(head)
    iv = b.phi(lb.type, name="iv")
    iv.add_incoming(lb, pre)
    carried = []
    for v, h in zip(inits, homes, strict=True):
        if h is not None:
            carried.append(h)
            continue
        phi = b.phi(v.type)
        phi.add_incoming(v, pre)
        carried.append(phi)
    signed = kind_of(op.operands[0].type) == "sint"
    cmp = b.icmp_signed if signed else b.icmp_unsigned
    up = b.icmp_signed(">", step, splat_const(step.type, 0)) if signed else ir.Constant(ir.IntType(1), 1)
    go = b.select(up, cmp("<", iv, ub), cmp(">", iv, ub))
    b.cbranch(go, body, done)
    b.position_at_end(body)
    lw.values[body_ir.args[0]] = iv
    for a, phi in zip(body_ir.args[1:], carried, strict=False):
        lw.values[a] = phi
    nxt_vals = _yielded(lw, lw.lower_block(body_ir), op)
    _move_in(lw, homes, nxt_vals)
    iv.add_incoming(b.add(iv, step), b.block)
    for phi, v in zip(carried, nxt_vals, strict=False):
        if not isinstance(phi, Big):
            phi.add_incoming(v, b.block)
    b.branch(head)
    b.position_at_end(done)
    return carried


def _if(lw: FunctionLowering, op: Operation) -> list:
    b = lw.b
    cond = lw.get(op.operands[0])
    then_bb = b.append_basic_block("if.then")
    else_bb = b.append_basic_block("if.else")
    merge = b.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    homes = _homes(lw, op.results)
    incoming = []
    for bb, region in ((then_bb, op.regions[0]), (else_bb, op.regions[1])):
        b.position_at_end(bb)
        vals = _yielded(lw, lw.lower_block(region.block), op)
        _move_in(lw, homes, vals)
        incoming.append((vals, b.block))
        b.branch(merge)
    b.position_at_end(merge)
    out = []
    for i, _r in enumerate(op.results):
        if homes[i] is not None:
            out.append(homes[i])
            continue
        phi = b.phi(incoming[0][0][i].type)
        for vals, block in incoming:
            phi.add_incoming(vals[i], block)
        out.append(phi)
    return out


def _while(lw: FunctionLowering, op: Operation) -> list:
    b = lw.b
    inits = [lw.get(v) for v in op.operands]
    before, after = op.regions[0].block, op.regions[1].block
    homes = _homes(lw, list(op.operands))
    _move_in(lw, homes, inits)
    pre = b.block
    head = b.append_basic_block("while.head")
    body = b.append_basic_block("while.body")
    done = b.append_basic_block("while.done")
    b.branch(head)
    b.position_at_end(head)
    phis = []
    for a, v, h in zip(before.args, inits, homes, strict=False):
        if h is not None:
            lw.values[a] = h
            phis.append(h)
            continue
        phi = b.phi(v.type)
        phi.add_incoming(v, pre)
        lw.values[a] = phi
        phis.append(phi)
    cond_vals = _yielded(lw, lw.lower_block(before), op)
    b.cbranch(cond_vals[0], body, done)
    b.position_at_end(body)
    for a, v in zip(after.args, cond_vals[1:], strict=False):
        lw.values[a] = v
    nxt = _yielded(lw, lw.lower_block(after), op)
    _move_in(lw, homes, nxt)
    for phi, v in zip(phis, nxt, strict=False):
        if not isinstance(phi, Big):
            phi.add_incoming(v, b.block)
    b.branch(head)
    b.position_at_end(done)
    return cond_vals[1:]


def _call(lw: FunctionLowering, op: Operation) -> list:
    callee = lw.functions.get(op.attrs["callee"])
    if callee is None:
        raise lowering_error(op, f"calls unknown function @{op.attrs['callee']}")
    b = lw.b
    args = [as_buffer(lw, v) if is_big(v.type) else lw.get(v) for v in op.operands]
    homes = _homes(lw, op.results)
    r = b.call(callee, args + lw.grid + [h.ptr for h in homes if h is not None])
    small = [i for i, h in enumerate(homes) if h is None]
    out: list = list(homes)
    if len(small) == 1:
        out[small[0]] = r
    elif small:
        for j, i in enumerate(small):
            out[i] = b.extract_value(r, j)
    return out


HANDLERS.update({"for": _for, "if": _if, "while": _while, "call": _call})
