"""The typing core of the frontend: runtime values (Tensor) over compiler.ir.Builder, with Triton's
promotion of weak Python scalars, NumPy broadcasting (splat/expand_dims/broadcast inserted so every
elementwise op sees identical types), casts, arithmetic, comparisons and pointer arithmetic.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ..errors import BudgetExceededError, CompileError
from ..ir import Builder, Operation, Value
from ..ir.types import PointerType, ScalarType, TileType, elem_type, i1, make_type, shape_of
from .literal import FoldError, fold_binop, fold_compare, fold_unary
from .reader import Budgets
from .types import DType, int_literal_type, literal_type, promote, promote_weak

Raise = Callable[..., CompileError]


class Tensor:
    """A runtime value while building: an IR value (scalar or tile) with Triton-style accessors."""

    __slots__ = ("value",)

    def __init__(self, value: Value):
        self.value = value

    @property
    def type(self):
        return self.value.type

    @property
    def shape(self) -> tuple[int, ...]:
        return shape_of(self.value.type)

    @property
    def elem(self):
        return elem_type(self.value.type)

    @property
    def dtype(self) -> DType:
        return DType(self.elem)

    def __repr__(self) -> str:
        return f"Tensor({self.value.type})"


class Aggregate:
    """A frontend-level value made of runtime scalars (its leaves) and static structure, such as a block
    pointer. Loops, ifs and helper calls carry it as its leaves; `static_key` must match to merge two."""

    METHODS: dict[str, Any] = {}

    def leaves(self) -> list[Any]:
        raise NotImplementedError

    def with_leaves(self, leaves: list[Any]) -> Aggregate:
        raise NotImplementedError

    def static_key(self) -> tuple:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def is_const(x: Any) -> bool:
    return not isinstance(x, Tensor)


def is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float))


def describe(x: Any) -> str:
    if isinstance(x, Aggregate):
        return x.describe()
    if isinstance(x, Tensor):
        return f"{x.dtype} tile of shape {list(x.shape)}" if x.shape else f"{x.dtype} scalar"
    return f"constant {x!r}"


class CountingBuilder(Builder):
    """A Builder that holds the op and tile-size budgets and raises located errors."""

    def __init__(self, budgets: Budgets, error: Raise):
        super().__init__()
        self.budgets = budgets
        self.error = error
        self.count = 0

    def insert(self, op: Operation) -> Operation:
        self.count += 1
        if self.count > self.budgets.max_ops:
            raise self.error(f"kernel needs more than {self.budgets.max_ops} IR ops", BudgetExceededError)
        for r in op.results:
            if isinstance(r.type, TileType) and r.type.numel > self.budgets.max_tile_elements:
                raise self.error(f"tile of {r.type.numel} elements is over the budget of "
                                 f"{self.budgets.max_tile_elements}", BudgetExceededError)
        return super().insert(op)


_ARITH = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Mod: "rem", ast.BitAnd: "and", ast.BitOr: "or",
          ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
           ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}


class Semantic:
    def __init__(self, builder: CountingBuilder, error: Raise):
        self.b = builder
        self.error = error

    # ---- making values
    def const(self, value: Any, elem: ScalarType, shape: tuple[int, ...] = ()) -> Tensor:
        if elem.is_float:
            v: Any = float(value)
        else:
            v = int(value)
            if elem.is_bool:
                v = 1 if v else 0
        return Tensor(self.b.constant(v, make_type(shape, elem)))

    def to_tensor(self, x: Any, elem: ScalarType | None = None) -> Tensor:
        if isinstance(x, Tensor):
            return x if elem is None else self.cast(x, elem)
        if not is_number(x):
            raise self.error(f"expected a number or tensor, got {describe(x)}")
        t = literal_type(x)
        if t is None:  # as Triton: a Python int past 64 bits is an error, whatever it would convert to
            raise self.error(f"integer constant {x} does not fit in 64 bits")
        return self.const(x, elem or t)

    def cast(self, x: Tensor, elem: Any) -> Tensor:
        if x.elem == elem:
            return x
        if isinstance(elem, PointerType) and not isinstance(x.elem, PointerType):
            # an address kept in memory as a 64-bit integer (grouped GEMM's table of pointers), as in Triton
            if not (isinstance(x.elem, ScalarType) and x.elem.is_int and x.elem.bits == 64):
                raise self.error(f"cannot cast {describe(x)} to a pointer: only 64-bit integers hold addresses")
            return Tensor(self.b.cast(x.value, elem))
        if isinstance(x.elem, PointerType) and isinstance(elem, PointerType):
            return Tensor(self.b.op1("bitcast", [x.value], make_type(x.shape, elem)))
        return Tensor(self.b.cast(x.value, elem))

    def bitcast(self, x: Tensor, elem: Any) -> Tensor:
        if x.elem == elem:
            return x
        if x.elem.bits != elem.bits:
            raise self.error(f"bitcast needs equal widths, {x.dtype} is {x.elem.bits} bits and "
                             f"{DType(elem)} is {elem.bits}")
        return Tensor(self.b.op1("bitcast", [x.value], make_type(x.shape, elem)))

    # ---- shapes
    def broadcast_to(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        if x.shape == shape:
            return x
        if not x.shape:
            return Tensor(self.b.splat(x.value, shape))
        if len(x.shape) > len(shape) or any(a not in (1, b) for a, b in zip(x.shape[::-1], shape[::-1], strict=False)):
            raise self.error(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
        v = x.value
        while len(shape_of(v.type)) < len(shape):
            v = self.b.expand_dims(v, 0)
        if shape_of(v.type) != shape:
            v = self.b.broadcast(v, shape)
        return Tensor(v)

    def broadcast_shape(self, *shapes: tuple[int, ...]) -> tuple[int, ...]:
        rank = max(len(s) for s in shapes)
        out = []
        for i in range(rank):
            dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
            if len(dims) > 1:
                raise self.error("cannot broadcast shapes " + " and ".join(str(list(s)) for s in shapes))
            out.append(dims.pop() if dims else 1)
        return tuple(out)

    def broadcast_all(self, *xs: Tensor) -> list[Tensor]:
        shape = self.broadcast_shape(*(x.shape for x in xs))
        return [self.broadcast_to(x, shape) for x in xs]

    # ---- operand typing
    def common(self, a: Any, b: Any, *, div_or_mod: bool = False) -> tuple[Tensor, Tensor]:
        """Promote two operands (at least one a Tensor) to one element type and one shape."""
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise self.error("internal: common() needs a tensor")
        for x in (a, b):
            if not isinstance(x, Tensor) and not is_number(x):
                raise self.error(f"cannot combine {describe(x)} with a tensor")
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            if isinstance(a.elem, PointerType) or isinstance(b.elem, PointerType):
                if a.elem != b.elem:
                    raise self.error(f"cannot combine {describe(a)} with {describe(b)}")
                t = a.elem
            else:
                t = promote(a.elem, b.elem, div_or_mod=div_or_mod)
        else:
            tensor, weak = (a, b) if isinstance(a, Tensor) else (b, a)
            if isinstance(tensor.elem, PointerType):
                raise self.error(f"cannot combine {describe(tensor)} with {describe(weak)}")
            t = promote_weak(tensor.elem, weak)
        if div_or_mod and isinstance(t, ScalarType) and t.name in ("f16", "bf16"):
            t = ScalarType("f32")  # Triton: `/` and `%` of half-precision operands compute (and return) f32
        if isinstance(t, ScalarType) and t.is_fp8:
            raise self.error(f"fp8 arithmetic is not supported ({describe(a)} with {describe(b)}): "
                             f"convert with .to(tl.float16) or .to(tl.float32) first")  # fmt: skip
        ta, tb = self.to_tensor(a, t), self.to_tensor(b, t)
        ta, tb = self.broadcast_all(ta, tb)
        return ta, tb

    # ---- arithmetic
    def binop(self, op: ast.operator, a: Any, b: Any) -> Any:
        if is_const(a) and is_const(b):
            try:
                return fold_binop(op, a, b)
            except FoldError as exc:
                raise self.error(str(exc)) from None
        sym = _SYMBOL.get(type(op), type(op).__name__)
        if isinstance(op, (ast.Add, ast.Sub)) and _has_ptr(a, b):
            return self.ptr_arith(a, b, isinstance(op, ast.Sub))
        if isinstance(op, ast.MatMult):
            raise self.error("use tl.dot for matrix products")
        if isinstance(op, ast.Pow):
            raise self.error("`**` on tensors is not supported (use tl.exp2/tl.math.pow)")
        for x in (a, b):
            if isinstance(x, Tensor) and isinstance(x.elem, PointerType):
                raise self.error(f"`{sym}` does not take pointers ({describe(x)})")
        if isinstance(op, ast.Div):
            return self.truediv(a, b)
        ta, tb = self.common(a, b, div_or_mod=isinstance(op, (ast.FloorDiv, ast.Mod)))
        if isinstance(op, ast.FloorDiv):
            if ta.elem.is_float:  # as Triton (its floordiv takes integers only)
                raise self.error(f"`//` needs integer operands, got {describe(ta)} (use tl.floor(a / b) or "
                                 "tl.div_rn for floats)")
            return Tensor(self.b.binary("div", ta.value, tb.value))
        # float `%` is C's fmod (the IR's `rem`), the sign of the dividend, as Triton lowers it (frem) and its
        # interpreter runs it (np.fmod); older Triton releases floored like Python instead
        name = _ARITH[type(op)]
        if name in ("and", "or", "xor", "shl", "shr") and ta.elem.is_float:
            raise self.error(f"`{sym}` needs integer operands, got {describe(ta)}")
        return Tensor(self.b.binary(name, ta.value, tb.value))

    def truediv(self, a: Any, b: Any, *, precise: bool = False) -> Tensor:
        """`a / b`; `precise`: correctly rounded (tl.math.div_rn) where a target's `/` approximates."""
        ta, tb = self.common(a, b, div_or_mod=True)
        if not ta.elem.is_float:
            f32 = ScalarType("f32")
            ta, tb = self.cast(ta, f32), self.cast(tb, f32)
        attrs = {"precise": True} if precise else {}
        return Tensor(self.b.binary("div", ta.value, tb.value, **attrs))

    def ptr_arith(self, a: Any, b: Any, subtract: bool) -> Tensor:
        if not (isinstance(a, Tensor) and isinstance(a.elem, PointerType)):
            if subtract:
                raise self.error("cannot subtract a pointer from a number")
            a, b = b, a
        off = self.to_tensor(b) if not isinstance(b, Tensor) else b
        if isinstance(off.elem, PointerType) or off.elem.is_float:
            raise self.error(f"pointer offsets must be integers, got {describe(off)}")
        if subtract:
            off = Tensor(self.b.unary("neg", off.value))
        p, off = self.broadcast_all(a, off)
        return Tensor(self.b.op1("addptr", [p.value, off.value], p.type))

    def compare(self, op: ast.cmpop, a: Any, b: Any) -> Any:
        if is_const(a) and is_const(b):
            try:
                return fold_compare(op, a, b)
            except FoldError as exc:
                raise self.error(str(exc)) from None
        if isinstance(op, (ast.Is, ast.IsNot)) and (a is None or b is None):
            return isinstance(op, ast.IsNot)  # a tensor is never None (`if bias_ptr is not None:`)
        pred = _CMP.get(type(op))
        if pred is None:
            raise self.error(f"`{type(op).__name__}` comparisons are not supported on tensors")
        ta, tb = self.common(a, b)
        return Tensor(self.b.cmp(pred, ta.value, tb.value))

    def unary(self, op: ast.unaryop, x: Any) -> Any:
        if is_const(x):
            try:
                return fold_unary(op, x)
            except FoldError as exc:
                raise self.error(str(exc)) from None
        if isinstance(op, ast.UAdd):
            return x
        if isinstance(x.elem, PointerType):
            raise self.error(f"unary operator does not take pointers ({describe(x)})")
        if isinstance(op, ast.USub):
            return Tensor(self.b.unary("neg", x.value))
        if isinstance(op, ast.Not):
            return self.logical_not(x)
        if x.elem.is_float:
            raise self.error(f"`~` needs an integer operand, got {describe(x)}")
        ones = -1 if x.elem.is_signed else (1 << x.elem.bits) - 1
        if x.elem.is_bool:
            ones = 1
        return Tensor(self.b.binary("xor", x.value, self.const(ones, x.elem, x.shape).value))

    def to_bool(self, x: Any) -> Any:
        if is_const(x):
            return bool(x)
        if x.elem == i1:
            return x
        if isinstance(x.elem, PointerType):  # as Triton: a pointer is true when it is not null
            x = Tensor(self.b.cast(x.value, ScalarType("i64")))
        zero = self.const(0, x.elem, x.shape)
        return Tensor(self.b.cmp("ne", x.value, zero.value))

    def logical_not(self, x: Tensor) -> Tensor:
        c = self.to_bool(x)
        return Tensor(self.b.binary("xor", c.value, self.const(1, i1, c.shape).value))

    def logical(self, is_and: bool, a: Any, b: Any) -> Tensor:
        ta, tb = self.broadcast_all(self.to_tensor(self.to_bool(a)), self.to_tensor(self.to_bool(b)))
        return Tensor(self.b.binary("and" if is_and else "or", ta.value, tb.value))

    def minmax(self, is_max: bool, a: Any, b: Any, propagate_nan: bool = False) -> Any:
        if is_const(a) and is_const(b):
            return max(a, b) if is_max else min(a, b)
        ta, tb = self.common(a, b)
        attrs = {"propagate_nan": True} if propagate_nan else {}
        return Tensor(self.b.binary("maximum" if is_max else "minimum", ta.value, tb.value, **attrs))

    def where(self, cond: Any, x: Any, y: Any) -> Any:
        c = self.to_bool(cond)
        if is_const(c) and is_const(x) and is_const(y):
            return x if c else y
        if is_const(x) and is_const(y):
            t = literal_type(x) if isinstance(x, float) or not isinstance(y, float) else literal_type(y)
            if t is None:
                raise self.error("tl.where branches must be numbers or tensors")
            tx, ty = self.to_tensor(x, t), self.to_tensor(y, t)
        else:
            tx, ty = self.common(x, y)
        tc = self.to_tensor(c)
        tc, tx, ty = self.broadcast_all(tc, tx, ty)
        return Tensor(self.b.select(tc.value, tx.value, ty.value))

    def materialize(self, x: Any, what: str) -> Tensor:
        """A Python scalar turned into an IR scalar (e.g. a loop-carried variable)."""
        if isinstance(x, Tensor):
            return x
        if not is_number(x):
            raise self.error(f"{what} must be a number or tensor, got {describe(x)}")
        if isinstance(x, int) and not isinstance(x, bool) and int_literal_type(x) is None:
            raise self.error(f"{what}: integer {x} does not fit in 64 bits")
        return self.to_tensor(x)


def _has_ptr(a: Any, b: Any) -> bool:
    return any(isinstance(x, Tensor) and isinstance(x.elem, PointerType) for x in (a, b))
