"""The compile pipeline: source or tile IR -> an Artifact, through the ordered stages of the target's backend.

Each stage is `(ir, metadata) -> next ir`; `emit` names the stage to stop after. The backend of a target
kind (compiler/backends/<kind>/) is imported on first use: cpu runs `tir -> llir -> object`, cuda
`tir -> gpu-tir -> llir -> ptx -> cubin`; both begin with the shared `tir` stage (compiler/tir.py).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from . import backends
from .artifact import Artifact, CompileOptions, compiler_version, parse_target
from .errors import CompileError
from .frontend import KernelSource, build_ir, read_kernel
from .frontend.reader import Budgets
from .ir import Module, parse_module, print_module, verify_module
from .request import CompileRequest


def frontend_module(
    source: str,
    name: str | None,
    signature: dict,
    constexprs: dict,
    hints: dict | None,
    budgets: Budgets | None = None,
) -> Module:
    return build_ir(read_kernel(source, name, budgets=budgets), signature, constexprs, hints=hints)


def ir_module(text: str, hints: dict | None) -> Module:
    module = parse_module(text)
    verify_module(module)
    for k in module.kernels:
        for p in k.params:
            p.attrs.update((hints or {}).get(p.name, {}))
    return module


def compile_kernel(
    source_or_ir: str,
    name: str | None,
    *,
    signature: dict[str, str] | None = None,
    constexprs: dict | None = None,
    hints: dict | None = None,
    options: CompileOptions = CompileOptions(),
    emit: str | None = None,
    is_ir: bool = False,
) -> Artifact:
    """Compile Triton-language source (or tile IR text when is_ir) down to the stage named by `emit`."""
    request = CompileRequest(
        text=source_or_ir,
        kind="ir" if is_ir else "source",
        name=name,
        signature=dict(signature or {}),
        constexprs=dict(constexprs or {}),
        hints=dict(hints or {}),
        options=options,
        emit=emit,
    )
    return compile_request(request)


StageCheck = Callable[[str, dict], None]


def read_request(request: CompileRequest) -> KernelSource:
    """The kernel a source or bundle request names (bundle: `text` is the bundle as JSON)."""
    if request.kind == "bundle":
        from .frontend.bundle import bundle_from_json, read_bundle

        return read_bundle(bundle_from_json(request.text), budgets=request.budgets)
    return read_kernel(request.text, request.name, budgets=request.budgets)


def compile_request(
    request: CompileRequest, kernel: KernelSource | None = None, *, after_stage: StageCheck | None = None
) -> Artifact:
    """Run `request` through its target's stages. A source request is read once, with the request's
    budgets; a caller that has read it already (to describe the kernel) passes that `kernel`.
    `after_stage(name, metadata)` runs after each stage and may raise to stop the compile there (the
    tuner prunes a config whose planned shared memory the arch cannot give before LLVM and ptxas run)."""
    with gc_paused():
        return _compile_request(request, kernel, after_stage)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The IR of a long kernel is many small objects in reference cycles (ops and their results): Python's
    cyclic collector would walk them again and again while the compile allocates (a quarter of the time
    of a 3200-step kernel, superlinear in its length). What the compile drops is collected after it."""
    if not gc.isenabled():  # paused by a compile in another thread, or by the caller
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _compile_request(request: CompileRequest, kernel: KernelSource | None, after_stage: StageCheck | None) -> Artifact:
    options = request.options
    try:
        kind, _ = parse_target(options.target)
    except ValueError as exc:
        raise CompileError(str(exc)) from None
    stages = backends.stages(kind)
    if stages is None:
        raise CompileError(f"target {options.target!r} has no backend installed here")
    names = [n for n, _ in stages]
    emit = request.emit or names[-1]
    if emit not in names:
        raise CompileError(f"target {options.target} emits one of {names}, not {emit!r}")
    hints = request.hints or None
    if request.kind == "ir":
        module = ir_module(request.text, hints)
    else:
        kernel = kernel or read_request(request)
        module = build_ir(kernel, request.signature, request.constexprs, hints=hints)
    name = request.name
    if name is None and len(module.kernels) == 1:
        name = module.kernels[0].name
    meta: dict[str, Any] = {"kernel_name": name, "options": options, "keep_pass_dumps": request.pass_dumps}
    ir_now: Any = module
    outputs: dict[str, Any] = {}
    for stage_name, stage in stages:
        ir_now = stage(ir_now, meta)
        outputs[stage_name] = ir_now
        if request.pass_dumps and stage_name == "gpu-tir" and meta.get("pass_dumps"):
            meta["pass_dumps"].append({"name": "gpu-tir (stage)", "ir": print_module(ir_now)})
        if after_stage is not None:
            after_stage(stage_name, meta)
        if stage_name == emit:
            break
    return _artifact(options, meta, outputs, emit)


def _artifact(options: CompileOptions, meta: dict, outputs: dict, emit: str) -> Artifact:
    binary = outputs.get(emit) if emit in ("object", "cubin") else b""
    llir = meta.pop("llir_optimised", None) or outputs.get("llir", "")
    ptx = meta.pop("ptx_final", None) or outputs.get("ptx", "")  # the cuda cubin stage may re-assemble it
    tir = meta.pop("tir", "")
    pass_dumps = meta.pop("pass_dumps", None)
    meta.pop("keep_pass_dumps", None)
    name = meta.pop("kernel_name")
    options_dict = {"target": options.target, "opt_level": options.opt_level, "hash": options.stable_hash()}
    meta.pop("options")
    meta["options"] = options_dict
    meta["emit"] = emit
    return Artifact(
        target=meta.pop("resolved_target", options.target),  # cuda:sm_90 may build for sm_90a (cuda target.py)
        kernel_name=name or "",
        binary=binary or b"",
        tir=tir,
        llir=llir if isinstance(llir, str) else "",
        ptx=ptx if isinstance(ptx, str) else "",
        metadata=meta,
        compiler_version=compiler_version(),
        pass_dumps=pass_dumps,
    )
