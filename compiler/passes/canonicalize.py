"""canonicalize: constant folding, algebraic identities and structural simplification, to a fixpoint.

The rewrite rules are the RULES table at the bottom; the folding of constants is folding.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.ops import COMMUTATIVE, ELEMENTWISE, ELEMENTWISE_BINARY, OPS
from ..ir.types import ScalarType, Type, elem_type, is_float, is_int
from .folding import fold
from .ir_utils import (
    const_value,
    defining_op,
    is_pure,
    make_constant,
    remove_dead,
    resolve,
    set_ops,
    wrap_int,
)


@dataclass(frozen=True)
class CanonicalizePass:
    """Fold and simplify until nothing changes (or `max_iterations` sweeps).

    Guarantees: the module computes the same values (per the interpreter's semantics) with no op left that
    a rule can fold; a replaced op is removed (only ops without side effects are ever replaced), and so is
    every pure op left unused.
    Rules: fold elementwise ops on constants (folding.py), x+0 x-0 x*1 x/1 x|0 x^0 x&-1 x<<0 x>>0 -> x,
    int x*0 x&0 -> 0, int x-x x^x -> 0, constants moved to the right of commutative ops, select with a
    constant or redundant condition, splat/broadcast/expand_dims/reshape/trans of constants and splats,
    broadcast/reshape/trans chains, identity casts and reshapes, `if` on a constant (the branch is
    inlined), `for` with zero trips (results become the inits), and params with `equal_to_1` -> constant 1.
    """

    name: ClassVar[str] = "canonicalize"
    max_iterations: int = 20

    def apply(self, module: Module) -> None:
        for f in module.functions:
            _bind_equal_to_1(f)
            for _ in range(self.max_iterations):
                if not _Sweep().block(f.body.block):
                    break
            remove_dead(f, is_pure)


def _bind_equal_to_1(f: Function) -> None:
    ops = []
    subst: dict[Value, Value] = {}
    for p, a in zip(f.params, f.args, strict=True):
        if p.attrs.get("equal_to_1") is True and isinstance(p.type, ScalarType) and p.type.is_int:
            c = make_constant(1, p.type)
            ops.append(c)
            subst[a] = c.result
    if not subst:
        return
    for op in f.walk():
        op.operands = [subst.get(v, v) for v in op.operands]
    set_ops(f.body.block, ops + f.body.block.ops)


class _Sweep:
    """One forward walk: operands renamed through `subst`, then each op offered to the rules."""

    def __init__(self) -> None:
        self.subst: dict[Value, Value] = {}
        self.changed = False
        self.pending: list[Operation] = []

    def block(self, b: Block) -> bool:
        out: list[Operation] = []
        for op in b.ops:
            op.operands = [resolve(v, self.subst) for v in op.operands]
            for r in op.regions:
                self.block(r.block)
            self.pending = []
            repl = _rewrite(op, self)
            out.extend(self.pending)
            if repl is None:
                out.append(op)
                continue
            self.changed = True
            for old, new in zip(op.results, repl, strict=True):
                self.subst[old] = resolve(new, self.subst)
        set_ops(b, out)
        return self.changed

    # ---- helpers for the rules
    def emit(self, op: Operation) -> Value:
        self.pending.append(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def const(self, value: int | float, t: Type, like: Operation) -> Value:
        return self.emit(make_constant(value, t, like))

    def new(self, like: Operation, name: str, operands: list[Value], t: Type, **attrs) -> Value:
        return self.emit(Operation(name, operands, [t], attrs, loc=like.loc))


Rule = Callable[[Operation, _Sweep], list[Value] | None]


def _rewrite(op: Operation, sw: _Sweep) -> list[Value] | None:
    rule = RULES.get(op.name)
    if rule is not None:
        r = rule(op, sw)
        if r is not None:
            return r
    if OPS[op.name].has(ELEMENTWISE) and op.results:
        return _fold_elementwise(op, sw)
    return None


def _fold_elementwise(op: Operation, sw: _Sweep) -> list[Value] | None:
    args = [const_value(v) for v in op.operands]
    if any(a is None for a in args):
        return None
    at, rt = elem_type(op.operands[0].type), elem_type(op.result.type)
    if not isinstance(at, ScalarType) or not isinstance(rt, ScalarType):
        return None
    v = fold(op.name, op.attrs, args, at, rt)  # type: ignore[arg-type]
    if v is None:
        return None
    return [sw.const(v, op.result.type, op)]


# ---- algebra ----------------------------------------------------------------------------------------


def _is(v: Value, k: int | float) -> bool:
    c = const_value(v)
    return c is not None and c == k and not (is_float(v.type) and k == 0 and _neg_zero(c))


def _neg_zero(c: int | float) -> bool:
    return isinstance(c, float) and c == 0 and str(c).startswith("-")


def _all_ones(v: Value) -> bool:
    e = elem_type(v.type)
    c = const_value(v)
    return isinstance(e, ScalarType) and e.is_int and c is not None and c == wrap_int(-1, e)


def _commute(op: Operation, sw: _Sweep) -> None:
    """Constants go right, so `c + x` and `x + c` look alike to the rules and to CSE."""
    a, b = op.operands
    if const_value(a) is not None and const_value(b) is None:
        op.operands = [b, a]
        sw.changed = True


def _binary(op: Operation, sw: _Sweep) -> list[Value] | None:
    if OPS[op.name].has(COMMUTATIVE):
        _commute(op, sw)
    a, b = op.operands
    t = op.result.type
    integer = is_int(t)
    identity_right = {"add": 0, "sub": 0, "mul": 1, "div": 1, "or": 0, "xor": 0, "shl": 0, "shr": 0}
    if op.name in identity_right and _is(b, identity_right[op.name]) and (integer or op.name in ("sub", "mul", "div")):
        return [a]
    if op.name == "add" and is_float(t) and _neg_zero_const(b):
        return [a]
    if op.name == "and" and _all_ones(b):
        return [a]
    if integer and op.name in ("mul", "and") and _is(b, 0):
        return [sw.const(0, t, op)]
    if integer and op.name in ("sub", "xor") and a is b:
        return [sw.const(0, t, op)]
    if integer and op.name in ("and", "or", "maximum", "minimum") and a is b:
        return [a]
    return None


def _neg_zero_const(v: Value) -> bool:
    c = const_value(v)
    return c is not None and _neg_zero(float(c))


def _cmp(op: Operation, sw: _Sweep) -> list[Value] | None:
    a, b = op.operands
    if a is b and is_int(a.type):
        return [sw.const(int(op.attrs["pred"] in ("eq", "le", "ge")), op.result.type, op)]
    return None


def _select(op: Operation, sw: _Sweep) -> list[Value] | None:
    c, a, b = op.operands
    if a is b:
        return [a]
    k = const_value(c)
    if k is None:
        return None
    return [a if k else b]


# ---- shapes -----------------------------------------------------------------------------------------


def _splat(op: Operation, sw: _Sweep) -> list[Value] | None:
    k = const_value(op.operands[0])
    return None if k is None else [sw.const(k, op.result.type, op)]


def _shape_op(op: Operation, sw: _Sweep) -> list[Value] | None:
    """broadcast / expand_dims / reshape / trans: of a constant or splat, of the same kind, identities."""
    (x,) = op.operands
    t = op.result.type
    if x.type == t and (op.name != "trans" or op.attrs["order"] == sorted(op.attrs["order"])):
        return [x]
    k = const_value(x)
    if k is not None:
        return [sw.const(k, t, op)]
    src = defining_op(x)
    if src is None:
        return None
    if src.name == "splat":
        return [sw.new(op, "splat", [src.operands[0]], t)]
    if src.name == op.name and op.name in ("broadcast", "reshape"):
        return [sw.new(op, op.name, [src.operands[0]], t)]
    if src.name == op.name == "trans":
        inner, outer = src.attrs["order"], op.attrs["order"]
        order = [inner[i] for i in outer]
        y = src.operands[0]
        return [y] if order == sorted(order) else [sw.new(op, "trans", [y], t, order=order)]
    return None


def _cast(op: Operation, sw: _Sweep) -> list[Value] | None:
    (x,) = op.operands
    return [x] if x.type == op.result.type else None


# ---- control flow -----------------------------------------------------------------------------------


def _if(op: Operation, sw: _Sweep) -> list[Value] | None:
    k = const_value(op.operands[0])
    if k is None:
        return None
    block = op.regions[0 if k else 1].block
    body, term = block.ops[:-1], block.ops[-1]
    sw.pending.extend(body)
    return list(term.operands)


def _for(op: Operation, sw: _Sweep) -> list[Value] | None:
    lb, ub, step = (const_value(v) for v in op.operands[:3])
    if lb is None or ub is None or step is None or step <= 0 or lb < ub:
        return None
    return list(op.operands[3:])


RULES: dict[str, Rule] = {
    **{n: _binary for n in ELEMENTWISE_BINARY},  # rem, pow, atan2 have no identities: only folding applies
    "cmp": _cmp,
    "select": _select,
    "splat": _splat,
    **{n: _shape_op for n in ("broadcast", "expand_dims", "reshape", "trans")},
    "cast": _cast,
    "if": _if,
    "for": _for,
}
