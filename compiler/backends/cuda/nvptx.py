"""LLVM IR -> PTX (llvmlite's NVPTX target) -> cubin (the ptxas binary when one is found, else nvJitLink).

libdevice is linked only when the kernel calls one of its functions. The cubin's resource usage
(registers, spills, stack, shared memory) is read back from the assembler's verbose log.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
from functools import cache
from glob import glob
from pathlib import Path

import llvmlite.binding as llvm

from ...errors import ToolError

PTX_FEATURES = "+ptx80"  # PTX ISA 8.0: accepted by nvJitLink/ptxas 12.x and 13.x for sm_70..sm_90


@cache
def _init() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def arch_name(sm: int | str) -> str:
    """'sm_90' for 90; an arch name ('sm_90a') as it is."""
    return sm if isinstance(sm, str) else f"sm_{sm}"


@cache
def target_machine(sm: int | str, opt: int):
    _init()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return target.create_target_machine(cpu=arch_name(sm), features=PTX_FEATURES, opt=min(opt, 3))


@cache
def _nvcc_wheel_dir() -> str | None:
    """Where the nvidia-cuda-nvcc wheel (the cuda extra) put ptxas and libdevice, if it is installed."""
    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return locs[0] if locs else None


def libdevice_path() -> str | None:
    env = os.environ.get("TILEC_LIBDEVICE")
    cands = [env] if env else []
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "nvvm/libdevice/libdevice.10.bc"))
    cands += sorted(glob("/usr/local/cuda*/nvvm/libdevice/libdevice.10.bc"), reverse=True)
    wheel = _nvcc_wheel_dir()
    if wheel:
        cands.append(os.path.join(wheel, "nvvm/libdevice/libdevice.10.bc"))
    try:
        spec = importlib.util.find_spec("triton")
        if spec and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                cands.append(os.path.join(loc, "backends/nvidia/lib/libdevice.10.bc"))
    except (ImportError, ValueError):
        pass
    for c in cands:
        if c and os.path.isfile(c):
            return c
    return None


@cache
def _libdevice_bitcode() -> bytes:
    path = libdevice_path()
    if path is None:
        raise ToolError("libdevice", "libdevice.10.bc not found (set TILEC_LIBDEVICE or CUDA_HOME)")
    return Path(path).read_bytes()


def optimise(llir: str, kernel: str, sm: int | str, opt: int) -> llvm.ModuleRef:
    tm = target_machine(sm, opt)
    mod = llvm.parse_assembly(llir)
    mod.triple = "nvptx64-nvidia-cuda"
    mod.data_layout = str(tm.target_data)
    if "__nv_" in llir:
        lib = llvm.parse_bitcode(_libdevice_bitcode())
        lib.triple = mod.triple
        lib.data_layout = mod.data_layout
        mod.link_in(lib)
        for f in mod.functions:
            if f.name != kernel and not f.is_declaration:
                f.linkage = llvm.Linkage.internal
    mod.verify()
    if opt > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=min(opt, 3))
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


# LLVM's instruction scheduler before register allocation: NVPTX's own choice keeps each block in source order
# ("default"); "registers" is LLVM's bottom-up register-reduction list scheduler (list-burr), which puts each
# value's computation next to its use. The choice is an LLVM command-line option, global to the process: emits
# take a lock, and one that asks for another scheduler sets it back before the lock is let go.
SCHEDULERS = {"default": "default", "registers": "list-burr"}
_EMIT_LOCK = threading.Lock()


def emit_ptx(mod: llvm.ModuleRef, sm: int | str, opt: int, scheduler: str = "default") -> str:
    with _EMIT_LOCK:
        if scheduler == "default":
            return target_machine(sm, opt).emit_assembly(mod)
        llvm.set_option("", f"-pre-RA-sched={SCHEDULERS[scheduler]}")
        try:
            return target_machine(sm, opt).emit_assembly(mod)
        finally:
            llvm.set_option("", "-pre-RA-sched=default")


def emit_ptx_again(llir_optimised: str, sm: int | str, opt: int, scheduler: str) -> str:
    """PTX of an already optimised module (its text, as the ptx stage keeps it) under another scheduler."""
    _init()
    return emit_ptx(llvm.parse_assembly(llir_optimised), sm, opt, scheduler)


# ---- cubin -------------------------------------------------------------------------------------


def assembler() -> tuple[str, str | None]:
    """("ptxas", path) or ("nvjitlink", None): TILEC_ASSEMBLER=ptxas|nvjitlink picks, else ptxas when found.

    ptxas first because it is the cheaper cold start: a fresh process runs it in ~45 ms, while nvJitLink
    13's first handle alone takes ~200 ms (cuda.bindings import and library initialisation).
    """
    want = os.environ.get("TILEC_ASSEMBLER", "")
    exe = None if want == "nvjitlink" else ptxas_path()
    return ("ptxas", exe) if exe is not None else ("nvjitlink", None)


@cache
def ptxas_path() -> str | None:
    cands = [shutil.which("ptxas")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", "ptxas"))
    wheel = _nvcc_wheel_dir()
    if wheel:
        cands.append(os.path.join(wheel, "bin", "ptxas"))
    return next((c for c in cands if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


@cache
def assembler_version() -> str:
    """What assembles cubins here, with its version (part of the compiler version)."""
    _, exe = assembler()
    if exe is not None:
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        return "ptxas=" + (out.strip().splitlines() or ["unknown"])[-1]
    try:
        from cuda.bindings import nvjitlink  # type: ignore[import-not-found]

        return "nvjitlink=" + ".".join(map(str, nvjitlink.version()))
    except Exception:  # noqa: BLE001 - any failure means "no nvJitLink here"
        return "nvjitlink=none"


def ptx_to_cubin(ptx: str, sm: int | str, opt: int = 3) -> tuple[bytes, str]:
    """(cubin, verbose log) through the assembler() of this machine; a ptxas that fails (too old for the
    PTX or the sm, say) hands over to nvJitLink where that loads."""
    _, exe = assembler()
    if exe is not None:
        try:
            return _ptxas(ptx, sm, opt, exe)
        except ToolError:
            out = _nvjitlink(ptx, sm, opt)
            if out is None:
                raise
            return out
    out = _nvjitlink(ptx, sm, opt)
    return out if out is not None else _ptxas(ptx, sm, opt)


def _nvjitlink(ptx: str, sm: int | str, opt: int) -> tuple[bytes, str] | None:
    """(cubin, verbose log) through nvJitLink; None when nvJitLink cannot be loaded."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return None
    data = ptx.encode()
    try:
        h = nvjitlink.create(3, [f"-arch={arch_name(sm)}", f"-O{min(opt, 3)}", "-verbose"])
    except Exception:  # noqa: BLE001 - the library itself failed to load
        return None
    try:
        nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(h)
        buf = bytearray(nvjitlink.get_linked_cubin_size(h))
        nvjitlink.get_linked_cubin(h, buf)
        return bytes(buf), _log(nvjitlink, h, "info")
    except nvjitlink.nvJitLinkError as exc:
        raise ToolError("nvJitLink", _log(nvjitlink, h, "error") or str(exc), repro=f"ptxas -arch={arch_name(sm)} -v kernel.ptx") from None
    finally:
        nvjitlink.destroy(h)


def _log(nvjitlink, h, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(h)
    if not size:
        return ""
    buf = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(h, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def _ptxas(ptx: str, sm: int | str, opt: int, exe: str | None = None) -> tuple[bytes, str]:
    exe = exe or ptxas_path()
    if exe is None:
        raise ToolError("ptxas", "neither nvJitLink (cuda-python) nor ptxas is available to assemble PTX")
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
        Path(src).write_text(ptx)
        cmd = [exe, f"-arch={arch_name(sm)}", f"-O{min(opt, 3)}", "-v", src, "-o", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise ToolError("ptxas", proc.stderr, repro=" ".join(cmd))
        return Path(out).read_bytes(), proc.stderr + proc.stdout


_RE = {
    "registers": re.compile(r"[Uu]sed (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame|(\d+) stack"),
    "static_smem_bytes": re.compile(r"(\d+) bytes smem"),
    "local_bytes": re.compile(r"(\d+) bytes lmem"),
}


def resource_usage(log: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, rx in _RE.items():
        m = rx.search(log)
        if m:
            out[key] = int(next(g for g in m.groups() if g is not None))
    return out
