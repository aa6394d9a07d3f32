"""What a compile produces (an Artifact), the options that produced it, and the compiler version.

The kernel key of IR input is defined here (ir_kernel_key), that of source in frontend/reader.py.
The artifact key hashes (kernel key, specialisation, config, target, compiler version, and the cuda
codegen options where they are not the defaults); the compiler
version hashes tilec's compiler sources and the versions of LLVM and the CUDA tools it used.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

TARGETS_HELP = "cpu, cuda:sm_80, cuda:sm_90, cuda:sm_90a (any cuda:sm_XX with XX >= 70; an 'a' from sm_90)"


def parse_target(target: str) -> tuple[str, int | None]:
    """'cpu' -> ('cpu', None); 'cuda:sm_90' and 'cuda:sm_90a' -> ('cuda', 90). ValueError otherwise."""
    if target == "cpu":
        return "cpu", None
    digits = target[8:-1] if target.endswith("a") else target[8:]
    if target.startswith("cuda:sm_") and digits.isdigit() and 70 <= int(digits) <= 130:
        if target.endswith("a") and int(digits) < 90:
            raise ValueError(f"unknown target {target!r}: arch-specific ('a') targets start at sm_90")
        return "cuda", int(digits)
    raise ValueError(f"unknown target {target!r}; expected {TARGETS_HELP}")


def arch_specific(target: str) -> bool:
    """Whether a cuda target names the arch-specific feature set (sm_90a: wgmma, setmaxnreg); its
    cubins run on that exact arch only."""
    return target.startswith("cuda:sm_") and target.endswith("a")


@dataclass(frozen=True)
class CudaOptions:
    """The cuda backend's code generation choices. Each changes the cubin, so each is a field here, in
    CompileOptions' stable hash and (where not the default) in the artifact key; a test or a bench that
    wants the other choice passes options, never flips a module's switch. The defaults are tilec's build;
    the others are what tilec built before each choice was made (bench/attention.py's ladder times them)."""

    fp_fusion: bool = True  # float mul/add carry LLVM's `contract` (fma); off: mul.rn/add.rn
    ex2_ftz: bool = True  # exp2 as ex2.approx.ftz; off: ex2.approx
    sm90a_for_dots: bool = True  # cuda:sm_90 builds its wgmma-able dots for sm_90a (cuda:sm_90a always does)
    wgmma_pending: int = 1  # wgmma groups a pipelined K loop may leave in flight (gpu-pipeline)
    leave_occupancy_to_ptxas: bool = True  # no .minnctapersm; off: `.minnctapersm 1` (ptxas may take 255 regs)
    occupancy_step: bool = True  # a dot-free kernel just past an occupancy step is assembled for one more block (cuda/target.py)
    register_schedule: bool = True  # a dot-free kernel held under half the SM's warps by its registers is scheduled again for registers (cuda/target.py)
    a_from_registers: bool = True  # an A operand already in wgmma's fragment layout feeds it from registers
    stage_invariants_once: bool = True  # loop-invariant staged wgmma operands are stored once before the loop
    reuse_staged: bool = True  # ...and a later loop of the same block reads them there while they still are
    issue_after_last_dot: bool = True  # a loop of several wgmma dots issues its copies after the last one's group
    mma_in_flight_across: bool = True  # ...whose group may stay in flight into the next iteration
    uniform_warp: bool = True  # the warp index read back through shfl.sync.idx (uniform registers)
    coords_from_tid: bool = True  # a thread coordinate that lane bits feed computed from tid.x in fields; off: bit by bit from lane and warp
    uniform_advance_offset: bool = False  # a pipelined loop's uniformly advanced address tile as bases plus one hidden offset; off: LLVM's carried pointers
    zero_fill_past_end: bool = False  # a pipelined loop's copies past its last iteration copy 0 bytes, unpredicated
    refill_barrier: bool = False  # one warpgroup's wgmma ring refilled behind a block sync too (Triton's), not its wait alone
    commit_per_load: bool = False  # a pipelined loop's cp.async copies committed one group per load (Triton's), not per stage
    rings_apart: bool = False  # each pipelined load's slots in a region of their own (Triton's), not one stage after another
    prefetch_regs: int = 0  # gpu-prefetch: registers a thread the tiles beyond the next may take (0: one ahead)
    mma_ring_late: bool = True  # mma.sync rings: num_stages - 1 slots refilled after the dots; off: num_stages, before
    mma_ring_pad: int = 16  # bytes after each row of an mma.sync ring tile not swizzled (ldmatrix rows in distinct banks)
    mma_ring_swizzle: bool = True  # mma.sync ring tiles that ldmatrix reads are XOR-swizzled; off: rows padded
    argmax_passes: int = 1  # a float argmax in a thread: 1, a tree of pairwise combines; 2, the extreme, then its first index

    def changed(self) -> dict[str, Any]:
        """The fields that differ from the defaults (what the artifact key adds)."""
        base = CudaOptions()
        return {k: v for k, v in asdict(self).items() if getattr(base, k) != v}


@dataclass(frozen=True)
class CompileOptions:
    """Everything besides the kernel and its specialisation that changes the binary."""

    target: str = "cpu"
    num_warps: int = 4
    num_stages: int = 3
    opt_level: int = 3
    debug: bool = False
    cuda: CudaOptions = field(default_factory=CudaOptions)

    def __post_init__(self) -> None:
        if isinstance(self.cuda, dict):  # from plain data (CompileRequest.from_dict, JSON)
            object.__setattr__(self, "cuda", CudaOptions(**self.cuda))

    def stable_hash(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


@dataclass
class Artifact:
    target: str
    kernel_name: str
    binary: bytes  # cubin (ELF) for cuda, a relocatable host object for cpu
    tir: str = ""  # the specialised tile IR after the pipeline
    llir: str = ""
    ptx: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # arg layout, threads, shared bytes, regs, spills
    compiler_version: str = ""
    pass_dumps: list[dict[str, str]] | None = None  # [{"name", "ir"}] when the request asked (CompileRequest)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.binary).hexdigest()

    @property
    def launch_key(self) -> str:
        """What a loaded binary is kept under: its bytes and the metadata its launch reads (how arguments are
        passed, threads, shared memory). Two builds can assemble to the same bytes and differ only there: a
        32-bit parameter stored as it came is one machine code for an int32 and a float32 argument (FlagGems'
        full_like filling int32 with 2 and float32 with 3.14); kept under the bytes alone, the second launch
        would pack its argument the first one's way."""
        meta = json.dumps(self.metadata, sort_keys=True, default=str).encode()
        return hashlib.sha256(hashlib.sha256(self.binary).digest() + meta).hexdigest()

    def to_json(self) -> str:
        d = asdict(self)
        d["binary"] = base64.b64encode(self.binary).decode()
        d["sha256"] = self.sha256
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Artifact:
        d = json.loads(text)
        want = d.pop("sha256", None)
        d["binary"] = base64.b64decode(d["binary"])
        art = cls(**d)
        if want is not None and want != art.sha256:
            raise ValueError("artifact binary does not match its sha256")
        return art


def ir_kernel_key(canonical_ir: str) -> str:
    """The kernel key of tile IR input: sha256 of its canonical text (print(parse(text))), so comments
    and spacing do not change it. Source input is keyed by its syntax tree instead (frontend/reader.py):
    its IR exists only once a signature and the constexprs are bound, so the two never meet."""
    return hashlib.sha256(canonical_ir.encode()).hexdigest()


def artifact_key(
    kernel_key: str,
    specialization: dict[str, Any],
    config: dict[str, Any],
    target: str,
    version: str,
    codegen: CudaOptions | None = None,
) -> str:
    """The key of one build. `codegen`: the cuda options it was built with; the defaults add nothing (so the
    keys of default builds are as they were), any other choice adds the fields that differ."""
    body = {"kernel": kernel_key, "spec": specialization, "config": config, "target": target, "version": version}
    changed = codegen.changed() if codegen is not None else {}
    if changed:
        body["codegen"] = changed
    blob = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@cache
def compiler_version() -> str:
    """sha256 over the compiler's own sources plus the versions of the tools it drives."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    h.update(_tool_versions().encode())
    return h.hexdigest()[:32]


def _tool_versions() -> str:
    parts = []
    try:
        import llvmlite

        parts.append(f"llvmlite={llvmlite.__version__}")
    except ImportError:  # pragma: no cover - llvmlite is a hard dependency
        parts.append("llvmlite=none")
    from .backends.cuda.nvptx import assembler_version  # ptxas or nvJitLink, whichever makes the cubins here

    parts.append(assembler_version())
    return ";".join(parts)
