"""Tensor maps for the kernels that load host descriptors or block pointers with TMA
(compiler/backends/cuda/tma.py): the artifact's metadata "tma" lists, per extra kernel parameter, the
tensor's base (the IR index of its parameter), the box (innermost first), the swizzle and the element type.
A host descriptor's map is encoded from the descriptor object passed at launch; a block pointer's from the
launch's own arguments, which the entry's "shape" and "strides" name (outermost first, each
{"param": IR index} or {"value": constant}). Each map is encoded with cuTensorMapEncodeTiled and passed by
value (128 bytes).
"""

from __future__ import annotations

import ctypes
from typing import Any

from . import libcuda as _libcuda
from . import tensordesc as _tensordesc
from .errors import ArgumentError

# CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapFloatOOBfill and CUtensorMapL2promotion of cuda.h
_DTYPE = {"u8": 0, "i8": 0, "fp16": 6, "fp32": 7, "bf16": 9}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_OOB_NAN = 1
_L2_256B = 3
MAX_DIM = 2**32  # cuTensorMapEncodeTiled: each extent in [1, 2^32], each stride below 2^40 bytes
MAX_STRIDE_BYTES = 2**40


def _descriptors_by_param(args: list[Any]) -> dict[int, Any]:
    """IR parameter index of each descriptor's base -> the descriptor object (the order of expand_args)."""
    out, at = {}, 0
    for a in args:
        if _tensordesc.is_descriptor(a):
            out[at] = a
            at += len(_tensordesc.expand(a))
        else:
            at += 1
    return out


def tensor_maps(args: list[Any], entries: list[dict]) -> list[bytes]:
    """The encoded CUtensorMap of each entry of an artifact's "tma" metadata, for these launch arguments."""
    descs = _descriptors_by_param(args)
    flat = _tensordesc.expand_args(args)
    out = []
    for e in entries:
        if "shape" in e:  # a block pointer: its tensor from the launch's arguments
            out.append(encode(BlockTensor.from_args(flat, e), e))
            continue
        d = descs.get(int(e["param"]))
        if d is None:
            raise ArgumentError(
                f"the kernel loads its parameter {e['param']} with TMA but no descriptor was passed there"
            )
        out.append(encode(d, e))
    return out


class BlockTensor:
    """The tensor a block pointer reads, as the launch's arguments give it (the fields encode() reads)."""

    def __init__(self, base: Any, shape: list[int], strides: list[int]):
        self.base, self.shape, self.strides, self.padding = base, shape, strides, "zero"

    @staticmethod
    def from_args(flat: list[Any], e: dict) -> BlockTensor:
        def value(src: dict) -> int:
            if "value" in src:
                return int(src["value"])
            v = flat[int(src["param"])]
            return int(v.item() if hasattr(v, "item") else v)

        shape, strides = [value(s) for s in e["shape"]], [value(s) for s in e["strides"]]
        eb = int(e["elem_bytes"])
        if any(not 1 <= d <= MAX_DIM for d in shape) or any(
            s <= 0 or s * eb % 16 or s * eb >= MAX_STRIDE_BYTES for s in strides[:-1]
        ):  # fmt: skip
            raise ArgumentError(
                f"the kernel reads the block pointer on parameter {e['param']} with TMA, which needs every "
                f"extent in 1..2^32 and the leading strides positive multiples of 16 bytes below 2^40; "
                f"this launch gives shape {shape}, strides {strides}"
            )
        return BlockTensor(flat[int(e["param"])], shape, strides)


def encode(d: Any, e: dict) -> bytes:
    """cuTensorMapEncodeTiled for tensor `d` (a descriptor or a BlockTensor) read in boxes `e["box"]`
    (innermost first)."""
    from .cuda import raw_cuda_arg

    rank = len(d.shape)
    eb = int(e["elem_bytes"])
    dims = (ctypes.c_uint64 * rank)(*(int(s) for s in reversed(list(d.shape))))
    strides = (ctypes.c_uint64 * max(1, rank - 1))(*(int(s) * eb for s in reversed(list(d.strides)[:-1])))
    box = list(e["box"]) + [1] * (rank - len(e["box"]))
    boxes = (ctypes.c_uint32 * rank)(*box)
    ones = (ctypes.c_uint32 * rank)(*([1] * rank))
    out = (ctypes.c_uint8 * 128)()
    fill = _OOB_NAN if getattr(d, "padding", "zero") == "nan" else 0
    _libcuda.driver().call(
        "cuTensorMapEncodeTiled", ctypes.byref(out), _DTYPE[e["dtype"]], rank, ctypes.c_void_p(raw_cuda_arg(d.base)),
        dims, strides, boxes, ones, 0, _SWIZZLE[int(e["swizzle"])], _L2_256B, fill,
    )  # fmt: skip
    return bytes(out)
