"""Layout algebra of `reshape` for the cuda target: the layout in which a reshape moves no data.

A reshape keeps the row-major order of the elements. With power-of-two shapes each basis of a layout
(one power-of-two component) is a power of two in the flat index, so it is a single power-of-two
component of the new shape too: re-expressing every basis gives a layout of the result that holds, in
each register of each thread, exactly the element the source layout held there.
"""

from __future__ import annotations

from dataclasses import replace

from .layouts import Basis, Layout


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def flat_index(coord: tuple[int, ...], shape: tuple[int, ...]) -> int:
    return sum(c * s for c, s in zip(coord, row_major_strides(shape), strict=True))


def unflat_index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple((flat // s) % n for s, n in zip(row_major_strides(shape), shape, strict=True))


def _move(basis: Basis, src: tuple[int, ...], dst: tuple[int, ...]) -> Basis | None:
    """The basis re-expressed in `dst`; None where it is not one power-of-two component."""
    nonzero = [(d, x) for d, x in enumerate(basis) if x]
    if not nonzero:
        return (0,) * len(dst)
    if len(nonzero) != 1:
        return None
    d, x = nonzero[0]
    if x & (x - 1) or x >= src[d]:
        return None
    return unflat_index(flat_index(tuple(x if i == d else 0 for i in range(len(src))), src), dst)


def reshape_layout(lay: Layout, shape: tuple[int, ...]) -> Layout | None:
    """The layout of reshape(x, shape) that keeps x's registers in place when x is in `lay`, or None
    where `lay` has a basis this algebra cannot carry (the caller then goes through a blocked layout)."""
    shape = tuple(shape)
    moved: list[tuple[Basis, ...]] = []
    for bases in (lay.reg, lay.lane, lay.warp):
        out = tuple(_move(b, lay.shape, shape) for b in bases)
        if any(b is None for b in out):
            return None
        moved.append(out)  # type: ignore[arg-type]
    reg, lane, warp = moved
    return replace(lay, shape=shape, reg=reg, lane=lane, warp=warp)
