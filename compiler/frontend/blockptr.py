"""Block pointers (tl.make_block_ptr, tl.advance) and tensor descriptors (tl.make_tensor_descriptor) as
frontend aggregates of a base pointer and runtime shape/stride/offset scalars. A load or store through one
becomes ordinary pointer tiles `base + sum_i (off_i + arange_i) * stride_i` with a boundary mask. A load
through a block pointer (unless NaN-padded) also marks its box with `desc_box`, carrying the offsets and the
block pointer's base, shape and strides, an identity everywhere, which the cuda target's TMA reads
(backends/cuda/tma.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..ir.types import PointerType, ScalarType, i32
from .library import LIB, _load, _store, cx_int, shape_arg
from .semantic import Aggregate, Semantic, Tensor, describe, is_number

i64 = ScalarType("i64")
PADDINGS = {"": None, None: None, "zero": 0, "nan": float("nan")}
MAX_BOX_RANK = 5  # the most dimensions a TMA tensor map has


@dataclass(frozen=True, eq=False)
class BlockPtr(Aggregate):
    """tl.make_block_ptr's value: the block at `offsets` of a `shape` tensor laid out with `strides`."""

    base: Tensor
    shape: tuple[Any, ...]
    strides: tuple[Any, ...]
    offsets: tuple[Any, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]

    def leaves(self) -> list[Any]:
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def with_leaves(self, leaves: list[Any]) -> BlockPtr:
        r = len(self.block_shape)
        return BlockPtr(leaves[0], tuple(leaves[1:1 + r]), tuple(leaves[1 + r:1 + 2 * r]),
                        tuple(leaves[1 + 2 * r:]), self.block_shape, self.order)

    def static_key(self) -> tuple:
        return ("block_ptr", str(self.base.type), self.block_shape, self.order)

    def describe(self) -> str:
        return f"block pointer to a {list(self.block_shape)} block of {self.base.dtype.element_ty}"


@dataclass(frozen=True, eq=False)
class TensorDescriptor(Aggregate):
    """tl.make_tensor_descriptor's value: desc.load([o0, o1]) / desc.store([o0, o1], v) read and write
    `block_shape` blocks, zero-padded (or NaN-padded) past the edges, the way TMA does."""

    base: Tensor
    shape: tuple[Any, ...]
    strides: tuple[Any, ...]
    block_shape: tuple[int, ...]
    padding: str
    host: str = ""  # a host descriptor's base parameter (hostdesc.py): its loads mark their box (desc_box)

    def leaves(self) -> list[Any]:
        return [self.base, *self.shape, *self.strides]

    def with_leaves(self, leaves: list[Any]) -> TensorDescriptor:
        r = len(self.block_shape)
        return TensorDescriptor(leaves[0], tuple(leaves[1:1 + r]), tuple(leaves[1 + r:]), self.block_shape,
                                self.padding, self.host)

    def static_key(self) -> tuple:
        return ("descriptor", str(self.base.type), self.block_shape, self.padding, self.host)

    def describe(self) -> str:
        return f"tensor descriptor of {list(self.block_shape)} blocks of {self.base.dtype.element_ty}"

    def at(self, offsets: tuple[Any, ...]) -> BlockPtr:
        order = tuple(range(len(self.block_shape)))[::-1]
        return BlockPtr(self.base, self.shape, self.strides, offsets, self.block_shape, order)


# ---- building --------------------------------------------------------------------------------------


def _base(sem: Semantic, base: Any, what: str) -> Tensor:
    if isinstance(base, Tensor) and isinstance(base.elem, PointerType) and not base.shape:
        return base
    raise sem.error(f"{what} needs a scalar pointer as its base, got {describe(base)}")


def _scalars(sem: Semantic, xs: Any, rank: int, what: str, elem: ScalarType) -> tuple[Any, ...]:
    """Integer scalars: constants stay Python ints (they fold), runtime values are cast to `elem`."""
    items = tuple(xs) if isinstance(xs, (tuple, list)) else (xs,)
    if len(items) != rank:
        raise sem.error(f"{what} needs {rank} values (one per block dimension), got {len(items)}")
    out = []
    for x in items:
        if isinstance(x, Tensor):
            if x.shape or not (isinstance(x.elem, ScalarType) and x.elem.is_int):
                raise sem.error(f"{what} must be integer scalars, got {describe(x)}")
            out.append(sem.cast(x, elem))
        elif is_number(x) and isinstance(x, int) and not isinstance(x, bool):
            if not -(2**63) <= x < 2**63:
                raise sem.error(f"{what}: {x} does not fit in 64 bits")
            out.append(x)
        else:
            raise sem.error(f"{what} must be integers, got {describe(x)}")
    return tuple(out)


def _rank_of(sem: Semantic, block_shape: Any, what: str) -> tuple[int, ...]:
    if not isinstance(block_shape, (tuple, list)) or not block_shape:
        raise sem.error(f"{what} block_shape must be a non-empty tuple of constexpr powers of two")
    return shape_arg(sem, tuple(block_shape), "block_shape")


