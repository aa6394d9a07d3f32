"""The registry of the machine-independent passes: PASSES maps each name to its class (one pass = one
file = one frozen dataclass), PIPELINES names ordered lists of them. The backends keep their own.
"""

from __future__ import annotations

from ..errors import CompileError
from .axis_analysis import AxisInfoPass
from .canonicalize import CanonicalizePass
from .cse import CSEPass
from .dce import DCEPass
from .inline import InlinePass
from .licm import LICMPass
from .mask_simplify import MaskSimplifyPass
from .trans_load import TransLoadPass

PASSES: dict[str, type] = {
    "inline": InlinePass,
    "canonicalize": CanonicalizePass,
    "cse": CSEPass,
    "dce": DCEPass,
    "licm": LICMPass,
    "mask-simplify": MaskSimplifyPass,
    "axis-info": AxisInfoPass,
    "trans-load": TransLoadPass,
}

PIPELINES: dict[str, list[str]] = {
    # inline first so every later pass sees one function; canonicalize before cse so folded constants
    # merge; licm after cse (fewer copies to move); mask-simplify once ranges are exact; canonicalize
    # again to fold what the masks exposed; dce last to drop everything left unused. trans-load after the
    # first cse, when a load's uses are counted once.
    "default": ["inline", "canonicalize", "cse", "trans-load", "licm", "mask-simplify", "canonicalize", "cse",
                "dce"],
}


def pipeline(name: str) -> list[str]:
    if name not in PIPELINES:
        raise CompileError(
            f"unknown pipeline '{name}' (known: {', '.join(sorted(PIPELINES))})", filename="<passes>"
        )
    return list(PIPELINES[name])
