"""The launch description of a remote tune: every argument of a kernel as data, so a worker can tune it.

Tensors are specs (shape and strides as expressions over the scalar arguments, dtype, init), scalars are
values or expressions, the grid is expressions over scalars and config parameters. Expressions are read
with `ast` and evaluated by the small evaluator below under budgets, never with `eval`.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal, NoReturn

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from ..errors import TilecError
from .keys import launch_string

_Int = Annotated[int, Strict()]  # a bool is not a size
_Num = Annotated[float, Strict()] | Annotated[int, Strict()]


class LaunchDescriptionError(TilecError, ValueError):
    """A launch description that cannot be used; `field` names where ("args.a_ptr", "grid[1]"). (Not the
    runtime's LaunchError, a launch that cannot run.)"""

    def __init__(self, field: str, reason: str, col: int | None = None) -> None:
        self.field = field
        self.reason = reason
        self.col = col
        where = f" (col {col})" if col is not None else ""
        super().__init__(f"{field}: {reason}{where}" if field else f"{reason}{where}")

    def __reduce__(self) -> tuple:  # crosses process boundaries (a tune reads its launch in a limited child)
        return type(self), (self.field, self.reason, self.col)


class GridTooLarge(LaunchDescriptionError):
    """A grid that computes, to more programs than a launch may have (or an axis past the device's range)."""


LaunchError = LaunchDescriptionError  # this module's raises use it; import LaunchDescriptionError elsewhere


@dataclass(frozen=True)
class LaunchBudgets:
    max_expr_chars: int = 1000
    max_expr_nodes: int = 200
    max_expr_depth: int = 32
    max_int_bits: int = 64
    max_tensor_bytes: int = 1 << 32
    max_total_bytes: int = 1 << 34
    max_grid: int = 2**31 - 1
    max_programs: int = 1 << 24  # programs of one launch, all axes together (2^31-1 took 60 s per config)
    max_args: int = 256


class TensorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    init: Literal["randn", "rand", "randint", "zeros", "empty"]
    shape: list[str | _Int]
    dtype: str | None = None
    low: _Num | None = None
    high: _Num | None = None
    strides: list[str | _Int] | None = None


class LaunchDescription(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    grid: list[str | _Int] = Field(min_length=1, max_length=3)
    args: dict[str, str | int | float | bool | TensorSpec]

    @classmethod
    def from_toml(cls, text: str) -> LaunchDescription:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise LaunchError("toml", _toml_reason(str(exc), text)) from None
        except RecursionError:
            raise LaunchError("toml", "nesting too deep") from None
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: object) -> LaunchDescription:
        """Validates parsed JSON (or TOML) data; every failure is a LaunchError naming the field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            # The deepest field says most; a union's members each add one reason for that field.
            fields = [(_loc_field(e["loc"]), e["msg"]) for e in exc.errors()]
            where = max(fields, key=lambda f: f[0].count(".") + f[0].count("["))[0]
            reasons = dict.fromkeys(msg for f, msg in fields if f == where)
            raise LaunchError(where or "launch", "; or ".join(reasons)) from None

    def to_json(self) -> dict:
        return self.model_dump(mode="json")


def _toml_reason(message: str, text: str) -> str:
    match = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if match:
        return f"{message[: match.start()].strip()} at line {match[1]} col {match[2]}"
    lines = text.split("\n")  # "(at end of document)": point after the last character
    return f"{message.split(' (at')[0]} at line {len(lines)} col {len(lines[-1]) + 1}"


_UNION_TAGS = {"str", "int", "float", "bool", "TensorSpec"}
LAUNCH_KEY_CHARS = 900  # a tuning key's key string is stored in a String(1000) column


def _loc_field(loc: tuple) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif not (i >= 2 and item in _UNION_TAGS):  # pydantic names the union member it tried
            parts.append(f".{item}" if parts else str(item))
    return "".join(parts)


# ---- the expression evaluator -------------------------------------------------------------------------

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow,
}  # fmt: skip
_FUNCS = {"cdiv", "min", "max"}
_INITS = {"randn", "rand", "randint", "zeros", "empty"}
_MAX_EXPONENT = 64


class _Expr:
    """One parsed expression with its text, so errors can name the character column."""

    def __init__(self, text: str, budgets: LaunchBudgets, field: str) -> None:
        self.text, self.budgets, self.field = text, budgets, field
        if len(text) > budgets.max_expr_chars:
            self.fail(f"expression longer than {budgets.max_expr_chars} characters", budgets.max_expr_chars)
        bad = next((i for i, ch in enumerate(text) if ch < " " and ch != "\t"), None)
        if bad is not None:
            self.fail("control characters (newlines included) are not allowed", bad)
        try:
            self.tree = ast.parse(text, mode="eval").body
        except SyntaxError as exc:
            self.fail(f"syntax error: {exc.msg}", (exc.offset or 1) - 1)
        except (RecursionError, MemoryError, ValueError):
            self.fail("expression too deeply nested")
        self._check_size()

    def fail(self, reason: str, col0: int | None = None, node: ast.expr | None = None) -> NoReturn:
        if node is not None:  # ast columns count UTF-8 bytes; ours count characters
            col0 = len(self.text.encode()[: node.col_offset].decode(errors="ignore"))
        raise LaunchError(self.field, reason, None if col0 is None else col0 + 1)

    def _check_size(self) -> None:
        count, stack = 0, [(self.tree, 1)]
        while stack:
            node, depth = stack.pop()
            count += 1
            if count > self.budgets.max_expr_nodes:
                self.fail(f"expression has more than {self.budgets.max_expr_nodes} nodes", node=self.tree)
            if depth > self.budgets.max_expr_depth:
                self.fail(f"expression nested deeper than {self.budgets.max_expr_depth}", node=node)
            stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id not in _FUNCS}

    def init_call(self) -> ast.Call | None:
        tree = self.tree
        is_init = isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id in _INITS
        return tree if is_init else None

    def value(self, node: ast.expr, env: Mapping[str, int | float | bool]) -> int | float:
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                self.fail(f"only int and float constants are allowed, not {node.value!r}", node=node)
            return self.bounded(node.value, node)
        if isinstance(node, ast.Name):
            if node.id not in env:
                self.fail(f"unknown name {node.id!r}", node=node)
            return self.bounded(env[node.id], node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.value(node.operand, env)
            return self.bounded(-operand if isinstance(node.op, ast.USub) else +operand, node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return self.binop(node, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        self.fail(f"{type(node).__name__} is not allowed in an expression", node=node)

    def binop(self, node: ast.BinOp, env: Mapping[str, int | float | bool]) -> int | float:
        left, right = self.value(node.left, env), self.value(node.right, env)
        is_div = isinstance(node.op, ast.FloorDiv | ast.Mod | ast.Div)
        if is_div and right == 0:
            self.fail("division by zero", node=node.right)
        if isinstance(node.op, ast.Pow) and (type(right) is not int or not 0 <= right <= _MAX_EXPONENT):
            self.fail(f"an exponent must be an integer in 0..{_MAX_EXPONENT}", node=node.right)
        try:
            result = _BINOPS[type(node.op)](left, right)
        except OverflowError:
            self.fail("float overflow", node=node)
        return self.bounded(result, node)

    def call(self, node: ast.Call, env: Mapping[str, int | float | bool]) -> int | float:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCS:
            self.fail("only cdiv(a, b), min(...) and max(...) may be called", node=node)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            self.fail(f"{name}() takes plain positional arguments", node=node)
        args = [self.value(a, env) for a in node.args]
        if name == "cdiv":
            if len(args) != 2:
                self.fail("cdiv takes two arguments", node=node)
            if args[1] == 0:
                self.fail("division by zero", node=node.args[1])
            return self.bounded(-(-args[0] // args[1]), node)  # the ceiling, whatever the signs
        if not args:
            self.fail(f"{name}() needs at least one argument", node=node)
        return min(args) if name == "min" else max(args)

    def bounded(self, value: object, node: ast.expr) -> int | float:
        reason = _number_problem(value, self.budgets)
        if reason:
            self.fail(reason, node=node)
        return value  # type: ignore[return-value]  # _number_problem checked it


def _number_problem(value: object, budgets: LaunchBudgets) -> str | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else "not a finite number"
    if not isinstance(value, int):
        return f"not a number: {value!r}"
    limit = 1 << (budgets.max_int_bits - 1)
    return None if -limit <= value < limit else f"integer outside the signed {budgets.max_int_bits}-bit range"


def evaluate(
    expr: str | int | float,
    env: Mapping[str, int | float | bool],
    budgets: LaunchBudgets = LaunchBudgets(),
    field: str = "",
) -> int | float:
    """The value of an expression over `env`: ints, floats, names, + - * / // % **, cdiv, min, max."""
    if isinstance(expr, int | float):
        reason = _number_problem(expr, budgets)
        if reason:
            raise LaunchError(field, reason)
        return expr
    if not isinstance(expr, str):
        raise LaunchError(field, f"an expression must be a string or a number, not {type(expr).__name__}")
    parsed = _Expr(expr, budgets, field)
    return parsed.value(parsed.tree, env)


# ---- types --------------------------------------------------------------------------------------------

_NUMPY = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "fp16": np.float16, "bf16": np.uint16, "fp32": np.float32, "fp64": np.float64,
}  # fmt: skip
_FLOAT_MAX = {"fp16": 65504.0, "bf16": 3.3895313892515355e38, "fp32": 3.4028234663852886e38, "fp64": math.inf}
_INT_RANGE = {"i1": (0, 1)} | {
    name: (int(np.iinfo(ty).min), int(np.iinfo(ty).max))
    for name, ty in _NUMPY.items()
    if name[0] in "iu" and name != "i1"
}


