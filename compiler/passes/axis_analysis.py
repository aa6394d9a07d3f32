"""Axis analysis (as Triton's AxisInfo): per dimension of each integer, pointer or i1 value, its runs of
consecutive and of equal values and their alignment. The backends use it for vector widths and
coalescing; the `axis-info` pass prints it for golden tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import gcd
from typing import ClassVar

from ..ir.core import Function, Module, Operation, Value
from ..ir.printer import Printer
from ..ir.types import PointerType, ScalarType, elem_type, shape_of
from .ir_utils import defining_op

MAX_DIV = 1 << 30


@dataclass(frozen=True)
class AxisInfo:
    """Per dimension (scalars are treated as shape [1]):
    - contiguity: the length of runs of consecutive values (+1 per element) along the dimension,
    - divisibility: the largest power of two dividing the first element of every such run (pointers: the
      address in bytes), and every element along a dimension whose contiguity is 1,
    - constancy: the length of runs of equal values along the dimension.
    """

    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]

    def __str__(self) -> str:
        def f(xs: tuple[int, ...]) -> str:
            return "[" + ", ".join(map(str, xs)) + "]"

        return f"contig={f(self.contiguity)} div={f(self.divisibility)} const={f(self.constancy)}"


def pow2_div(v: int) -> int:
    """The largest power of two dividing `v` (MAX_DIV for 0)."""
    if v == 0:
        return MAX_DIV
    return min(abs(v) & -abs(v), MAX_DIV)


def tracked(v: Value) -> bool:
    e = elem_type(v.type)
    return isinstance(e, PointerType) or (isinstance(e, ScalarType) and e.is_int)


def dims(v: Value) -> tuple[int, ...]:
    return shape_of(v.type) or (1,)


def unknown(v: Value) -> AxisInfo:
    n = len(dims(v))
    return AxisInfo((1,) * n, (1,) * n, (1,) * n)


def uniform(v: Value, div: int) -> AxisInfo:
    s = dims(v)
    return AxisInfo((1,) * len(s), (div,) * len(s), s)


def strict_div(x: AxisInfo) -> int:
    """A power of two dividing every element: each element starts a run along a contiguity-1 dim."""
    ds = [d for c, d in zip(x.contiguity, x.divisibility, strict=True) if c == 1]
    return max(ds) if ds else 1


def axis_analysis(f: Function) -> dict[Value, AxisInfo]:
    """AxisInfo of every tracked (integer, i1 or pointer) value of `f`. A `for` loop's carried values get what
    holds for their init and for every value the body yields back (a fixpoint of the meet, from the init's
    info, as Triton's analysis joins a loop's block arguments): an address tile advanced by a constant step
    keeps its contiguity and alignment inside the loop. Block arguments of other regions are unknown."""
    info: dict[Value, AxisInfo] = {}
    for p, a in zip(f.params, f.args, strict=True):
        if tracked(a):
            k = 1 if p.attrs.get("equal_to_1") is True else 0
            info[a] = uniform(a, pow2_div(k) if k else int(p.attrs.get("divisibility", 1)))
    for op in f.body.block.ops:
        _analyse(op, info)
    return info


LOOP_ROUNDS = 8  # a carried value's info only ever weakens; past this many rounds it is taken as unknown


def _analyse(op: Operation, info: dict[Value, AxisInfo]) -> None:
    """`op`'s nested ops, then its results (a loop's: _loop)."""
    if op.name == "for":
        _loop(op, info)
        return
    for r in op.regions:
        for a in r.block.args:
            if tracked(a):
                info[a] = unknown(a)
        for inner in r.block.ops:
            _analyse(inner, info)
    if op.name == "if" and len(op.regions) == 2 and op.results:  # what holds for what either branch yields
        then, other = (reg.block.terminator.operands for reg in op.regions)
        for r, x, y in zip(op.results, then, other, strict=False):
            if tracked(r):
                info[r] = _meet(info.get(x) or unknown(r), info.get(y) or unknown(r), unit_bytes(r))
        return
    for r in op.results:
        if tracked(r):
            fn = RULES.get(op.name)
            ins = [info.get(v) or unknown(v) for v in op.operands]
            got = fn(op, ins) if fn else None
            info[r] = _clamp(r, got) if got is not None else unknown(r)


def _loop(op: Operation, info: dict[Value, AxisInfo]) -> None:
    body = op.regions[0].block
    iv, carried = body.args[0], body.args[1:]
    if tracked(iv):
        lb, st = info.get(op.operands[0]) or unknown(iv), info.get(op.operands[2]) or unknown(iv)
        info[iv] = AxisInfo((1,), (gcd(lb.divisibility[0], st.divisibility[0]),), (1,))
    pairs = [(a, init, nxt) for a, init, nxt in zip(carried, op.operands[3:], body.terminator.operands, strict=False)
             if tracked(a)]  # fmt: skip
    for a, init, _ in pairs:
        info[a] = info.get(init) or unknown(a)
    for _ in range(LOOP_ROUNDS):
        for inner in body.ops:
            _analyse(inner, info)
        changed = False
        for a, _, nxt in pairs:
            met = _meet(info[a], info.get(nxt) or unknown(a), unit_bytes(a))
            if met != info[a]:
                info[a], changed = met, True
        if not changed:
            break
    else:
        for a, _, _ in pairs:
            info[a] = unknown(a)
        for inner in body.ops:
            _analyse(inner, info)
    for a, r in zip(carried, op.results, strict=False):  # the results: the init or a value yielded back
        if tracked(a) and tracked(r):
            info[r] = info[a]


def _meet(x: AxisInfo, y: AxisInfo, unit: int = 1) -> AxisInfo:
    """What holds for both: the shorter runs, the common alignment. A side whose runs are cut shorter keeps
    only the alignment that the starts of the shorter runs inside its own runs have (`unit`: a pointer's
    element size, its divisibility being in bytes)."""
    cont = tuple(map(min, x.contiguity, y.contiguity))

    def div(z: AxisInfo) -> tuple[int, ...]:
        return tuple(d if c == zc else gcd(d, pow2_div(c * unit))
                     for c, zc, d in zip(cont, z.contiguity, z.divisibility, strict=True))  # fmt: skip

    return AxisInfo(cont, tuple(map(gcd, div(x), div(y))), tuple(map(min, x.constancy, y.constancy)))


def unit_bytes(v: Value) -> int:
    """The step of one element along a run of `v`: a pointer's element size (its divisibility is in bytes)."""
    e = elem_type(v.type)
    return max(1, e.pointee.bytes) if isinstance(e, PointerType) else 1


