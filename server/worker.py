"""What runs inside a compile child process: reading kernels and compiling them.

Untrusted source and IR are only ever parsed here, never in the API process. A compile takes one
CompileRequest (with the frontend budgets of the service's settings) and reads its input once: the
same reading describes the kernel and feeds the pipeline. Results are plain dicts (picklable,
JSON-able); a CompileError comes back as its to_dict(), tagged "compile".
"""

from __future__ import annotations

from typing import Any

from tilec.compiler import backends
from tilec.compiler.artifact import ir_kernel_key, parse_target
from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import Budgets, KernelSource, build_ir
from tilec.compiler.ir import Module, parse_module, print_module, verify_module
from tilec.compiler.passes import PassManager, pipeline
from tilec.compiler.pipeline import compile_request, frontend_module, ir_module, read_request
from tilec.compiler.request import CompileRequest


def _ir_kernel(module: Module, name: str | None) -> Any:
    kernels = module.kernels
    if name is not None:
        fn = module.get(name)
        if fn is None:
            raise CompileError(f"no function @{name} in the IR", filename="<ir>")
        return fn
    if len(kernels) != 1:
        found = ", ".join("@" + k.name for k in kernels) or "none"
        raise CompileError(f"the IR must hold exactly one kernel when no name is given (found {found})", filename="<ir>")
    return kernels[0]


def _describe_ir(text: str, name: str | None) -> dict:
    module = parse_module(text)
    verify_module(module)
    ir = print_module(module)
    fn = _ir_kernel(module, name)
    params = [{"name": p.name, "annotation": str(p.type)} for p in fn.params]
    return {"key": ir_kernel_key(ir), "name": fn.name, "params": params, "ir": ir}


def _describe_source(ks: KernelSource) -> dict:
    info = ks.to_dict()
    return {
        "key": ks.key,
        "name": ks.name,
        "params": info.get("params", []),
        "autotune": info.get("autotune"),
        "heuristics": info.get("heuristics") or {},
        "ir": None,
        # an Inductor module's decorator data (its signature types a tune job's arguments)
        **({"inductor": info["inductor"]} if info.get("inductor") else {}),
    }


def analyze(*, kind: str, text: str, name: str | None, budgets: dict, signature: dict | None) -> dict:
    """Kernel key, name, params (and, when it can be built, the tile IR) of source or IR text."""
    if kind == "ir":
        return _describe_ir(text, name)
    ks = read_request(CompileRequest(text=text, kind=kind, name=name, budgets=Budgets(**budgets)))  # type: ignore[arg-type]
    out = _describe_source(ks)
    constexprs_all_default = all(p.has_default for p in ks.params if p.constexpr)
    if signature is not None and constexprs_all_default:
        out["ir"] = print_module(build_ir(ks, signature, {}))
    return out


def compile_one(request: CompileRequest, describe: bool = False) -> dict:
    """One compile through compiler.pipeline: the Artifact as a dict (binary as bytes), and with
    `describe` the kernel as `analyze` sees it, from the same reading of the source."""
    kernel = None
    out: dict[str, Any] = {}
    if request.kind in ("source", "bundle"):
        kernel = read_request(request)
        if describe:
            out["kernel"] = _describe_source(kernel)
    elif describe:
        out["kernel"] = _describe_ir(request.text, request.name)
    art = compile_request(request, kernel)
    out.update(
        kernel_name=art.kernel_name,
        binary=art.binary,
        tir=art.tir,
        llir=art.llir,
        ptx=art.ptx,
        metadata=art.metadata,
        compiler_version=art.compiler_version,
        pass_dumps=art.pass_dumps,
    )
    return out


def pass_dumps(request: CompileRequest) -> list[dict]:
    """The tile IR of a compile as the frontend builds it and after each pass of the machine-independent
    pipeline, one pass at a time as the `tir` stage runs them (each verified), and for a cuda target
    after its `gpu-tir` stage: the per-pass dumps of this build, recomputed (a compile keeps none)."""
    hints = request.hints or None
    if request.kind == "ir":
        module = ir_module(request.text, hints)
    else:
        module = frontend_module(request.text, request.name, request.signature, request.constexprs, hints,
                                 request.budgets)  # fmt: skip
    dumps = [{"name": "input", "ir": print_module(module)}]
    for name in pipeline("default"):
        PassManager.from_names([name]).run(module)
        dumps.append({"name": name, "ir": print_module(module)})
    verify_module(module)
    kind, _ = parse_target(request.options.target)
    if kind == "cuda":
        stage = dict(backends.stages(kind) or [])["gpu-tir"]
        names = [k.name for k in module.kernels]
        name = request.name or (names[0] if len(names) == 1 else None)
        gpu = stage(module, {"kernel_name": name, "options": request.options})
        dumps.append({"name": "gpu-tir (stage)", "ir": print_module(gpu)})
    return dumps


TASKS = {"analyze": analyze, "compile": compile_one, "passes": pass_dumps}
