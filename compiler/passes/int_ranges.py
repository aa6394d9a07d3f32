"""Integer range analysis: for every integer value (scalar or tile), bounds [lo, hi] on all its elements
in every program. Bounds are mathematical values in the type's signedness; an op that could wrap gets
the type's full range. Sources: constants, make_range, program_id >= 0, num_programs >= 1,
params with `equal_to_1`, and `for` induction variables with a positive step.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Function, Operation, Value
from ..ir.types import ScalarType, elem_type

Range = tuple[int, int]
GRID_MAX = (1 << 31) - 1


def full_range(t) -> Range | None:
    e = elem_type(t)
    if not isinstance(e, ScalarType) or e.is_float:
        return None
    if e.is_signed:
        return (-(1 << (e.bits - 1)), (1 << (e.bits - 1)) - 1)
    return (0, (1 << e.bits) - 1)


def int_ranges(f: Function) -> dict[Value, Range]:
    """Bounds for every integer value of `f` (values of other types are absent)."""
    rng: dict[Value, Range] = {}
    for p, a in zip(f.params, f.args, strict=True):
        fr = full_range(a.type)
        if fr is not None:
            rng[a] = (1, 1) if p.attrs.get("equal_to_1") is True else fr
    for op in f.walk():
        _block_args(op, rng)
        for r in op.results:
            fr = full_range(r.type)
            if fr is None:
                continue
            got = _transfer(op, rng)
            rng[r] = got if got is not None and fr[0] <= got[0] <= got[1] <= fr[1] else fr
    return rng


def _block_args(op: Operation, rng: dict[Value, Range]) -> None:
    """Loop region arguments: a `for` induction variable is in [lb, ub) when the step is positive."""
    for r in op.regions:
        for a in r.block.args:
            fr = full_range(a.type)
            if fr is not None:
                rng[a] = fr
    if op.name != "for":
        return
    lb, ub, st = (rng.get(v) for v in op.operands[:3])
    if lb is None or ub is None or st is None or st[0] <= 0:
        return
    rng[op.regions[0].block.args[0]] = (lb[0], max(lb[0], ub[1] - 1))


def _transfer(op: Operation, rng: dict[Value, Range]) -> Range | None:
    fn = TRANSFER.get(op.name)
    if fn is None:
        return None
    args = [rng.get(v) for v in op.operands]
    if op.name not in ("select", "cmp") and any(a is None for a in args):
        return None
    return fn(op, args)


def _cmp(op: Operation, args: list) -> Range | None:
    a, b = args
    if a is None or b is None:
        return None
    pred = op.attrs["pred"]
    always = {"lt": a[1] < b[0], "le": a[1] <= b[0], "gt": a[0] > b[1], "ge": a[0] >= b[1],
              "eq": a[0] == a[1] == b[0] == b[1], "ne": a[1] < b[0] or b[1] < a[0]}
    never = {"lt": a[0] >= b[1], "le": a[0] > b[1], "gt": a[1] <= b[0], "ge": a[1] < b[0],
             "eq": a[1] < b[0] or b[1] < a[0], "ne": a[0] == a[1] == b[0] == b[1]}
    if always[pred]:
        return (1, 1)
    if never[pred]:
        return (0, 0)
    return (0, 1)


def _bitwise(op: Operation, args: list) -> Range | None:
    (a, b), e = args, elem_type(op.result.type)
    if e.is_bool:
        if op.name == "and":
            return (a[0] & b[0], a[1] & b[1])
        if op.name == "or":
            return (a[0] | b[0], a[1] | b[1])
        return (a[0] ^ b[0], a[0] ^ b[0]) if a[0] == a[1] and b[0] == b[1] else (0, 1)
    if op.name == "and" and (a[0] >= 0 or b[0] >= 0):
        return (0, min(x[1] for x in (a, b) if x[0] >= 0))
    return None


def _div(op: Operation, args: list) -> Range | None:
    a, (c, c2) = args
    if c != c2 or c <= 0:
        return None
    if op.name == "div":
        return (_tdiv(a[0], c), _tdiv(a[1], c))
    return (max(a[0], -(c - 1)) if a[0] < 0 else 0, min(a[1], c - 1) if a[1] > 0 else 0)


def _tdiv(x: int, c: int) -> int:
    return x // c if x >= 0 else -((-x) // c)


def _shift(op: Operation, args: list) -> Range | None:
    a, (s, s2) = args
    if s != s2 or s < 0:
        return None
    if op.name == "shr":
        return (a[0] >> s, a[1] >> s)
    return (a[0] << s, a[1] << s)


def _mul(op: Operation, args: list) -> Range:
    (a, b) = args
    ps = [x * y for x in a for y in b]
    return (min(ps), max(ps))


def _cast(op: Operation, args: list) -> Range | None:
    (a,) = args
    if elem_type(op.result.type).is_bool:
        return (int(not (a[0] <= 0 <= a[1])), int(a != (0, 0)))
    return a


def _select(op: Operation, args: list) -> Range | None:
    _, a, b = args
    return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))


def _same(op: Operation, args: list) -> Range:
    return args[0]


TRANSFER: dict[str, Callable[[Operation, list], Range | None]] = {
    "constant": lambda op, _: (op.attrs["value"], op.attrs["value"]),
    "make_range": lambda op, _: (op.attrs["start"], op.attrs["end"] - 1),
    "program_id": lambda op, _: (0, GRID_MAX - 1),
    "num_programs": lambda op, _: (1, GRID_MAX),
    "add": lambda op, a: (a[0][0] + a[1][0], a[0][1] + a[1][1]),
    "sub": lambda op, a: (a[0][0] - a[1][1], a[0][1] - a[1][0]),
    "mul": _mul,
    "div": _div,
    "rem": _div,
    "shl": _shift,
    "shr": _shift,
    "maximum": lambda op, a: (max(a[0][0], a[1][0]), max(a[0][1], a[1][1])),
    "minimum": lambda op, a: (min(a[0][0], a[1][0]), min(a[0][1], a[1][1])),
    "and": _bitwise,
    "or": _bitwise,
    "xor": _bitwise,
    "cmp": _cmp,
    "select": _select,
    "cast": _cast,
    **{n: _same for n in ("splat", "broadcast", "expand_dims", "reshape", "trans", "multiple_of", "max_contiguous", "desc_box")},
}
