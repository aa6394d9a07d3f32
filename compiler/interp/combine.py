"""reduce_with and scan_with on the interpreter: reductions and scans whose combine is a region of pure
scalar code. Each step runs the region once over all of its lanes together (its ops are elementwise, so
NumPy carries the lanes through them; ifs and loops keep each lane's own outcome), in the orders ops.py
states: a balanced tree for reduce_with (first half with second half), one element after another for
scan_with.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..ir.core import Block, Operation, Value
from ..ir.ops import TERMINATORS
from ..ir.types import bf16, elem_type
from . import numerics as nx
from .errors import InterpError, located
from .semantics import SEMANTICS

Array = np.ndarray


class Machine(Protocol):
    """What a combiner reads of the running program (machine.py's Machine provides it; named here so this
    module, which machine.py dispatches to, does not import it back)."""

    pid: tuple[int, ...]
    module: Any
    env: dict[Value, Array]

    def tick(self, op: Operation) -> None: ...
MAX_CALL_DEPTH = 64


def reduce_with(m: Machine, op: Operation, xs: list[Array]) -> list[Array]:
    axis = op.attrs["axis"]
    parts = [np.moveaxis(x, axis, 0) for x in xs]
    while parts[0].shape[0] > 1:
        n = parts[0].shape[0]
        h = n // 2
        ys = combine(m, op, [p[:h] for p in parts], [p[h : 2 * h] for p in parts])
        parts = [np.concatenate([y, p[2 * h :]]) if n % 2 else y for y, p in zip(ys, parts, strict=True)]
    return [np.asarray(p[0]) for p in parts]


def scan_with(m: Machine, op: Operation, xs: list[Array]) -> list[Array]:
    axis, reverse = op.attrs["axis"], op.attrs.get("reverse", False)
    parts = [np.moveaxis(np.flip(x, axis) if reverse else x, axis, 0) for x in xs]
    outs = [p.copy() for p in parts]
    acc = [p[0] for p in parts]
    for i in range(1, parts[0].shape[0]):
        acc = combine(m, op, acc, [p[i] for p in parts])
        for o, a in zip(outs, acc, strict=True):
            o[i] = a
    outs = [np.moveaxis(o, 0, axis) for o in outs]
    return [np.ascontiguousarray(np.flip(o, axis) if reverse else o) for o in outs]


def combine(m: Machine, op: Operation, lhs: list[Array], rhs: list[Array]) -> list[Array]:
    """The combiner of `op` applied lane by lane to (lhs, rhs): one array per operand, of the lanes' shape."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in (*lhs, *rhs)))
    block = op.regions[0].block
    out = _run(m, block, dict(zip(block.args, [*lhs, *rhs], strict=True)), 0)
    return [np.array(np.broadcast_to(v, shape)) if np.shape(v) != shape else v for v in out]


def _run(m: Machine, block: Block, env: dict[Value, Array], depth: int) -> list[Array]:
    """Run a combiner block (or the body of a helper it calls, or a region nested in them) over arrays of
    lanes; values defined outside the combiner are read from the machine's environment."""
    for op in block.ops:
        if op.name in TERMINATORS:
            return [_read(m, env, v) for v in op.operands]
        m.tick(op)
        xs = [_read(m, env, v) for v in op.operands]
        if op.name == "call":
            if depth >= MAX_CALL_DEPTH:
                raise located(InterpError, op, f"calls nest deeper than {MAX_CALL_DEPTH}")
            callee = m.module.get(op.attrs["callee"])
            assert callee is not None  # the verifier checked it
            outs = _run(m, callee.body.block, dict(zip(callee.args, xs, strict=True)), depth + 1)
        elif op.name in _CONTROL:
            outs = _CONTROL[op.name](m, op, xs, env, depth)
        else:
            got = SEMANTICS[op.name](op, xs, m)
            outs = [got] if len(op.results) == 1 else list(got)
        for r, v in zip(op.results, outs, strict=True):
            env[r] = _fit(op, v, r)
    return []


# Control flow over lanes: a combiner is pure, so running a region for lanes that do not need it and
# keeping only the lanes that do gives each lane what running it alone would.


def _if(m: Machine, op: Operation, xs: list[Array], env: dict[Value, Array], depth: int) -> list[Array]:
    cond = xs[0]
    if np.ndim(cond) == 0:
        return _run(m, op.regions[0 if bool(cond) else 1].block, env, depth)
    then = _run(m, op.regions[0].block, env, depth)
    orelse = _run(m, op.regions[1].block, env, depth)
    return [np.where(cond, a, b) for a, b in zip(then, orelse, strict=True)]


def _for(m: Machine, op: Operation, xs: list[Array], env: dict[Value, Array], depth: int) -> list[Array]:
    lb, ub, step, *carried = xs
    if np.any(step == 0):
        raise located(InterpError, op, f"has step 0 (program {m.pid})")
    body = op.regions[0].block
    iv = lb
    while True:
        active = np.where(step > 0, iv < ub, iv > ub)
        if not np.any(active):
            return carried
        m.tick(op)
        env.update(zip(body.args, [iv, *carried], strict=True))
        new = _run(m, body, env, depth)
        carried = [np.where(active, n, c) for n, c in zip(new, carried, strict=True)]
        iv = (iv + step).astype(lb.dtype)


def _while(m: Machine, op: Operation, xs: list[Array], env: dict[Value, Array], depth: int) -> list[Array]:
    before, after = op.regions[0].block, op.regions[1].block
    vals, active, out = xs, np.asarray(True), None
    while True:
        m.tick(op)
        env.update(zip(before.args, vals, strict=True))
        cond, *carried = _run(m, before, env, depth)
        stopping = active & ~cond
        out = (
            carried if out is None else [np.where(stopping, c, o) for c, o in zip(carried, out, strict=True)]
        )
        active = active & cond
        if not np.any(active):
            return out
        env.update(zip(after.args, carried, strict=True))
        vals = _run(m, after, env, depth)


_CONTROL = {"if": _if, "for": _for, "while": _while}


def _read(m: Machine, env: dict[Value, Array], v: Value) -> Array:
    got = env.get(v)
    return m.env[v] if got is None else got


def _fit(op: Operation, value, r: Value) -> Array:
    """The lanes of a scalar result: its IR dtype (bf16 rounded), any shape of lanes."""
    a = np.asarray(value)
    e = elem_type(r.type)
    if a.dtype != nx.value_dtype(e):
        raise AssertionError(f"interpreter bug: '{op.name}' gave {a.dtype} for {r.type}")
    return nx.round_bf16(a) if e == bf16 else a
