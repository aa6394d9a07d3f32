"""The client's resolver: a kernel as a Python function in the user's process -> a closed kernel bundle
(compiler/frontend/bundle.py). As Triton's JIT does, each name a jit function uses is resolved through the
function's real globals and closure: helpers in any module, aliases, conditional imports, nested jit
functions, constexpr globals. What it finds is pinned as data; the sources of the modules holding the
reachable jit functions go with it. Nothing here runs kernel code; the bundle is data only.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import sys
import textwrap
import types
from typing import Any

from tilec.compiler.errors import CompileError
from tilec.compiler.frontend.bundle import Bundle

_TRITON_HOMES = ("triton.language", "triton.language.math", "triton.language.extra.libdevice",
                 "triton.language.extra.cuda.libdevice", "triton")  # fmt: skip
# Triton's dtype names (tl.float16.name == "fp16") -> the tl attribute that spells them
_DTYPE_ATTR = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "int1": "int1",
               "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
               "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "fp8e4nv": "float8e4nv",
               "fp8e5": "float8e5"}  # fmt: skip


def python_function(obj: Any) -> types.FunctionType | None:
    """The Python function under a jit wrapper (Triton's JITFunction, tilec's JITKernel), else None."""
    for _ in range(4):
        if isinstance(obj, types.FunctionType):
            return None
        fn = getattr(obj, "fn", None)
        if isinstance(fn, types.FunctionType) and _is_jit_wrapper(obj):
            return fn
        if fn is None:
            return None
        obj = fn  # an autotuner or heuristics object over a jit function
    return None


def _is_jit_wrapper(obj: Any) -> bool:
    if getattr(obj, "_tilec_jit", False):
        return True
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("triton.") and cls.__name__ in ("JITFunction", "InterpretedFunction"):
            return True
    return False


class Resolver:
    """Collects one bundle: call `bundle(fn)`."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.filenames: dict[str, str] = {}
        self.packages: set[str] = set()
        self.pins: dict[str, dict[str, dict]] = {}
        self.done: dict[int, str] = {}  # id(function) -> "module:name"

    def bundle(self, fn: types.FunctionType, *, autotune: dict | None = None,
               heuristics: tuple[str, ...] = ()) -> Bundle:  # fmt: skip
        ref = self.add_function(fn)
        return Bundle(modules=dict(self.modules), kernel=ref, packages=tuple(sorted(self.packages)),
                      pins={m: dict(sorted(p.items())) for m, p in sorted(self.pins.items()) if p},
                      autotune=autotune, heuristics=tuple(heuristics), filenames=dict(self.filenames))  # fmt: skip

    # ---- functions and their modules

    def add_function(self, fn: types.FunctionType) -> str:
        known = self.done.get(id(fn))
        if known is not None:
            return known
        module_name, source, filename, tree = self._source_of(fn)
        ref = f"{module_name}:{fn.__name__}"
        self.done[id(fn)] = ref
        fdef = _find_def(tree, fn.__name__, fn.__code__.co_firstlineno)
        if fdef is None:
            raise CompileError(f"cannot find the source of {fn.__qualname__}", filename=filename)
        self._resolve_names(fn, fdef, module_name)
        return ref

    def _source_of(self, fn: types.FunctionType) -> tuple[str, str, str, ast.Module]:
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        mod = sys.modules.get(fn.__module__)
        module_name = fn.__module__ or "__main__"
        if not _valid(module_name):  # generated code loaded under an odd name: a name of its own
            module_name = "_tilec_mod_" + re.sub(r"[^A-Za-z0-9_]", "_", module_name)
        nested = fn.__qualname__ != fn.__name__
        try:
            if nested:  # a jit function defined inside another function: its own text, at its own lines
                lines, start = inspect.getsourcelines(fn)
                source = "\n" * (start - 1) + textwrap.dedent("".join(lines))
                module_name = f"{module_name}._tilec_local_{re.sub(r'[^A-Za-z0-9_]', '_', fn.__qualname__)}"
            else:
                source = inspect.getsource(mod) if mod is not None else "".join(inspect.findsource(fn)[0])
        except (OSError, TypeError) as exc:
            raise CompileError(
                f"cannot read the source of {fn.__qualname__}: {exc}", filename=filename
            ) from None
        if module_name not in self.modules:
            self.modules[module_name] = source
            self.filenames[module_name] = filename
            if mod is not None and hasattr(mod, "__path__") and not nested:
                self.packages.add(module_name)
        return module_name, self.modules[module_name], filename, ast.parse(self.modules[module_name])

    # ---- names

    def _resolve_names(self, fn: types.FunctionType, fdef: ast.FunctionDef, module: str) -> None:
        closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__, strict=False):
                try:
                    closure[name] = cell.cell_contents
                except ValueError:
                    continue
        local = _local_names(fdef)
        chains = _chains(fdef)
        for name in sorted(_free_names(fdef) - local):
            if name in closure:
                value = closure[name]
            elif name in fn.__globals__:
                value = fn.__globals__[name]
            else:
                continue  # a builtin (range, min...), or an error the compiler reports at its place
            self._pin(module, name, value, chains.get(name, set()))

    def _pin(self, module: str, name: str, value: Any, attrs: set[tuple[str, ...]], depth: int = 0) -> None:
        pins = self.pins.setdefault(module, {})
        if isinstance(value, types.ModuleType) and not _is_api_module(value.__name__):
            if depth < 8 and self._pin_module_attrs(value, attrs, depth):
                pins[name] = {"module": value.__name__}
            return
        pin = self._classify(value)
        if pin is not None:
            pins[name] = pin

    def _pin_module_attrs(self, mod: types.ModuleType, attrs: set[tuple[str, ...]], depth: int) -> bool:
        """`u.helper` where `u` is one of the user's modules: bring u into the bundle and pin `helper` in u's
        own table; only when the kernel reaches a jit function or a constant through it (True then)."""
        wanted = []
        for chain in sorted(attrs):
            value = getattr(mod, chain[0], None) if chain else None
            if value is None:
                continue
            if (
                python_function(value) is not None
                or _constant(value) is not None
                or _triton_ref(value) is not None  # a shim module's `pow = libdevice.pow`
                or type(value).__name__ == "ConstexprFunction"
                or (isinstance(value, types.ModuleType) and len(chain) > 1)
            ):
                wanted.append((chain, value))
        if not wanted or self._module_of(mod) is None:
            return False
        for chain, value in wanted:
            self._pin(mod.__name__, chain[0], value, {chain[1:]} if len(chain) > 1 else set(), depth + 1)
        return True

    def _module_of(self, mod: types.ModuleType) -> str | None:
        """Bring a user module into the bundle (its source), so its names can be pinned and read."""
        name = mod.__name__
        if name in self.modules:
            return name
        try:
            self.modules[name] = inspect.getsource(mod)
        except (OSError, TypeError):
            return None
        self.filenames[name] = getattr(mod, "__file__", None) or f"<{name}>"
        if hasattr(mod, "__path__"):
            self.packages.add(name)
        return name

    def _classify(self, value: Any) -> dict | None:
        if type(value).__name__ == "ConstexprFunction" and isinstance(
            getattr(value, "fn", None), types.FunctionType
        ):
            if value.fn.__module__.startswith("triton."):
                return _triton_ref(value)
            module_name, *_ = self._source_of(
                value.fn
            )  # its text goes with the bundle, it runs in the compiler
            return {"cfn": f"{module_name}:{value.fn.__name__}"}
        wrapped = getattr(value, "value", None) if type(value).__name__ == "constexpr" else None
        if isinstance(wrapped, types.FunctionType) and not wrapped.__module__.startswith("triton."):
            # `@tl.constexpr def f(dtype): ...`: Triton calls it on constants at compile time, as a
            # constexpr_function; its text goes with the bundle
            module_name, *_ = self._source_of(wrapped)
            return {"cfn": f"{module_name}:{wrapped.__name__}"}
        fn = python_function(value)
        if fn is not None and fn.__module__.startswith("triton."):  # Triton's own library (tl.sum is @jit)
            return _triton_ref(value)
        if fn is not None:
            return {"fn": self.add_function(fn)}
        if isinstance(value, types.ModuleType):
            return {"ref": value.__name__}  # triton's modules
        if type(value).__name__ == "constexpr" and hasattr(
            value, "value"
        ):  # tl.constexpr(3), not tl.constexpr
            return _constant(value)
        tilec_name = getattr(value, "_tilec_name", None)  # tilec.language's stand-ins
        if isinstance(tilec_name, str):
            return {"ref": tilec_name}
        ref = _triton_ref(value)
        if ref is not None:
            return ref
        return _constant(value)


