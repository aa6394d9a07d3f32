"""The dozen CUDA driver calls of the load-and-launch path, made through ctypes on libcuda.so.1.

cuda-python's `cuda.bindings.driver` costs tens of milliseconds to import; a first launch from the local
cache needs only these entry points, each with its C signature declared here. The tuner's benchmark
(events, allocations, graphs) still uses cuda-python. Every call returns the CUresult; `call` raises
LaunchError naming the function and the driver's error name.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_uint, c_void_p

from .errors import LaunchError, TargetError

# enum values of cuda.h used here
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_SIGNATURES = {
    "cuInit": [c_uint],
    "cuDriverGetVersion": [POINTER(c_int)],
    "cuGetErrorName": [c_int, POINTER(c_char_p)],
    "cuDeviceGet": [POINTER(c_int), c_int],
    "cuDeviceGetAttribute": [POINTER(c_int), c_int, c_int],
    "cuDeviceGetName": [c_char_p, c_int, c_int],
    "cuDevicePrimaryCtxRetain": [POINTER(c_void_p), c_int],
    "cuCtxGetCurrent": [POINTER(c_void_p)],
    "cuCtxSetCurrent": [c_void_p],
    "cuCtxGetDevice": [POINTER(c_int)],
    "cuCtxSynchronize": [],
    "cuModuleLoadData": [POINTER(c_void_p), c_char_p],
    "cuModuleGetFunction": [POINTER(c_void_p), c_void_p, c_char_p],
    "cuFuncSetAttribute": [c_void_p, c_int, c_int],
    "cuTensorMapEncodeTiled": [
        c_void_p, c_int, c_uint, c_void_p, POINTER(ctypes.c_uint64), POINTER(ctypes.c_uint64), POINTER(c_uint),
        POINTER(c_uint), c_int, c_int, c_int, c_int,
    ],  # fmt: skip
    "cuLaunchKernel": [
        c_void_p,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_void_p,
        c_void_p,
        c_void_p,
    ],  # fmt: skip
}


class Driver:
    """libcuda's entry points, typed; attribute access gives the ctypes function."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = c_int
            setattr(self, name, fn)

    def error_name(self, rc: int) -> str:
        name = c_char_p()
        if self.cuGetErrorName(rc, ctypes.byref(name)) != 0 or not name.value:
            return f"CUresult {rc}"
        return name.value.decode()

    def call(self, name: str, *args) -> None:
        """`name(*args)`, raising LaunchError on an error code."""
        rc = getattr(self, name)(*args)
        if rc != 0:
            raise LaunchError(f"CUDA driver error {rc} ({self.error_name(rc)}) in {name}")


_driver: Driver | None = None


def driver() -> Driver:
    """The process's Driver, libcuda loaded on first use; TargetError where there is no libcuda."""
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise TargetError(f"the cuda runtime needs the NVIDIA driver's libcuda.so.1 ({exc})") from exc
        _driver = Driver(lib)
    return _driver


def out_int(d: Driver, name: str, *args) -> int:
    """A call whose first argument is an int out-parameter, its value."""
    v = c_int()
    d.call(name, ctypes.byref(v), *args)
    return v.value


def out_ptr(d: Driver, name: str, *args) -> int:
    """A call whose first argument is a handle out-parameter (context, module, function), its value."""
    v = c_void_p()
    d.call(name, ctypes.byref(v), *args)
    return v.value or 0