def _itemsize(dtype: str) -> int:
    return np.dtype(_NUMPY[dtype]).itemsize


@dataclass(frozen=True)
class TensorArg:
    name: str
    shape: tuple[int, ...]
    dtype: str
    init: str
    low: float | int | None
    high: float | int | None
    strides: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        if 0 in self.shape:
            return 0
        return (1 + sum((s - 1) * st for s, st in zip(self.shape, self.strides, strict=True))) * _itemsize(
            self.dtype
        )

    @property
    def contiguous(self) -> bool:
        return self.strides == _contiguous(self.shape)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order element strides: each the product of the sizes after it."""
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


@dataclass(frozen=True)
class ResolvedLaunch:
    params: tuple[str, ...]
    tensors: dict[str, TensorArg]
    scalars: dict[str, int | float | bool]
    grid_exprs: tuple[str | int, ...] = ()
    budgets: LaunchBudgets = field(default_factory=LaunchBudgets)

    def grid(self, config: dict[str, int | float | bool]) -> tuple[int, int, int]:
        env = {**self.scalars, **config}
        axes = []
        for i, expr in enumerate(self.grid_exprs):
            where = f"grid[{i}]"
            value = evaluate(expr, env, self.budgets, where)
            limit = self.budgets.max_grid if i == 0 else min(self.budgets.max_grid, 65535)
            if type(value) is not int:
                raise LaunchError(where, f"a grid axis must be an integer, got {value!r}")
            if not 1 <= value <= limit:
                raise GridTooLarge(where, f"a grid axis must be in 1..{limit}, got {value}")
            axes.append(value)
        programs = math.prod(axes)
        if programs > self.budgets.max_programs:
            raise GridTooLarge(
                "grid", f"{programs} programs, over the limit of {self.budgets.max_programs} per launch"
            )
        return (*axes, 1, 1, 1)[:3]

    def values(self, name: str) -> int | float | bool | TensorArg:
        if name in self.tensors:
            return self.tensors[name]
        if name in self.scalars:
            return self.scalars[name]
        raise LaunchError(f"args.{name}", "no such argument")

    def key_values(self, names: list[str]) -> dict[str, object]:
        values = {name: self.values(name) for name in names}
        return {
            n: {"shape": list(v.shape), "dtype": v.dtype} if isinstance(v, TensorArg) else v
            for n, v in values.items()
        }

    def launch_key_string(self) -> str:
        """The `key` string of a tuning key for a kernel without an autotune decorator: what was timed
        (every argument's value, or shape, dtype and strides, and the grid), so that one launch's trials
        never answer another's (keys.launch_string; long ones are hashed)."""
        args = {n: {"shape": list(v.shape), "dtype": v.dtype, "strides": list(v.strides)} if isinstance(v, TensorArg)
                else v for n in self.params for v in [self.values(n)]}  # fmt: skip
        return launch_string({"args": args, "grid": [str(g) for g in self.grid_exprs]}, LAUNCH_KEY_CHARS)


# ---- resolution ---------------------------------------------------------------------------------------


def resolve(
    launch: LaunchDescription,
    signature: dict[str, str],
    params: list[str],
    budgets: LaunchBudgets = LaunchBudgets(),
) -> ResolvedLaunch:
    """Checks a description against a kernel's runtime parameters and evaluates every shape and scalar."""
    args = launch.args
    if len(args) > budgets.max_args:
        raise LaunchError("args", f"{len(args)} arguments, over the limit of {budgets.max_args}")
    if missing := [p for p in params if p not in args]:
        raise LaunchError(f"args.{missing[0]}", "missing: the kernel's runtime parameter needs an argument")
    if unknown := [a for a in args if a not in params]:
        raise LaunchError(f"args.{unknown[0]}", "unknown argument: not a runtime parameter of the kernel")
    types = {name: _type_of(signature, name) for name in params}
    inits = {name: _as_tensor(args[name], budgets, f"args.{name}") for name in params}
    for name in params:
        if types[name].startswith("*") and inits[name] is None:
            raise LaunchError(f"args.{name}", "a pointer parameter needs a tensor (an init call or a table)")
        if not types[name].startswith("*") and inits[name] is not None:
            raise LaunchError(f"args.{name}", "a scalar parameter needs a scalar, not a tensor")
    scalars = _resolve_scalars({n: args[n] for n in params if inits[n] is None}, types, budgets)
    tensors = {n: _tensor(n, i, types[n][1:], scalars, budgets) for n, i in inits.items() if i is not None}
    if (total := sum(t.nbytes for t in tensors.values())) > budgets.max_total_bytes:
        raise LaunchError(
            "args", f"tensors of {total} bytes in all exceed the limit of {budgets.max_total_bytes} bytes"
        )
    for i, expr in enumerate(launch.grid):  # syntax and budgets now; values once a config is known
        if isinstance(expr, str):
            _Expr(expr, budgets, f"grid[{i}]")
    return ResolvedLaunch(tuple(params), tensors, scalars, tuple(launch.grid), budgets)


def _type_of(signature: dict[str, str], name: str) -> str:
    ty = signature.get(name)
    if ty is None or ty.removeprefix("*") not in _NUMPY:
        raise LaunchError(f"signature.{name}", f"unsupported or missing type {ty!r}")
    return ty


@dataclass
class _Init:
    """A tensor whose expressions are not evaluated yet, from a table or an init-call string. An expression
    is a string or number from a table, or a (parsed init call, node) pair whose columns count in its text."""

    spec: TensorSpec
    shape: list[tuple[object, str]]  # (expression, the field its errors name)
    strides: list[tuple[object, str]] | None = None
    bounds: tuple[object, object] = (None, None)


def _as_tensor(value: object, budgets: LaunchBudgets, where: str) -> _Init | None:
    if isinstance(value, TensorSpec):
        strides = value.strides and _located(value.strides, f"{where}.strides")
        return _Init(value, _located(value.shape, f"{where}.shape"), strides, (value.low, value.high))
    parsed = _Expr(value, budgets, where) if isinstance(value, str) else None
    call = parsed.init_call() if parsed else None
    if parsed is None or call is None:
        return None
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        parsed.fail("an init call takes positional arguments (a table gives dtype, strides)", node=call)
    init, nodes, bounds = call.func.id, [(parsed, a) for a in call.args], (None, None)
    if init == "randint":
        if len(nodes) < 2:
            parsed.fail("randint takes (low, high, *shape)", node=call)
        bounds, nodes = (nodes[0], nodes[1]), nodes[2:]
    return _Init(TensorSpec(init=init, shape=[]), [(node, where) for node in nodes], None, bounds)


def _located(exprs: list[str | int], where: str) -> list[tuple[object, str]]:
    return [(expr, f"{where}[{i}]") for i, expr in enumerate(exprs)]


def _eval(expr: object, env: dict, budgets: LaunchBudgets, where: str) -> int | float:
    return expr[0].value(expr[1], env) if isinstance(expr, tuple) else evaluate(expr, env, budgets, where)


def _resolve_scalars(raw: dict[str, object], types: dict[str, str], budgets: LaunchBudgets) -> dict:
    """Evaluates scalars in dependency order (an expression may name other scalars); a cycle is an error."""
    deps = {
        n: _Expr(v, budgets, f"args.{n}").names() & raw.keys() if isinstance(v, str) else set()
        for n, v in raw.items()
    }
    done: dict[str, int | float | bool] = {}

    def visit(name: str, path: list[str]) -> None:
        if name in done:
            return
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise LaunchError(f"args.{name}", f"scalar expressions form a cycle: {cycle}")
        for dep in sorted(deps[name] - done.keys()):
            visit(dep, [*path, name])
        done[name] = _coerce(name, evaluate(raw[name], done, budgets, f"args.{name}"), types[name])

    for name in raw:
        visit(name, [])
    return {name: done[name] for name in raw}


def _coerce(name: str, value: int | float | bool, ty: str) -> int | float | bool:
    """Ints for integer types (bools too for i1), floats for fp types, each within its type's range."""
    if ty in _FLOAT_MAX and not isinstance(value, bool) and abs(value) <= _FLOAT_MAX[ty]:
        return float(value)
    if ty in _FLOAT_MAX:
        raise LaunchError(f"args.{name}", f"{value!r} is not a {ty} value")
    if ty == "i1" and type(value) in (bool, int) and value in (0, 1):
        return bool(value)
    if type(value) is not int:
        raise LaunchError(f"args.{name}", f"a {ty} parameter needs an integer, got {value!r}")
    if not _INT_RANGE[ty][0] <= value <= _INT_RANGE[ty][1]:
        raise LaunchError(f"args.{name}", f"{value} does not fit {ty} {_INT_RANGE[ty]}")
    return value


def _ints(exprs: list[tuple[object, str]], env: dict, budgets: LaunchBudgets, what: str) -> tuple[int, ...]:
    out = []
    for expr, where in exprs:
        value = _eval(expr, env, budgets, where)
        if type(value) is not int or value < 0:
            reason = f"a {what} must be a non-negative integer, got {value!r}"
            if isinstance(expr, tuple):
                expr[0].fail(reason, node=expr[1])
            raise LaunchError(where, reason)
        out.append(value)
    return tuple(out)


def _tensor(name: str, init: _Init, pointee: str, env: dict, budgets: LaunchBudgets) -> TensorArg:
    where, spec = f"args.{name}", init.spec
    if spec.dtype is not None and spec.dtype != pointee:
        raise LaunchError(f"{where}.dtype", f"{spec.dtype!r} differs from the signature's '*{pointee}'")
    shape = _ints(init.shape, env, budgets, "size")
    if init.strides is not None and len(init.strides) != len(shape):
        raise LaunchError(f"{where}.strides", f"{len(init.strides)} strides for {len(shape)} dimensions")
    strides = _contiguous(shape) if init.strides is None else _ints(init.strides, env, budgets, "stride")
    low, high = (
        _bounds(init, pointee, env, budgets, where) if spec.init == "randint" else (spec.low, spec.high)
    )
    tensor = TensorArg(name, shape, pointee, spec.init, low, high, strides)
    if tensor.nbytes > budgets.max_tensor_bytes:
        raise LaunchError(
            where, f"tensor of {tensor.nbytes} bytes exceeds the limit of {budgets.max_tensor_bytes} bytes"
        )
    return tensor


def _bounds(init: _Init, dtype: str, env: dict, budgets: LaunchBudgets, where: str) -> tuple[int, int]:
    if None in init.bounds:
        raise LaunchError(where, "randint needs low and high")
    low, high = (_eval(b, env, budgets, where) for b in init.bounds)
    if type(low) is not int or type(high) is not int or low >= high:
        raise LaunchError(where, f"randint needs integer bounds with low < high, got {low!r}, {high!r}")
    lowest, highest = (-_FLOAT_MAX[dtype], _FLOAT_MAX[dtype]) if dtype in _FLOAT_MAX else _INT_RANGE[dtype]
    if not (lowest <= low and high - 1 <= highest):
        raise LaunchError(where, f"randint bounds {low}..{high} do not fit {dtype}")
    return low, high


# ---- host arrays --------------------------------------------------------------------------------------


def host_arrays(resolved: ResolvedLaunch, seed: int = 0) -> dict[str, np.ndarray]:
    """Every tensor as a NumPy array (bf16 as uint16 bits); flat storage where strides are not C order."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, tensor in resolved.tensors.items():
        count = tensor.nbytes // _itemsize(tensor.dtype)
        flat = _generate(rng, tensor, count)
        out[name] = flat.reshape(tensor.shape) if tensor.contiguous else flat
    return out


_CHUNK = 1 << 20  # elements generated at a time: the peak is the output plus a few MiB, whatever the size


def _generate(rng: np.random.Generator, t: TensorArg, count: int) -> np.ndarray:
    """`count` random elements of the tensor's dtype, drawn in chunks straight into the result (a 512 MiB
    bf16 randn once peaked at 3.6 GB: float64 draws, a float32 copy, the bits)."""
    dtype = np.dtype(_NUMPY[t.dtype])
    if t.init in ("zeros", "empty"):
        return np.zeros(count, dtype) if t.init == "zeros" else np.empty(count, dtype)
    out = np.empty(count, np.uint16 if t.dtype == "bf16" else dtype)
    for lo in range(0, count, _CHUNK):
        out[lo : lo + _CHUNK] = _draw(rng, t, dtype, min(_CHUNK, count - lo))
    if count and not out.any():  # random inputs are never all zeros (a one-element rand can draw 0.0)
        if t.dtype in _FLOAT_MAX:
            out[:1] = _bf16_bits(np.ones(1, np.float32)) if t.dtype == "bf16" else 1.0
        else:
            low, high = (t.low, t.high) if t.init == "randint" else _int_defaults(t.dtype, t.init)
            out[0] = high - 1 or low  # a range holding only zero stays zero: the description asked for it
    return out


def _draw(rng: np.random.Generator, t: TensorArg, dtype: np.dtype, count: int) -> np.ndarray:
    if t.dtype in _FLOAT_MAX:
        wide = np.float64 if t.dtype == "fp64" else np.float32
        if t.init == "randint":
            values = rng.integers(t.low, t.high, count).astype(wide)
        else:
            values = (
                rng.standard_normal(count, dtype=wide) if t.init == "randn" else rng.random(count, dtype=wide)
            )
        return _bf16_bits(values) if t.dtype == "bf16" else values.astype(dtype, copy=False)
    low, high = (t.low, t.high) if t.init == "randint" else _int_defaults(t.dtype, t.init)
    return rng.integers(low, high, count, dtype=np.int64 if t.dtype == "i1" else dtype).astype(
        dtype, copy=False
    )


def _int_defaults(dtype: str, init: str) -> tuple[int, int]:
    """randn/rand on an integer tensor: small values (signed ones centred on zero for randn)."""
    if dtype == "i1":
        return 0, 2
    return (-8, 8) if init == "randn" and dtype.startswith("i") else (0, 16)


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 bit patterns, rounded to nearest even (inputs are finite)."""
    bits = values.astype(np.float32, copy=False).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)
