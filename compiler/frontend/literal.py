"""Compile-time arithmetic on Python values, guarded so untrusted input cannot hang or exhaust memory,
and a small evaluator for data written as code: decorator arguments and heuristics lambdas.

Nothing here calls Python's eval: each AST node kind is interpreted by hand over plain values.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from .types import DType

MAX_INT_BITS = 256
MAX_SEQ_LEN = 10_000
# elements of a constant counted through its nesting (a string counts its characters): sharing makes
# `((1,) * 100,) * 100 ...` tiny to write and huge to copy, print or send (a 173-byte kernel once made a
# 200 MB answer for the API process to unpickle)
MAX_ELEMENTS = 100_000


class FoldError(Exception):
    """A compile-time computation that is not allowed or failed (the caller locates it)."""


def _check(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_INT_BITS:
        raise FoldError(f"constant expression exceeds {MAX_INT_BITS} bits")
    if isinstance(v, (str, tuple, list)) and len(v) > MAX_SEQ_LEN:
        raise FoldError(f"constant sequence longer than {MAX_SEQ_LEN}")
    if isinstance(v, (tuple, list, dict)) and _elements(v, {}) > MAX_ELEMENTS:
        raise FoldError(f"constant holds more than {MAX_ELEMENTS} elements (counted through its nesting)")
    return v


def _elements(v: Any, seen: dict[int, int]) -> int:
    """How many elements `v` holds counted through its nesting, each shared part counted every time it is
    reached (as a copy would count it), computed once per object; stops counting past MAX_ELEMENTS."""
    if isinstance(v, str):
        return max(1, len(v))
    if not isinstance(v, (tuple, list, dict)):
        return 1
    if id(v) in seen:
        if seen[id(v)] < 0:  # reached again while being counted: it contains itself
            raise FoldError("a constant that contains itself")
        return seen[id(v)]
    seen[id(v)] = -1
    total = 0
    for x in v.items() if isinstance(v, dict) else v:
        total += _elements(x, seen)
        if total > MAX_ELEMENTS:
            break
    seen[id(v)] = max(1, total)
    return seen[id(v)]


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > MAX_INT_BITS:
        raise FoldError(f"constant expression exceeds {MAX_INT_BITS} bits")
    return a**b


def _shl(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > MAX_INT_BITS:
        raise FoldError(f"shift by {b} is too large")
    return a << b


def _mul(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, tuple, list)) and isinstance(n, int) and len(seq) * n > MAX_SEQ_LEN:
            raise FoldError(f"constant sequence longer than {MAX_SEQ_LEN}")
    return a * b


BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
    ast.LShift: _shl,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    # Triton's dtypes are one object per type (`dtype is tl.float32`); here they are values, equal per type
    ast.Is: lambda a, b: a is b or (isinstance(a, DType) and a == b),
    ast.IsNot: lambda a, b: not (a is b or (isinstance(a, DType) and a == b)),
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
UNARYOPS: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}


def fold_binop(op: ast.operator, a: Any, b: Any) -> Any:
    fn = BINOPS.get(type(op))
    if fn is None:
        raise FoldError(f"operator {type(op).__name__} is not supported")
    try:
        return _check(fn(a, b))
    except FoldError:
        raise
    except ZeroDivisionError:
        raise FoldError("division by zero in a constant expression") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise FoldError(f"cannot compute this constant expression: {exc}") from None


def fold_compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    try:
        return CMPOPS[type(op)](a, b)
    except (TypeError, ValueError) as exc:
        raise FoldError(f"cannot compare these constants: {exc}") from None


def fold_unary(op: ast.unaryop, a: Any) -> Any:
    try:
        return _check(UNARYOPS[type(op)](a))
    except (TypeError, ValueError) as exc:
        raise FoldError(f"cannot compute this constant expression: {exc}") from None


def next_power_of_2(n: int) -> int:
    if not isinstance(n, int) or n > 2**MAX_INT_BITS:
        raise FoldError("next_power_of_2 needs a (small) integer")
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    if b == 0:
        raise FoldError("division by zero in cdiv")
    return (a + b - 1) // b


def _safe_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_SEQ_LEN:
        raise FoldError(f"range longer than {MAX_SEQ_LEN}")
    return r


_SAFE_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "bool": bool,
    "len": len,
    "range": _safe_range,
    "triton.next_power_of_2": next_power_of_2,
    "triton.cdiv": cdiv,
    "next_power_of_2": next_power_of_2,
    "cdiv": cdiv,
}


class LiteralEvaluator:
    """Evaluates a restricted expression AST: literals, containers, names from `env`, arithmetic,
    comparisons, conditional expressions, subscripts and a few pure functions (min, max, cdiv...).
    `call_hook(dotted_name, args, kwargs)` may handle other calls (e.g. triton.Config)."""

    def __init__(
        self,
        env: Mapping[str, Any],
        call_hook: Callable[[str, list, dict], Any] | None = None,
        dotted: Callable[[ast.expr], str | None] | None = None,
        attr_hook: Callable[[str], Any] | None = None,
    ):
        self.env = env
        self.call_hook = call_hook
        self.dotted = dotted or _plain_dotted
        self.attr_hook = attr_hook  # dotted name (e.g. triton.language.float16) -> value, or NotImplemented

    def eval(self, node: ast.AST) -> Any:
        stack_guard = getattr(self, "_depth", 0)
        if stack_guard > 200:
            raise FoldError("expression nested too deeply")
        self._depth = stack_guard + 1
        try:
            return self._eval(node)
        finally:
            self._depth = stack_guard

    def _eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.eval(e) for e in node.elts]
            return _check(items if isinstance(node, ast.List) else tuple(items))
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise FoldError("dict unpacking is not supported here")
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values, strict=False)}
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            raise FoldError(f"name '{node.id}' is not known here")
        if isinstance(node, ast.BinOp):
            return fold_binop(node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.UnaryOp):
            return fold_unary(node.op, self.eval(node.operand))
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.ListComp):
            return self._listcomp(node)
        if isinstance(node, ast.Attribute) and node.attr in _DTYPE_PROPERTIES:
            owner = self._dtype_owner(node)
            if owner is not None:  # `dtype.primitive_bitwidth`, `ptr_dtype.element_ty`
                try:
                    return getattr(owner, node.attr)
                except AttributeError:
                    raise FoldError(f"{owner} has no {node.attr}") from None
        if isinstance(node, ast.Attribute) and self.attr_hook is not None:
            name = self.dotted(node)
            v = self.attr_hook(name) if name is not None else NotImplemented
            if v is not NotImplemented:
                return v
        raise FoldError(f"{type(node).__name__} is not allowed in this expression")

    def _dtype_owner(self, node: ast.expr) -> Any:
        """The dtype value `node`'s attribute is taken of (a local name or an expression that is one), else None."""
        if not isinstance(node, ast.Attribute) or (isinstance(node.value, ast.Name) and node.value.id not in self.env):
            return None
        if not isinstance(node.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            return None
        try:
            owner = self.eval(node.value)
        except FoldError:
            return None
        return owner if isinstance(owner, DType) else None

    def _boolop(self, node: ast.BoolOp) -> Any:
        v = None
        for e in node.values:
            v = self.eval(e)
            if isinstance(node.op, ast.And) and not v:
                return v
            if isinstance(node.op, ast.Or) and v:
                return v
        return v

    def _compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = self.eval(right_node)
            if not fold_compare(op, left, right):
                return False
            left = right
        return True

    def _listcomp(self, node: ast.ListComp) -> list:
        out: list = []
        saved = self.env
        try:
            self._comp(node, 0, dict(saved), out)
        finally:
            self.env = saved
        return out

    def _comp(self, node: ast.ListComp, i: int, env: dict, out: list) -> None:
        if i == len(node.generators):
            self.env = env
            out.append(self.eval(node.elt))
            _check(out)
            return
        gen = node.generators[i]
        self.env = env
        seq = self.eval(gen.iter)
        if not isinstance(seq, (list, tuple, range)) or len(seq) > MAX_SEQ_LEN:
            raise FoldError("a comprehension must iterate over a short list, tuple or range")
        for item in seq:
            inner = dict(env)
            _bind(gen.target, item, inner)
            self.env = inner
            if all(self.eval(cond) for cond in gen.ifs):
                self._comp(node, i + 1, inner, out)

    def _subscript(self, node: ast.Subscript) -> Any:
        base = self.eval(node.value)
        if isinstance(node.slice, ast.Slice):
            raise FoldError("slices are not supported here")
        key = self.eval(node.slice)
        try:
            return base[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise FoldError(f"cannot index this value: {exc!r}") from None

    def _call(self, node: ast.Call) -> Any:
        name = self.dotted(node.func) or (node.func.id if isinstance(node.func, ast.Name) else None)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise FoldError("*args and **kwargs are not supported here")
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        owner = self._dtype_owner(node.func)
        if owner is not None:  # `dtype.is_fp16()`: a dtype's predicates, as host code asks them
            method = node.func.attr  # type: ignore[attr-defined]
            if method not in _DTYPE_METHODS or args or kwargs:
                raise FoldError(f"a dtype's {method}() is not supported here")
            return getattr(owner, method)()
        if self.call_hook is not None and name is not None:
            handled = self.call_hook(name, args, kwargs)
            if handled is not NotImplemented:
                return handled
        fn = _SAFE_FUNCS.get(name or "")
        if fn is None:
            raise FoldError(f"calling {name or 'this'} is not supported here")
        try:
            return _check(fn(*args, **kwargs))
        except FoldError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise FoldError(f"{name}(...) failed: {exc}") from None


# what host code may ask of a dtype value (compiler/frontend/types.py's DType has each)
_DTYPE_METHODS = frozenset({"is_ptr", "is_floating", "is_int", "is_int_signed", "is_int_unsigned", "is_bool", "is_fp16",
                            "is_bf16", "is_fp32", "is_fp64", "is_fp8", "is_fp8e4nv", "is_fp8e5", "is_block",
                            "is_int1", "is_int8", "is_int16", "is_int32", "is_int64", "is_uint8", "is_uint16",
                            "is_uint32", "is_uint64", "is_standard_floating"})  # fmt: skip
_DTYPE_PROPERTIES = frozenset({"element_ty", "primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "name",
                               "scalar"})  # fmt: skip

MAX_BUILDER_STEPS = 10_000


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


def run_builder(fn: ast.FunctionDef, ev: LiteralEvaluator) -> Any:
    """Run a host function that only builds data (e.g. a list of triton.Config in loops) with our evaluator:
    assignments, `for` over short sequences, `if`, `.append`/`.extend` and `return`; nothing else.
    Raises FoldError on any other statement, on arguments, or past MAX_BUILDER_STEPS statements."""
    if fn.args.args or fn.args.posonlyargs or fn.args.vararg or fn.args.kwonlyargs or fn.args.kwarg:
        raise FoldError(f"{fn.name}() must take no arguments to build autotune data")
    saved = ev.env
    ev.env = dict(saved)
    steps = [0]
    try:
        _run_stmts(fn.body, ev, steps)
    except _Return as r:
        return r.value
    finally:
        ev.env = saved
    return None


def run_function(fn: ast.FunctionDef, args: list, kwargs: dict, ev: LiteralEvaluator) -> Any:
    """Call a host function on constants with our evaluator (a @triton.constexpr_function): its parameters
    bound (defaults evaluated here), then the statements run_builder allows. Raises FoldError otherwise."""
    a = fn.args
    if a.vararg or a.kwonlyargs or a.kwarg:
        raise FoldError(f"{fn.name}() must take plain parameters")
    params = [p.arg for p in a.posonlyargs + a.args]
    if len(args) > len(params):
        raise FoldError(f"{fn.name}() takes {len(params)} arguments, got {len(args)}")
    bound = dict(zip(params, args, strict=False))
    for k, v in kwargs.items():
        if k not in params or k in bound:
            raise FoldError(f"{fn.name}() got an unexpected or repeated argument '{k}'")
        bound[k] = v
    defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults, strict=False))
    saved = ev.env
    for p in params:
        if p not in bound:
            if p not in defaults:
                raise FoldError(f"{fn.name}() is missing argument '{p}'")
            bound[p] = ev.eval(defaults[p])
    ev.env = {**saved, **bound}
    try:
        _run_stmts(fn.body, ev, [0])
    except _Return as r:
        return r.value
    finally:
        ev.env = saved
    return None


