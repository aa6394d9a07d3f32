"""inline: replace every `call` by a copy of the callee's body, then drop the helper functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import CompileError
from ..ir.core import Block, Function, Module, Operation, Value, error_location
from .ir_utils import clone_op, resolve, set_ops


@dataclass(frozen=True)
class InlinePass:
    """Inline all calls, callees first.

    Guarantees: no `call` is left; when the module has a kernel, only kernels remain (every helper was
    inlined). Recursion (direct or mutual) is a CompileError at the call; so is inlining that would grow
    the module past `max_ops` operations (a call tree that doubles at each level).
    """

    name: ClassVar[str] = "inline"
    max_ops: int = 200_000

    def apply(self, module: Module) -> None:
        funcs = {f.name: f for f in module.functions}
        order = _callees_first(module, funcs)
        _check_sizes(order, self.max_ops)
        for f in order:
            _inline_block(f.body.block, funcs, {})
        if module.kernels:
            module.functions = module.kernels


def _calls(f: Function) -> list[Operation]:
    return [op for op in f.walk() if op.name == "call"]


def _callees_first(module: Module, funcs: dict[str, Function]) -> list[Function]:
    """Functions in post-order of the call graph; a cycle is an error at the call that closes it."""
    order: list[Function] = []
    state: dict[str, str] = {}  # name -> "active" | "done"

    def visit(f: Function) -> None:
        state[f.name] = "active"
        for call in _calls(f):
            callee = funcs.get(call.attrs["callee"])
            if callee is None:
                raise _error(call, f"call to unknown function @{call.attrs['callee']}")
            if state.get(callee.name) == "active":
                raise _error(call, f"recursive call to @{callee.name} cannot be inlined")
            if callee.name not in state:
                visit(callee)
        state[f.name] = "done"
        order.append(f)

    for f in module.functions:
        if f.name not in state:
            visit(f)
    return order


def _check_sizes(order: list[Function], max_ops: int) -> None:
    """Refuse before cloning anything when a function would grow past `max_ops` once inlined."""
    sizes: dict[str, int] = {}
    for f in order:
        total = 0
        for op in f.walk():
            total += sizes[op.attrs["callee"]] if op.name == "call" else 1
            if total > max_ops:
                raise _error(op, f"inlining into @{f.name} grows it past {max_ops} operations")
        sizes[f.name] = total


def _error(op: Operation, msg: str) -> CompileError:
    return CompileError(msg, **error_location(op.loc))


def _inline_block(b: Block, funcs: dict[str, Function], subst: dict[Value, Value]) -> None:
    out: list[Operation] = []
    for op in b.ops:
        op.operands = [resolve(v, subst) for v in op.operands]
        for r in op.regions:
            _inline_block(r.block, funcs, subst)
        if op.name != "call":
            out.append(op)
            continue
        callee = funcs[op.attrs["callee"]]
        mapping: dict[Value, Value] = dict(zip(callee.args, op.operands, strict=True))
        body = callee.body.block.ops
        out.extend(clone_op(inner, mapping) for inner in body[:-1])
        ret = body[-1]
        for old, new in zip(op.results, ret.operands, strict=True):
            subst[old] = mapping.get(new, new)
    set_ops(b, out)