def make_block_ptr(sem: Semantic, base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                   order: Any) -> BlockPtr:
    p = _base(sem, base, "tl.make_block_ptr")
    bs = _rank_of(sem, block_shape, "tl.make_block_ptr")
    r = len(bs)
    order_t = tuple(cx_int(sem, o, "order") for o in (order if isinstance(order, (tuple, list)) else (order,)))
    if sorted(order_t) != list(range(r)):
        raise sem.error(f"order {list(order_t)} is not a permutation of {r} dimensions")
    return BlockPtr(p, _scalars(sem, shape, r, "shape", i64), _scalars(sem, strides, r, "strides", i64),
                    _scalars(sem, offsets, r, "offsets", i32), bs, order_t)


def _block_ptr(sem: Semantic, x: Any, what: str) -> BlockPtr:
    if isinstance(x, BlockPtr):
        return x
    raise sem.error(f"{what} needs a block pointer from tl.make_block_ptr, got {describe(x)}")


def _offset_sum(sem: Semantic, a: Any, b: Any) -> Any:
    if is_number(b) and b == 0:
        return a  # unchanged, so a loop does not need to carry it
    s = sem.binop(ast.Add(), a, b)
    return sem.cast(s, i32) if isinstance(s, Tensor) else s


def advance(sem: Semantic, base: Any, offsets: Any) -> BlockPtr:
    bp = _block_ptr(sem, base, "tl.advance")
    delta = _scalars(sem, offsets, len(bp.block_shape), "tl.advance offsets", i32)
    new = tuple(_offset_sum(sem, a, b) for a, b in zip(bp.offsets, delta, strict=True))
    return BlockPtr(bp.base, bp.shape, bp.strides, new, bp.block_shape, bp.order)


def make_tensor_descriptor(sem: Semantic, base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any = "zero") -> TensorDescriptor:
    p = _base(sem, base, "tl.make_tensor_descriptor")
    bs = _rank_of(sem, block_shape, "tl.make_tensor_descriptor")
    if padding_option not in ("zero", "nan"):
        raise sem.error(f"padding_option must be 'zero' or 'nan', got {padding_option!r}")
    r = len(bs)
    return TensorDescriptor(p, _scalars(sem, shape, r, "shape", i64), _scalars(sem, strides, r, "strides", i64),
                            bs, padding_option)


# ---- lowering to pointer tiles ------------------------------------------------------------------------


def _indices(sem: Semantic, bp: BlockPtr) -> list[Tensor]:
    """Per dimension i: off_i + arange(0, B_i), shaped to broadcast along dimension i only."""
    r = len(bp.block_shape)
    out = []
    for i, (n, off) in enumerate(zip(bp.block_shape, bp.offsets, strict=True)):
        idx = Tensor(sem.b.make_range(0, n))
        if not (is_number(off) and off == 0):
            idx = sem.binop(ast.Add(), idx, off)
        for j in range(r):  # new unit axes around dimension i (expand_dims: every backend lowers it)
            if j != i:
                idx = Tensor(sem.b.expand_dims(idx.value, j))
        out.append(idx)
    return out


def _pointers(sem: Semantic, bp: BlockPtr, idx: list[Tensor]) -> Tensor:
    total: Any = None
    for i, stride in zip(idx, bp.strides, strict=True):
        term = i if is_number(stride) and stride == 1 else sem.binop(ast.Mult(), i, stride)
        total = term if total is None else sem.binop(ast.Add(), total, term)
    ptrs = sem.binop(ast.Add(), bp.base, total)
    return sem.broadcast_to(ptrs, bp.block_shape)


def _checked_dims(sem: Semantic, boundary_check: Any, rank: int) -> list[int]:
    dims = boundary_check if isinstance(boundary_check, (tuple, list)) else (
        () if boundary_check is None else (boundary_check,))
    out: list[int] = []
    for d in dims:
        d = cx_int(sem, d, "boundary_check dimension")
        if not 0 <= d < rank or d in out:
            raise sem.error(f"boundary_check dimension {d} is out of range or repeated for a rank-{rank} block")
        out.append(d)
    return out


def _boundary_mask(sem: Semantic, bp: BlockPtr, idx: list[Tensor], dims: list[int]) -> Tensor | None:
    mask: Any = None
    for d in dims:
        inside = sem.logical(True, sem.compare(ast.GtE(), idx[d], 0), sem.compare(ast.Lt(), idx[d], bp.shape[d]))
        mask = inside if mask is None else sem.logical(True, mask, inside)
    return None if mask is None else sem.broadcast_to(mask, bp.block_shape)


def _padding(sem: Semantic, bp: BlockPtr, padding_option: Any) -> Any:
    if padding_option not in PADDINGS:
        raise sem.error(f"padding_option must be 'zero' or 'nan', got {padding_option!r}")
    pad = PADDINGS[padding_option]
    if isinstance(pad, float) and not bp.base.elem.pointee.is_float:
        raise sem.error(f"padding_option 'nan' needs a floating-point block, got {bp.base.dtype.element_ty}")
    return pad


