"""Kernel bundles: the source of one or more modules, by module name, plus data that pins what the host
decided (names it resolved, constants, the autotune configs, which parameters heuristics set). Read with
`ast` only, like a lone file (which is a bundle of one); nothing in a bundle is imported or run here.

Imports between the bundle's modules resolve statically (`from .utils import exp`, `import pkg.tle as
tle`); a pin overrides what the module's text says of one name (the client's resolver pins every name a
kernel uses to what the user's process bound it to: a conditional import, an alias, a constexpr global).
The kernel key covers every function reachable from the kernel across modules and every pin they use.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetExceededError, CompileError
from .reader import (
    AutotuneSpec,
    Budgets,
    ConfigSpec,
    KernelSource,
    ModuleInfo,
    SourceInfo,
    binding_closure,
    called_names,
    canonical_dump,
    canonical_module,
    kernel_key,
    literal_env,
    parse_source,
    read_params,
    scan_module,
)
from .types import dtype_named

MAX_MODULES = 256
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PIN_KINDS = ("const", "dtype", "ref", "module", "fn", "cfn")  # cfn: a @triton.constexpr_function


@dataclass(frozen=True)
class Bundle:
    """What the wire carries (`tilec.wire.BundleIn`) and the client's resolver makes."""

    modules: dict[str, str]  # module name -> source
    kernel: str  # "module:function"
    packages: tuple[str, ...] = ()  # the modules that are packages (their relative imports stay inside)
    pins: dict[str, dict[str, dict]] = field(default_factory=dict)  # module -> name -> {"const": 3} ...
    autotune: dict | None = None  # {"configs": [{"kwargs", "num_warps", "num_stages"}], "key": [...], ...}
    heuristics: tuple[str, ...] = ()  # parameters the host's heuristics set
    filenames: dict[str, str] = field(default_factory=dict)  # for messages only: not part of the key

    @classmethod
    def from_dict(cls, data: Any) -> Bundle:
        if not isinstance(data, dict):
            raise CompileError(
                "a kernel bundle is an object with 'modules' and 'kernel'", filename="<bundle>"
            )
        unknown = set(data) - {"modules", "kernel", "packages", "pins", "autotune", "heuristics", "filenames"}
        if unknown:
            raise CompileError(f"a kernel bundle has no fields {sorted(unknown)}", filename="<bundle>")
        return cls(
            modules=_str_map(data.get("modules"), "modules"),
            kernel=data.get("kernel")
            if isinstance(data.get("kernel"), str)
            else _bad("kernel", "'module:function'"),
            packages=tuple(_str_list(data.get("packages", []), "packages")),
            pins={m: dict(p) for m, p in _dict_map(data.get("pins", {}), "pins").items()},
            autotune=data.get("autotune"),
            heuristics=tuple(_str_list(data.get("heuristics", []), "heuristics")),
            filenames=_str_map(data.get("filenames", {}), "filenames"),
        )

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"modules": dict(self.modules), "kernel": self.kernel}
        if self.packages:
            out["packages"] = list(self.packages)
        if self.pins:
            out["pins"] = {m: dict(p) for m, p in self.pins.items()}
        if self.autotune is not None:
            out["autotune"] = self.autotune
        if self.heuristics:
            out["heuristics"] = list(self.heuristics)
        if self.filenames:
            out["filenames"] = dict(self.filenames)
        return out


def bundle_from_json(text: str) -> Bundle:
    """A bundle from its JSON text (a compile request's `text`); bad JSON is a CompileError."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise CompileError("a kernel bundle must be a JSON object", filename="<bundle>") from None
    return Bundle.from_dict(data)


def bundle_json(bundle: Bundle) -> str:
    return json.dumps(bundle.to_dict(), sort_keys=True, separators=(",", ":"))


def _bad(what: str, want: str) -> Any:
    raise CompileError(f"bundle field '{what}' must be {want}", filename="<bundle>")


def _str_map(v: Any, what: str) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        _bad(what, "an object of strings")
    return dict(v)


def _dict_map(v: Any, what: str) -> dict[str, dict]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, dict) for k, x in v.items()):
        _bad(what, "an object of objects")
    return dict(v)


def _str_list(v: Any, what: str) -> list[str]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        _bad(what, "a list of strings")
    return list(v)


@dataclass
class BundleModules:
    """The read modules of a bundle, for the code generator to switch between while building helpers."""

    modules: dict[str, tuple[ModuleInfo, SourceInfo]]

    def resolve(self, dotted: str) -> tuple[str, str] | None:
        """A dotted name inside one of the bundle's modules: (module, the rest), longest module first."""
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:i])
            if name in self.modules:
                return name, ".".join(parts[i:])
        return None


