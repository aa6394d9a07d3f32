"""gpu-prefetch: a `for` loop the source asked to pipeline (`tl.range(..., num_stages=S)`, S >= 2) that has no
tensor-core dot (those go to gpu-pipeline's cp.async rings) loads later iterations' tiles while it works on
this one: each load whose address, mask and `other` follow from the induction variable and values from outside
the loop alone is issued iterations ahead into loop-carried tiles.

    %x = load %p(iv), %m(iv)              %x0 = load %p(lb), %m(lb) & (lb < ub)      (before the loop;
    ... uses of %x ...             ->     for ... (%x_cur = %x0):                     one ahead here)
                                              %x1 = load %p(iv + st), %m(iv + st) & (iv + st < ub)
                                              ... uses of %x_cur ...
                                              yield ..., %x1

One iteration ahead by default (CudaOptions.prefetch_regs = 0). With `extra_regs` = R (prefetch_regs) the loads
go up to S - 1 iterations ahead, as Triton's pipeliner keeps S - 1 in flight, while the tiles beyond the next take
at most R registers a thread (R = 16: a row of 256 floats on 8 warps three ahead, one of 4096 two, longer rows
one). Timed on an H100, the tutorial's kernel alone with L2 cold (bench/softmax_kernel.py,
bench/results_softmax_kernel_h100.log): one ahead runs at 1.35x Triton's speed on rows of 256 floats, 1.10x on 512,
1.00-1.04x from 1,024 to 4,096; three ahead (R = 4 or 16) is slower at 256 (0.97-0.99x: 35 registers, so the
tutorial's grid, sized by them, holds fewer programs) and no faster elsewhere. So one ahead stays the default.

Triton pipelines such a loop through shared memory (the fused-softmax tutorial's row loop: a row's load is in
flight while the previous row's reductions run); here the tiles ahead wait in registers, which hides the same
latency for a loop whose tiles fit them. A load past the last iteration is masked off entirely, so no address
is touched that the loop would not have touched. Volatile loads and loads in nested regions stay as they are,
and so does a load through a pointer argument the loop also writes through (or where a write's argument is
not known): read early, it would miss an earlier iteration's store.
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
    """Loads of a `tl.range(num_stages=S)` loop without a dot issued one iteration ahead, or up to S - 1 where
    the tiles beyond the next take at most `extra_regs` registers a thread on `num_warps` warps."""

    name: ClassVar[str] = "gpu-prefetch"
    num_warps: int = 4
    extra_regs: int = 0  # 0: one ahead, the default build (see the module's docstring for the timings)

    def apply(self, module: Module) -> None:
        for f in module.functions:
            done = [_prefetch(op, self.num_warps, self.extra_regs) for op in list(f.walk())
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


def _depth(loop: Operation, picked: list, num_warps: int, extra_regs: int) -> int:
    """Iterations ahead: num_stages - 1, as far as the tiles in flight beyond the next one stay within
    `extra_regs` registers a thread (the values a thread holds of every prefetched tile, 32-bit each or less)."""
    per_thread = sum(max(1, _numel(ld.result.type) // (32 * num_warps)) for ld, _ in picked)
    return max(1, min(int(loop.attrs[STAGES]) - 1, 1 + extra_regs // per_thread))


def _numel(t) -> int:
    return t.numel if isinstance(t, TileType) else 1


WRITES = ("store", "atomic_rmw", "atomic_cas")
VIEWS = ("splat", "broadcast", "expand_dims", "reshape", "trans", "multiple_of", "max_contiguous")


def _base(v: Value) -> Value | None:
    """The kernel argument a pointer (tile) is an offset of, through addptr and views; None where it is not one
    (a loop-carried, selected or loaded pointer)."""
    while True:
        o = v.owner
        if isinstance(o, Block):  # a block argument: the kernel's own parameters only
            return v if o.parent is not None and not isinstance(o.parent.parent, Operation) else None
        if not isinstance(o, Operation) or o.name not in ("addptr", *VIEWS):
            return None
        v = o.operands[0]


def _reads_ahead_safely(loop: Operation, ld: Operation) -> bool:
    """Whether `ld` may run before earlier iterations' writes: no write in the loop goes through the pointer
    argument `ld` reads (Triton's pipeliner has no such check: triton-lang/triton#8259, a store and a load of
    the same address in one iteration, comes out wrong), nor through a pointer whose argument is unknown. Writes
    through other arguments are taken not to reach what a later iteration reads, as by Triton."""
    base = _base(ld.operands[0])
    writes = [o for o in loop.walk() if o.name in WRITES or o.name == "call"]
    if not writes:
        return True
    return base is not None and all(o.name != "call" and (b := _base(o.operands[0])) is not None and b is not base
                                    for o in writes)  # fmt: skip


def _prefetch(loop: Operation, num_warps: int, extra_regs: int) -> bool:
    body = loop.regions[0].block
    lb, ub, step = loop.operands[:3]
    iv = body.args[0]
    loads = [o for o in body.ops if o.name == "load" and not o.attrs.get("volatile") and _reads_ahead_safely(loop, o)]
    picked = [(ld, s) for ld in loads if (s := _slice(ld, body)) is not None]
    if not picked:
        return False
    depth = _depth(loop, picked, num_warps, extra_regs)
    parent = loop.parent
    before: list[Operation] = []
    ahead: list[Operation] = []
    starts = [lb]  # lb + k * step, for the k = 0 .. depth - 1 iterations loaded before the loop
    for _ in range(depth - 1):
        nxt0 = Operation("add", [starts[-1], step], [iv.type], loc=loop.loc)
        before.append(nxt0)
        starts.append(nxt0.result)
    far = iv  # iv + depth * step: the iteration this one loads for
    for _ in range(depth):
        a = Operation("add", [far, step], [iv.type], loc=loop.loc)
        ahead.append(a)
        far = a.result
    carried: list[tuple[Operation, list[Value], Value]] = []  # (the load, its tiles before the loop, the far one)
    for ld, ops in picked:
        firsts = []
        for s in starts:
            cloned, m = _at(s, ops, iv)
            before.extend(cloned)
            firsts.append(_guarded_load(ld, m, s, ub, before))
        then, m1 = _at(far, ops, iv)
        ahead.extend(then)
        carried.append((ld, firsts, _guarded_load(ld, m1, far, ub, ahead)))
    at = parent.ops.index(loop)
    for i, o in enumerate(before):
        parent.insert(at + i, o)
    term = body.terminator
    for ld, firsts, x_far in carried:
        window = [body.add_arg(ld.result.type, ld.result.hint) for _ in firsts]  # this iteration's, then the next
        for x in firsts:
            loop.operands.append(x)
            loop.results.append(Value(ld.result.type, loop, len(loop.results)))
        term.operands.extend([*window[1:], x_far])
        _replace_uses(body, ld.result, window[0])
    dropped = {ld for ld, _, _ in carried}
    body.ops = ahead + [o for o in body.ops if o not in dropped]
    for o in body.ops:
        o.parent = body
    return True


def _replace_uses(block: Block, old: Value, new: Value) -> None:
    for op in block.ops:
        for inner in op.walk():
            inner.operands = [new if v is old else v for v in inner.operands]