def _run_stmts(stmts: list[ast.stmt], ev: LiteralEvaluator, steps: list[int]) -> None:
    for st in stmts:
        steps[0] += 1
        if steps[0] > MAX_BUILDER_STEPS:
            raise FoldError(f"building this data takes more than {MAX_BUILDER_STEPS} steps")
        _run_stmt(st, ev, steps)


def _run_stmt(st: ast.stmt, ev: LiteralEvaluator, steps: list[int]) -> None:
    env = ev.env
    assert isinstance(env, dict)
    if isinstance(st, ast.Return):
        raise _Return(ev.eval(st.value) if st.value is not None else None)
    if isinstance(st, ast.Assign):
        value = ev.eval(st.value)
        for t in st.targets:
            _bind(t, value, env)
    elif isinstance(st, ast.AnnAssign) and st.value is not None:
        _bind(st.target, ev.eval(st.value), env)
    elif isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
        env[st.target.id] = fold_binop(st.op, ev.eval(st.target), ev.eval(st.value))
    elif isinstance(st, ast.For) and not st.orelse:
        seq = ev.eval(st.iter)
        if not isinstance(seq, (list, tuple, range)) or len(seq) > MAX_SEQ_LEN:
            raise FoldError("a loop must iterate over a short list, tuple or range")
        for item in list(seq):
            _bind(st.target, item, env)
            _run_stmts(st.body, ev, steps)
    elif isinstance(st, ast.If):
        _run_stmts(st.body if ev.eval(st.test) else st.orelse, ev, steps)
    elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
        return
    elif isinstance(st, ast.Expr) and _is_list_append(st.value):
        call = st.value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
        target = ev.eval(call.func.value)
        if not isinstance(target, list) or len(call.args) != 1 or call.keywords:
            raise FoldError("only list.append(x) / list.extend(xs) are supported here")
        item = ev.eval(call.args[0])
        target.append(item) if call.func.attr == "append" else target.extend(item)
        _check(target)
    elif not isinstance(st, ast.Pass):
        raise FoldError(f"{type(st).__name__} statements are not supported in a data-building function")


def _is_list_append(e: ast.expr) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("append", "extend")


def _bind(target: ast.expr, value: Any, env: dict) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return
    if isinstance(target, (ast.Tuple, ast.List)):
        if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
            raise FoldError("cannot unpack this value")
        for t, v in zip(target.elts, value, strict=False):
            _bind(t, v, env)
        return
    raise FoldError("unsupported comprehension target")


def _plain_dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def evaluate_heuristic(text: str, args: Mapping[str, Any]) -> Any:
    """Evaluate a heuristics lambda source (`lambda args: ...`) on a dict of launch arguments,
    with our own evaluator (never eval). Raises FoldError on anything outside the literal subset."""
    if len(text) > 10_000:
        raise FoldError("heuristic text is too long")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise FoldError(f"heuristic does not parse: {exc}") from None
    lam = tree.body
    if not isinstance(lam, ast.Lambda) or len(lam.args.args) != 1:
        raise FoldError("a heuristic must be a lambda of one argument")
    return LiteralEvaluator({lam.args.args[0].arg: dict(args)}).eval(lam.body)
