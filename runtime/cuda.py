"""The cuda runtime: loads cubins (cuModuleLoadData) and launches them (cuLaunchKernelEx), through the
ctypes driver calls of runtime/libcuda.py.

A loaded module is cached per (artifact, context); each launch writes the arguments into prebuilt
ctypes slots (no allocation) and launches on the arguments' current stream (torch's when torch
tensors are passed). Arguments: torch/CuPy arrays (__cuda_array_interface__ or DLPack) or raw ints.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilec.compiler.artifact import Artifact, parse_target

from . import libcuda as _libcuda
from .errors import ArchMismatchError, ArgumentError, LaunchError, TargetError
from .grid import check_grid

_CTYPES = {
    "ptr": ctypes.c_uint64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
    "tmap": lambda b: (ctypes.c_uint8 * 128).from_buffer_copy(b),  # a CUtensorMap by value (runtime/tma.py)
}  # fmt: skip
_TORCH_DTYPES = {
    "torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float64": "fp64",
    "torch.int32": "i32", "torch.int64": "i64", "torch.int16": "i16", "torch.int8": "i8", "torch.uint8": "u8",
    "torch.bool": "i1", "torch.uint16": "u16", "torch.uint32": "u32", "torch.uint64": "u64",
    "torch.float8_e4m3fn": "fp8e4nv", "torch.float8_e5m2": "fp8e5",  # as Triton names them
}  # fmt: skip
_NP_DTYPES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "float16": "fp16", "float32": "fp32", "float64": "fp64",
}  # fmt: skip
_lock = threading.Lock()
_modules: dict[tuple[str, int], CudaKernel] = {}
_sm_of_device: dict[int, int] = {}
_arch_of_device: dict[int, DeviceArch] = {}
_initialised = False


def _driver():
    """cuda-python's driver module, for the benchmark (events, allocations, graphs); loading and
    launching go through runtime/libcuda.py, which imports in a fraction of the time."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - cuda-python is a dependency of the cuda extra
        raise TargetError("the cuda runtime needs cuda-python (pip install 'tilec[cuda]')") from exc
    return driver


def check(result) -> Any:
    """Unpack a cuda-python result tuple, raising LaunchError on an error code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        driver = _driver()
        _, name = driver.cuGetErrorName(err)
        raise LaunchError(f"CUDA driver error {int(err)} ({name.decode() if name else '?'})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def _init() -> None:
    global _initialised
    if not _initialised:
        _libcuda.driver().call("cuInit", 0)
        _initialised = True


def _context(device: int) -> int:
    """The current context, or the device's primary context made current (no torch/CuPy present)."""
    d = _libcuda.driver()
    _init()
    ctx = _libcuda.out_ptr(d, "cuCtxGetCurrent")
    if ctx != 0:
        return ctx
    dev = _libcuda.out_int(d, "cuDeviceGet", device)
    ctx = _libcuda.out_ptr(d, "cuDevicePrimaryCtxRetain", dev)
    d.call("cuCtxSetCurrent", ctx)
    return ctx


def synchronize() -> None:
    """Wait for all work of the current context (autotune trials time whole runs, not launches)."""
    _libcuda.driver().call("cuCtxSynchronize")


def device_sm(device: int) -> int:
    sm = _sm_of_device.get(device)
    if sm is None:
        d = _libcuda.driver()
        _init()
        dev = _libcuda.out_int(d, "cuDeviceGet", device)
        major = _libcuda.out_int(
            d, "cuDeviceGetAttribute", _libcuda.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
        )
        minor = _libcuda.out_int(
            d, "cuDeviceGetAttribute", _libcuda.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
        )
        sm = 10 * major + minor
        _sm_of_device[device] = sm
    return sm


# ---- arch and driver: checked before a module is loaded -------------------------------------------

# cuModuleLoadData's refusals of a binary that is not for this GPU or this driver: each becomes an
# ArchMismatchError with this reason, never a raw CUDA error, so a caller can rebuild for the device
LOAD_REFUSALS = {
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the driver found no code for this GPU in it",
    "CUDA_ERROR_INVALID_IMAGE": "the driver cannot read it (built for another arch, or by a newer toolkit)",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "its PTX is newer than this driver supports",
    "CUDA_ERROR_INVALID_PTX": "the driver's PTX compiler refused it (another arch, or a newer PTX ISA)",
}


@dataclass(frozen=True)
class DeviceArch:
    """What the arch check needs to know of a GPU: its ordinal, name, sm and cuDriverGetVersion."""

    ordinal: int
    name: str
    sm: int
    driver_version: int  # as cuDriverGetVersion gives it: 12080 is CUDA 12.8

    @property
    def target(self) -> str:
        return f"cuda:sm_{self.sm}"

    def mismatch(self, artifact_target: str, reason: str) -> ArchMismatchError:
        version = f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}"
        return ArchMismatchError(artifact_target=artifact_target, device_target=self.target, device_name=self.name,
                                 driver_version=version, reason=reason, device=self.ordinal)  # fmt: skip


