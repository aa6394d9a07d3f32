"""Machine-independent passes over the tile IR and the pass manager that runs them by name.

PASSES maps each pass name to its class (one pass = one file = one frozen dataclass).
"""

from .axis_analysis import AxisInfoPass
from .canonicalize import CanonicalizePass
from .cse import CSEPass
from .dce import DCEPass
from .inline import InlinePass
from .licm import LICMPass
from .manager import PIPELINES, PassManager, make_pass, pipeline
from .mask_simplify import MaskSimplifyPass

PASSES: dict[str, type] = {
    "inline": InlinePass,
    "canonicalize": CanonicalizePass,
    "cse": CSEPass,
    "dce": DCEPass,
    "licm": LICMPass,
    "mask-simplify": MaskSimplifyPass,
    "axis-info": AxisInfoPass,
}

__all__ = ["PASSES", "PIPELINES", "PassManager", "make_pass", "pipeline"]
