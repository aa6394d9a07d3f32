"""The one textual form of the tile IR. Values are renumbered in order, so the text is canonical."""

from __future__ import annotations

import json
import math
from typing import Any

from .core import Block, Function, Module, Operation, Value
from .types import Type


def format_attr(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, Type.__args__):  # type: ignore[attr-defined]
        return str(v)
    raise TypeError(f"cannot print attribute {v!r}")


def format_attrs(attrs: dict[str, Any]) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k} = {format_attr(attrs[k])}" for k in sorted(attrs)) + "}"


class Printer:
    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self.counter = 0
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        n = self.names.get(v)
        if n is None:
            return "%<undefined>"
        return n

    def fresh(self, v: Value) -> str:
        n = f"%{self.counter}"
        self.counter += 1
        self.names[v] = n
        return n

    def module(self, m: Module) -> str:
        self.lines = ["module {"]
        for i, f in enumerate(m.functions):
            if i:
                self.lines.append("")
            self.function(f, "  ")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def function(self, f: Function, ind: str) -> None:
        self.names, self.counter = {}, 0
        params = []
        for p, a in zip(f.params, f.args, strict=True):
            self.names[a] = "%" + p.name
            params.append(f"%{p.name}: {p.type}{format_attrs(p.attrs)}")
        head = f"{ind}{'kernel' if f.kernel else 'func'} @{f.name}({', '.join(params)})"
        if f.result_types:
            head += " -> " + ", ".join(str(t) for t in f.result_types)
        head += format_attrs(f.attrs) + " {"
        self.lines.append(head)
        self.block_ops(f.body.block, ind + "  ")
        self.lines.append(ind + "}")

    def block_ops(self, b: Block, ind: str) -> None:
        for op in b.ops:
            self.op(op, ind)

    def op(self, op: Operation, ind: str) -> None:
        operands = ", ".join(self.name(v) for v in op.operands)
        res = ", ".join(self.fresh(r) for r in op.results)
        text = ind + (res + " = " if res else "") + op.name
        if operands:
            text += " " + operands
        text += format_attrs(op.attrs)
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        if not op.regions:
            self.lines.append(text)
            return
        for i, r in enumerate(op.regions):
            text += " {" if i == 0 else "} {"
            self.lines.append(text)
            text = ind
            if r.block.args:
                args = ", ".join(f"{self.fresh(a)}: {a.type}" for a in r.block.args)
                self.lines.append(f"{ind}^({args}):")
            self.block_ops(r.block, ind + "  ")
        self.lines.append(ind + "}")


def print_module(m: Module) -> str:
    return Printer().module(m)


def print_function(f: Function) -> str:
    p = Printer()
    p.function(f, "")
    return "\n".join(p.lines) + "\n"