def read_bundle(bundle: Bundle | dict, *, budgets: Budgets | None = None) -> KernelSource:
    """Read a bundle's kernel (and what it reaches), without executing any of it."""
    budgets = budgets or Budgets()
    if isinstance(bundle, dict):
        bundle = Bundle.from_dict(bundle)
    entry_module, _, entry_name = bundle.kernel.partition(":")
    if not entry_name or entry_module not in bundle.modules:
        raise CompileError(
            f"the bundle's kernel '{bundle.kernel}' names a module it does not contain "
            f"(it has: {', '.join(sorted(bundle.modules)) or 'none'})",
            filename="<bundle>",
        )
    if len(bundle.modules) > MAX_MODULES:
        raise BudgetExceededError(f"a bundle holds at most {MAX_MODULES} modules", filename="<bundle>")
    total = sum(len(s.encode("utf-8", errors="replace")) for s in bundle.modules.values())
    if total > 4 * budgets.max_source_bytes:
        raise BudgetExceededError(
            f"the bundle's sources are {total} bytes, over the budget of {4 * budgets.max_source_bytes}",
            filename="<bundle>",
        )
    read: dict[str, tuple[ModuleInfo, SourceInfo]] = {}
    trees: dict[str, ast.Module] = {}
    for name, source in bundle.modules.items():
        if not _MODULE_NAME.match(name):
            raise CompileError(f"'{name}' is not a module name", filename="<bundle>")
        filename = bundle.filenames.get(name) or f"<{name}>"
        trees[name] = parse_source(source, filename, budgets)
        info = SourceInfo(source, filename)
        package = name if name in bundle.packages else name.rpartition(".")[0]
        mod = scan_module(trees[name], info, package)
        mod.name = name
        read[name] = (mod, info)
    for name, pins in bundle.pins.items():
        if name not in read:
            raise CompileError(
                f"the bundle pins names of module '{name}', which it does not contain", filename="<bundle>"
            )
        _apply_pins(read, name, pins)
    mods = BundleModules(read)
    mod, info = read[entry_module]
    kernel = mod.jit_functions.get(entry_name) or mod.other_functions.get(entry_name)
    if kernel is None:
        raise CompileError(f"module '{entry_module}' has no function '{entry_name}'", filename=info.filename)
    _mark_jit(mod, entry_name)
    env = literal_env(mod, info)
    env.update(mod.pinned)
    params = read_params(kernel, mod, env, info)
    autotune = _autotune(bundle.autotune, info)
    reached = reachable(mods, entry_module, kernel)
    same = [f for m, f in reached if m == entry_module and f is not kernel]
    others = [(m, f) for m, f in reached if m != entry_module]
    extra = _extra_key(mods, trees, entry_module, [kernel, *same], others, bundle.heuristics)
    key = kernel_key(kernel, trees[entry_module], autotune, {}, extra)
    return KernelSource(
        kernel.name,
        key,
        params,
        autotune,
        {},
        info.filename,
        budgets,
        trees[entry_module],
        mod,
        info,
        bundle=mods,
        host_heuristics=tuple(bundle.heuristics),
    )


def _mark_jit(mod: ModuleInfo, name: str) -> None:
    if name in mod.other_functions:
        mod.jit_functions[name] = mod.other_functions.pop(name)


