"""The cuda target (cuda:sm_XX): tir -> gpu-tir (its passes record layouts and plans in the IR) -> llir
(NVVM) -> ptx -> cubin. `PASSES` are its machine-dependent passes; `stages()` imports the lowering."""

from __future__ import annotations

from .passes import PASSES


def stages() -> list:
    """The cuda stage list: tir -> gpu-tir -> llir -> ptx -> cubin."""
    from .target import STAGES

    return list(STAGES)


__all__ = ["PASSES", "stages"]