def _constant(value: Any) -> dict | None:
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):  # tl.constexpr(3) at module level
        value = value.value
    if isinstance(value, bool | int | float | str) or value is None:
        return {"const": value}
    if isinstance(value, tuple | list) and all(isinstance(v, bool | int | float | str) for v in value):
        return {"const": list(value)}
    name = _dtype_name(value)
    return {"dtype": name} if name is not None else None


def _dtype_name(value: Any) -> str | None:
    cls = type(value)
    if (
        cls.__module__.startswith("triton")
        and cls.__name__ == "dtype"
        and isinstance(getattr(value, "name", None), str)
    ):
        return _DTYPE_ATTR.get(value.name)
    return None


def _triton_ref(value: Any) -> dict | None:
    """A Triton API object (tl.exp, libdevice.rsqrt, triton.cdiv...) by the name it has in its home module."""
    name = getattr(value, "__name__", None)
    if not isinstance(name, str) or _dtype_name(value) is not None:
        return None
    for home in _TRITON_HOMES:
        mod = sys.modules.get(home)
        if mod is not None and getattr(mod, name, None) is value:
            return {"ref": f"{home}.{name}"}
    return None


def _is_api_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in ("triton", "tilec.language")) or name == "tilec"


def _valid(name: str) -> bool:
    return re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", name) is not None


def _find_def(tree: ast.Module, name: str, line: int) -> ast.FunctionDef | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first <= line <= node.body[0].lineno or best is None:
                best = node
    return best


def _free_names(fdef: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | {
        n.id for d in fdef.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name)
    } - set(dir(builtins))


def _local_names(fdef: ast.FunctionDef) -> set[str]:
    a = fdef.args
    names = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
    return names


def _chains(fdef: ast.FunctionDef) -> dict[str, set[tuple[str, ...]]]:
    """`u.a.b` in the function -> {"u": {("a", "b")}}: the attribute chains under each name."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for node in ast.walk(fdef):
        if not isinstance(node, ast.Attribute):
            continue
        parts = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if isinstance(cur, ast.Name):
            out.setdefault(cur.id, set()).add(tuple(reversed(parts)))
    return out


def resolve(
    fn: types.FunctionType, *, autotune: dict | None = None, heuristics: tuple[str, ...] = ()
) -> Bundle:
    """The closed bundle of kernel `fn` (a plain Python function, the one under @triton.jit / @tilec.jit)."""
    return Resolver().bundle(fn, autotune=autotune, heuristics=heuristics)
