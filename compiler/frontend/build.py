"""build_ir: specialise a read kernel (argument types, constexpr values, hints) into a verified tile IR
Module: one `kernel` function plus a `func` per helper instance (per argument-type signature and
constexpr values), reached through `call` ops; the inline pass inlines them later.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import BudgetExceededError, CompileError, UnsupportedSyntaxError, VerifyError
from ..ir import Function, Loc, Module, Param, verify_module
from ..ir.types import Type
from . import hostdesc
from .codegen import Context, JitFunction, QualName, is_numberlike, wrap_internal
from .control import StmtGen
from .reader import KernelSource, is_constexpr_annotation
from .semantic import Aggregate, Tensor, describe
from .types import DType, parse_signature_type


class HelperInstance:
    def __init__(self, function: Function, structure: Any):
        self.function = function
        self.structure = structure  # None (no value), or ("one" | "tuple", per-item templates): see flatten_return


class FunctionGen(StmtGen):
    def __init__(self, ctx: Context, fdef: ast.FunctionDef, function: Function, scope: dict, is_kernel: bool):
        super().__init__(ctx, scope)
        self.fdef = fdef
        self.function = function
        self.is_kernel = is_kernel

    def build(self) -> Any:
        body = self.fdef.body
        with self.b.at_end(self.function.body.block):
            self.block(body)
            values, structure = self.flatten_return(self.return_value)
            self.b.create("return", [v.value for v in values], [])
        self.function.result_types = [v.type for v in values]
        return structure

    def flatten_return(self, ret: Any) -> tuple[list[Tensor], Any]:
        """The IR values a helper returns, and how to rebuild what it returned from them: ("one" | "tuple",
        one entry per item: None for a tensor or number, the aggregate itself for a block pointer)."""
        if ret is None:
            return [], None
        if self.is_kernel:
            raise self.error("a kernel cannot return a value")
        items = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        out: list[Tensor] = []
        shapes: list[Any] = []
        for v in items:
            if isinstance(v, Aggregate):
                out.extend(self.sem.materialize(x, "a returned block pointer") for x in v.leaves())
                shapes.append(v)
                continue
            if not is_numberlike(v):
                raise self.error(f"helpers can return tensors, numbers and block pointers, not {describe(v)}")
            out.append(self.sem.materialize(v, "a returned value"))
            shapes.append(None)
        return out, ("tuple" if isinstance(ret, (tuple, list)) else "one", tuple(shapes))

    # ---- helper calls
    def call_helper(self, fdef: ast.FunctionDef, args: list, kwargs: dict, module: str = "") -> Any:
        """`module`: the helper's module in a bundle; its body (and its defaults) are built with that module's
        names and file, while errors about the call itself point at the caller."""
        bound = self.bind_helper_args(fdef, args, kwargs, module)
        runtime, const = [], []
        aggregates: dict[str, Aggregate] = {}
        for p, (v, is_cx) in bound.items():
            if isinstance(v, Aggregate):
                const.append((p, self.split_aggregate(p, v, runtime)))
                aggregates[p] = v
            elif is_cx and not isinstance(v, Tensor):
                const.append((p, _const_key(v)))
            else:
                runtime.append((p, self.sem.materialize(v, f"argument '{p}'")))
        key = (module, fdef.name, tuple((p, str(t.type)) for p, t in runtime), tuple(const))
        if key in self.ctx.in_progress:
            raise self.error(f"recursive call to {fdef.name} is not supported", UnsupportedSyntaxError)
        inst = self.ctx.instances.get(key)
        if inst is None:
            # as in Triton, a helper's tl.constexpr parameter given a tensor takes it as a runtime value
            consts = {p: v for p, (v, is_cx) in bound.items()
                      if is_cx and p not in aggregates and not isinstance(v, Tensor)}
            saved = self.ctx.enter_module(module)
            try:
                inst = self.instantiate(fdef, key, runtime, consts, aggregates)
            finally:
                self.ctx.leave_module(saved)
        f = inst.function
        op = self.b.create("call", [t.value for _, t in runtime], list(f.result_types), {"callee": f.name})
        results = [Tensor(r) for r in op.results]
        if inst.structure is None:
            return None
        kind, shapes = inst.structure
        values, k = [], 0
        for template in shapes:
            n = 1 if template is None else len(template.leaves())
            values.append(results[k] if template is None else template.with_leaves(results[k:k + n]))
            k += n
        return values[0] if kind == "one" else tuple(values)

    def split_aggregate(self, p: str, v: Aggregate, runtime: list) -> tuple:
        """An aggregate argument (a block pointer) passes its runtime leaves as parameters (`p.0, p.1...`, `p_0...` in the IR);
        its constant leaves and structure become part of the instance key."""
        key: list[Any] = []
        for i, leaf in enumerate(v.leaves()):
            if isinstance(leaf, Tensor):
                runtime.append((f"{p}.{i}", leaf))
                key.append(None)
            else:
                key.append(_const_key(leaf))
        return ("aggregate", v.static_key(), tuple(key))

    def bind_helper_args(self, fdef: ast.FunctionDef, args: list, kwargs: dict,
                         module: str = "") -> dict[str, tuple[Any, bool]]:  # fmt: skip
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs:
            raise self.error(f"helper {fdef.name} must take plain parameters", UnsupportedSyntaxError)
        params = a.posonlyargs + a.args
        if len(args) > len(params):
            raise self.error(f"{fdef.name}() takes {len(params)} arguments, got {len(args)}")
        values: dict[str, Any] = {p.arg: v for p, v in zip(params, args, strict=False)}
        names = {p.arg for p in params}
        for k, v in kwargs.items():
            if k not in names or k in values:
                raise self.error(f"{fdef.name}() got an unexpected or repeated argument '{k}'")
            values[k] = v
        defaults = dict(zip([p.arg for p in params[len(params) - len(a.defaults):]], a.defaults, strict=False))
        out = {}
        for p in params:
            if p.arg not in values:
                if p.arg not in defaults:
                    raise self.error(f"{fdef.name}() is missing argument '{p.arg}'")
                saved = self.ctx.enter_module(module)
                try:
                    values[p.arg] = StmtGen(self.ctx, {}).expr(defaults[p.arg])
                finally:
                    self.ctx.leave_module(saved)
            v = values[p.arg]
            helper_mod = self.ctx.bundle.modules[module][0] if self.ctx.bundle and module in self.ctx.bundle.modules \
                else self.ctx.mod
            ann_cx = p.annotation is not None and is_constexpr_annotation(p.annotation, helper_mod)
            if isinstance(v, (tuple, list)) and any(isinstance(x, Tensor) for x in v):
                raise self.error(f"passing a tuple of tensors to {fdef.name} is not supported", UnsupportedSyntaxError)
            # as in Triton, a compile-time value (a literal, a constexpr) passed to a helper is a constexpr there;
            # a name assigned a number is a tensor already (see the frontend's assignments)
            out[p.arg] = (v, ann_cx or not isinstance(v, (Tensor, Aggregate)))
        return out

    def instantiate(self, fdef: ast.FunctionDef, key: tuple, runtime: list, consts: dict,
                    aggregates: dict[str, Aggregate]) -> HelperInstance:
        ctx = self.ctx
        if ctx.call_depth >= ctx.budgets.max_call_depth:
            raise self.error(f"helper calls nested deeper than {ctx.budgets.max_call_depth}", BudgetExceededError)
        name = _unique_name(ctx.module, fdef.name)
        loc = Loc(fdef.lineno, fdef.col_offset + 1, ctx.info.filename)
        names = _param_names([p.replace(".", "_") for p, _ in runtime], set(fdef_param_names(fdef)) - {p for p, _ in runtime})
        fn = Function(name, [Param(n, t.type) for n, (_, t) in zip(names, runtime, strict=True)], [], kernel=False,
                      loc=loc)
        ctx.module.functions.append(fn)
        scope: dict[str, Any] = {p: Tensor(a) for (p, _), a in zip(runtime, fn.args, strict=False)}
        for p, agg in aggregates.items():
            leaves = agg.leaves()
            for i in range(len(leaves)):
                if isinstance(leaves[i], Tensor):
                    leaves[i] = scope.pop(f"{p}.{i}")
            scope[p] = agg.with_leaves(leaves)
        scope.update(consts)
        saved = (ctx.b.block, ctx.b.index, ctx.b.loc, ctx.node)
        ctx.call_depth += 1
        ctx.in_progress.add(key)
        try:
            structure = FunctionGen(ctx, fdef, fn, scope, is_kernel=False).build()
        finally:
            ctx.call_depth -= 1
            ctx.in_progress.discard(key)
            ctx.b.block, ctx.b.index, ctx.b.loc, ctx.node = saved
        _drop_dead_calls(ctx.module, fn)
        inst = HelperInstance(fn, structure)
        ctx.instances[key] = inst
        return inst


def _drop_dead_calls(module: Module, fn: Function) -> None:
    """Calls whose results nobody uses and whose callees write nothing: Triton's frontend never emits them
    (`promote_to_tensor(x).dtype.is_floating()` only asks a dtype), and a combiner must not keep them."""
    from ..passes.ir_utils import remove_dead
    from .combine import no_effects

    remove_dead(fn, lambda op: op.name == "call" and op.results != [] and no_effects(module, op, set()))


def _const_key(v: Any) -> Any:
    if isinstance(v, JitFunction):
        return ("fn", v.module, v.node.name)
    if isinstance(v, (DType, QualName)):
        return ("obj", str(v))
    if isinstance(v, (tuple, list)):
        return ("seq", tuple(_const_key(x) for x in v))
    return (type(v).__name__, repr(v))


def fdef_param_names(fdef: ast.FunctionDef) -> list[str]:
    return [p.arg for p in fdef.args.posonlyargs + fdef.args.args]


def _param_names(wanted: list[str], taken: set[str]) -> list[str]:
    """IR parameter names: the wanted ones, made unique (an aggregate's `p_0` may clash with a real name)."""
    out = []
    for w in wanted:
        n, k = w, 1
        while n in taken:
            n, k = f"{w}_{k}", k + 1
        taken.add(n)
        out.append(n)
    return out


def _unique_name(module: Module, base: str) -> str:
    taken = {f.name for f in module.functions}
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


# ---- the entry point ------------------------------------------------------------------------------

_HINT_KINDS = {"divisibility": int, "equal_to_1": bool}
_CONST_TYPES = (bool, int, float, str, type(None), tuple, list, DType)


def build_ir(ks: KernelSource, signature: dict[str, str], constexprs: dict[str, object], *,
             hints: dict[str, dict] | None = None) -> Module:
    """Specialise `ks` and build its verified tile IR (see INTERFACES.md)."""
    if ks.tree is None or ks.module is None or ks.source_info is None:
        raise CompileError("this KernelSource was not made by read_kernel", filename=ks.filename)
    module = Module()
    ctx = Context(ks, module)
    fdef = ks.module.jit_functions[ks.name]
    ctx.at(fdef)
    try:
        ctx.globals = ctx.module_globals(ks.module, ks.source_info)
        params, scope, descs = _kernel_params(ctx, ks, signature or {}, constexprs or {}, hints or {})
        fn = Function(ks.name, params, [], kernel=True, loc=Loc(fdef.lineno, fdef.col_offset + 1, ks.filename))
        module.functions.append(fn)
        values = {p.name: Tensor(a) for p, a in zip(params, fn.args, strict=False)}
        scope = {**scope, **values}
        for pname, (dt, names) in descs.items():  # a host descriptor: the aggregate over its parameters
            scope[pname] = hostdesc.descriptor_value(dt, [scope.pop(n) for n in names], names[0])
        FunctionGen(ctx, fdef, fn, scope, is_kernel=True).build()
    except CompileError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything unexpected becomes a located CompileError
        raise wrap_internal(ctx, ctx.node or fdef, exc) from None
    try:
        verify_module(module)
    except VerifyError as exc:
        line = exc.line
        text = ks.source_info.lines[line - 1] if line and 0 < line <= len(ks.source_info.lines) else None
        raise VerifyError(f"the IR built for this code is invalid: {exc.message}", filename=ks.filename, line=line,
                          col=exc.col, source_line=text) from None
    return module


def _kernel_params(ctx: Context, ks: KernelSource, signature: dict, constexprs: dict, hints: dict):
    by_name = {p.name: p for p in ks.params}
    for k in signature:
        if k not in by_name:
            raise ctx.error(f"signature names '{k}', which is not a parameter of {ks.name}")
    for k in constexprs:
        if k not in by_name:
            raise ctx.error(f"constexpr '{k}' is not a parameter of {ks.name}")
    for k in hints:
        if k not in by_name or by_name[k].constexpr:
            raise ctx.error(f"hint for '{k}', which is not a runtime parameter of {ks.name}")
    params: list[Param] = []
    consts: dict[str, Any] = {}
    descs: dict[str, tuple[hostdesc.DescType, list[str]]] = {}
    taken = {p.name for p in ks.params}
    for p in ks.params:
        if p.constexpr:
            consts[p.name] = _constexpr_value(ctx, ks, p, constexprs)
            continue
        if p.name in constexprs and constexprs[p.name] is None:
            consts[p.name] = None  # Triton: a None argument (an unused pointer) specialises as the constexpr None
            continue
        if p.name in constexprs:
            raise ctx.error(f"'{p.name}' is not a tl.constexpr parameter; give its type in the signature instead")
        spelled = signature.get(p.name) or ks.default_signature.get(p.name)  # Inductor's own signature
        if spelled is None:
            raise ctx.error(f"the signature needs a type for '{p.name}' (e.g. '*fp32' or 'i32')")
        if hostdesc.is_tensordesc(spelled):
            descs[p.name] = _descriptor_params(ctx, p.name, spelled, hints.get(p.name, {}), taken, params)
            continue
        t = spelled if isinstance(spelled, Type.__args__) else (  # type: ignore[attr-defined]
            parse_signature_type(spelled) if isinstance(spelled, str) else None)
        if t is None:
            raise ctx.error(f"unknown type {spelled!r} for '{p.name}' (use e.g. '*fp16', 'i32', 'fp32', 'ptr<f32>')")
        params.append(Param(p.name, t, _hint_attrs(ctx, p.name, hints.get(p.name, {}))))
    return params, consts, descs


def _descriptor_params(ctx: Context, name: str, spelled: str, hint: Any, taken: set[str],
                       params: list[Param]) -> tuple[hostdesc.DescType, list[str]]:
    """Append host descriptor `name`'s IR parameters (hostdesc.py) to `params`; its type, their names."""
    try:
        dt = hostdesc.parse_tensordesc(spelled)
        per_sub = hostdesc.split_hints(hint if isinstance(hint, dict) else {})
    except ValueError as exc:
        raise ctx.error(f"'{name}': {exc}") from None
    subs = hostdesc.sub_names(name, dt.rank)
    unknown = set(per_sub) - set(subs)
    if unknown:
        raise ctx.error(f"hints for '{name}' name {sorted(unknown)}, which are not parts of it ({', '.join(subs)})")
    made = hostdesc.descriptor_params(name, dt, taken)
    for sub, prm in zip(subs, made, strict=True):
        prm.attrs.update(_hint_attrs(ctx, f"{name}.{sub}", per_sub.get(sub, {})))
    params.extend(made)
    return dt, [prm.name for prm in made]


def _constexpr_value(ctx: Context, ks: KernelSource, p, constexprs: dict) -> Any:
    if p.name in constexprs:
        v = constexprs[p.name]
    elif p.has_default:
        v = p.default
    else:
        raise ctx.error(f"no value for the constexpr '{p.name}'")
    if not isinstance(v, _CONST_TYPES):
        raise ctx.error(f"constexpr '{p.name}' must be a number, bool, string, dtype or None, got {type(v).__name__}")
    if isinstance(v, str) and parse_signature_type(v) is not None and not v.startswith(("*", "ptr")):
        ir = parse_signature_type(v)
        return DType(ir)  # a dtype passed as a constexpr spelling, e.g. 'fp16'
    return v


def _hint_attrs(ctx: Context, name: str, hint: Any) -> dict:
    if not isinstance(hint, dict):
        raise ctx.error(f"hints for '{name}' must be a dict")
    out = {}
    for k, v in hint.items():
        want = _HINT_KINDS.get(k)
        if want is None or not isinstance(v, want) or (want is int and (isinstance(v, bool) or v <= 0)):
            raise ctx.error(f"bad hint {k}={v!r} for '{name}' (divisibility: positive int, equal_to_1: bool)")
        out[k] = v
    return out
