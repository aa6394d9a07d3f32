"""The launch grid: a tuple of program counts (or a callable over the launch's meta-parameters),
checked once here for every runtime."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import GridError


def check_grid(grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    """A grid tuple (or callable(meta) -> tuple) as three program counts. An axis of 0 is a launch of no
    programs, which launches nothing (as in Triton); a negative one is an error."""
    g = grid(meta) if callable(grid) else grid
    if isinstance(g, int | np.integer):
        g = (g,)
    if not isinstance(g, tuple | list) or not 1 <= len(g) <= 3:
        raise GridError(f"grid must be a tuple of 1 to 3 ints (or a callable returning one), got {g!r}")
    out = []
    for axis, n in enumerate(g):
        if not isinstance(n, int | np.integer) or isinstance(n, bool):
            raise GridError(f"grid axis {axis} is {n!r}, not an int")
        if n < 0:
            raise GridError(f"grid axis {axis} has size {n}; an axis is 0 (launch nothing) or more")
        out.append(int(n))
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]