def runs_on(artifact_sm: int, device_sm: int) -> bool:
    """Whether a cubin for sm_XY runs on an sm_XZ GPU: SASS runs on its own arch and the later minor
    versions of the same major only (sm_80 runs on sm_86; never on sm_90, and sm_86 not on sm_80)."""
    return artifact_sm // 10 == device_sm // 10 and artifact_sm % 10 <= device_sm % 10


def arch_mismatch(artifact_target: str, device: DeviceArch) -> ArchMismatchError | None:
    """The error for loading a binary built for `artifact_target` on `device`, or None when it runs there."""
    try:
        kind, sm = parse_target(artifact_target)
    except ValueError:
        kind, sm = "", None
    if kind != "cuda" or sm is None:
        return device.mismatch(artifact_target, "it is not a cuda target")
    if runs_on(sm, device.sm):
        return None
    if sm // 10 != device.sm // 10:
        return device.mismatch(artifact_target, f"a cubin for sm_{sm} does not run on another major arch")
    return device.mismatch(
        artifact_target, f"a cubin for sm_{sm} runs on sm_{sm} and later minor versions only"
    )


def load_refusal(error_name: str, artifact_target: str, device: DeviceArch) -> ArchMismatchError | None:
    """The ArchMismatchError that a cuModuleLoadData error (by its CUresult name) stands for, or None when
    the error means something else (out of memory, a dead context: a LaunchError as before)."""
    reason = LOAD_REFUSALS.get(error_name)
    return None if reason is None else device.mismatch(artifact_target, f"{reason} ({error_name})")


def device_arch(device: int) -> DeviceArch:
    """The arch check's view of a GPU, asked of the driver once per device."""
    arch = _arch_of_device.get(device)
    if arch is None:
        d = _libcuda.driver()
        _init()
        dev = _libcuda.out_int(d, "cuDeviceGet", device)
        raw = ctypes.create_string_buffer(256)
        name = (
            raw.value.decode(errors="replace") if d.cuDeviceGetName(raw, 256, dev) == 0 else "an unnamed GPU"
        )
        arch = DeviceArch(device, name, device_sm(device), _libcuda.out_int(d, "cuDriverGetVersion"))
        _arch_of_device[device] = arch
    return arch


def _load_module(binary: bytes, artifact_target: str, device: DeviceArch) -> int:
    """cuModuleLoadData, its arch and driver refusals translated into ArchMismatchError."""
    d = _libcuda.driver()
    module = ctypes.c_void_p()
    rc = d.cuModuleLoadData(ctypes.byref(module), binary)
    if rc == 0:
        return module.value or 0
    name = d.error_name(rc)
    refused = load_refusal(name, artifact_target, device)
    if refused is not None:
        raise refused
    raise LaunchError(f"CUDA driver error {rc} ({name}) in cuModuleLoadData")


# ---- arguments -----------------------------------------------------------------------------------


def is_torch_cuda(v: Any) -> bool:
    return type(v).__module__.startswith("torch") and getattr(v, "is_cuda", False)


def is_cuda_array(v: Any) -> bool:
    if type(v).__module__.startswith("torch"):
        return bool(getattr(v, "is_cuda", False))
    return hasattr(v, "__cuda_array_interface__") or (is_duck_tensor(v) and _duck_device(v) is not None)


def is_duck_tensor(v: Any) -> bool:
    """An object Triton takes as a tensor: `data_ptr()` and `dtype` (Triton's TensorWrapper, a library's
    strided buffer), not a torch tensor or a CUDA array interface."""
    return (callable(getattr(v, "data_ptr", None)) and hasattr(v, "dtype")
            and not type(v).__module__.startswith("torch") and not hasattr(v, "__cuda_array_interface__"))  # fmt: skip


def _duck_device(v: Any) -> int | None:
    """The CUDA device ordinal of a duck-typed tensor (None: not on a CUDA device)."""
    dev = getattr(v, "device", None)
    if getattr(dev, "type", None) == "cuda" or str(dev).startswith("cuda") or getattr(v, "is_cuda", False):
        return getattr(dev, "index", None) or 0
    if dev is None and not hasattr(v, "is_cuda"):
        # a bare typed pointer (data_ptr() and dtype, no device: FlagGems' TypedPtr). Triton takes it as an
        # address on the current device; so does tilec where torch has a CUDA device
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.current_device())
    return None


