"""The cpu runtime: loads a cpu Artifact's host object into an LLVM JIT (no recompile) and runs its grid.

Programs are split into contiguous chunks run on a thread pool; the grid function is a ctypes call,
which releases the GIL, so chunks run in parallel. Atomics in the kernel are real atomics.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

from tilec.compiler.artifact import Artifact
from tilec.compiler.backends.llvm.types import round_bf16_py

from .errors import KernelAssertionError, LaunchError

_GRID_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.c_int32,
)
_LIBM_SYMBOLS = ("erff", "erf", "tanhf", "tanh", "powf", "pow", "atan2f", "atan2", "expf", "exp", "exp2f", "exp2",
                 "logf", "log", "log2f", "log2", "sinf", "sin", "cosf", "cos", "fmodf", "fmod", "floorf", "floor",
                 "ceilf", "ceil", "sqrtf", "sqrt", "fmaf", "fma")  # fmt: skip
# Half-precision conversions that x86 has no instruction for (f64 -> f16, and f32 <-> f16 without F16C):
# LLVM calls compiler-rt's helpers, which the process may not have loaded; libgcc_s (GCC >= 12) has them.
_LIBGCC_SYMBOLS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2", "__extendhfdf2")
_lock = threading.Lock()
_ready = False
_engines: dict[str, CpuKernel] = {}
_MIN_PROGRAMS_PER_CHUNK = 16


def _init_llvm() -> None:
    """Native target once, and libm's symbols made visible to the JIT's linker."""
    global _ready
    if _ready:
        return
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for name in _LIBM_SYMBOLS:
        fn = getattr(libm, name, None)
        if fn is not None:
            llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    try:
        libgcc = ctypes.CDLL(ctypes.util.find_library("gcc_s") or "libgcc_s.so.1")
    except OSError:
        libgcc = None
    libc = ctypes.CDLL(None)  # tl.device_print (compiler/backends/cpu/printing.py)
    for name in ("printf", "fflush"):
        if not llvm.address_of_symbol(name):
            llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
    for name in _LIBGCC_SYMBOLS:
        fn = getattr(libgcc, name, None) if libgcc is not None else None
        if fn is not None and not llvm.address_of_symbol(name):
            llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    _ready = True


def prepare() -> None:
    """Everything a load will need from the filesystem, loaded now: the native target, libm and libgcc_s, the
    target machine's module and the thread pool. A sandboxed bench (runtime/sandbox.py) calls it before it
    gives up its view of the host's files."""
    with _lock:
        _init_llvm()
    from concurrent.futures import thread  # noqa: F401

    from tilec.compiler.backends.cpu.target import new_target_machine

    new_target_machine()


class CpuKernel:
    """A loaded cpu artifact: its grid function and argument layout."""

    def __init__(self, art: Artifact):
        if art.target != "cpu" or not art.binary:
            raise LaunchError(
                f"artifact for {art.target!r} with {len(art.binary)} bytes of binary is not a cpu object"
            )
        with _lock:
            _init_llvm()
            from tilec.compiler.backends.cpu.target import new_target_machine

            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine())
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(art.binary))
            self._engine.finalize_object()
            addr = self._engine.get_function_address(art.metadata["grid_symbol"])
        if not addr:
            raise LaunchError(f"symbol {art.metadata['grid_symbol']} missing from the cpu object")
        self.grid_fn = _GRID_FN(addr)
        self.args = art.metadata["args"]
        self.asserts = art.metadata.get("asserts", [])
        self.name = art.kernel_name

    def launch(self, args: list, grid: tuple[int, int, int], threads: int | None = None) -> None:
        buf = pack_args(self.args, args)
        g0, g1, g2 = grid
        total = g0 * g1 * g2
        if total == 0:
            return
        addr = ctypes.addressof(buf)
        nthreads = max(1, min(threads or os.cpu_count() or 1, total // _MIN_PROGRAMS_PER_CHUNK or 1))
        if nthreads == 1:
            self._check(self.grid_fn(addr, 0, total, g0, g1, g2))
            return
        bounds = [total * i // nthreads for i in range(nthreads + 1)]
        with ThreadPoolExecutor(nthreads) as pool:
            codes = list(
                pool.map(lambda i: self.grid_fn(addr, bounds[i], bounds[i + 1], g0, g1, g2), range(nthreads))
            )
        for c in codes:
            self._check(c)

    def _check(self, code: int) -> None:
        if code == 0:
            return
        a = (
            self.asserts[code - 1]
            if 0 < code <= len(self.asserts)
            else {"message": f"code {code}", "loc": ""}
        )
        raise KernelAssertionError(f"device assertion failed in {self.name}: {a['message']} ({a['loc']})")


_PACK = {
    "i1": "?", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "f16": "e", "f32": "f", "f64": "d",
}  # fmt: skip


def pack_args(layout: list[dict], args: list) -> ctypes.Array:
    """Arguments in 8-byte slots: addresses for pointers, the value's bytes (little-endian) for scalars."""
    raw = bytearray(8 * max(1, len(layout)))
    for i, (spec, value) in enumerate(zip(layout, args, strict=False)):
        if spec["kind"] == "ptr":
            struct.pack_into("<Q", raw, 8 * i, int(value))
        elif spec["dtype"] == "bf16":
            struct.pack_into("<f", raw, 8 * i, round_bf16_py(float(value)))  # the upper 16 bits are the bf16
            raw[8 * i : 8 * i + 2] = raw[8 * i + 2 : 8 * i + 4]
        else:
            struct.pack_into("<" + _PACK[spec["dtype"]], raw, 8 * i, value)
    return (ctypes.c_uint8 * len(raw)).from_buffer(raw)


def load(art: Artifact) -> CpuKernel:
    """The loaded kernel for an artifact, loaded once per binary and argument layout (Artifact.launch_key)."""
    key = art.launch_key
    k = _engines.get(key)
    if k is None:
        k = CpuKernel(art)
        _engines[key] = k
    return k
