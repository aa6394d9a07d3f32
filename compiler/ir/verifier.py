"""Module verifier: every op against its spec, values defined before use, calls and returns typed."""

from __future__ import annotations

from ..errors import VerifyError
from .core import Block, Function, Module, Operation, Value, error_location
from .ops import OPS, TERMINATORS, check_combiner_op, fail, verify_op_shape
from .types import is_fp8

# fp8 is a storage type (as in Triton, no op computes in it): these are the ops that may touch it.
FP8_OPS = frozenset((
    "constant", "splat", "select", "cast", "bitcast", "broadcast", "expand_dims", "reshape", "trans",
    "load", "store", "dot", "for", "if", "while", "yield", "condition", "call", "return",
))  # fmt: skip


def verify_module(m: Module) -> None:
    """Raise VerifyError naming the op and its location at the first problem."""
    funcs = {f.name: f for f in m.functions}
    for f in m.functions:
        _verify_function(f, funcs)


def _verify_function(f: Function, funcs: dict[str, Function]) -> None:
    defined: set[Value] = set(f.args)
    _verify_block(f.body.block, defined, f, funcs)
    t = f.body.block.terminator
    if t is None or t.name != "return":
        raise VerifyError(f"function @{f.name} must end with 'return'", **error_location(f.loc))


def _verify_block(b: Block, defined: set[Value], f: Function, funcs: dict[str, Function]) -> None:
    for i, op in enumerate(b.ops):
        _verify_op(op, defined, f, funcs)
        if op.name in TERMINATORS and i != len(b.ops) - 1:
            fail(op, "is a terminator but is not last in its block")


def _verify_op(op: Operation, defined: set[Value], f: Function, funcs: dict[str, Function]) -> None:
    verify_op_shape(op)
    if op.name not in FP8_OPS and any(is_fp8(v.type) for v in (*op.operands, *op.results)):
        fail(op, "does not take fp8 values (fp8 is storage only: cast to f16/bf16/f32 first)")
    for v in op.operands:
        if v not in defined:
            fail(op, "uses a value that is not defined before it (or not in scope)")
    for r in op.regions:
        inner = set(defined) | set(r.block.args)
        _verify_block(r.block, inner, f, funcs)
    spec = OPS[op.name]
    if spec.verify is not None:
        spec.verify(op)
    if op.name == "call":
        _verify_call(op, funcs)
    elif op.name == "return":
        got = [v.type for v in op.operands]
        if got != f.result_types:
            fail(op, f"returns {[str(t) for t in got]}, @{f.name} is declared to return {[str(t) for t in f.result_types]}")
        if op.parent is not f.body.block:
            fail(op, "may only end a function body")
    elif op.name in ("yield", "condition") and (op.parent is None or op.parent is f.body.block):
        fail(op, "may only end the region of a for, if, while, reduce_with or scan_with")
    elif op.name in ("reduce_with", "scan_with"):
        _verify_combiner_calls(op, funcs)
    defined.update(op.results)


def _verify_combiner_calls(op: Operation, funcs: dict[str, Function]) -> None:
    """The helpers a combiner calls (and those they call) are pure scalar code too."""
    seen: set[str] = set()
    todo = [inner for inner in op.walk() if inner.name == "call"]
    while todo:
        call = todo.pop()
        callee = funcs.get(call.attrs["callee"])
        if callee is None or callee.name in seen:
            continue  # an unknown callee is reported by _verify_call
        seen.add(callee.name)
        for inner in callee.body.block.ops:
            check_combiner_op(op, inner, callee.name)
        todo.extend(inner for inner in callee.walk() if inner.name == "call")


def _verify_call(op: Operation, funcs: dict[str, Function]) -> None:
    callee = funcs.get(op.attrs["callee"])
    if callee is None:
        fail(op, f"calls unknown function @{op.attrs['callee']}")
    if callee.kernel:
        fail(op, f"cannot call the kernel @{callee.name}")
    got = [v.type for v in op.operands]
    want = [p.type for p in callee.params]
    if got != want:
        fail(op, f"passes {[str(t) for t in got]} to @{callee.name}, which takes {[str(t) for t in want]}")
    if [r.type for r in op.results] != callee.result_types:
        fail(op, f"result types differ from @{callee.name}'s")
