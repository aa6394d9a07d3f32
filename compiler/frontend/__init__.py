"""The Triton-language frontend: reads kernel source with `ast` only (never importing, executing or
evaluating it) and builds tile IR for one specialisation. See reader.py for the kernel key.
"""

from .build import build_ir
from .literal import FoldError, evaluate_heuristic
from .reader import (
    FRONTEND_VERSION,
    AutotuneSpec,
    Budgets,
    ConfigSpec,
    KernelParam,
    KernelSource,
    read_kernel,
)

__all__ = [
    "FRONTEND_VERSION",
    "AutotuneSpec",
    "Budgets",
    "ConfigSpec",
    "FoldError",
    "KernelParam",
    "KernelSource",
    "build_ir",
    "evaluate_heuristic",
    "read_kernel",
]
