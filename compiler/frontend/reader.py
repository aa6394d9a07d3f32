"""Reading a kernel file with `ast` only: size/depth budgets before anything recursive, imports and
aliases, @triton.jit functions, @triton.autotune / @triton.heuristics data, parameters and the key.

The kernel key is the sha256 of a canonical form of the kernel's AST, not of its tile IR: the IR
depends on constexpr values (tile shapes are static), so it exists only after specialisation.
The canonical form is `ast.dump` without positions, docstrings removed, of every top-level statement
that binds a name the kernel reaches, transitively (helpers of helpers, constants that name constants,
decorators and defaults), plus the autotune/heuristics data and FRONTEND_VERSION: two sources that mean
different things never share a key. Comments and formatting do not change it; renaming a local may.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import io
import json
import tokenize
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetExceededError, CompileError, UnsupportedSyntaxError
from . import inductor
from .literal import FoldError, LiteralEvaluator, run_builder
from .types import dtype_named

FRONTEND_VERSION = "tilec-frontend-2"  # 2: the key covers the closure of module-level bindings

# Import spellings -> the canonical module they stand for.
_MODULE_ALIASES = {
    "triton.language.core": "triton.language",  # `import triton.language.core as core`: core.constexpr, core.arange
    "triton.language.standard": "triton.language",  # `from triton.language.standard import _log2, zeros_like`
    "tilec.language": "triton.language",
    "tilec": "triton",
    "triton.language.extra.cuda.libdevice": "triton.language.extra.libdevice",
    "triton.language.math": "triton.language.math",
    # Inductor's modules import the math namespaces through its runtime helpers
    "torch._inductor.runtime.triton_helpers.libdevice": "triton.language.extra.libdevice",
    "torch._inductor.runtime.triton_helpers.math": "triton.language.math",
}


@dataclass(frozen=True)
class Budgets:
    """Limits on what one compile may cost; over any of them is a BudgetExceededError.
    max_unroll bounds the trip count of each tl.static_range and the total unrolled iterations."""

    max_source_bytes: int = 262144
    max_ast_nodes: int = 200000
    max_ast_depth: int = 100
    max_unroll: int = 4096
    max_tile_elements: int = 1 << 20
    max_ops: int = 200000
    max_call_depth: int = 8


@dataclass(frozen=True)
class KernelParam:
    name: str
    constexpr: bool
    has_default: bool
    default: Any = None
    annotation: str | None = None


@dataclass(frozen=True)
class ConfigSpec:
    kwargs: dict
    num_warps: int | None = None
    num_stages: int | None = None


@dataclass(frozen=True)
class AutotuneSpec:
    configs: list[ConfigSpec]
    key: list[str]
    reset_to_zero: list[str] = field(default_factory=list)  # arguments zeroed before each timed run
    restore_value: list[str] = field(default_factory=list)  # (every array argument is restored anyway)


class SourceInfo:
    """The user's text, to locate errors: file name, lines, a caret excerpt."""

    def __init__(self, source: str, filename: str):
        self.filename = filename
        self.lines = source.splitlines()

    def error(self, node: ast.AST | None, msg: str, cls: type[CompileError] = CompileError) -> CompileError:
        line = getattr(node, "lineno", None)
        if line is None:
            return cls(msg, filename=self.filename)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        col = getattr(node, "col_offset", 0)
        if text is not None:  # ast columns count UTF-8 bytes
            col = len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))
        return cls(msg, filename=self.filename, line=line, col=col + 1, source_line=text)


