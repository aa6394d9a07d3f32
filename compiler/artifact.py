"""What a compile produces (an Artifact), the options that produced it, and the compiler version.

The kernel key of IR input is defined here (ir_kernel_key), that of source in frontend/reader.py.
The artifact key hashes (kernel key, specialisation, config, target, compiler version); the compiler
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
class CompileOptions:
    """Everything besides the kernel and its specialisation that changes the binary."""

    target: str = "cpu"
    num_warps: int = 4
    num_stages: int = 3
    opt_level: int = 3
    debug: bool = False

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


def artifact_key(kernel_key: str, specialization: dict[str, Any], config: dict[str, Any], target: str, version: str) -> str:
    blob = json.dumps(
        {"kernel": kernel_key, "spec": specialization, "config": config, "target": target, "version": version},
        sort_keys=True,
        default=str,
    )
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