def _duck_type(dtype: Any) -> str | None:
    """A duck tensor's dtype (torch's, or Triton's: tl.float16.name == 'fp16') as a Triton type."""
    t = _TORCH_DTYPES.get(str(dtype))
    if t is not None:
        return t
    name = getattr(dtype, "name", str(dtype))
    if name.startswith(("fp", "bf")):
        return name
    for long, short in (("uint", "u"), ("int", "i")):
        if name.startswith(long) and name[len(long):].isdigit():
            return short + name[len(long):]
    return None


def array_info(name: str, v: Any) -> tuple[int, str, int]:
    """(device pointer, Triton pointer type, device ordinal) of a CUDA array. As in Triton, a view of any
    strides passes the address of its first element: the kernel indexes it with the strides it is given."""
    if type(v).__module__.startswith("torch"):
        t = _TORCH_DTYPES.get(str(v.dtype))
        if t is None:
            raise ArgumentError(f"argument '{name}': unsupported tensor dtype {v.dtype}")
        return v.data_ptr(), "*" + t, v.device.index or 0
    if is_duck_tensor(v):
        t = _duck_type(v.dtype)
        if t is None:
            raise ArgumentError(f"argument '{name}': unsupported tensor dtype {v.dtype}")
        return int(v.data_ptr()), "*" + t, _duck_device(v) or 0
    cai = v.__cuda_array_interface__
    dt = np.dtype(cai["typestr"])
    t = _NP_DTYPES.get(dt.name)
    if t is None:
        raise ArgumentError(f"argument '{name}': unsupported array dtype {dt}")
    dev = getattr(getattr(v, "device", None), "id", 0) or 0
    return int(cai["data"][0]), "*" + t, int(dev)


def specialise_cuda(name: str, v: Any) -> tuple[str, tuple]:
    ptr, t, _ = array_info(name, v)
    return t, ((("divisibility", 16),) if ptr % 16 == 0 else ())


def cuda_target(args: list[Any]) -> str:
    """'cuda:sm_XX' of the device the CUDA arrays among `args` live on (all on one device)."""
    devs = {array_info("?", a)[2] for a in args if is_cuda_array(a)}
    if len(devs) > 1:
        raise TargetError(
            f"the CUDA arrays live on several devices {sorted(devs)}; pass arrays of one device"
        )
    return f"cuda:sm_{device_sm(devs.pop() if devs else 0)}"


def raw_cuda_arg(v: Any) -> Any:
    if type(v).__module__.startswith("torch"):
        return v.data_ptr() if getattr(v, "is_cuda", False) else v.item()
    if hasattr(v, "__cuda_array_interface__"):
        return int(v.__cuda_array_interface__["data"][0])
    if is_duck_tensor(v):
        return int(v.data_ptr())
    if isinstance(v, np.generic):
        return v.item()
    return v


def current_stream(args: list[Any], device: int) -> int:
    """torch's current stream of `device` where an argument is a torch CUDA tensor or a duck-typed tensor on a
    CUDA device (as Triton launches), else the default stream."""
    for a in args:
        torch_cuda = type(a).__module__.startswith("torch") and getattr(a, "is_cuda", False)
        if torch_cuda or (is_duck_tensor(a) and "torch" in sys.modules and _duck_device(a) is not None):
            import torch

            getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            return int(getter(device)) if getter else int(torch.cuda.current_stream(device).cuda_stream)
    return 0


# ---- kernels -------------------------------------------------------------------------------------

_STRUCT = {"ptr": "Q", "i32": "i", "u32": "I", "i64": "q", "u64": "Q", "f32": "f", "f64": "d", "tmap": "128s"}


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig of cuda.h (CUDA 12+): the argument of cuLaunchKernelEx."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]  # fmt: skip


