"""What runs inside a compile child process: reading kernels and compiling them.

Untrusted source and IR are only ever parsed here, never in the API process. Results are plain
dicts (picklable, JSON-able); a CompileError comes back as its to_dict(), tagged "compile".
"""

from __future__ import annotations

import hashlib
from typing import Any

from tilec.compiler.artifact import CompileOptions, compiler_version
from tilec.compiler.errors import CompileError
from tilec.compiler.ir import parse_module, print_module, verify_module


class NotAvailable(Exception):
    """The part of the compiler this request needs has not landed in this build."""


def _type_text(t: Any) -> str:
    return str(t)


def _ir_kernel(module: Any, name: str | None) -> Any:
    kernels = module.kernels() if callable(getattr(module, "kernels", None)) else module.kernels
    if name is not None:
        fn = module.get(name)
        if fn is None:
            raise CompileError(f"no function @{name} in the IR", filename="<ir>")
        return fn
    if len(kernels) != 1:
        found = ", ".join("@" + k.name for k in kernels) or "none"
        raise CompileError(f"the IR must hold exactly one kernel when no name is given (found {found})", filename="<ir>")
    return kernels[0]


def analyze(*, kind: str, text: str, name: str | None, budgets: dict, signature: dict | None) -> dict:
    """Kernel key, name, params (and, when it can be built, the tile IR) of source or IR text."""
    if kind == "ir":
        module = parse_module(text)
        verify_module(module)
        ir = print_module(module)
        fn = _ir_kernel(module, name)
        params = [{"name": p.name, "annotation": _type_text(p.type)} for p in fn.params]
        return {"key": hashlib.sha256(ir.encode()).hexdigest(), "name": fn.name, "params": params, "ir": ir}
    try:
        from tilec.compiler.frontend import Budgets, build_ir, read_kernel
    except ImportError as exc:
        raise NotAvailable("frontend") from exc
    ks = read_kernel(text, name, budgets=Budgets(**budgets))
    info = ks.to_dict()
    out = {
        "key": ks.key,
        "name": ks.name,
        "params": info.get("params", []),
        "autotune": info.get("autotune"),
        "heuristics": info.get("heuristics") or {},
        "ir": None,
    }
    constexprs_all_default = all(p.has_default for p in ks.params if p.constexpr)
    if signature is not None and constexprs_all_default:
        out["ir"] = print_module(build_ir(ks, signature, {}))
    return out


def compile_one(
    *,
    kind: str,
    text: str,
    name: str,
    signature: dict,
    constexprs: dict,
    hints: dict,
    options: dict,
    emit: str,
) -> dict:
    """One compile through compiler.pipeline; an Artifact as a dict (binary as bytes)."""
    try:
        from tilec.compiler.pipeline import compile_kernel
    except ImportError:
        return _compile_without_pipeline(kind=kind, text=text, name=name, options=options, emit=emit)
    art = compile_kernel(
        text,
        name,
        signature=signature,
        constexprs=constexprs,
        hints=hints or None,
        options=CompileOptions(**options),
        emit=emit,
        is_ir=kind == "ir",
    )
    return {
        "kernel_name": art.kernel_name,
        "binary": art.binary,
        "tir": art.tir,
        "llir": art.llir,
        "ptx": art.ptx,
        "metadata": art.metadata,
        "compiler_version": art.compiler_version or compiler_version(),
    }


def _compile_without_pipeline(*, kind: str, text: str, name: str, options: dict, emit: str) -> dict:
    """Until compiler.pipeline lands: IR input, `emit tir` = the verified IR after the default passes."""
    if emit != "tir" or kind != "ir":
        raise NotAvailable("pipeline")
    module = parse_module(text)
    verify_module(module)
    fn = _ir_kernel(module, name)
    try:
        from tilec.compiler.passes import PassManager, pipeline

        PassManager.from_names(pipeline("default")).run(module)
        verify_module(module)
    except ImportError:
        pass
    return {
        "kernel_name": fn.name,
        "binary": b"",
        "tir": print_module(module),
        "llir": "",
        "ptx": "",
        "metadata": {"target": options.get("target")},
        "compiler_version": compiler_version(),
    }


TASKS = {"analyze": analyze, "compile": compile_one}
