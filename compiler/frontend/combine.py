"""General reductions and scans: `reduce_with` / `scan_with` over one tensor or several of one shape, with
a combiner region built by a Python callable (codegen.py passes one that calls the @triton.jit combine
function; library code may pass its own). Known combines (a+b, max, ...) never get here: they keep the
`reduce`/`scan` fast path (library.py).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..errors import CompileError, UnsupportedSyntaxError
from ..ir import Block, Function, Module, Operation, Region
from ..ir.ops import OPS, PURE
from ..ir.types import PointerType, TileType, make_type
from .library import expand_dims, norm_axis
from .semantic import Semantic, Tensor, describe, is_number
from .types import DType

# (lhs elements, rhs elements) -> one combined element per input; emits at the builder's insertion point
Combiner = Callable[[list[Tensor], list[Tensor]], Any]


def reduce_with(
    sem: Semantic,
    inputs: list[Any],
    axis: Any,
    combiner: Combiner,
    keep_dims: Any = False,
    what: str = "tl.reduce",
) -> list[Tensor]:
    """Reduce `inputs` along `axis` (None: over every element) with `combiner`; one result per input."""
    ts = _inputs(sem, inputs, what)
    rank = len(ts[0].shape)
    if axis is None:
        n = ts[0].type.numel
        ts = [t if rank == 1 else Tensor(sem.b.reshape(t.value, (n,))) for t in ts]
        ax = 0
    else:
        ax = norm_axis(sem, axis, rank)
    shape = list(ts[0].shape)
    del shape[ax]
    region = _region(sem, ts, combiner, what)
    types = [make_type(tuple(shape), t.elem) for t in ts]
    op = sem.b.create("reduce_with", [t.value for t in ts], types, {"axis": ax}, [region])
    out = [Tensor(r) for r in op.results]
    if not keep_dims:
        return out
    if axis is None:
        return [sem.broadcast_to(r, (1,) * rank) for r in out]
    return [expand_dims(sem, r, ax) for r in out]


def scan_with(
    sem: Semantic,
    inputs: list[Any],
    axis: Any,
    combiner: Combiner,
    reverse: Any = False,
    what: str = "tl.associative_scan",
) -> list[Tensor]:
    """Inclusive scan of `inputs` along `axis` with `combiner` (from the end when `reverse`)."""
    ts = _inputs(sem, inputs, what)
    if not isinstance(reverse, bool):
        raise sem.error(f"{what} reverse must be a constexpr bool, got {describe(reverse)}")
    ax = norm_axis(sem, axis, len(ts[0].shape))
    region = _region(sem, ts, combiner, what)
    attrs: dict[str, Any] = {"axis": ax, **({"reverse": True} if reverse else {})}
    op = sem.b.create("scan_with", [t.value for t in ts], [t.type for t in ts], attrs, [region])
    return [Tensor(r) for r in op.results]


def _inputs(sem: Semantic, inputs: list[Any], what: str) -> list[Tensor]:
    if not inputs:
        raise sem.error(f"{what} needs at least one input tensor")
    ts = []
    for x in inputs:
        if not isinstance(x, Tensor) or not x.shape:
            raise sem.error(f"{what} inputs must be tiles, got {describe(x)}")
        if isinstance(x.elem, PointerType):
            raise sem.error(f"{what} does not take pointers")
        ts.append(x)
    if any(t.shape != ts[0].shape for t in ts):
        raise sem.error(f"{what} inputs must have one shape, got {[list(t.shape) for t in ts]}")
    return ts


def _region(sem: Semantic, ts: list[Tensor], combiner: Combiner, what: str) -> Region:
    """The combiner region: block args (lhs..., rhs...), the combine, a yield of one element per input."""
    elems = [t.elem for t in ts]
    block = Block([*elems, *elems])
    with sem.b.at_end(block):
        args = [Tensor(a) for a in block.args]
        got = combiner(args[: len(ts)], args[len(ts) :])
        items = list(got) if isinstance(got, (tuple, list)) else [got]
        if got is None or len(items) != len(ts):
            n = 0 if got is None else len(items)
            raise sem.error(
                f"{what}: the combine function returns {n} value{'s' * (n != 1)}, but {len(ts)} "
                f"input{'s' * (len(ts) != 1)} need{'s' * (len(ts) == 1)} {len(ts)}"
            )
        values = [_element(sem, v, e, i, what) for i, (v, e) in enumerate(zip(items, elems, strict=True))]
        sem.b.create("yield", [v.value for v in values], [])
    return Region(block)


def _element(sem: Semantic, v: Any, elem: Any, i: int, what: str) -> Tensor:
    if is_number(v):
        return sem.to_tensor(v, elem)
    if not isinstance(v, Tensor) or v.shape:
        raise sem.error(
            f"{what}: the combine function must return one element per input, got {describe(v)} for input {i}"
        )
    if v.elem != elem:
        raise sem.error(
            f"{what}: the combine function returns {v.dtype} for input {i}, whose elements are "
            f"{DType(elem)}; cast it to match"
        )
    return v


# ---- checking a @triton.jit combine function -----------------------------------------------------------


def check_pure_scalar(module: Module, call: Operation, name: str, error: Callable[..., CompileError]) -> None:
    """The helper `call` calls (and those it calls) is pure scalar code, which a combiner must be; else a
    CompileError at the first op that is not, `error(node_like, message, cls)`."""
    seen: set[str] = set()
    todo = [call]
    while todo:
        c = todo.pop()
        f: Function | None = module.get(c.attrs["callee"])
        if f is None or f.name in seen:
            continue
        seen.add(f.name)
        for op in f.walk():
            problem = _problem(op)
            if problem is not None:
                node = SimpleNamespace(lineno=op.loc.line, col_offset=op.loc.col - 1) if op.loc else None
                raise error(node, f"combine function '{name}': {problem}", UnsupportedSyntaxError)
            if op.name == "call":
                todo.append(op)


def no_effects(module: Module, op: Operation, seen: set[str]) -> bool:
    """`op` (and, for a call, everything its callee runs) writes no memory, asserts or synchronises."""
    from ..passes.ir_utils import SIDE_EFFECTS

    for inner in op.walk():
        if inner.name == "call":
            callee = module.get(inner.attrs["callee"])
            name = inner.attrs["callee"]
            if callee is None or name in seen:
                continue
            seen.add(name)
            if not all(no_effects(module, o, seen) for o in callee.body.block.ops):
                return False
        elif inner.name in SIDE_EFFECTS or (inner.name == "load" and inner.attrs.get("volatile", False)):
            return False
    return True


def _problem(op: Operation) -> str | None:
    for v in (*op.operands, *op.results):
        if isinstance(v.type, TileType):
            return (
                f"'{op.name}' makes or takes the tile {v.type}; a combine function works on single elements"
            )
    if op.name not in _CONTROL and not OPS[op.name].has(PURE):
        return (
            f"'{op.name}' is not allowed in a combine function (it must be pure: no memory access or asserts)"
        )
    return None


_CONTROL = ("call", "return", "if", "for", "while", "yield", "condition")
