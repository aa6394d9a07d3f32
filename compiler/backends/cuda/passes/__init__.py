"""The cuda target's machine-dependent passes over the tile IR. What they decide (layouts, the mma
plan of each dot, the cp.async rings of pipelined loops) is recorded as `gpu.*` attributes.

PASSES maps each pass name to its class (one pass = one file = one frozen dataclass).
"""

from .gpu_dot_acc import GpuDotAccPass
from .gpu_layout import GpuLayoutPass
from .gpu_pipeline import GpuPipelinePass
from .gpu_prefetch import GpuPrefetchPass

PASSES: dict[str, type] = {
    "gpu-dot-acc": GpuDotAccPass,
    "gpu-layout": GpuLayoutPass,
    "gpu-pipeline": GpuPipelinePass,
    "gpu-prefetch": GpuPrefetchPass,
}

__all__ = ["PASSES", "GpuDotAccPass", "GpuLayoutPass", "GpuPipelinePass", "GpuPrefetchPass"]
