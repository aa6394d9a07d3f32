"""The expression half of the AST visitor: names, attributes, subscripts, operators and calls.
Constexprs are plain Python values here and fold in Python; runtime values are semantic.Tensor.
Statements and control flow are in control.py; helper instantiation and the entry point in build.py.
"""

from __future__ import annotations

import ast
import inspect
import os
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetExceededError, CompileError, UnsupportedSyntaxError
from ..ir import Loc, Module
from ..ir.types import ScalarType
from . import atomics, blockptr, combine, extras, philox, tileops  # noqa: F401 - they register tl.rand, tl.sort, block pointers... in LIB
from .blockptr import BlockPtr
from .library import LIB, cast, expand_dims, lookup, reshape, trans
from .reader import KernelSource, ModuleInfo, canonical_module
from .reductions import reduce, scan
from .semantic import Aggregate, CountingBuilder, Semantic, Tensor, describe, is_const, is_number
from .types import BlockPtrType, BlockType, DType

PY_BUILTINS = ("range", "min", "max", "len", "int", "float", "bool", "print", "abs", "isinstance", "str", "tuple")
def _logical(op: ast.operator) -> Any:
    """`x.logical_and(y)` / `x.logical_or(y)`: both sides as booleans (nonzero is true), then and / or."""
    boolean = DType(ScalarType("i1"))

    def method(sem: Semantic, x: Any, other: Any) -> Any:
        return sem.binop(op, cast(sem, x, boolean, None, False), cast(sem, other, boolean, None, False))

    return method


TENSOR_METHODS = {
    "to": lambda sem, x, dtype, fp_downcast_rounding=None, bitcast=False: cast(sem, x, dtype, fp_downcast_rounding,
                                                                               bitcast),
    "logical_and": _logical(ast.BitAnd()), "logical_or": _logical(ast.BitOr()),
    "sum": LIB["sum"], "max": LIB["max"], "min": LIB["min"], "argmax": LIB["argmax"], "argmin": LIB["argmin"],
    "reshape": reshape, "view": reshape, "trans": trans, "permute": trans, "expand_dims": expand_dims,
    "broadcast_to": LIB["broadcast_to"], "cumsum": LIB["cumsum"], "cumprod": LIB["cumprod"], "ravel": LIB["ravel"],
    "xor_sum": LIB["xor_sum"],
    **{name: LIB[name] for name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "abs", "floor",
                                    "ceil", "erf", "sigmoid", "softmax", "cast", "split", "sort", "flip", "topk",
                                    "gather", "cdiv", "reduce_or", "sqrt_rn", "histogram", "item", "store",
                                    "atomic_cas", "atomic_xchg", "atomic_add", "atomic_max", "atomic_min",
                                    "atomic_and", "atomic_or", "atomic_xor")
       if name in LIB},
}
DTYPE_ATTRS = ("element_ty", "primitive_bitwidth", "name", "is_ptr", "is_floating", "is_int", "is_int_signed",
               "is_int_unsigned", "is_bool", "is_fp16", "is_bf16", "is_fp32", "is_fp64", "is_fp8", "is_fp8e4nv", "is_fp8e5", "scalar",
               "is_block", "int_bitwidth", "fp_mantissa_width", "is_int1", "is_int8", "is_int16", "is_int32", "is_int64",
               "is_uint8", "is_uint16", "is_uint32", "is_uint64", "is_standard_floating")
BLOCK_TYPE_ATTRS = ("element_ty", "scalar", "shape", "is_block", "is_ptr")


@dataclass(frozen=True)
class QualName:
    """A module or not-yet-called API name such as triton.language.math."""

    name: str


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class JitFunction:
    node: ast.FunctionDef
    module: str = ""  # its module in a bundle ("" in a lone file)


@dataclass(frozen=True)
class ConstexprFunction:
    """A @triton.constexpr_function: host code that the compiler runs on constants (literal.run_function)."""

    node: ast.FunctionDef
    module: str = ""


