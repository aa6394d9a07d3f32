"""gpu-prefetch: a `for` loop the source asked to pipeline (`tl.range(..., num_stages=S)`, S >= 2) that has no
tensor-core dot (those go to gpu-pipeline's cp.async rings) loads its next iteration's tiles while it works on
this one: each load whose address, mask and `other` follow from the induction variable and values from outside
the loop alone is issued one iteration ahead into a loop-carried tile.

    %x = load %p(iv), %m(iv)              %x0 = load %p(lb), %m(lb) & (lb < ub)      (before the loop)
    ... uses of %x ...             ->     for ... (%x_cur = %x0):
                                              %x1 = load %p(iv + st), %m(iv + st) & (iv + st < ub)
                                              ... uses of %x_cur ...
                                              yield ..., %x1

Triton pipelines such a loop through shared memory (the fused-softmax tutorial's row loop: a row's load is in
flight while the previous row's reductions run); here the next tile waits in registers, which hides the same
latency for a loop whose tiles fit them. A load past the last iteration is masked off entirely, so no address
is touched that the loop would not have touched. Volatile loads and loads in nested regions stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ....ir.core import Block, Module, Operation, Value
from ....ir.types import ScalarType, TileType, shape_of
from ....passes.ir_utils import clone_op, is_pure, remove_dead

STAGES = "num_stages"
BOOL = ScalarType("i1")


@dataclass(frozen=True)
class GpuPrefetchPass:
    name: ClassVar[str] = "gpu-prefetch"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            done = [_prefetch(op) for op in list(f.walk())
                    if op.name == "for" and int(op.attrs.get(STAGES, 1) or 1) >= 2 and not _has_dot(op)]  # fmt: skip
            if any(done):
                remove_dead(f, is_pure)  # the address and mask ops of the loads that moved ahead


def _has_dot(loop: Operation) -> bool:
    return any(o.name == "dot" for o in loop.walk())


def _slice(load: Operation, body: Block) -> list[Operation] | None:
    """The body's pure ops `load`'s operands are computed by, in body order, when they read only the induction
    variable and values from outside the loop; None otherwise."""
    iv = body.args[0]
    owners = {r: o for o in body.ops for r in o.results}
    need: set[Operation] = set()
    work = list(load.operands)
    while work:
        v = work.pop()
        if v in body.args and v is not iv:
            return None
        o = owners.get(v)
        if o is None or o in need:
            continue
        if not is_pure(o):
            return None
        need.add(o)
        work.extend(o.operands)
    return [o for o in body.ops if o in need]


def _at(iv_value: Value, ops: list[Operation], iv: Value) -> tuple[list[Operation], dict[Value, Value]]:
    mapping: dict[Value, Value] = {iv: iv_value}
    return [clone_op(o, mapping) for o in ops], mapping


def _guarded_load(load: Operation, mapping: dict[Value, Value], iv_value: Value, ub: Value,
                  out: list[Operation]) -> Value:  # fmt: skip
    """`load` at iv_value (its operands renamed through `mapping`), masked off where iv_value >= ub."""
    ptr = mapping.get(load.operands[0], load.operands[0])
    shape = shape_of(ptr.type)
    live = Operation("cmp", [iv_value, ub], [BOOL], {"pred": "lt"}, loc=load.loc)
    out.append(live)
    guard = live.result
    if shape:
        splat = Operation("splat", [guard], [TileType(shape, BOOL)], loc=load.loc)
        out.append(splat)
        guard = splat.result
    if len(load.operands) > 1:
        both = Operation("and", [mapping.get(load.operands[1], load.operands[1]), guard], [guard.type], loc=load.loc)
        out.append(both)
        guard = both.result
    rest = [mapping.get(v, v) for v in load.operands[2:]]
    new = Operation("load", [ptr, guard, *rest], [load.result.type], dict(load.attrs), loc=load.loc)
    out.append(new)
    return new.result


def _prefetch(loop: Operation) -> bool:
    body = loop.regions[0].block
    lb, ub, step = loop.operands[:3]
    iv = body.args[0]
    loads = [o for o in body.ops if o.name == "load" and not o.attrs.get("volatile")]
    picked = [(ld, s) for ld in loads if (s := _slice(ld, body)) is not None]
    if not picked:
        return False
    parent = loop.parent
    before: list[Operation] = []
    ahead: list[Operation] = []
    nxt = Operation("add", [iv, step], [iv.type], loc=loop.loc)
    ahead.append(nxt)
    carried: list[tuple[Operation, Value, Value]] = []  # (the load, its value before the loop, one ahead)
    for ld, ops in picked:
        first, m0 = _at(lb, ops, iv)
        before.extend(first)
        x0 = _guarded_load(ld, m0, lb, ub, before)
        then, m1 = _at(nxt.result, ops, iv)
        ahead.extend(then)
        x1 = _guarded_load(ld, m1, nxt.result, ub, ahead)
        carried.append((ld, x0, x1))
    at = parent.ops.index(loop)
    for i, o in enumerate(before):
        parent.insert(at + i, o)
    term = body.terminator
    for ld, x0, x1 in carried:
        cur = body.add_arg(ld.result.type, ld.result.hint)
        loop.operands.append(x0)
        loop.results.append(Value(ld.result.type, loop, len(loop.results)))
        term.operands.append(x1)
        _replace_uses(body, ld.result, cur)
    dropped = {ld for ld, _, _ in carried}
    body.ops = ahead + [o for o in body.ops if o not in dropped]
    for o in body.ops:
        o.parent = body
    return True


def _replace_uses(block: Block, old: Value, new: Value) -> None:
    for op in block.ops:
        for inner in op.walk():
            inner.operands = [new if v is old else v for v in inner.operands]
