"""Parser of the tile IR's textual form: the inverse of printer.py (print(parse(t)) == t).

Errors are CompileErrors located at the offending token (line:col of the IR text).
"""

from __future__ import annotations

import json
import re

from ..errors import CompileError
from .core import Block, Function, Loc, Module, Operation, Param, Region, Value
from .ops import OPS
from .types import PointerType, ScalarType, TileType, Type, parse_scalar

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<value>%[A-Za-z0-9_.$]+)
  | (?P<symbol>@[A-Za-z_][A-Za-z0-9_.$]*)
  | (?P<number>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)|-inf|-nan)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<arrow>->)
  | (?P<punct>[{}()\[\]<>,:=^x])
    """,
    re.VERBOSE,
)

MAX_IR_BYTES = 16 * 1024 * 1024
MAX_NESTING = 200
MAX_ATTR_NESTING = 16
MAX_INT_DIGITS = 40  # u128's maximum has 39 digits


class Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col


def tokenize(text: str, filename: str) -> list[Tok]:
    toks: list[Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CompileError(
                f"unexpected character {text[pos]!r}",
                filename=filename,
                line=line,
                col=pos - line_start + 1,
                source_line=_line_of(text, line_start),
            )
        kind = m.lastgroup or ""
        s = m.group()
        if kind != "ws":
            toks.append(Tok(kind, s, line, pos - line_start + 1))
        nl = s.count("\n")
        if nl:
            line += nl
            line_start = pos + s.rindex("\n") + 1
        pos = m.end()
    toks.append(Tok("eof", "", line, pos - line_start + 1))
    return toks


def _line_of(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


class Parser:
    def __init__(self, text: str, filename: str = "<ir>"):
        if len(text) > MAX_IR_BYTES:
            line = text.count("\n", 0, MAX_IR_BYTES) + 1
            start = text.rfind("\n", 0, MAX_IR_BYTES) + 1
            raise CompileError(f"IR text is {len(text)} bytes, over the {MAX_IR_BYTES} byte limit (which ends here)",
                               filename=filename, line=line, col=MAX_IR_BYTES - start + 1)  # fmt: skip
        self.text = text
        self.lines = text.split("\n")
        self.filename = filename
        self.toks = tokenize(text, filename)
        self.i = 0
        self.scopes: list[dict[str, Value]] = []
        self.depth = 0

    # ---- token helpers
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def error(self, msg: str, tok: Tok | None = None) -> CompileError:
        t = tok or self.tok
        src = self.lines[t.line - 1] if 0 < t.line <= len(self.lines) else None
        return CompileError(msg, filename=self.filename, line=t.line, col=t.col, source_line=src)

    def loc(self, t: Tok | None = None) -> Loc:
        t = t or self.tok
        return Loc(t.line, t.col, self.filename)

    def at(self, text: str) -> bool:
        return self.tok.text == text and self.tok.kind not in ("string",)

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            raise self.error(f"expected '{text}', got {self._desc()}")
        t = self.tok
        self.i += 1
        return t

    def expect_kind(self, kind: str, what: str) -> Tok:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}, got {self._desc()}")
        t = self.tok
        self.i += 1
        return t

    def _desc(self) -> str:
        return "end of input" if self.tok.kind == "eof" else f"'{self.tok.text}'"

    # ---- types
    def parse_type(self) -> Type:
        t = self.tok
        if t.kind != "ident":
            raise self.error(f"expected a type, got {self._desc()}")
        if t.text == "ptr":
            self.i += 1
            return self._pointer_rest(t)
        if t.text == "tile":
            self.i += 1
            self.expect("<")
            return self._tile_rest(t)
        s = parse_scalar(t.text)
        if s is None:
            raise self.error(f"unknown type '{t.text}'")
        self.i += 1
        return s

    def _tile_rest(self, start: Tok) -> TileType:
        # tile<4x8xf32>: the tokenizer splits "4x8xf32" into number, ident("x8xf32") ... so re-lex here
        raw = ""
        while not self.at(">") and self.tok.kind != "eof":
            raw += self.tok.text
            self.i += 1
            if raw.endswith("ptr"):
                break
        parts = raw.split("x")
        elem_text = parts[-1]
        try:
            shape = [int(p) for p in parts[:-1]]
        except ValueError:
            raise self.error(f"bad tile shape '{raw}'", start) from None
        if not shape or any(d <= 0 for d in shape):
            raise self.error(f"tile shape must have positive dimensions, got '{raw}'", start)
        if elem_text == "ptr":
            elem: ScalarType | PointerType = self._pointer_rest(start)
        else:
            s = parse_scalar(elem_text)
            if s is None:
                raise self.error(f"unknown element type '{elem_text}'", start)
            elem = s
        self.expect(">")
        return TileType(tuple(shape), elem)

    def _pointer_rest(self, start: Tok) -> PointerType:
        """`<scalar>` after `ptr`; a pointer to a pointer or a tile is an error at `start`."""
        self.expect("<")
        if self.tok.text in ("ptr", "tile"):
            raise self.error("pointers point to scalars", start)
        inner = self.parse_type()
        self.expect(">")
        return PointerType(inner)

    # ---- attributes
    def parse_attr_value(self, depth: int = 0):
        t = self.tok
        if depth > MAX_ATTR_NESTING:
            raise self.error(f"attribute lists nested deeper than {MAX_ATTR_NESTING}")
        if t.kind == "string":
            self.i += 1
            try:
                return json.loads(t.text)
            except ValueError as e:
                raise self.error(f"bad string literal: {e.args[0].split(':')[0]}", t) from None
        if t.kind == "number":
            self.i += 1
            if t.text in ("-inf", "-nan"):
                return -float(t.text[1:])
            if any(c in t.text for c in ".eE"):
                return float(t.text)
            if len(t.text.lstrip("-")) > MAX_INT_DIGITS:  # no integer type is that wide (nor can int() read it)
                raise self.error(f"integer literal of {len(t.text.lstrip('-'))} digits: no integer type holds it", t)
            return int(t.text)
        if self.accept("["):
            vals = []
            while not self.at("]"):
                vals.append(self.parse_attr_value(depth + 1))
                if not self.accept(","):
                    break
            self.expect("]")
            return vals
        if t.kind == "ident":
            if t.text in ("true", "false"):
                self.i += 1
                return t.text == "true"
            if t.text in ("inf", "nan"):
                self.i += 1
                return float(t.text)
            return self.parse_type()
        raise self.error(f"expected an attribute value, got {self._desc()}")

    def parse_attrs(self) -> dict:
        attrs: dict = {}
        # an attribute dict is `{name = ...`; a region that follows instead starts with an op or `^`
        last = len(self.toks) - 1
        nxt, after = self.toks[min(self.i + 1, last)], self.toks[min(self.i + 2, last)]
        if not (self.at("{") and nxt.kind == "ident" and after.text == "="):
            return attrs
        self.i += 1
        while not self.at("}"):
            k = self.expect_kind("ident", "an attribute name")
            if k.text in attrs:
                raise self.error(f"attribute '{k.text}' given twice", k)
            self.expect("=")
            attrs[k.text] = self.parse_attr_value()
            if not self.accept(","):
                break
        self.expect("}")
        return attrs

    # ---- values
    def define(self, tok: Tok, v: Value) -> None:
        scope = self.scopes[-1]
        if any(tok.text in s for s in self.scopes):
            raise self.error(f"value {tok.text} is defined twice", tok)
        scope[tok.text] = v

    def use(self) -> Value:
        t = self.expect_kind("value", "a value")
        for s in reversed(self.scopes):
            if t.text in s:
                return s[t.text]
        raise self.error(f"use of undefined value {t.text}", t)

    # ---- structure
    def parse_module(self) -> Module:
        self.expect("module")
        self.expect("{")
        m = Module()
        names: set[str] = set()
        while not self.at("}"):
            t = self.tok
            f = self.parse_function()
            if f.name in names:
                raise self.error(f"function @{f.name} is defined twice", t)
            names.add(f.name)
            m.functions.append(f)
        self.expect("}")
        if self.tok.kind != "eof":
            raise self.error(f"unexpected {self._desc()} after the module")
        return m

    def parse_function(self) -> Function:
        start = self.tok
        if not (self.accept("kernel") or self.accept("func")):
            raise self.error(f"expected 'kernel' or 'func', got {self._desc()}")
        kernel = start.text == "kernel"
        name = self.expect_kind("symbol", "a function name like @name").text[1:]
        self.expect("(")
        params: list[Param] = []
        ptoks: list[Tok] = []
        while not self.at(")"):
            pt = self.expect_kind("value", "a parameter")
            self.expect(":")
            ty = self.parse_type()
            params.append(Param(pt.text[1:], ty, self.parse_attrs()))
            ptoks.append(pt)
            if not self.accept(","):
                break
        self.expect(")")
        results: list[Type] = []
        if self.accept("->"):
            results.append(self.parse_type())
            while self.accept(","):
                results.append(self.parse_type())
        attrs = self.parse_attrs()
        f = Function(name, params, results, kernel=kernel, attrs=attrs, loc=self.loc(start))
        self.scopes = [{}]
        for pt, a in zip(ptoks, f.args, strict=True):
            self.define(pt, a)
        self.expect("{")
        self.parse_ops(f.body.block)
        self.expect("}")
        return f

    def parse_ops(self, block: Block) -> None:
        while not self.at("}") and self.tok.kind != "eof":
            block.append(self.parse_op())

    def parse_op(self) -> Operation:
        start = self.tok
        res_toks: list[Tok] = []
        if self.tok.kind == "value":
            res_toks.append(self.expect_kind("value", "a value"))
            while self.accept(","):
                res_toks.append(self.expect_kind("value", "a result name"))
            self.expect("=")
        name_tok = self.tok
        if name_tok.kind != "ident" or name_tok.text not in OPS:
            raise self.error(f"unknown op '{name_tok.text}'" if name_tok.kind == "ident" else f"expected an op, got {self._desc()}")
        self.i += 1
        operands: list[Value] = []
        if self.tok.kind == "value" and self.tok.line == name_tok.line:  # else it starts the next op (`barrier`)
            operands.append(self.use())
            while self.accept(","):
                operands.append(self.use())
        attrs = self.parse_attrs()
        rtypes: list[Type] = []
        if self.accept(":"):
            rtypes.append(self.parse_type())
            while self.accept(","):
                rtypes.append(self.parse_type())
        if len(rtypes) != len(res_toks):
            raise self.error(f"'{name_tok.text}' names {len(res_toks)} results but gives {len(rtypes)} types", start)
        spec = OPS[name_tok.text]
        regions: list[Region] = []
        for k in range(spec.regions):
            if k and not self.at("{"):
                break
            regions.append(self.parse_region())
        op = Operation(name_tok.text, operands, rtypes, attrs, regions, loc=self.loc(name_tok))
        for t, r in zip(res_toks, op.results, strict=True):
            self.define(t, r)
        return op

    def parse_region(self) -> Region:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"regions nested deeper than {MAX_NESTING}")
        self.expect("{")
        self.scopes.append({})
        block = Block()
        if self.accept("^"):
            self.expect("(")
            while not self.at(")"):
                at = self.expect_kind("value", "a block argument")
                self.expect(":")
                self.define(at, block.add_arg(self.parse_type()))
                if not self.accept(","):
                    break
            self.expect(")")
            self.expect(":")
        self.parse_ops(block)
        self.expect("}")
        self.scopes.pop()
        self.depth -= 1
        return Region(block)


def parse_module(text: str, filename: str = "<ir>") -> Module:
    """Parse IR text into a Module (not yet verified: call verify_module)."""
    return Parser(text, filename).parse_module()