@dataclass(frozen=True)
class BoundMethod:
    obj: Any
    name: str


class Context:
    """State shared by every function built for one kernel."""

    def __init__(self, ks: KernelSource, module: Module):
        assert ks.module is not None and ks.source_info is not None
        self.ks = ks
        self.mod: ModuleInfo = ks.module
        self.info = ks.source_info
        self.budgets = ks.budgets
        self.module = module
        self.node: ast.AST | None = None
        self.b = CountingBuilder(self.budgets, self.error)
        self.sem = Semantic(self.b, self.error)
        self.instances: dict[tuple, Any] = {}
        self.in_progress: set[tuple] = set()
        self.call_depth = 0
        self.unrolled = 0
        self.globals: dict[str, Any] = {}
        self.bundle = ks.bundle  # bundle.BundleModules, or None for a lone file
        self._module_globals: dict[str, dict[str, Any]] = {}

    def enter_module(self, name: str) -> tuple:
        """Build in module `name` of a bundle (its names, file and constants) until leave_module(saved)."""
        saved = (self.mod, self.info, self.globals)
        if self.bundle is None or name == self.mod.name or name not in self.bundle.modules:
            return saved
        self.mod, self.info = self.bundle.modules[name]
        self.globals = self.module_globals(self.mod, self.info)
        return saved

    def leave_module(self, saved: tuple) -> None:
        self.mod, self.info, self.globals = saved

    def module_globals(self, mod: ModuleInfo, info: Any) -> dict[str, Any]:
        from .reader import literal_env

        env = self._module_globals.get(mod.name)
        if env is None:
            env = literal_env(mod, info)
            env.update(mod.pinned)
            self._module_globals[mod.name] = env
        return env

    def error(self, msg: str, cls: type[CompileError] = CompileError) -> CompileError:
        return self.info.error(self.node, msg, cls)

    def at(self, node: ast.AST) -> None:
        self.node = node
        if hasattr(node, "lineno"):
            self.b.loc = Loc(node.lineno, node.col_offset + 1, self.info.filename)


def wrap_internal(ctx: Context, node: ast.AST, exc: BaseException) -> CompileError:
    """Any unexpected exception becomes a located CompileError (TILEC_DEBUG_FRONTEND=1 lets it through)."""
    if os.environ.get("TILEC_DEBUG_FRONTEND") == "1":
        raise exc
    ctx.node = node
    if isinstance(exc, RecursionError):
        return ctx.error("kernel is nested too deeply to compile", BudgetExceededError)
    if isinstance(exc, MemoryError):
        return ctx.error("compiling this kernel ran out of memory", BudgetExceededError)
    return ctx.error(f"internal compiler error on this code ({type(exc).__name__}); please report it")