def _apply_pins(read: dict[str, tuple[ModuleInfo, SourceInfo]], name: str, pins: dict[str, dict]) -> None:
    mod, info = read[name]
    for key, pin in sorted(pins.items()):
        where = f"the bundle's pin '{key}' of module '{name}'"
        if not isinstance(pin, dict) or len(pin) != 1 or next(iter(pin)) not in _PIN_KINDS:
            raise CompileError(
                f"{where} must be one of {{{', '.join(_PIN_KINDS)}: ...}}", filename=info.filename
            )
        kind, value = next(iter(pin.items()))
        for table in (mod.aliases, mod.global_nodes, mod.pinned, mod.pinned_fns, mod.pinned_refs):
            table.pop(key, None)
        if kind == "const":
            mod.pinned[key] = _const(value, where, info)
        elif kind == "dtype":
            d = dtype_named(f"triton.language.{value}") if isinstance(value, str) else None
            if d is None:
                raise CompileError(f"{where}: unknown dtype {value!r}", filename=info.filename)
            mod.pinned[key] = d
        elif kind in ("ref", "module"):
            if not isinstance(value, str) or not _MODULE_NAME.match(value):
                raise CompileError(f"{where}: {value!r} is not a dotted name", filename=info.filename)
            if kind == "module" and value not in read:
                raise CompileError(
                    f"{where} names module '{value}', which the bundle does not contain",
                    filename=info.filename,
                )
            mod.aliases[key] = value
            mod.pinned_refs[key] = value
        else:
            target, _, fname = value.partition(":") if isinstance(value, str) else ("", "", "")
            if target not in read:
                raise CompileError(
                    f"{where} names module '{target}', which the bundle does not contain",
                    filename=info.filename,
                )
            tmod = read[target][0]
            if (
                fname not in tmod.jit_functions
                and fname not in tmod.other_functions
                and fname not in tmod.constexpr_functions
            ):
                raise CompileError(
                    f"{where} names '{value}': module '{target}' has no function '{fname}'",
                    filename=info.filename,
                )
            if kind == "cfn":
                for table in (tmod.jit_functions, tmod.other_functions):
                    if fname in table:
                        tmod.constexpr_functions[fname] = table.pop(fname)
            else:
                _mark_jit(tmod, fname)
            mod.pinned_fns[key] = (target, fname)


def _const(value: Any, where: str, info: SourceInfo) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, list):
        return tuple(_const(v, where, info) for v in value)
    raise CompileError(
        f"{where}: a constant is a number, bool, string, None or a list of them", filename=info.filename
    )