def _clamp(v: Value, x: AxisInfo) -> AxisInfo:
    s = dims(v)
    return AxisInfo(tuple(max(1, min(c, n)) for c, n in zip(x.contiguity, s, strict=True)),
                    tuple(max(1, min(d, MAX_DIV)) for d in x.divisibility),
                    tuple(max(1, min(c, n)) for c, n in zip(x.constancy, s, strict=True)))


def _zip(*xs: tuple[int, ...]):
    return zip(*xs, strict=True)


# ---- transfer rules -----------------------------------------------------------------------------


def _constant(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    return uniform(op.result, pow2_div(int(op.attrs["value"])))


def _make_range(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    n = op.attrs["end"] - op.attrs["start"]
    return AxisInfo((n,), (pow2_div(op.attrs["start"]),), (1,))


def _splat(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    return uniform(op.result, ins[0].divisibility[0])


def _broadcast(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    (x,), src, dst = ins, dims(op.operands[0]), dims(op.result)
    const = tuple(n if s == 1 else c for c, s, n in _zip(x.constancy, src, dst))
    return AxisInfo(x.contiguity, x.divisibility, const)


def _expand_dims(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    (x,), ax = ins, op.attrs["axis"]
    scalar = not shape_of(op.operands[0].type)  # a scalar's one [1] dim is not a real axis
    c, d, k = ([] if scalar else list(t) for t in (x.contiguity, x.divisibility, x.constancy))
    c.insert(ax, 1)
    d.insert(ax, strict_div(x))
    k.insert(ax, 1)
    return AxisInfo(tuple(c), tuple(d), tuple(k))


def _trans(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    (x,), order = ins, op.attrs["order"]
    return AxisInfo(*(tuple(t[i] for i in order) for t in (x.contiguity, x.divisibility, x.constancy)))


def _add(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    a, b = ins
    scale = elem_type(op.operands[0].type).pointee.bytes if op.name == "addptr" else 1
    contig = tuple(max(gcd(ac, bk), gcd(ak, bc) if op.name != "sub" else 1)
                   for ac, ak, bc, bk in _zip(a.contiguity, a.constancy, b.contiguity, b.constancy))
    div = tuple(gcd(ad, bd * scale) for ad, bd in _zip(a.divisibility, b.divisibility))
    const = tuple(gcd(ak, bk) for ak, bk in _zip(a.constancy, b.constancy))
    return AxisInfo(contig, div, const)


def _mul(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    a, b = ins
    for x, other in ((a, op.operands[1]), (b, op.operands[0])):  # x * 1 is x (a stride specialised to 1)
        if _const_operand(other) == 1:
            return x
    n = len(a.contiguity)
    div = tuple(_sdiv(a, i) * _sdiv(b, i) for i in range(n))
    return AxisInfo((1,) * n, div, tuple(gcd(x, y) for x, y in _zip(a.constancy, b.constancy)))


def _sdiv(x: AxisInfo, i: int) -> int:
    return x.divisibility[i] if x.contiguity[i] == 1 else 1


def _divrem(op: Operation, ins: list[AxisInfo]) -> AxisInfo | None:
    a, b = ins
    c = _const_operand(op.operands[1])
    n = len(a.contiguity)
    shape = dims(op.result)
    if c == 1:  # x // 1 is x; x % 1 is 0 everywhere
        return a if op.name == "div" else AxisInfo((1,) * n, (MAX_DIV,) * n, shape)
    if c is None and op.name == "div" and b.constancy == tuple(dims(op.operands[1])):
        # x // N with N uniform: a run of x starting at a multiple of gcd(div x, div N) has one quotient
        # (FlagGems' cat: idx // dim_size over a thread's contiguous elements). This holds where x >= 0
        # (division truncates), as indices are; the rule is Triton's for DivOp, with its condition that x is
        # contiguous along the whole dimension, so that a kernel dividing negative values gets Triton's result
        const = tuple(max(a.constancy[i], gcd(a.contiguity[i], a.divisibility[i], b.divisibility[0]))
                      if a.contiguity[i] == shape[i] else a.constancy[i] for i in range(n))  # fmt: skip
        return AxisInfo((1,) * n, (1,) * n, const)
    if c is None and op.name == "rem" and b.constancy == tuple(dims(op.operands[1])):
        # x % N with N uniform: a run starting at a multiple of gcd(div x, div N) stays below the next wrap
        return AxisInfo(tuple(gcd(a.contiguity[i], a.divisibility[i], b.divisibility[0]) for i in range(n)),
                        tuple(gcd(d, b.divisibility[0]) for d in a.divisibility), a.constancy)
    if c is None or c <= 0 or c & (c - 1):
        return None
    if op.name == "rem":
        return AxisInfo(tuple(gcd(a.contiguity[i], a.divisibility[i], c) for i in range(n)),
                        tuple(gcd(d, c) for d in a.divisibility), a.constancy)
    div = tuple(_sdiv(a, i) // c if _sdiv(a, i) % c == 0 else 1 for i in range(n))
    return AxisInfo((1,) * n, div, a.constancy)


def _const_operand(v: Value) -> int | None:
    op = defining_op(v)
    while op is not None and op.name == "splat":
        op = defining_op(op.operands[0])
    return op.attrs["value"] if op is not None and op.name == "constant" else None


def _cmp(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    a, b = ins
    pred = op.attrs["pred"]
    n = len(a.contiguity)
    const = []
    for i in range(n):
        k = gcd(a.constancy[i], b.constancy[i])
        if pred in ("lt", "ge"):  # an aligned run of a against a value constant over it
            k = max(k, gcd(a.contiguity[i], a.divisibility[i], b.divisibility[i], b.constancy[i]))
        if pred in ("gt", "le"):
            k = max(k, gcd(b.contiguity[i], b.divisibility[i], a.divisibility[i], a.constancy[i]))
        const.append(k)
    return AxisInfo((1,) * n, (1,) * n, tuple(const))


def _bitwise(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    """and/or/xor: equal where both operands are equal (e.g. masks combined from per-axis compares)."""
    a, b = ins
    n = len(a.contiguity)
    return AxisInfo((1,) * n, (1,) * n, tuple(gcd(x, y) for x, y in _zip(a.constancy, b.constancy)))


def _select(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    c, a, b = ins
    n = len(a.contiguity)
    if not shape_of(op.operands[0].type):  # a scalar condition picks one whole tile
        c = AxisInfo(c.contiguity * n, c.divisibility * n, dims(op.result))
    const = tuple(gcd(x, y, z) for x, y, z in _zip(c.constancy, a.constancy, b.constancy))
    return AxisInfo((1,) * n, tuple(gcd(_sdiv(a, i), _sdiv(b, i)) for i in range(n)), const)


def _same(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
    return ins[0]


def _hint(field: str) -> Callable[[Operation, list[AxisInfo]], AxisInfo]:
    def rule(op: Operation, ins: list[AxisInfo]) -> AxisInfo:
        vals = tuple(op.attrs["values"])
        x = ins[0]
        if len(vals) != len(x.contiguity):
            return x
        if field == "divisibility":
            return AxisInfo(x.contiguity, tuple(max(a, b) for a, b in _zip(vals, x.divisibility)), x.constancy)
        return AxisInfo(tuple(max(a, b) for a, b in _zip(vals, x.contiguity)), x.divisibility, x.constancy)

    return rule


def _cast(op: Operation, ins: list[AxisInfo]) -> AxisInfo | None:
    src, dst = elem_type(op.operands[0].type), elem_type(op.result.type)
    if isinstance(src, ScalarType) and (src.is_float or (not dst.is_bool and dst.bits < src.bits)):
        return None
    return ins[0] if not dst.is_bool else AxisInfo((1,) * len(ins[0].contiguity), (1,) * len(ins[0].contiguity),
                                                  ins[0].constancy)


RULES: dict[str, Callable[[Operation, list[AxisInfo]], AxisInfo | None]] = {
    "constant": _constant,
    "make_range": _make_range,
    "splat": _splat,
    "broadcast": _broadcast,
    "expand_dims": _expand_dims,
    "trans": _trans,
    "add": _add,
    "sub": _add,
    "addptr": _add,
    "mul": _mul,
    "div": _divrem,
    "rem": _divrem,
    "cmp": _cmp,
    "select": _select,
    "and": _bitwise,
    "or": _bitwise,
    "xor": _bitwise,
    "multiple_of": _hint("divisibility"),
    "max_contiguous": _hint("contiguity"),
    "desc_box": lambda op, ins: ins[0],
    "cast": _cast,
    "program_id": lambda op, ins: uniform(op.result, 1),
    "num_programs": lambda op, ins: uniform(op.result, 1),
}


@dataclass(frozen=True)
class AxisInfoPass:
    """Changes nothing; prints `// axis @fn %v: contig=[..] div=[..] const=[..]` for every tracked
    op result, numbered as the printer numbers them, to stdout (for the golden tests)."""

    name: ClassVar[str] = "axis-info"

    def apply(self, module: Module) -> None:
        for f in module.functions:
            info = axis_analysis(f)
            p = Printer()
            p.function(f, "")
            print(f"// axis-info @{f.name}")
            for op in f.walk():
                for r in op.results:
                    if r in info:
                        print(f"// axis @{f.name} {p.name(r)}: {info[r]}")