class ExprGen:
    def __init__(self, ctx: Context, scope: dict[str, Any]):
        self.ctx = ctx
        self.sem = ctx.sem
        self.b = ctx.b
        self.scope = scope

    def error(self, msg: str, cls: type[CompileError] = CompileError) -> CompileError:
        return self.ctx.error(msg, cls)

    def expr(self, node: ast.expr) -> Any:
        saved = self.ctx.node
        self.ctx.at(node)
        try:
            method = getattr(self, "expr_" + type(node).__name__, None)
            if method is None:
                raise self.error(f"{_describe_syntax(node)} is not supported in kernels", UnsupportedSyntaxError)
            return method(node)
        except CompileError:
            raise
        except Exception as exc:  # noqa: BLE001 - located at the innermost node
            raise wrap_internal(self.ctx, node, exc) from None
        finally:
            self.ctx.node = saved
            if saved is not None:
                self.ctx.at(saved)

    # ---- leaves
    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bytes, complex)):
            raise self.error(f"{type(node.value).__name__} constants are not supported", UnsupportedSyntaxError)
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup_name(node.id)

    def lookup_name(self, name: str) -> Any:
        if name in self.scope:
            return self.scope[name]
        mod = self.ctx.mod
        if name in mod.pinned:
            return mod.pinned[name]
        if name in mod.pinned_fns:
            return self.bundle_function(*mod.pinned_fns[name])
        if name in mod.jit_functions:
            return JitFunction(mod.jit_functions[name], mod.name)
        if name in mod.constexpr_functions:
            return ConstexprFunction(mod.constexpr_functions[name], mod.name)
        if name in mod.aliases:
            return self.qualified(mod.dotted(ast.Name(id=name)) or name)
        if name in self.ctx.globals:
            return self.ctx.globals[name]
        star = self.star_name(name)
        if star is not None:
            return star
        if name in PY_BUILTINS:
            return Builtin(name)
        if name in mod.global_nodes:
            raise self.error(f"global '{name}' is not a compile-time constant (only literal data can be used)")
        if name in mod.other_functions:
            raise self.error(f"'{name}' is not a @triton.jit function; kernels can only call @triton.jit functions "
                             "and tl.* (host Python is never run)", UnsupportedSyntaxError)
        raise self.error(f"name '{name}' is not defined")

    def bundle_attr(self, module: str, rest: str, depth: int) -> Any:
        """`rest` (a name, or a name and attributes) in module `module` of the bundle."""
        first, _, more = rest.partition(".")
        mod, info = self.ctx.bundle.modules[module]
        if depth > 16:
            raise self.error(f"'{module}.{rest}' is imported in a cycle")
        if first in mod.pinned_fns:
            value: Any = self.bundle_function(*mod.pinned_fns[first])
        elif first in mod.jit_functions:
            value = JitFunction(mod.jit_functions[first], module)
        elif first in mod.constexpr_functions:
            value = ConstexprFunction(mod.constexpr_functions[first], module)
        elif first in mod.aliases:
            value = self.qualified(canonical_module(mod.aliases[first]), depth + 1)
        elif first in (env := self.ctx.module_globals(mod, info)):
            value = env[first]
        elif first in mod.other_functions:
            raise self.error(f"'{module}.{first}' is not a @triton.jit function; kernels can only call @triton.jit "
                             "functions and tl.* (host Python is never run)", UnsupportedSyntaxError)
        else:
            raise self.error(f"module '{module}' of the bundle has no @triton.jit function or constant '{first}' "
                             f"(the bundle does not contain module '{module}.{first}')")
        if not more:
            return value
        if isinstance(value, QualName):
            return self.qualified(f"{value.name}.{more}", depth + 1)
        raise self.error(f"'{module}.{first}' has no attribute '{more}'")

    def star_name(self, name: str) -> Any:
        """A name brought in by `from triton.language import *` (Python's builtins keep their meaning)."""
        if name in PY_BUILTINS and name != "range":
            return None
        for star in self.ctx.mod.star_modules:
            full = f"{star}.{name}"
            if lookup(full) is not None or full in ("triton.jit", "triton.language.static_range",
                                                    "triton.language.range"):
                return self.qualified(full)
        return None

    def bundle_function(self, module: str, name: str) -> JitFunction | ConstexprFunction:
        owner = self.ctx.bundle.modules[module][0]
        if name in owner.constexpr_functions:
            return ConstexprFunction(owner.constexpr_functions[name], module)
        return JitFunction(owner.jit_functions[name], module)

    def qualified(self, name: str, depth: int = 0) -> Any:
        bundle = self.ctx.bundle
        if bundle is not None and not name.startswith("triton.") and name not in bundle.modules:
            found = bundle.resolve(name)
            if found is not None:
                return self.bundle_attr(found[0], found[1], depth)
        entry = lookup(name)
        if entry is not None and not callable(entry):
            return entry
        return QualName(name)

    def expr_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def expr_JoinedStr(self, node: ast.JoinedStr) -> str:
        parts = []
        for v in node.values:
            x = self.expr(v.value) if isinstance(v, ast.FormattedValue) else self.expr(v)
            if isinstance(x, Tensor):
                raise self.error("f-strings can only format compile-time values")
            parts.append(str(x))
        return "".join(parts)

    # ---- attributes and subscripts
    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, QualName):
            return self.qualified(f"{base.name}.{attr}")
        if isinstance(base, Tensor):
            return self.tensor_attr(base, attr)
        if isinstance(base, Aggregate):
            return self.aggregate_attr(base, attr)
        if (isinstance(base, DType) and attr in DTYPE_ATTRS) or (isinstance(base, BlockType) and attr in BLOCK_TYPE_ATTRS) \
                or (isinstance(base, BlockPtrType) and attr in ("element_ty", "scalar", "is_ptr", "is_block")):
            try:
                return getattr(base, attr)
            except AttributeError:
                raise self.error(f"{base} has no attribute '{attr}'") from None
        if attr == "value" and (is_number(base) or isinstance(base, (str, DType)) or base is None):
            return base  # a constexpr's .value: constexprs are plain values here
        raise self.error(f"{describe(base)} has no attribute '{attr}'")

    def tensor_attr(self, t: Tensor, attr: str) -> Any:
        if attr == "dtype":
            return t.dtype
        if attr == "type":
            return BlockType(t.elem, t.shape) if t.shape else t.dtype
        if attr == "shape":
            return t.shape
        if attr == "numel":
            n = 1
            for d in t.shape:
                n *= d
            return n
        if attr == "T":
            return trans(self.sem, t)
        if attr in TENSOR_METHODS or attr in ("reduce", "associative_scan"):
            return BoundMethod(t, attr)
        raise self.error(f"tensors have no attribute '{attr}'")

    def aggregate_attr(self, x: Aggregate, attr: str) -> Any:
        if attr in x.METHODS:
            return BoundMethod(x, attr)
        if attr in ("block_shape", "shape", "strides") and hasattr(x, attr):
            return tuple(getattr(x, attr))
        if attr in ("dtype", "type") and isinstance(x, BlockPtr):  # as Triton: a pointer to a block type
            return BlockPtrType(x.leaves()[0].elem.pointee, tuple(x.block_shape))
        if attr == "dtype":
            return DType(x.leaves()[0].elem.pointee)
        raise self.error(f"{describe(x)} has no attribute '{attr}'")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, Tensor):
            return self.index_tensor(base, items)
        if isinstance(base, (tuple, list, str)):
            if isinstance(node.slice, ast.Slice):
                parts = [None if p is None else self.expr(p) for p in (node.slice.lower, node.slice.upper, node.slice.step)]
                if any(isinstance(p, Tensor) for p in parts):
                    raise self.error("slice bounds must be compile-time constants")
                return base[slice(*parts)]
            i = self.expr(node.slice)
            if isinstance(i, bool) or not isinstance(i, int):
                raise self.error(f"index must be a compile-time integer, got {describe(i)}")
            if not -len(base) <= i < len(base):
                raise self.error(f"index {i} is out of range for {len(base)} elements")
            return base[i]
        raise self.error(f"{describe(base)} cannot be indexed")

    def index_tensor(self, t: Tensor, items: list[ast.expr]) -> Tensor:
        """x[:, None], x[None, :], x[None], x[..., None]: only new axes and full slices."""
        kinds = []
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                kinds.append("new")
            elif isinstance(it, ast.Constant) and it.value is Ellipsis:
                kinds.append("...")
            elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None and it.step is None:
                kinds.append(":")
            else:
                raise self.error("tensors can only be indexed with None and ':' (new axes)", UnsupportedSyntaxError)
        rank = len(t.shape)
        n_keep = kinds.count(":")
        if kinds.count("...") > 1 or n_keep > rank:
            raise self.error(f"too many indices for a tile of rank {rank}")
        if "..." in kinds:
            i = kinds.index("...")
            kinds[i : i + 1] = [":"] * (rank - n_keep)
        else:
            kinds += [":"] * (rank - n_keep)
        axis = 0
        for k in kinds:
            if k == "new":
                t = expand_dims(self.sem, t, axis)
            axis += 1
        return t

    # ---- operators
    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.sem.binop(node.op, self.expr(node.left), self.expr(node.right))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.expr(node.operand)
        if isinstance(node.op, ast.Not) and is_const(x):
            return not x
        return self.sem.unary(node.op, x)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        acc = self.expr(node.values[0])
        for v in node.values[1:]:
            if is_const(acc):
                if bool(acc) != is_and:  # short-circuit, as Python
                    return acc
                acc = self.expr(v)
                continue
            acc = self.sem.logical(is_and, acc, self.expr(v))
        return acc

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=False):
            right = self.expr(right_node)
            c = self.sem.compare(op, left, right)
            result = c if result is True else (self.sem.logical(True, result, c) if not (is_const(c) and c) else result)
            if is_const(result) and not result:
                return False
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        c = self.sem.to_bool(self.expr(node.test))
        if is_const(c):
            return self.expr(node.body) if c else self.expr(node.orelse)
        return self.sem.where(c, self.expr(node.body), self.expr(node.orelse))

    # ---- calls
    def expr_Call(self, node: ast.Call) -> Any:
        fn = self.expr(node.func)
        if isinstance(fn, QualName) and fn.name in ("triton.language.reduce", "triton.language.associative_scan"):
            return self.combine_call(fn.name, *self.call_args(node))
        args, kwargs = self.call_args(node)
        if isinstance(fn, BoundMethod) and fn.name in ("reduce", "associative_scan"):  # x.reduce(axis, fn)
            return self.combine_call(f"triton.language.{fn.name}", [fn.obj, *args], kwargs)
        if isinstance(fn, QualName):
            entry = lookup(fn.name)
            if entry is None and self.ctx.bundle is not None and not fn.name.startswith("triton"):
                raise self.error(f"'{fn.name}' is not in the bundle: it holds no module '{fn.name.rpartition('.')[0]}'")
            if entry is None:
                raise self.error(f"{_short(fn.name)} is not supported", UnsupportedSyntaxError)
            if fn.name.endswith("static_range") or fn.name == "triton.language.range":
                raise self.error(f"{_short(fn.name)} can only be used as the iterable of a for loop")
            return self.apply(_short(fn.name), entry, args, kwargs)
        if isinstance(fn, BoundMethod):
            table = fn.obj.METHODS if isinstance(fn.obj, Aggregate) else TENSOR_METHODS
            return self.apply(f".{fn.name}", table[fn.name], [fn.obj, *args], kwargs)
        if isinstance(fn, JitFunction):
            return self.call_helper(fn.node, args, kwargs, fn.module)
        if isinstance(fn, ConstexprFunction):
            return self.call_constexpr_function(fn, args, kwargs)
        if isinstance(fn, Builtin):
            return self.call_builtin(fn.name, args, kwargs)
        if callable(fn) and isinstance(getattr(fn, "__self__", None), (DType, BlockType)):
            if args or kwargs:
                raise self.error(f"{fn.__name__}() takes no arguments")
            return fn()
        raise self.error(f"{describe(fn)} is not callable")

    def call_args(self, node: ast.Call) -> tuple[list, dict]:
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                if not isinstance(v, (tuple, list)):
                    raise self.error("only tuples can be unpacked with *")
                args.extend(v)
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error("**kwargs is not supported", UnsupportedSyntaxError)
            kwargs[k.arg] = self.expr(k.value)
        return args, kwargs

    def apply(self, what: str, fn: Any, args: list, kwargs: dict) -> Any:
        if "sem" in kwargs and "sem_" in inspect.signature(fn).parameters:
            kwargs = dict(kwargs)
            kwargs["sem_"] = kwargs.pop("sem")
        try:
            inspect.signature(fn).bind(self.sem, *args, **kwargs)
        except TypeError as exc:
            raise self.error(f"bad arguments to {what}: {exc}") from None
        return fn(self.sem, *args, **kwargs)

    def call_constexpr_function(self, fn: ConstexprFunction, args: list, kwargs: dict) -> Any:
        """Run a @triton.constexpr_function on compile-time values with the literal evaluator (never Python)."""
        from .literal import FoldError, LiteralEvaluator, run_function

        if any(isinstance(v, Tensor) for v in [*args, *kwargs.values()]):
            raise self.error(f"{fn.node.name}() is a constexpr_function: its arguments must be compile-time values")
        saved = self.ctx.enter_module(fn.module)
        try:
            mod = self.ctx.mod
            ev = LiteralEvaluator(dict(self.ctx.globals), None, mod.dotted, _host_attr)
            ev.call_hook = _host_calls(mod, ev)
            return run_function(fn.node, list(args), dict(kwargs), ev)
        except FoldError as exc:
            raise self.error(f"constexpr_function {fn.node.name}(): {exc}") from None
        finally:
            self.ctx.leave_module(saved)

    def call_builtin(self, name: str, args: list, kwargs: dict) -> Any:
        if name == "print":  # sep=/end=/flush= are the host's business
            return LIB["print"](self.sem, *args)
        if name == "isinstance" and len(args) == 2 and not kwargs:
            return self.is_instance(args[0], args[1])
        if kwargs:
            raise self.error(f"{name}() takes no keyword arguments here")
        if name in ("min", "max"):
            vals = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            if not vals:
                raise self.error(f"{name}() needs arguments")
            acc = vals[0]
            for v in vals[1:]:
                acc = self.sem.minmax(name == "max", acc, v)
            return acc
        if name == "abs":
            return LIB["abs"](self.sem, *args)
        if name == "range":
            raise self.error("range() can only be used as the iterable of a for loop")
        if any(isinstance(a, Tensor) for a in args) or len(args) != 1 or name == "isinstance":
            raise self.error(f"{name}() only works on compile-time values here")
        try:
            return {"len": len, "int": int, "float": float, "bool": bool, "str": str, "tuple": tuple}[name](args[0])
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.error(f"{name}() failed: {exc}") from None

    def is_instance(self, x: Any, cls: Any) -> bool:
        """isinstance(x, tl.tensor | tl.tensor_descriptor | tl.constexpr | tl.dtype | int | float | bool |
        str | tuple), decided at compile time, as Triton's frontend decides it."""
        if isinstance(cls, (tuple, list)):
            return any(self.is_instance(x, c) for c in cls)
        name = cls.name if isinstance(cls, (QualName, Builtin)) else None
        if isinstance(cls, DType) or name is None:
            raise self.error(f"isinstance() against {describe(cls)} is not supported in kernels")
        short = name.replace("triton.language.core.", "triton.language.")
        if short == "triton.language.tensor":
            return isinstance(x, Tensor)
        if short in ("triton.language.tensor_descriptor", "triton.language.tensor_descriptor_base"):
            return isinstance(x, Aggregate) and not isinstance(x, BlockPtr)
        if short == "triton.language.constexpr":
            return not isinstance(x, (Tensor, Aggregate))
        if short == "triton.language.dtype":
            return isinstance(x, DType)
        py = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple}.get(name)
        if py is None:
            raise self.error(f"isinstance() against {name} is not supported in kernels")
        return isinstance(x, py)

    def combine_call(self, name: str, args: list, kwargs: dict) -> Any:
        """tl.reduce(input, axis, combine_fn, keep_dims), tl.associative_scan(input, axis, combine_fn,
        reverse): one tensor with a combine we recognise (a+b, a*b, max, min...) takes the reduce/scan fast
        path; any other @triton.jit combine, or a tuple of tensors, the general reduce_with/scan_with
        (combine.py). A tuple input gives a tuple of results, as in Triton."""
        is_reduce = name.endswith("reduce")
        params = ["input", "axis", "combine_fn", "keep_dims" if is_reduce else "reverse"]
        if len(args) > len(params) or any(k not in params for k in kwargs):
            raise self.error(f"{_short(name)} takes ({', '.join(params)})")
        bound = dict(zip(params, args, strict=False))
        bound.update(kwargs)
        if any(p not in bound for p in params[:3]):
            raise self.error(f"{_short(name)} needs (input, axis, combine_fn)")
        items = list(bound["input"]) if isinstance(bound["input"], (tuple, list)) else [bound["input"]]
        fn, flag = bound["combine_fn"], bound.get(params[3], False)
        kind = _fast_kind(fn, items, is_reduce, self.ctx.mod)
        if kind is not None:
            out = [reduce(self.sem, items[0], bound["axis"], kind, flag) if is_reduce
                   else scan(self.sem, items[0], bound["axis"], kind, flag)]
        else:
            build = combine.reduce_with if is_reduce else combine.scan_with
            out = build(self.sem, items, bound["axis"], self.combiner(fn, len(items), _short(name)), flag,
                        _short(name))
        return tuple(out) if isinstance(bound["input"], (tuple, list)) else out[0]

    def combiner(self, fn: Any, n: int, what: str) -> combine.Combiner:
        """The combine function as a region builder: a call of the @triton.jit function (checked to be
        pure scalar code), or a tl.* library function applied to the elements."""
        if isinstance(fn, QualName) and callable(lookup(fn.name)):
            entry = lookup(fn.name)
            return lambda lhs, rhs: self.apply(_short(fn.name), entry, [*lhs, *rhs], {})
        if not isinstance(fn, JitFunction):
            raise self.error(f"{what} combine_fn must be a @triton.jit function, got {describe(fn)}")
        fdef, module = fn.node, fn.module
        params = fdef.args.posonlyargs + fdef.args.args
        required = len(params) - len(fdef.args.defaults)
        if not required <= 2 * n <= len(params) or fdef.args.vararg or fdef.args.kwonlyargs:
            raise self.error(f"{what}: combine function '{fdef.name}' takes {len(params)} arguments, but "
                             f"combining {n} input{'s' * (n != 1)} passes {2 * n} (each side's elements)")

        def build(lhs: list, rhs: list) -> Any:
            got = self.call_helper(fdef, [*lhs, *rhs], {}, module)
            call = self.b.block.ops[-1] if self.b.block is not None and self.b.block.ops else None
            if call is not None and call.name == "call":
                combine.check_pure_scalar(self.ctx.module, call, fdef.name, self.ctx.info.error)
            return got

        return build

    def call_helper(self, fdef: ast.FunctionDef, args: list, kwargs: dict, module: str = "") -> Any:
        raise NotImplementedError  # provided by build.FunctionGen


