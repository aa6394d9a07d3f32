"""The cpu target's stages: a tile-IR module -> an LLVM module with a grid function -> an optimised host object.

The grid function `<kernel>__grid(ptr args, i64 start, i64 end, i32 g0, i32 g1, i32 g2) -> i32` runs the
programs whose linear ids lie in [start, end) (pid0 fastest); arguments come packed in 8-byte slots.
It returns 0, or the code of the first failing assert (index + 1 into metadata["asserts"]).
"""

from __future__ import annotations

from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from ...errors import CompileError, ToolError
from ...ir.core import Function, Module
from ...ir.types import PointerType, ScalarType
from ...passes.expand_tileops import expand_sort_gather
from ...tir import tir_stage
from ..llvm.loops import counted_loop
from ..llvm.types import I32, I64, PTR, ll_type
from . import control, memory, reduce, reduce_with, tiles  # noqa: F401 - they register their op handlers
from .lower import SEGMENT_SUFFIX, FunctionLowering, function_type

SLOT_BYTES = 8


@cache
def target_machine(opt_level: int = 3) -> llvm.TargetMachine:
    """The host target machine the compiler emits objects with (shared: never hand it to a JIT engine)."""
    return new_target_machine(opt_level)


def new_target_machine(opt_level: int = 3) -> llvm.TargetMachine:
    """A host target machine of one's own: an MCJIT engine takes ownership of (and frees) the one it gets."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=host_features(),
        opt=min(max(opt_level, 0), 3),
        reloc="pic",
        codemodel="jitdefault",
    )


def host_features() -> str:
    """The host's feature string, AVX-512 turned off: LLVM's x86 backend aborts the whole process
    ('Cannot emit physreg copy instruction') on some of the kernels' i1 vector code when it may use the
    mask registers (seen on an AMD Zen 4), and a compile of a stranger's kernel must never take the
    process down. The cpu target is the reference and the CI path, so AVX2 is fast enough."""
    feats = llvm.get_host_cpu_features()
    for name in list(feats):
        if name.startswith("avx512") or name in ("evex512", "avx10.1-256", "avx10.1-512"):
            feats[name] = False
    return feats.flatten()


def pick_kernel(module: Module, name: str | None) -> Function:
    kernels = module.kernels
    if name is not None:
        f = module.get(name)
        if f is None or not f.kernel:
            raise CompileError(
                f"no kernel named @{name} in the module (kernels: {[k.name for k in kernels]})"
            )
        return f
    if len(kernels) != 1:
        raise CompileError(f"the module has {len(kernels)} kernels; name the one to compile")
    return kernels[0]


def arg_layout(kernel: Function) -> list[dict]:
    """name, kind (ptr/scalar) and dtype of every kernel parameter, in order."""
    out = []
    for p in kernel.params:
        if isinstance(p.type, PointerType):
            out.append({"name": p.name, "kind": "ptr", "dtype": p.type.pointee.name})
        elif isinstance(p.type, ScalarType):
            out.append({"name": p.name, "kind": "scalar", "dtype": p.type.name})
        else:
            raise CompileError(
                f"kernel parameter %{p.name} has tile type {p.type}; kernels take scalars and pointers"
            )
    return out


def lower_module(module: Module, kernel_name: str | None) -> tuple[ir.Module, dict]:
    """The whole tile-IR module as one LLVM module plus launch metadata."""
    kernel = pick_kernel(module, kernel_name)
    ll = ir.Module(name=kernel.name)
    ll.triple = llvm.get_process_triple()
    ll.data_layout = str(target_machine().target_data)
    functions: dict[str, ir.Function] = {}
    for f in module.functions:
        if f.kernel and f is not kernel:
            continue
        llf = ir.Function(ll, function_type(f), f"tk_{f.name}")
        llf.linkage = "internal"
        functions[f.name] = llf
    asserts: list[dict] = []
    for f in module.functions:
        if f.name in functions:
            FunctionLowering(f, functions[f.name], functions, asserts).lower()
    meta = {
        "args": arg_layout(kernel),
        "grid_symbol": f"{kernel.name}__grid",
        "asserts": asserts,
        "slot_bytes": SLOT_BYTES,
    }
    _grid_function(ll, kernel, functions[kernel.name], meta["grid_symbol"])
    return ll, meta


def _grid_function(ll: ir.Module, kernel: Function, llk: ir.Function, symbol: str) -> None:
    fnty = ir.FunctionType(I32, [PTR, I64, I64, I32, I32, I32])
    grid = ir.Function(ll, fnty, symbol)
    argbuf, start, end, g0, g1, g2 = grid.args
    b = ir.IRBuilder(grid.append_basic_block("entry"))
    args = []
    for i, p in enumerate(kernel.params):
        slot = b.gep(argbuf, [ir.Constant(I64, i * SLOT_BYTES)], source_etype=ir.IntType(8))
        args.append(b.load(slot, typ=ll_type(p.type), align=SLOT_BYTES))
    fail = grid.append_basic_block("fail")
    g0w, g1w = b.zext(g0, I64), b.zext(g1, I64)
    with counted_loop(b, start, end, "pid") as lin:
        p0 = b.trunc(b.urem(lin, g0w), I32)
        rest = b.udiv(lin, g0w)
        p1 = b.trunc(b.urem(rest, g1w), I32)
        p2 = b.trunc(b.udiv(rest, g1w), I32)
        status = b.call(llk, [*args, p0, p1, p2, g0, g1, g2])
        call_block = b.block
        ok = grid.append_basic_block("ok")
        b.cbranch(b.icmp_signed("==", status, ir.Constant(I32, 0)), ok, fail)
        b.position_at_end(ok)
    b.ret(ir.Constant(I32, 0))
    b.position_at_end(fail)
    phi = b.phi(I32)
    phi.add_incoming(status, call_block)
    b.ret(phi)


def optimise(llir: str, opt_level: int = 3) -> llvm.ModuleRef:
    """Parse, verify and optimise LLVM IR text; a failure raises ToolError with LLVM's message."""
    try:
        mod = llvm.parse_assembly(llir)
        mod.verify()
    except RuntimeError as exc:
        raise ToolError("llvm (parse/verify)", str(exc), repro="llvm-as <kernel>.ll") from exc
    tm = target_machine(opt_level)
    pto = llvm.PipelineTuningOptions(speed_level=min(max(opt_level, 0), 3))
    pto.loop_vectorization = opt_level >= 2
    pto.slp_vectorization = opt_level >= 2
    # A kernel long enough to be lowered in segments keeps its tile loops rolled: unrolled, their masked
    # loads and stores make blocks that LLVM's schedulers take several times longer over.
    pto.loop_unrolling = not any(SEGMENT_SUFFIX in f.name for f in mod.functions)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    return mod


def emit_object(mod: llvm.ModuleRef, opt_level: int = 3) -> bytes:
    try:
        return target_machine(opt_level).emit_object(mod)
    except RuntimeError as exc:
        raise ToolError("llvm (codegen)", str(exc), repro="llc -filetype=obj <kernel>.ll") from exc


# ---- the stages --------------------------------------------------------------------------------


def llir_stage(module: Module, meta: dict) -> str:
    expand_sort_gather(module)  # the cpu target lowers sort and gather as plain ops
    ll, info = lower_module(module, meta["kernel_name"])
    meta.update(info)
    return str(ll)


def object_stage(llir: str, meta: dict) -> bytes:
    opt = meta["options"].opt_level
    mod = optimise(llir, opt)
    meta["llir_optimised"] = str(mod)
    return emit_object(mod, opt)


STAGES = [("tir", tir_stage), ("llir", llir_stage), ("object", object_stage)]