@dataclass
class ModuleInfo:
    """What the module level offers a kernel: import aliases, jit functions, other defs, constants."""

    aliases: dict[str, str] = field(default_factory=dict)
    jit_functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    other_functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    global_nodes: dict[str, ast.expr] = field(default_factory=dict)
    star_modules: list[str] = field(default_factory=list)  # `from triton.language import *`
    name: str = ""  # the module's name in a bundle ("" for a lone file)
    pinned: dict[str, Any] = field(default_factory=dict)  # a bundle's host-resolved constants (bundle.py)
    pinned_fns: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (module, function) in the bundle
    pinned_refs: dict[str, str] = field(default_factory=dict)  # name -> the dotted name a bundle pinned it to
    constexpr_functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # @triton.constexpr_function

    def dotted(self, node: ast.AST) -> str | None:
        """The canonical dotted name of `tl.foo.bar` (through import aliases and star imports), or None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        if node.id in self.aliases:
            parts.append(self.aliases[node.id])
        elif self.star_modules and node.id not in self.jit_functions and node.id not in self.global_nodes:
            parts.append(f"{self.star_modules[0]}.{node.id}")
        else:
            return None
        return canonical_module(".".join(reversed(parts)))


def canonical_module(name: str) -> str:
    for prefix, canon in _MODULE_ALIASES.items():
        if name == prefix or name.startswith(prefix + "."):
            return canon + name[len(prefix) :]
    return name


@dataclass
class KernelSource:
    name: str
    key: str
    params: list[KernelParam]
    autotune: AutotuneSpec | None
    heuristics: dict[str, str]
    filename: str = "<source>"
    budgets: Budgets = field(default_factory=Budgets)
    tree: ast.Module | None = field(default=None, repr=False)
    module: ModuleInfo | None = field(default=None, repr=False)
    source_info: SourceInfo | None = field(default=None, repr=False)
    inductor: inductor.InductorSpec | None = None  # an Inductor-generated kernel's decorator data
    bundle: Any = field(default=None, repr=False)  # a bundle's other modules (bundle.BundleModules), or None
    host_heuristics: tuple[str, ...] = ()  # a bundle's parameters that the host's heuristics set

    @property
    def default_signature(self) -> dict[str, str]:
        """Types the source itself gives (an Inductor kernel's triton_meta signature): no --signature needed."""
        return dict(self.inductor.signature) if self.inductor is not None else {}

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "key": self.key,
            "params": [
                {"name": p.name, "constexpr": p.constexpr, "has_default": p.has_default, "default": _jsonable(p.default),
                 "annotation": p.annotation}
                for p in self.params
            ],
            "autotune": None if self.autotune is None else {
                "configs": [{"kwargs": _jsonable(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages}
                            for c in self.autotune.configs],
                "key": list(self.autotune.key),
                "reset_to_zero": list(self.autotune.reset_to_zero),
                "restore_value": list(self.autotune.restore_value),
            },
            "heuristics": dict(self.heuristics),
            **({"inductor": self.inductor.to_dict()} if self.inductor is not None else {}),
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


# ---- parsing under budgets ---------------------------------------------------------------------


def parse_source(source: str, filename: str, budgets: Budgets) -> ast.Module:
    if not isinstance(source, str):
        raise CompileError("kernel source must be text", filename=filename)
    size = len(source.encode("utf-8", errors="replace"))
    info = SourceInfo(source, filename)
    if size > budgets.max_source_bytes:
        line, col = byte_location(source, budgets.max_source_bytes)
        raise info.error(_at(info, line, col), f"source is {size} bytes, over the budget of {budgets.max_source_bytes} "
                         "(which ends here)", BudgetExceededError)  # fmt: skip
    try:
        tree = ast.parse(source, filename="<source>")
    except SyntaxError as exc:
        node = ast.Pass(lineno=exc.lineno or 1, col_offset=max((exc.offset or 1) - 1, 0)) if exc.lineno else None
        raise info.error(node, f"syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):
        line, col = _longest_logical_line(source)
        raise info.error(_at(info, line, col), "source is nested too deeply to parse", BudgetExceededError) from None
    except ValueError as exc:
        raise CompileError(f"source cannot be parsed: {exc}", filename=filename) from None
    check_tree_size(tree, info, budgets)
    return tree


def byte_location(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both from 1, of the character holding UTF-8 byte `offset` of `text` (the first byte
    past a size budget): counted, not parsed, so the API process may call it on untrusted text."""
    head = text.encode("utf-8", errors="replace")[:offset].decode("utf-8", errors="ignore")
    start = head.rfind("\n") + 1
    return head.count("\n") + 1, len(head) - start + 1


def _at(info: SourceInfo, line: int, col: int) -> ast.AST:
    """A node at (line, character column), for SourceInfo.error, which reads ast's UTF-8 byte columns."""
    text = info.lines[line - 1] if 0 < line <= len(info.lines) else ""
    return ast.Pass(lineno=line, col_offset=len(text[: col - 1].encode("utf-8")))


def _longest_logical_line(source: str) -> tuple[int, int]:
    """Where a source too deep for Python's parser starts the statement with the most tokens (tokenize
    works without recursion); (1, 1) when it cannot tell."""
    best, count, start = (0, (1, 1)), 0, (1, 1)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if count == 0:
                start = tok.start
            count += 1
            if count > best[0]:
                best = (count, start)
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                count = 0
    except (tokenize.TokenError, SyntaxError, MemoryError, RecursionError):
        pass
    line, col = best[1]
    return line, col + 1


def check_tree_size(tree: ast.AST, info: SourceInfo, budgets: Budgets) -> None:
    """Count nodes and measure depth without recursion, before anything recursive visits the tree."""
    stack: list[tuple[ast.AST, int, ast.AST]] = [(tree, 0, _at(info, 1, 1))]
    count = 0
    while stack:
        node, depth, at = stack.pop()
        at = node if hasattr(node, "lineno") else at  # Load, operators and the module have no position
        count += 1
        if count > budgets.max_ast_nodes:
            raise info.error(at, f"source has more than {budgets.max_ast_nodes} syntax nodes", BudgetExceededError)
        if depth > budgets.max_ast_depth:
            raise info.error(at, f"expression nested deeper than {budgets.max_ast_depth} levels", BudgetExceededError)
        for child in ast.iter_child_nodes(node):
            stack.append((child, depth + 1, at))


# ---- the module level ---------------------------------------------------------------------------


def scan_module(tree: ast.Module, info: SourceInfo, package: str | None = None) -> ModuleInfo:
    """The module level. `package`: the package a bundle's module sits in, for relative imports (None: a
    lone file, whose relative imports name nothing). Imports under a module-level `if`/`try` count too (the
    first binding wins: a host picks one at run time, which the client's resolver pins), and a module-level
    name bound to an imported name (`rsqrt = libdevice.rsqrt`) is an alias of it."""
    mod = ModuleInfo()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
            _scan_imports(stmt, mod, package, first=isinstance(stmt, (ast.Import, ast.ImportFrom)))
        elif isinstance(stmt, ast.FunctionDef):
            target = mod.jit_functions if _is_jit(stmt, mod) else mod.other_functions
            # `@triton.constexpr_function`, or `@tl.constexpr` over a host function (Triton calls either on
            # constants at compile time)
            if _is_jit(stmt, mod, "triton.constexpr_function") or _is_jit(stmt, mod, "triton.language.constexpr"):
                target = mod.constexpr_functions
            target[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            _scan_global(mod, stmt.targets[0].id, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            _scan_global(mod, stmt.target.id, stmt.value)
    return mod


def _scan_global(mod: ModuleInfo, name: str, value: ast.expr) -> None:
    target = mod.dotted(value) if isinstance(value, ast.Attribute) else None
    if isinstance(value, ast.Name) and value.id in mod.aliases:
        target = mod.aliases[value.id]
    if target is not None and dtype_named(canonical_module(target)) is None:  # a dtype stays literal data
        mod.aliases[name] = target
        mod.global_nodes.pop(name, None)
    else:
        mod.global_nodes[name] = value


def _scan_imports(stmt: ast.stmt, mod: ModuleInfo, package: str | None, first: bool) -> None:
    if isinstance(stmt, (ast.If, ast.Try)):
        bodies = [stmt.body, stmt.orelse] + ([h.body for h in stmt.handlers] if isinstance(stmt, ast.Try) else [])
        for body in bodies:
            for sub in body:
                if isinstance(sub, (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
                    _scan_imports(sub, mod, package, first=False)
        return
    bind = mod.aliases.__setitem__ if first else mod.aliases.setdefault
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            if a.asname:
                bind(a.asname, a.name)
            else:
                root = a.name.split(".")[0]
                bind(root, root)
        return
    assert isinstance(stmt, ast.ImportFrom)
    base = _import_base(stmt, package)
    if base is None:
        return
    for a in stmt.names:
        if a.name == "*":
            if canonical_module(base) in ("triton", "triton.language"):
                mod.star_modules.append(canonical_module(base))
            continue
        bind(a.asname or a.name, f"{base}.{a.name}" if base else a.name)


def _import_base(stmt: ast.ImportFrom, package: str | None) -> str | None:
    """The absolute module a `from X import ...` names (None: relative, outside any package)."""
    if stmt.level == 0:
        return stmt.module
    if package is None:
        return None
    parts = package.split(".") if package else []
    if stmt.level - 1 > len(parts):
        return None
    parts = parts[: len(parts) - (stmt.level - 1)]
    if stmt.module:
        parts.append(stmt.module)
    return ".".join(parts)


def _is_jit(fn: ast.FunctionDef, mod: ModuleInfo, decorator: str = "triton.jit") -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if mod.dotted(target) in (decorator, decorator.replace("triton.", "triton.language.")):
            return True
    return False


def called_names(fn: ast.FunctionDef) -> set[str]:
    """Names a function refers to (calls, and function values passed as arguments)."""
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def pick_kernel(mod: ModuleInfo, name: str | None, info: SourceInfo) -> ast.FunctionDef:
    if name is not None:
        fn = mod.jit_functions.get(name)
        if fn is None:
            known = ", ".join(sorted(mod.jit_functions)) or "none"
            raise CompileError(f"no @triton.jit function named '{name}' (found: {known})", filename=info.filename)
        return fn
    called: set[str] = set()
    for fn in mod.jit_functions.values():
        called |= called_names(fn) - {fn.name}
    roots = [f for n, f in mod.jit_functions.items() if n not in called]
    if len(roots) == 1:
        return roots[0]
    if not mod.jit_functions:
        raise CompileError("no @triton.jit function in this source", filename=info.filename)
    names = ", ".join(f.name for f in roots) or ", ".join(mod.jit_functions)
    raise CompileError(f"several kernels in this source ({names}): name the one to compile", filename=info.filename)


# ---- decorators as data ------------------------------------------------------------------------


def literal_env(mod: ModuleInfo, info: SourceInfo) -> dict[str, Any]:
    """Module-level constants whose value is literal data (others are host code, left alone)."""
    env: dict[str, Any] = {}
    for name, node in mod.global_nodes.items():
        try:
            env[name] = LiteralEvaluator(env, _constexpr_hook(mod), mod.dotted, dtype_attr).eval(node)
        except (FoldError, RecursionError):
            continue
    return env


def dtype_attr(name: str) -> Any:
    """Lets literal data name dtypes: `DTYPE: tl.constexpr = tl.float16`."""
    d = dtype_named(name)
    return NotImplemented if d is None else d


def _constexpr_hook(mod: ModuleInfo):
    def hook(name: str, args: list, kwargs: dict) -> Any:
        if name == "triton.language.constexpr" and len(args) == 1 and not kwargs:
            return args[0]
        return NotImplemented

    return hook


def _config_hook(name: str, args: list, kwargs: dict) -> Any:
    if name == "triton.Config":
        if not args and "kwargs" in kwargs:
            args = [kwargs.pop("kwargs")]
        if not args or not isinstance(args[0], dict) or len(args) > 1:
            raise FoldError("triton.Config takes a dict of meta-parameters")
        if kwargs.get("pre_hook") is not None:
            raise FoldError("triton.Config(pre_hook=...) is not supported (the hook is host code and is not run: "
                            "prepare the buffers before the launch)")
        unknown = set(kwargs) - {"num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook"}
        if unknown:
            raise FoldError(f"triton.Config got unknown arguments {sorted(unknown)}")
        return ConfigSpec(dict(args[0]), kwargs.get("num_warps"), kwargs.get("num_stages"))
    if name == "triton.language.constexpr" and len(args) == 1:
        return args[0]
    return NotImplemented


def read_decorators(fn: ast.FunctionDef, mod: ModuleInfo, env: dict, info: SourceInfo):
    autotune: AutotuneSpec | None = None
    heuristics: dict[str, str] = {}
    spec: inductor.InductorSpec | None = None
    names = [mod.dotted(d.func if isinstance(d, ast.Call) else d) for d in fn.decorator_list]
    jit_at = names.index("triton.jit") if "triton.jit" in names else len(names)
    for i, d in enumerate(fn.decorator_list):
        target = d.func if isinstance(d, ast.Call) else d
        name = names[i]
        if name == "triton.jit":
            continue
        if i < jit_at and not (name or "").startswith(("triton.", inductor.HEURISTICS_MODULE)):
            continue  # a library's host wrapper over the jit function (a launch cache...): host code, as under
            # Triton it never changes the kernel's body; its launch behaviour is the host's (the drop-in keeps it)
        if name is not None and name.startswith(inductor.HEURISTICS_MODULE + "."):
            if spec is not None:
                raise info.error(d, "one @triton_heuristics decorator per kernel", UnsupportedSyntaxError)
            spec = inductor.read_decorator(d, name[len(inductor.HEURISTICS_MODULE) + 1 :], mod.dotted, info)
        elif name == "triton.autotune" and isinstance(d, ast.Call):
            autotune = _read_autotune(d, mod, env, info)
        elif name == "triton.heuristics" and isinstance(d, ast.Call):
            heuristics.update(_read_heuristics(d, info))
        else:
            raise info.error(d, f"decorator '{ast.unparse(target)}' is not supported", UnsupportedSyntaxError)
    if spec is not None:
        if autotune is not None:
            raise info.error(fn, "@triton.autotune and an Inductor decorator on one kernel", UnsupportedSyntaxError)
        autotune = _inductor_autotune(fn, spec, mod, info)
    return autotune, heuristics, spec


def _inductor_autotune(fn: ast.FunctionDef, spec: inductor.InductorSpec, mod: ModuleInfo,
                       info: SourceInfo) -> AutotuneSpec:  # fmt: skip
    """An Inductor kernel's configs (tilec's space from its size hints, or the configs it lists), keyed on
    the numel parameters it takes, as an autotune decorator would give them."""
    from ..tune.space import inductor_configs

    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    blocks = [p for p in params if p in inductor.BLOCK_PARAMS or p.endswith("BLOCK")]
    try:
        configs = inductor_configs(spec.kind, spec.size_hints, blocks, spec.reduction_hint, spec.tile_hint,
                                   spec.configs)  # fmt: skip
    except ValueError as exc:
        raise info.error(fn, f"Inductor kernel: {exc}", UnsupportedSyntaxError) from None
    key = [p for p in params if p.endswith("numel")]
    return AutotuneSpec([ConfigSpec(dict(c["kwargs"]), c["num_warps"], c["num_stages"]) for c in configs], key)


def _read_autotune(d: ast.Call, mod: ModuleInfo, env: dict, info: SourceInfo) -> AutotuneSpec:
    kw = {k.arg: k.value for k in d.keywords}
    if d.args:
        kw.setdefault("configs", d.args[0])
        if len(d.args) > 1:
            kw.setdefault("key", d.args[1])
    if "configs" not in kw or "key" not in kw:
        raise info.error(d, "@triton.autotune needs configs=[...] and key=[...]")
    if kw.get("prune_configs_by") is not None and not _is_none(kw["prune_configs_by"]):
        _check_prune(kw["prune_configs_by"], info)
    cnode = _config_list_node(kw["configs"], mod)
    ev = LiteralEvaluator(env, _config_hook, mod.dotted, dtype_attr)
    builder = _config_builder(cnode, mod)
    _refuse_pre_hooks(builder or cnode, info)
    try:
        configs = run_builder(builder, ev) if builder is not None else ev.eval(cnode)
        key = ev.eval(kw["key"])
        lists = {n: ev.eval(kw[n]) for n in ("reset_to_zero", "restore_value") if n in kw and not _is_none(kw[n])}
    except FoldError as exc:
        raise info.error(cnode, f"cannot read autotune data: {exc}") from None
    for n, names in lists.items():
        if not isinstance(names, (list, tuple)) or not all(isinstance(x, str) for x in names):
            raise info.error(kw[n], f"autotune {n} must be a list of argument names")
    if not isinstance(configs, (list, tuple)) or not all(isinstance(c, ConfigSpec) for c in configs):
        raise info.error(cnode, "autotune configs must be a list of triton.Config(...)")
    if not isinstance(key, (list, tuple)) or not all(isinstance(k, str) for k in key):
        raise info.error(kw["key"], "autotune key must be a list of argument names")
    return AutotuneSpec(list(configs), list(key), list(lists.get("reset_to_zero", [])),
                        list(lists.get("restore_value", [])))


def _refuse_pre_hooks(node: ast.AST, info: SourceInfo) -> None:
    """Before evaluating: a pre_hook (a name, a lambda) is host code; say so at its place."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == "pre_hook" and not _is_none(sub.value):
            raise info.error(sub.value, "triton.Config(pre_hook=...) is not supported (the hook is host code and is "
                             "not run: prepare the buffers before the launch)", UnsupportedSyntaxError)


def _check_prune(node: ast.expr, info: SourceInfo) -> None:
    """prune_configs_by: `perf_model` / `top_k` only narrow which configs get timed, so ignoring them (timing
    every config) picks at least as well; `early_config_prune` is host code that may drop configs that would be
    wrong for the arguments, so it is refused rather than ignored."""
    if not isinstance(node, ast.Dict) or not all(isinstance(k, ast.Constant) for k in node.keys):
        raise info.error(node, "prune_configs_by must be a dict literal {'perf_model': ..., 'top_k': ...}",
                         UnsupportedSyntaxError)
    keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
    if "early_config_prune" in keys:
        raise info.error(node, "prune_configs_by={'early_config_prune': ...} is not supported (the pruning function "
                         "is host code; list only the configs that apply)", UnsupportedSyntaxError)
    unknown = keys - {"perf_model", "top_k"}
    if unknown:
        raise info.error(node, f"prune_configs_by has unknown keys {sorted(map(str, unknown))}", UnsupportedSyntaxError)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _config_list_node(node: ast.expr, mod: ModuleInfo) -> ast.expr:
    """A configs list may be written in place or named (a module-level list)."""
    if isinstance(node, ast.Name) and node.id in mod.global_nodes:
        return mod.global_nodes[node.id]
    return node


def _config_builder(node: ast.expr, mod: ModuleInfo) -> ast.FunctionDef | None:
    """`configs=get_configs()`: a module-level function that builds the list (run by literal.run_builder)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords:
        return mod.other_functions.get(node.func.id)
    return None


def _read_heuristics(d: ast.Call, info: SourceInfo) -> dict[str, str]:
    given = list(d.args) + [k.value for k in d.keywords if k.arg == "values"]
    if len(given) != 1 or len(d.keywords) > (0 if d.args else 1) or not isinstance(given[0], ast.Dict):
        raise info.error(d, "@triton.heuristics takes one dict literal {name: lambda args: ...}")
    table = given[0]
    out: dict[str, str] = {}
    for k, v in zip(table.keys, table.values, strict=False):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise info.error(k or d, "heuristics keys must be parameter names as strings")
        if not isinstance(v, ast.Lambda) or len(v.args.args) != 1:
            raise info.error(v, "heuristics values must be lambdas of one argument (lambda args: ...)")
        out[k.value] = ast.unparse(v)
    return out


# ---- parameters and key -------------------------------------------------------------------------


def read_params(fn: ast.FunctionDef, mod: ModuleInfo, env: dict, info: SourceInfo) -> list[KernelParam]:
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs:
        raise info.error(fn, "kernels take plain parameters (no *args, **kwargs or keyword-only)", UnsupportedSyntaxError)
    params = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(params) - len(a.defaults)) + list(a.defaults)
    out = []
    for p, dflt in zip(params, defaults, strict=False):
        ann = ast.unparse(p.annotation) if p.annotation is not None else None
        is_cx = p.annotation is not None and is_constexpr_annotation(p.annotation, mod)
        value = None
        if dflt is not None:
            try:
                value = LiteralEvaluator(env, _config_hook, mod.dotted, dtype_attr).eval(dflt)
            except FoldError as exc:
                raise info.error(dflt, f"default of '{p.arg}' must be a literal: {exc}") from None
        out.append(KernelParam(p.arg, is_cx, dflt is not None, value, ann))
    return out


def is_constexpr_annotation(node: ast.expr, mod: ModuleInfo) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1] == "constexpr"
    return mod.dotted(node) == "triton.language.constexpr"


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def canonical_dump(fn: ast.FunctionDef) -> str:
    clean = copy.copy(fn)  # shallow: only `body` is replaced, and ast.dump reads the children
    clean.body = _strip_docstring(clean.body) or [ast.Pass()]
    return ast.dump(clean, annotate_fields=True, include_attributes=False)


def kernel_key(kernel: ast.FunctionDef, tree: ast.Module, autotune: AutotuneSpec | None,
               heuristics: dict[str, str], extra: bytes = b"") -> str:
    """The one place the kernel key is made: the kernel's name, every module-level statement that binds a
    name the kernel reaches, transitively (constants that name constants, helpers of helpers, config
    builders, decorators' and defaults' names), the star imports, and the autotune/heuristics data read.
    `extra`: what a bundle adds (bundle.py: helpers in its other modules, pinned values); b"" for a file."""
    h = hashlib.sha256(FRONTEND_VERSION.encode())
    h.update(f"kernel {kernel.name}\n".encode())
    for text in binding_closure(tree, {kernel.name}):
        h.update(hashlib.sha256(text.encode()).digest())
    data = {
        "autotune": None if autotune is None else {
            "configs": [[_jsonable(c.kwargs), c.num_warps, c.num_stages] for c in autotune.configs],
            "key": autotune.key, **({"reset_to_zero": autotune.reset_to_zero} if autotune.reset_to_zero else {})},
        "heuristics": heuristics,
    }
    h.update(json.dumps(data, sort_keys=True).encode())
    if extra:
        h.update(b"bundle " + extra)
    return h.hexdigest()


def binding_closure(tree: ast.Module, roots: set[str]) -> list[str]:
    """The canonical text of every top-level statement that binds a name reachable from `roots`, in source
    order: a statement's own names lead to the statements that bind them, until none is new. Every kind
    of binding counts (a second assignment, `+=`, a tuple target, `X[i] = ...`, a def inside an `if`),
    whether or not the reader gives it a meaning, so a key never depends on which binding the compiler
    picks. Star imports always count: they give every unbound name its meaning."""
    binders: dict[str, list[int]] = {}
    for i, stmt in enumerate(tree.body):
        for name in _bound_names(stmt):
            binders.setdefault(name, []).append(i)
    chosen = {i for i, stmt in enumerate(tree.body) if _is_star_import(stmt)}
    seen: set[str] = set()
    work = sorted(roots)
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        for i in binders.get(name, ()):
            if i not in chosen:
                chosen.add(i)
                work.extend(_referenced_names(tree.body[i]) - seen)
    return [_canonical_statement(tree.body[i]) for i in sorted(chosen)]


def _is_star_import(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names)


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds, rebinds, mutates or deletes."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, ast.Import):
        return {a.asname or a.name.split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom):
        return {a.asname or a.name for a in stmt.names if a.name != "*"}
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):  # `X[0] = 1` and `X.a = 1` change X
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return names | _walrus_names(stmt.value)
    names: set[str] = set()  # compound statements and the rest: anything stored or deleted inside
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= _bound_names(n)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
    return names


def _walrus_names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)}


def _referenced_names(stmt: ast.stmt) -> set[str]:
    """Every name a statement mentions (a superset of what it reads: a local that shadows a module-level
    name only makes the key depend on more than it must). `global X` inside a def rebinds X: mentioned."""
    names: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
    return names


def _canonical_statement(stmt: ast.stmt) -> str:
    """A statement without positions; a function without its docstring; an import as the canonical modules
    its names stand for (so `tilec.language` and `triton.language` are one)."""
    if isinstance(stmt, ast.Import):
        return "import " + ",".join(
            f"{a.asname}={canonical_module(a.name)}" if a.asname else a.name for a in stmt.names)
    if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
        return f"from {canonical_module(stmt.module)} import " + ",".join(
            f"{a.asname or a.name}={canonical_module(stmt.module + '.' + a.name)}" for a in stmt.names)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return canonical_dump(stmt)  # type: ignore[arg-type]
    return ast.dump(stmt, annotate_fields=True, include_attributes=False)


def read_kernel(source: str, name: str | None = None, *, filename: str = "<source>",
                budgets: Budgets | None = None) -> KernelSource:
    """Read a kernel (and what it reaches) from Triton-language source, without executing any of it."""
    budgets = budgets or Budgets()
    tree = parse_source(source, filename, budgets)
    info = SourceInfo(source, filename)
    mod = scan_module(tree, info)
    kernel = pick_kernel(mod, name, info)
    if any(a == inductor.HELPERS_MODULE or a.startswith(inductor.HELPERS_MODULE + ".") for a in mod.aliases.values()):
        inductor.install_helpers(mod, info)  # before the key: the helpers it reaches are part of it
        kernel = mod.jit_functions[kernel.name]
    env = literal_env(mod, info)
    autotune, heuristics, spec = read_decorators(kernel, mod, env, info)
    params = read_params(kernel, mod, env, info)
    key = kernel_key(kernel, tree, autotune, heuristics)
    return KernelSource(kernel.name, key, params, autotune, heuristics, filename, budgets, tree, mod, info, spec)
