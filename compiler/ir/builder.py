"""A builder that appends ops at an insertion point and infers result types for the common ops."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from .core import Block, Loc, Operation, Region, Value
from .types import TileType, Type, elem_type, i1, i32, make_type, shape_of, with_elem


class Builder:
    def __init__(self, block: Block | None = None, index: int | None = None):
        self.block = block
        self.index = index  # None: append at the end
        self.loc: Loc | None = None

    @contextmanager
    def at_end(self, block: Block):
        saved = (self.block, self.index)
        self.block, self.index = block, None
        try:
            yield self
        finally:
            self.block, self.index = saved

    def insert(self, op: Operation) -> Operation:
        assert self.block is not None
        if op.loc is None:
            op.loc = self.loc
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        return op

    def create(
        self, name: str, operands: list[Value], result_types: list[Type], attrs: dict[str, Any] | None = None, regions: list[Region] | None = None
    ) -> Operation:
        return self.insert(Operation(name, operands, result_types, attrs, regions))

    def op1(self, name: str, operands: list[Value], result_type: Type, **attrs: Any) -> Value:
        return self.create(name, operands, [result_type], attrs).result

    # ---- common ops with inferred types
    def constant(self, value: int | float, t: Type) -> Value:
        return self.op1("constant", [], t, value=value)

    def binary(self, name: str, a: Value, b: Value, **attrs: Any) -> Value:
        return self.op1(name, [a, b], a.type, **attrs)

    def unary(self, name: str, a: Value) -> Value:
        return self.op1(name, [a], a.type)

    def cmp(self, pred: str, a: Value, b: Value) -> Value:
        return self.op1("cmp", [a, b], with_elem(a.type, i1), pred=pred)

    def select(self, c: Value, a: Value, b: Value) -> Value:
        return self.op1("select", [c, a, b], a.type)

    def splat(self, v: Value, shape: tuple[int, ...]) -> Value:
        return self.op1("splat", [v], TileType(shape, elem_type(v.type)))

    def broadcast(self, v: Value, shape: tuple[int, ...]) -> Value:
        return self.op1("broadcast", [v], TileType(shape, elem_type(v.type)))

    def expand_dims(self, v: Value, axis: int) -> Value:
        s = list(shape_of(v.type))
        s.insert(axis, 1)
        return self.op1("expand_dims", [v], TileType(tuple(s), elem_type(v.type)), axis=axis)

    def reshape(self, v: Value, shape: tuple[int, ...]) -> Value:
        return self.op1("reshape", [v], make_type(shape, elem_type(v.type)))

    def cast(self, v: Value, elem) -> Value:
        return self.op1("cast", [v], with_elem(v.type, elem))

    def make_range(self, start: int, end: int) -> Value:
        return self.op1("make_range", [], TileType((end - start,), i32), start=start, end=end)