_COMBINE_BINOPS = {ast.Add: "sum", ast.Mult: "prod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}
_SCAN_KINDS = ("sum", "prod", "max", "min")


def _fast_kind(fn: Any, items: list, is_reduce: bool, mod: ModuleInfo) -> str | None:
    """The reduce/scan kind that does what `fn` does on the one tensor in `items`, where the fast path
    gives exactly what the combine would (no widening of small integer sums, no bool arithmetic)."""
    if not isinstance(fn, JitFunction) or len(items) != 1 or not isinstance(items[0], Tensor):
        return None
    kind = combine_kind(fn.node, mod)
    elem = items[0].elem
    if kind is None or not items[0].shape or not isinstance(elem, ScalarType) or elem.is_bool:
        return None
    if kind in ("sum", "prod") and elem.is_int and elem.bits < 32:
        return None
    if kind in ("and", "or", "xor") and elem.is_float:
        return None
    return kind if is_reduce or kind in _SCAN_KINDS else None


def combine_kind(fdef: ast.FunctionDef, mod: ModuleInfo) -> str | None:
    """The kind of `return a <op> b` (or `t = a <op> b; return t`, as Inductor writes it) over the two
    parameters, or None."""
    body = [s for s in fdef.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    params = [a.arg for a in fdef.args.args]
    if len(body) == 2 and _assigns_returned(body):
        body = [ast.Return(value=body[0].value)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or len(params) != 2 or body[0].value is None:
        return None
    e = body[0].value
    names: list[str] = []
    if isinstance(e, ast.BinOp) and type(e.op) in _COMBINE_BINOPS:
        kind, operands = _COMBINE_BINOPS[type(e.op)], [e.left, e.right]
    elif isinstance(e, ast.Call) and len(e.args) == 2 and not e.keywords:
        fname = mod.dotted(e.func) if not isinstance(e.func, ast.Name) or e.func.id not in ("max", "min") else e.func.id
        table = {"triton.language.maximum": "max", "triton.language.minimum": "min", "max": "max", "min": "min"}
        kind, operands = table.get(fname or ""), e.args
    else:
        return None
    names = [o.id for o in operands if isinstance(o, ast.Name)]
    return kind if sorted(names) == sorted(params) else None


def _assigns_returned(body: list[ast.stmt]) -> bool:
    first, last = body
    target = first.targets[0] if isinstance(first, ast.Assign) and len(first.targets) == 1 else None
    if not isinstance(target, ast.Name):
        return False
    name = target.id
    return isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == name


class _ConstexprClass:
    """`tl.constexpr` named in host code run at compile time: constexprs are plain values there, so
    `isinstance(o, tl.constexpr)` is False (and `unwrap_if_constexpr(o)` is `o`)."""


def _host_attr(name: str) -> Any:
    from .reader import dtype_attr

    if canonical_module(name) == "triton.language.constexpr":
        return _ConstexprClass
    return dtype_attr(name)


_MAX_HOST_DEPTH = 32


def _host_calls(mod: ModuleInfo, ev: Any) -> Any:
    """What a constexpr_function may call besides the evaluator's own: tl.core.get_int_dtype, isinstance
    against tl.constexpr, and the plain host functions of its own module (run by the same evaluator)."""
    from .literal import FoldError, run_function

    depth = [0]

    def hook(name: str, args: list, kwargs: dict) -> Any:
        canon = canonical_module(name)
        if canon == "triton.language.get_int_dtype":
            bits, signed = [*args, *kwargs.values()][:2]
            if bits not in (1, 8, 16, 32, 64):
                raise FoldError(f"no integer dtype of {bits} bits")
            return DType(ScalarType("i1" if bits == 1 else f"{'i' if signed else 'u'}{bits}"))
        if name == "isinstance" and len(args) == 2 and args[1] is _ConstexprClass:
            return False
        fdef = mod.other_functions.get(name) or mod.constexpr_functions.get(name)
        if fdef is None:
            return NotImplemented
        if depth[0] >= _MAX_HOST_DEPTH:
            raise FoldError(f"host calls nested deeper than {_MAX_HOST_DEPTH}")
        depth[0] += 1
        try:
            return run_function(fdef, args, kwargs, ev)
        finally:
            depth[0] -= 1

    return hook


def _short(name: str) -> str:
    return name.replace("triton.language.", "tl.")


def _describe_syntax(node: ast.AST) -> str:
    names = {"Lambda": "lambda", "ListComp": "list comprehension", "DictComp": "dict comprehension",
             "SetComp": "set comprehension", "GeneratorExp": "generator expression", "Dict": "dict literal",
             "Set": "set literal", "NamedExpr": "`:=`", "Await": "await", "Yield": "yield", "YieldFrom": "yield from",
             "Starred": "`*` unpacking", "Slice": "slice"}
    return names.get(type(node).__name__, type(node).__name__)


def is_numberlike(x: Any) -> bool:
    return isinstance(x, Tensor) or is_number(x)