def load_block(sem: Semantic, bp: BlockPtr, boundary_check: Any, padding_option: Any, host: str = "",
               **mem: Any) -> Tensor:
    idx = _indices(sem, bp)
    mask = _boundary_mask(sem, bp, idx, _checked_dims(sem, boundary_check, len(bp.block_shape)))
    pad = _padding(sem, bp, padding_option)
    ptrs = _pointers(sem, bp, idx)
    if host:  # a host descriptor's box: the pointers stay as they are, the box start rides along
        coords = [sem.materialize(o, "a descriptor offset") for o in bp.offsets]
        ptrs = Tensor(sem.b.create("desc_box", [ptrs.value, *(c.value for c in coords)], [ptrs.type],
                                   {"desc": host}).results[0])
    elif len(bp.block_shape) <= MAX_BOX_RANK and not isinstance(pad, float):
        ptrs = _block_box(sem, bp, ptrs)
    return _load(sem, ptrs, mask, pad if mask is not None else None, **mem)


def _block_box(sem: Semantic, bp: BlockPtr, ptrs: Tensor) -> Tensor:
    """A block pointer's box: the pointers unchanged, with the box start and the block pointer's base, shape
    and strides as operands, so that a target that can prove them to be kernel parameters (or constants)
    with a layout TMA takes may copy the box with TMA (backends/cuda/tma.py); elsewhere an identity."""
    coords = [sem.materialize(o, "a block pointer offset").value for o in bp.offsets]
    dims = [sem.to_tensor(x, i64).value for x in (*bp.shape, *bp.strides)]
    return Tensor(sem.b.create("desc_box", [ptrs.value, *coords, bp.base.value, *dims], [ptrs.type]).results[0])


def store_block(sem: Semantic, bp: BlockPtr, value: Any, boundary_check: Any, **mem: Any) -> None:
    v = sem.to_tensor(value, bp.base.elem.pointee) if not isinstance(value, Tensor) else value
    v = sem.broadcast_to(v, bp.block_shape)
    idx = _indices(sem, bp)
    mask = _boundary_mask(sem, bp, idx, _checked_dims(sem, boundary_check, len(bp.block_shape)))
    _store(sem, _pointers(sem, bp, idx), v, mask, **mem)


# ---- tl.load / tl.store that also take block pointers ---------------------------------------------------


def load(sem: Semantic, pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
         padding_option: Any = "", cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False) -> Tensor:
    mem = {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy, "volatile": volatile}
    if isinstance(pointer, TensorDescriptor):
        raise sem.error("load through a tensor descriptor with desc.load([offsets])")
    if not isinstance(pointer, BlockPtr):
        return _load(sem, pointer, mask, other, boundary_check, padding_option, **mem)
    if mask is not None or other is not None:
        raise sem.error("tl.load through a block pointer takes boundary_check/padding_option, not mask/other")
    return load_block(sem, pointer, boundary_check, padding_option, **mem)


def store(sem: Semantic, pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (),
          cache_modifier: Any = "", eviction_policy: Any = "") -> None:
    mem = {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy}
    if not isinstance(pointer, BlockPtr):
        return _store(sem, pointer, value, mask, boundary_check, **mem)
    if mask is not None:
        raise sem.error("tl.store through a block pointer takes boundary_check, not mask")
    return store_block(sem, pointer, value, boundary_check, **mem)


def _desc(sem: Semantic, x: Any, what: str) -> TensorDescriptor:
    if isinstance(x, TensorDescriptor):
        return x
    raise sem.error(f"{what} needs a tensor descriptor from tl.make_tensor_descriptor, got {describe(x)}")


def desc_load(sem: Semantic, desc: Any, offsets: Any) -> Tensor:
    d = _desc(sem, desc, "desc.load")
    bp = d.at(_scalars(sem, offsets, len(d.block_shape), "desc.load offsets", i32))
    return load_block(sem, bp, tuple(range(len(d.block_shape))), d.padding, d.host)


def desc_store(sem: Semantic, desc: Any, offsets: Any, value: Any) -> None:
    d = _desc(sem, desc, "desc.store")
    bp = d.at(_scalars(sem, offsets, len(d.block_shape), "desc.store offsets", i32))
    store_block(sem, bp, value, tuple(range(len(d.block_shape))))


TensorDescriptor.METHODS = {"load": desc_load, "store": desc_store}
BlockPtr.METHODS = {"advance": advance}  # `ptr.advance([dm, dn])`, the method form of tl.advance

LIB.update({
    "make_block_ptr": make_block_ptr, "advance": advance, "load": load, "store": store,
    "make_tensor_descriptor": make_tensor_descriptor, "load_tensor_descriptor": desc_load,
    "store_tensor_descriptor": desc_store,
})