class Launcher:
    """The per-launch work of one kernel, all of it prepared once: arguments go into one preallocated
    buffer with a single struct.pack_into, grid and stream into a CUlaunchConfig only when they
    change, and cuLaunchKernelEx is called through ctypes with four prebuilt pointer arguments."""

    def __init__(self, func_addr: int, threads: int, shared: int, kinds: list[str], launch_ex) -> None:
        fmt, offsets, size = "=", [], 0
        for k in kinds:
            width = struct.calcsize("=" + _STRUCT[k])
            pad = -size % width
            fmt += "x" * pad + _STRUCT[k]
            offsets.append(size + pad)
            size += pad + width
        self.nargs = len(kinds)
        self.pack = struct.Struct(fmt).pack_into
        self.buf = (ctypes.c_uint64 * max(1, (size + 7) // 8))()
        base = ctypes.addressof(self.buf)
        self.params = (ctypes.c_void_p * max(1, len(kinds)))(*[base + o for o in offsets])
        self.config = _LaunchConfig(1, 1, 1, threads, 1, 1, shared, None, None, 0)
        self.grid: tuple | None = None
        self.stream: int | None = None
        self.fn = launch_ex
        self.argv = (ctypes.c_void_p(ctypes.addressof(self.config)), ctypes.c_void_p(func_addr),
                     ctypes.c_void_p(ctypes.addressof(self.params)), None)  # fmt: skip

    def __call__(self, raw, grid: tuple, stream: int) -> int:
        """Launch with runtime arguments `raw` (ints/floats, in kernel order); the driver's return code."""
        try:
            self.pack(self.buf, 0, *raw)
        except struct.error as exc:
            raise ArgumentError(
                f"cannot pass these arguments to the kernel ({exc}); expected {self.nargs}"
            ) from None
        if grid != self.grid:
            self.config.gridDimX, self.config.gridDimY, self.config.gridDimZ = check_grid(grid, {})
            self.grid = grid
        if not (self.config.gridDimX and self.config.gridDimY and self.config.gridDimZ):
            return 0  # a grid of no programs launches nothing
        if stream != self.stream:
            self.config.hStream = stream or None
            self.stream = stream
        return self.fn(*self.argv)


class CudaKernel:
    """A cubin loaded into one context, with its prepared launcher."""

    def __init__(self, art: Artifact):
        ptx = art.metadata.get("emit") == "ptx"  # PTX text the driver compiles at load (a driver rebuild)
        if not art.target.startswith("cuda") or not (art.binary.startswith(b"\x7fELF") or ptx):
            raise LaunchError(f"artifact for {art.target!r} is not a cubin")
        d = _libcuda.driver()
        self.name = art.kernel_name
        meta = art.metadata
        self.threads = int(meta["threads_per_block"])
        self.shared = int(meta.get("shared_bytes", 0))
        self.kinds = list(meta["arg_kinds"])
        device = device_arch(_libcuda.out_int(d, "cuCtxGetDevice"))  # the GPU of the current context
        refused = arch_mismatch(art.target, device)
        if refused is not None:
            raise refused
        self.module = _load_module(art.binary, art.target, device)
        self.func = _libcuda.out_ptr(d, "cuModuleGetFunction", self.module, self.name.encode())
        if self.shared > 48 * 1024:
            d.call("cuFuncSetAttribute", self.func, _libcuda.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                   self.shared)  # fmt: skip
        self._driver = d
        self.func_addr = self.func
        ex = _raw_launcher()
        self.fast = (
            Launcher(self.func_addr, self.threads, self.shared, self.kinds, ex) if ex is not None else None
        )

    def launch(self, raw_args: list[Any], grid: tuple[int, int, int], stream: int = 0) -> None:
        if len(raw_args) != len(self.kinds):
            raise ArgumentError(f"{self.name} takes {len(self.kinds)} runtime arguments, got {len(raw_args)}")
        if self.fast is not None:
            rc = self.fast(raw_args, grid, stream)
            if rc:
                self.fail(rc)
            return
        slots = [_CTYPES[k](v) for k, v in zip(self.kinds, raw_args, strict=True)]
        params = (ctypes.c_void_p * max(1, len(slots)))(*[ctypes.addressof(x) for x in slots])
        rc = self._driver.cuLaunchKernel(self.func, grid[0], grid[1], grid[2], self.threads, 1, 1, self.shared,
                                         stream or None, params, None)  # fmt: skip
        if rc:
            self.fail(rc)

    def fail(self, rc: int) -> None:
        raise LaunchError(f"CUDA driver error {rc} ({self._driver.error_name(rc)}) launching {self.name}")


def load(art: Artifact, device: int = 0) -> CudaKernel:
    key = (art.launch_key, _context(device))  # one module per binary, argument layout and context
    k = _modules.get(key)
    if k is None:
        with _lock:
            k = _modules.get(key)
            if k is None:
                k = CudaKernel(art)
                _modules[key] = k
    return k


def launch(art: Artifact, args: list[Any], grid: tuple[int, int, int]) -> None:
    """The cuda entry of runtime/launch.RUNTIMES: args are the kernel's runtime arguments."""
    device = next((array_info("?", a)[2] for a in args if is_cuda_array(a)), 0)
    kernel = load(art, device)
    kernel.launch([raw_cuda_arg(a) for a in args], grid, current_stream(args, device))


# ---- the warm launch path -------------------------------------------------------------------------

_launch_ex = None


def _raw_launcher():
    """cuLaunchKernelEx straight from libcuda through ctypes (no argtypes: its four arguments are
    prebuilt pointer objects), or None where libcuda or the entry point is missing."""
    global _launch_ex
    if _launch_ex is None:
        try:
            fn = _libcuda.driver().lib.cuLaunchKernelEx
            fn.restype = ctypes.c_int
            _launch_ex = fn
        except (TargetError, AttributeError):
            _launch_ex = False
    return _launch_ex or None
