"""The cuda target's stages: tir -> gpu-tir (the cuda passes record layouts and plans in the IR) -> llir
(NVVM) -> ptx -> cubin.

STAGES is the list the backend registry hands the pipeline for "cuda"; each stage is `(ir, meta) -> next`.

cuda:sm_90a turns on warpgroup MMA (wgmma) for the dots that can take it and builds for the sm_90a
feature set; with options.cuda.sm90a_for_dots (the default), cuda:sm_90 does the same for a kernel whose dots take wgmma, and its
artifact says cuda:sm_90a (meta["resolved_target"]). Other kernels and targets keep mma.sync.
"""

from __future__ import annotations

import re

from ...artifact import arch_specific, parse_target
from ...errors import CompileError
from ...ir.core import Function, Module
from ...ir.verifier import verify_module
from ...passes.manager import PassManager
from ...tir import tir_stage
from . import nvptx
from .layouts import is_pow2_shape
from .passes import GpuDotAccPass, GpuLayoutPass, GpuPipelinePass, GpuPrefetchPass
from .plan import MMA
from .tma import grid_constant_params

# The codegen choices are options (compiler/artifact.py CudaOptions, meta["options"].cuda). With
# leave_occupancy_to_ptxas the PTX states no .minnctapersm, leaving ptxas's own heuristic to weigh registers
# against resident blocks (Triton's PTX says only .reqntid). Off: nvvm.minctasm=1, i.e. `.minnctapersm 1`,
# which tells ptxas that one block per SM is enough and licenses up to 255 registers per thread: causal flash
# attention at head dim 64 (128x64, 8 warps) took 150 registers with it, one 256-thread block per SM; 128
# without, two.


def _sm(meta: dict) -> int:
    _, sm = parse_target(meta["options"].target)
    return sm


def _arch(meta: dict) -> str:
    """The arch ptx and the assembler build for: sm_XX, or sm_90a once gpu-tir chose wgmma."""
    return meta.get("arch") or f"sm_{_sm(meta)}" + ("a" if arch_specific(meta["options"].target) else "")


def _wants_wgmma(meta: dict) -> bool:
    target = meta["options"].target
    return _sm(meta) == 90 and (arch_specific(target) or meta["options"].cuda.sm90a_for_dots)


def _kernel(module: Module, name: str | None) -> Function:
    ks = [f for f in module.kernels if name is None or f.name == name]
    if len(ks) != 1:
        raise CompileError(f"cuda: expected one kernel{' named ' + name if name else ''}, found {len(ks)}")
    return ks[0]


def _check_shapes(fn: Function) -> None:
    for op in fn.walk():
        for v in op.results:
            shape = getattr(v.type, "shape", ())
            if shape and not is_pow2_shape(shape):
                where = {"filename": op.loc.file, "line": op.loc.line, "col": op.loc.col} if op.loc else {}
                raise CompileError(f"cuda: tile shapes must be powers of two, but '{op.name}' makes {v.type} "
                                   "(the cpu target runs any shape)", **where)  # fmt: skip


def gpu_tir(module: Module, meta: dict) -> Module:
    """The kernel alone (the tir stage inlined every helper), through the cuda passes."""
    opts = meta["options"]
    nw = opts.num_warps
    if nw < 1 or nw > 32 or nw & (nw - 1):
        raise CompileError(f"cuda: num_warps must be a power of two from 1 to 32, got {nw}")
    fn = _kernel(module, meta.get("kernel_name"))
    meta["kernel_name"] = fn.name
    _check_shapes(fn)
    wgmma = _wants_wgmma(meta)
    passes = [GpuPrefetchPass(num_warps=nw, extra_regs=opts.cuda.prefetch_regs), GpuDotAccPass(),
              GpuLayoutPass(num_warps=nw, sm=_sm(meta), wgmma=wgmma),
              GpuPipelinePass(num_stages=opts.num_stages, wgmma_pending=opts.cuda.wgmma_pending,
                              mma_late=opts.cuda.mma_ring_late, mma_pad=opts.cuda.mma_ring_pad,
                              mma_swizzle=opts.cuda.mma_ring_swizzle)]  # fmt: skip
    module = PassManager(passes, verify=False).run(Module([fn]))
    verify_module(module)  # once: only gpu-dot-acc rewrites ops, the other two add attributes
    if wgmma and not arch_specific(opts.target):  # cuda:sm_90: sm_90a only where a dot took wgmma
        used = any(str(op.attrs.get(MMA, "")).startswith("wgmma ") for op in fn.walk())
        meta["arch"] = "sm_90a" if used else "sm_90"
        meta["resolved_target"] = f"cuda:{meta['arch']}"
    return module


