"""The tile IR's data structures: SSA values, operations with regions, blocks, functions, modules.

Ops are generic `Operation`s whose name selects an `OpSpec` (declared in ops.py) that states operands,
attributes, regions, traits and the verifier of that op.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .types import Type

# name -> OpSpec; ops.py declares every op into it (kept here so an Operation finds its spec without
# importing the declarations back).
OPS: dict[str, Any] = {}


@dataclass(frozen=True)
class Loc:
    line: int
    col: int
    file: str = "<source>"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def error_location(loc: Loc | None) -> dict[str, Any]:
    """CompileError's location keywords for `loc`; an op or function without one is placed in `<ir>`."""
    if loc is None:
        return {"filename": "<ir>"}
    return {"filename": loc.file, "line": loc.line, "col": loc.col}


class Value:
    """An SSA value: the result of an operation or an argument of a block."""

    __slots__ = ("type", "owner", "index", "hint")

    def __init__(self, type: Type, owner: Operation | Block | None, index: int, hint: str | None = None):
        self.type = type
        self.owner = owner
        self.index = index
        self.hint = hint

    def __repr__(self) -> str:
        return f"<Value {self.hint or ''}: {self.type}>"


class Block:
    """A list of operations with arguments (loop induction variables, iter args)."""

    def __init__(self, arg_types: list[Type] | None = None, arg_hints: list[str | None] | None = None):
        hints = arg_hints or [None] * len(arg_types or [])
        self.args: list[Value] = [Value(t, self, i, h) for i, (t, h) in enumerate(zip(arg_types or [], hints, strict=True))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def add_arg(self, type: Type, hint: str | None = None) -> Value:
        v = Value(type, self, len(self.args), hint)
        self.args.append(v)
        return v

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Region:
    """A single-block region, the body of a loop, a branch of an if, or a function."""

    def __init__(self, block: Block | None = None):
        self.block = block or Block()
        self.block.parent = self
        self.parent: Operation | Function | None = None


class Operation:
    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(
        self,
        name: str,
        operands: list[Value],
        result_types: list[Type],
        attrs: dict[str, Any] | None = None,
        regions: list[Region] | None = None,
        loc: Loc | None = None,
    ):
        self.name = name
        self.operands = list(operands)
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs = dict(attrs or {})
        self.regions = list(regions or [])
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.name
        return self.results[0]

    @property
    def spec(self) -> Any:
        return OPS[self.name]

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, outer before inner."""
        yield self
        for r in self.regions:
            for op in r.block.ops:
                yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name}>"


@dataclass
class Param:
    """A function parameter; kernel parameters carry specialisation hints as attributes."""

    name: str
    type: Type
    attrs: dict[str, Any] = field(default_factory=dict)


class Function:
    def __init__(
        self,
        name: str,
        params: list[Param],
        result_types: list[Type],
        *,
        kernel: bool = False,
        attrs: dict[str, Any] | None = None,
        loc: Loc | None = None,
    ):
        self.name = name
        self.params = params
        self.result_types = list(result_types)
        self.kernel = kernel
        self.attrs = dict(attrs or {})
        self.loc = loc
        self.body = Region(Block([p.type for p in params], [p.name for p in params]))
        self.body.parent = self

    @property
    def args(self) -> list[Value]:
        return self.body.block.args

    def walk(self) -> Iterator[Operation]:
        for op in self.body.block.ops:
            yield from op.walk()


class Module:
    def __init__(self, functions: list[Function] | None = None):
        self.functions: list[Function] = list(functions or [])

    def get(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    @property
    def kernels(self) -> list[Function]:
        return [f for f in self.functions if f.kernel]

    def walk(self) -> Iterator[Operation]:
        for f in self.functions:
            yield from f.walk()


def uses_in(block: Block) -> dict[Value, list[Operation]]:
    """Map each value to the ops (nested anywhere in `block`) that use it."""
    uses: dict[Value, list[Operation]] = {}
    for op in block.ops:
        for inner in op.walk():
            for v in inner.operands:
                uses.setdefault(v, []).append(inner)
    return uses


def replace_all_uses(root: Block, old: Value, new: Value) -> None:
    for op in root.ops:
        for inner in op.walk():
            inner.operands = [new if v is old else v for v in inner.operands]