def _autotune(data: Any, info: SourceInfo) -> AutotuneSpec | None:
    if data is None:
        return None
    try:
        configs = [
            ConfigSpec(dict(c["kwargs"]), c.get("num_warps"), c.get("num_stages")) for c in data["configs"]
        ]
        key = [str(k) for k in data["key"]]
        return AutotuneSpec(
            configs, key, list(data.get("reset_to_zero", [])), list(data.get("restore_value", []))
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise CompileError(
            "the bundle's autotune data must be {'configs': [{'kwargs': {...}, 'num_warps': w, "
            "'num_stages': s}], 'key': [...]}",
            filename=info.filename,
        ) from None


# ---- what a kernel reaches across modules ---------------------------------------------------------


def lookup_function(
    mods: BundleModules, module: str, name: str, depth: int = 0
) -> tuple[str, ast.FunctionDef] | None:
    """The jit function `name` means in `module`: pinned, its own, or imported from another module of the bundle."""
    if depth > 16:
        return None
    mod = mods.modules[module][0]
    if name in mod.pinned_fns:
        m, f = mod.pinned_fns[name]
        owner = mods.modules[m][0]
        return m, owner.jit_functions.get(f) or owner.constexpr_functions[f]
    if name in mod.jit_functions:
        return module, mod.jit_functions[name]
    if name in mod.constexpr_functions:  # host code run at compile time: its text is part of the meaning
        return module, mod.constexpr_functions[name]
    if name in mod.aliases:
        return lookup_dotted(mods, canonical_module(mod.aliases[name]), depth + 1)
    return None


def lookup_dotted(mods: BundleModules, dotted: str, depth: int = 0) -> tuple[str, ast.FunctionDef] | None:
    found = mods.resolve(dotted)
    if found is None or "." in found[1]:
        return None
    return lookup_function(mods, found[0], found[1], depth)


def reachable(mods: BundleModules, module: str, kernel: ast.FunctionDef) -> list[tuple[str, ast.FunctionDef]]:
    """Every (module, function) the kernel may call, itself first, the rest in a stable order."""
    seen: dict[tuple[str, str], ast.FunctionDef] = {(module, kernel.name): kernel}
    work = [(module, kernel)]
    roots = {name.split(".")[0] for name in mods.modules}
    while work:
        m, fn = work.pop()
        mod = mods.modules[m][0]
        for ref in sorted(_references(fn, mod)):
            found = lookup_function(mods, m, ref) if "." not in ref else lookup_dotted(mods, ref)
            if found is None:
                _check_contained(mods, m, fn, ref, roots)
            if found is not None and (found[0], found[1].name) not in seen:
                seen[(found[0], found[1].name)] = found[1]
                work.append(found)
    first = [(module, kernel)]
    return first + [(m, f) for (m, n), f in sorted(seen.items()) if (m, n) != (module, kernel.name)]


def _check_contained(
    mods: BundleModules, module: str, fn: ast.FunctionDef, ref: str, roots: set[str]
) -> None:
    """A name the function takes from a module of the bundle's packages must be in the bundle."""
    mod, info = mods.modules[module]
    target = ref if "." in ref else mod.aliases.get(ref)
    if target is None or target.split(".")[0] not in roots or ref in mod.pinned:
        return
    for _ in range(16):
        if target.split(".")[0] not in roots:  # followed out of the bundle's packages (e.g. to triton's)
            return
        found = mods.resolve(target)
        if found is None:
            break
        owner = mods.modules[found[0]][0]
        first = found[1].split(".")[0]
        if first in owner.aliases and "." not in found[1]:
            target = canonical_module(owner.aliases[first])
            continue
        if (
            first in owner.global_nodes
            or first in owner.pinned
            or first in owner.jit_functions
            or first in owner.other_functions
            or first in owner.aliases
            or first in owner.pinned_fns
        ):
            return
        break
    if target in mods.modules:
        return
    where = target.rpartition(".")[0]
    raise info.error(
        fn,
        f"'{ref}' in {fn.name} comes from '{target}', which the bundle does not contain "
        f"(no module '{where}' or no such name in it)",
    )


def _references(fn: ast.FunctionDef, mod: ModuleInfo) -> set[str]:
    """The names a function's parameters and body use, and its attribute chains through modules
    (`tle.program_id`) as dotted names; not its decorators (host code, which the host ran)."""
    out: set[str] = set()
    for part in [fn.args, *fn.body]:
        for node in ast.walk(part):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                out.add(node.id)
            elif isinstance(node, ast.Attribute):
                dotted = mod.dotted(node)
                if dotted is not None:
                    out.add(dotted)
    return out


def _extra_key(mods: BundleModules, trees: dict[str, ast.Module], entry: str, entry_fns: list[ast.FunctionDef],
               others: list[tuple[str, ast.FunctionDef]], heuristics: tuple[str, ...]) -> bytes:  # fmt: skip
    """What a bundle means beyond what kernel_key hashes for its entry module: the entry module's pins,
    and for each function of another module, its module's name and every statement of that module it
    reaches, transitively (binding_closure: constants that name constants there too)."""
    emod = mods.modules[entry][0]
    used: set[str] = set()
    for fn in entry_fns:
        used |= called_names(fn)
    entry_pins = _pins_used(emod, used)
    if not others and not heuristics and not entry_pins:
        return b""  # a bundle of one file, nothing pinned: the file's own key
    h = hashlib.sha256(entry_pins.encode())
    for m, fn in others:
        mod = mods.modules[m][0]
        names = called_names(fn)
        h.update(f"module {m} ".encode() + canonical_dump(fn).encode())
        for text in binding_closure(trees[m], {fn.name}):
            h.update(hashlib.sha256(text.encode()).digest())
        for n in sorted(names & set(mod.aliases)):
            h.update(f"alias {n}={canonical_module(mod.aliases[n])}".encode())
        h.update(_pins_used(mod, names).encode())
    if heuristics:
        h.update(json.dumps(sorted(heuristics)).encode())
    return h.hexdigest().encode()


def _pins_used(mod: ModuleInfo, names: set[str]) -> str:
    pinned = {n: repr(v) for n, v in mod.pinned.items() if n in names}
    fns = {n: list(v) for n, v in mod.pinned_fns.items() if n in names}
    refs = {n: v for n, v in mod.pinned_refs.items() if n in names}
    if not (pinned or fns or refs):
        return ""
    return json.dumps({"pinned": pinned, "fns": fns, "refs": refs}, sort_keys=True)