def llir(module: Module, meta: dict) -> str:
    from .lower import lower_kernel

    fn = module.kernels[0]
    cg = meta["options"].cuda
    ll, info = lower_kernel(fn, _sm(meta), cg, debug=meta["options"].debug)
    meta.update(info)
    return grid_constant_params(
        _with_attrs(str(ll), fn.name, info["threads_per_block"], cg.leave_occupancy_to_ptxas)
    )


def _with_attrs(text: str, name: str, threads: int, leave_occupancy_to_ptxas: bool) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(f'define ptx_kernel void @"{name}"('):
            lines[i] = line + " #0"
            break
    hint = "" if leave_occupancy_to_ptxas else ' "nvvm.minctasm"="1"'
    lines.append(f'attributes #0 = {{ "nvvm.maxntid"="{threads}"{hint} }}')
    return "\n".join(lines)


def ptx(llir_text: str, meta: dict) -> str:
    opts = meta["options"]
    arch = _arch(meta)
    mod = nvptx.optimise(llir_text, meta["kernel_name"], arch, opts.opt_level)
    meta["llir_optimised"] = str(mod)
    return nvptx.emit_ptx(mod, arch, opts.opt_level)


# ptxas's own weighing of registers against resident blocks can go far wrong on a kernel of many live values:
# a [64, 1024] fp32 row scan (bench/speed.py's cumsum) holds 256 values a thread, and ptxas, left to itself,
# takes 32 registers and spills 8,700 bytes a thread (Triton's build of it: 7,892), where `.minnctapersm 1`
# gives 255 registers and 1,028 bytes. Past this many spilled bytes under its own choice of fewer than 255
# registers, the kernel is assembled again with `.minnctapersm 1`, and that build is kept where it spills at
# most half as much (the PTX the artifact keeps says so).
SPILL_RETRY_BYTES = 512


def _min_blocks_per_sm(ptx_text: str, blocks: int = 1) -> str | None:
    """The PTX with `.minnctapersm <blocks>` after its entry's thread-count directive; None where it states one."""
    if ".minnctapersm" in ptx_text or ".maxnreg" in ptx_text:
        return None
    text, n = re.subn(r"^(\.(?:maxntid|reqntid) [^\n]*)$", rf"\1\n.minnctapersm {blocks}", ptx_text, count=1,
                      flags=re.MULTILINE)  # fmt: skip
    return text if n else None


# ptxas takes the registers its schedule wants and the resident blocks follow; it does not look for the block
# it just missed. Tutorial 05's layer-norm backward (8,192 columns on 8 warps) took 154 registers, one block
# an SM, where Triton's build of the same kernel took 128 and two; asked for two (`.minnctapersm 2`), ptxas
# fits it in 128 with nothing spilled. A kernel without dots (those trade registers for reuse) whose count is
# at most this far above a count that gives more blocks is assembled again for one more block (ptxas takes the
# registers of as many as then fit), and that build is kept where it spills nothing.
OCCUPANCY_STEP = 0.2


