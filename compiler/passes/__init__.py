"""Machine-independent passes over the tile IR and the pass manager that runs them by name.

PASSES (registry.py) maps each pass name to its class (one pass = one file = one frozen dataclass);
the machine-dependent passes live with their backend (compiler/backends/<kind>/passes/).
"""

from .manager import PassManager, make_pass
from .registry import PASSES, PIPELINES, pipeline

__all__ = ["PASSES", "PIPELINES", "PassManager", "make_pass", "pipeline"]
