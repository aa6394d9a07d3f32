"""The tilec client: `client.jit` for launching Triton-language kernels locally (NumPy arrays run on
the cpu target), and the errors it raises. Everything public is re-exported here from private modules.
"""

from ._exceptions import ArgumentError, GridError, KernelAssertionError, LaunchError, TargetError, TilecError
from ._jit import JITKernel, jit
from ._launch import BF16Array, as_bf16

__all__ = [
    "ArgumentError",
    "BF16Array",
    "GridError",
    "JITKernel",
    "KernelAssertionError",
    "LaunchError",
    "TargetError",
    "TilecError",
    "as_bf16",
    "jit",
]