def _regs_for_blocks(blocks: int, threads: int) -> int:
    """The most registers a thread may hold for `blocks` resident blocks (blocks_per_sm's units)."""
    warps = -(-threads // 32)
    return 65536 // (blocks * warps) // 256 * 256 // 32


def _one_more_block(ptx_text: str, usage: dict, meta: dict) -> str | None:
    """The PTX asking ptxas for one more resident block, where the step is within OCCUPANCY_STEP; else None."""
    regs, threads, shared = usage.get("registers", 0), meta.get("threads_per_block", 0), meta.get("shared_bytes", 0)
    if not regs or not threads or usage.get("spill_stores", 0) or meta.get("dots", 1):
        return None
    now = blocks_per_sm(regs, threads, shared)
    cap = _regs_for_blocks(now + 1, threads)
    if cap < regs * (1 - OCCUPANCY_STEP) or blocks_per_sm(cap, threads, shared) <= now:
        return None
    return _min_blocks_per_sm(ptx_text, now + 1)


# LLVM's NVPTX backend emits each block's instructions in the order the lowering wrote them: an elementwise
# chain over a tile is written op by op across every element a thread holds, so all of a thread's elements are
# live at once, and ptxas does not undo that. Liger-Kernel's KL divergence (16,384 fp32 columns on 16 warps,
# libdevice's log on each) took 95 registers and one block an SM where Triton's build took 32 and four (its LLVM
# keeps logf's branches, which cut the chains apart). A dot-free kernel that its registers leave under half the
# SM's warps is emitted again under LLVM's register-reduction scheduler and assembled (with the same retry and
# step as the first); that build is kept where it spills no more and gives more resident blocks. Not for fewer
# bytes spilled alone: FlagGems' argmax went from 255 registers and 36 bytes spilled to 210 and none under it, at
# the same two blocks an SM, and ran at 0.92x Triton in CUDA graphs where its first build ran at 1.00.
def _wants_register_schedule(build: _Build, meta: dict) -> bool:
    regs, threads, shared = build.usage.get("registers", 0), meta.get("threads_per_block", 0), meta.get("shared_bytes", 0)
    if not regs or not threads or not meta.get("llir_optimised") or meta.get("dots", 1):
        return False
    now = blocks_per_sm(regs, threads, shared)
    return now < blocks_per_sm(1, threads, shared) and now * -(-threads // 32) < 32


class _Build:
    """One assembly of a kernel's PTX: the text, the cubin, ptxas's log and the resources it read there."""

    def __init__(self, text: str, meta: dict) -> None:
        self.text = text
        self.binary, self.log = nvptx.ptx_to_cubin(text, _arch(meta), meta["options"].opt_level)
        self.usage = nvptx.resource_usage(self.log)

    def rank(self, meta: dict) -> tuple[int, int]:
        """(resident blocks an SM, bytes not spilled): more is better."""
        regs = self.usage.get("registers", 255)
        return blocks_per_sm(regs, meta.get("threads_per_block", 0), meta.get("shared_bytes", 0)), -self.usage.get("spill_stores", 0)


def _retried(build: _Build, meta: dict, facts: dict) -> _Build:
    """The build after the spill retry or the occupancy step, where either applies and is kept (`facts` records
    which, with the first build's figures)."""
    usage, cuda = build.usage, meta["options"].cuda
    spilled = usage.get("spill_stores", 0)
    if (cuda.leave_occupancy_to_ptxas and spilled >= SPILL_RETRY_BYTES and usage.get("registers", 255) < 255
            and (text := _min_blocks_per_sm(build.text)) is not None):  # fmt: skip
        again = _Build(text, meta)
        if again.usage.get("spill_stores", 0) <= spilled // 2:
            facts["occupancy_retry"] = {"registers": usage.get("registers"), "spill_stores": spilled}
            return again
    elif cuda.occupancy_step and (text := _one_more_block(build.text, usage, meta)) is not None:
        again = _Build(text, meta)
        if not again.usage.get("spill_stores", 0) and again.usage.get("registers", 255) < usage.get("registers", 0):
            facts["occupancy_step"] = {"registers": usage.get("registers")}
            return again
    return build


def cubin(ptx_text: str, meta: dict) -> bytes:
    first = _Build(ptx_text, meta)
    facts: dict = {}
    best = _retried(first, meta, facts)
    if meta["options"].cuda.register_schedule and _wants_register_schedule(best, meta):
        arch, level = _arch(meta), meta["options"].opt_level
        text = nvptx.emit_ptx_again(meta["llir_optimised"], arch, level, "registers")
        if text != ptx_text:
            alt_facts: dict = {}
            alt = _retried(_Build(text, meta), meta, alt_facts)
            (blocks, kept), (alt_blocks, alt_kept) = best.rank(meta), alt.rank(meta)
            if alt_kept >= kept and alt_blocks > blocks:
                facts = alt_facts | {"register_schedule": {"registers": best.usage.get("registers"),
                                                           "spill_stores": -kept}}  # fmt: skip
                best = alt
    meta.update(facts)
    if best is not first:
        meta["ptx_final"] = best.text
    meta.update(best.usage)
    # without ptxas's "Compile time = ... ms" lines: the launch metadata is signed with the build, and two
    # builds of one key must give the same bytes (tests/test_build_determinism.py)
    meta["assembler_log"] = re.sub(r"^.*Compile time = .*(\n|$)", "", best.log, flags=re.MULTILINE)
    return best.binary


def blocks_per_sm(registers: int, threads: int, shared_bytes: int) -> int:
    """Resident blocks per SM on sm_80/sm_90 limits: 64 Ki registers (a warp's allocated in units of 256,
    8 per thread), 64 warps, 32 blocks, 228 KiB of shared memory with 1 KiB reserved per block."""
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by_regs = 65536 // (per_warp * warps)
    by_smem = 228 * 1024 // (shared_bytes + 1024) if shared_bytes else 32
    return min(by_regs, by_smem, 64 // warps, 32)


STAGES = [("tir", tir_stage), ("gpu-tir", gpu_tir), ("llir", llir), ("ptx", ptx), ("cubin", cubin)]
