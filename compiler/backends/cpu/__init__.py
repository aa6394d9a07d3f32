"""The cpu target: tir -> llir (a grid function over the kernel) -> object, JIT-run on the host.

It has no machine-dependent passes yet; `stages()` imports the lowering (llvmlite) on first use.
"""

from __future__ import annotations

PASSES: dict[str, type] = {}


def stages() -> list:
    """The cpu stage list: tir -> llir -> object."""
    from .target import STAGES

    return list(STAGES)
