"""From Python launch arguments to a compiled-kernel launch: target choice, Triton-style typing and
specialisation of arguments, grid checking, and the dispatch point between the cpu and cuda runtimes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilec.compiler.artifact import Artifact

from . import tensordesc as _tensordesc
from .errors import ArgumentError, TargetError

_NP_TO_TRITON = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "float32": "fp32", "float64": "fp64",
}  # fmt: skip
_TRITON_TO_IR = {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64", "fp8e4nv": "f8e4nv", "fp8e5": "f8e5"}  # fmt: skip
_FP8_ARRAYS = {"float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}  # ml_dtypes' dtypes, one byte each


@dataclass(frozen=True)
class BF16Array:
    """A NumPy uint16 array holding bf16 bits, passed where the kernel takes a bf16 pointer."""

    bits: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.bits, np.ndarray) or self.bits.dtype != np.uint16:
            raise ArgumentError("as_bf16 takes a NumPy uint16 array of bf16 bit patterns")


def as_bf16(bits: np.ndarray) -> BF16Array:
    """Mark a uint16 NumPy array as bf16 data for a launch."""
    return BF16Array(bits)


def ir_dtype(triton_name: str) -> str:
    return _TRITON_TO_IR.get(triton_name, triton_name)


def host_view(value: Any) -> Any:
    """A torch CPU tensor (or a duck-typed tensor over one, such as Triton's TensorWrapper) as the NumPy
    array over its memory, for the cpu target (bf16 as a BF16Array); any other value as it is."""
    base = value
    if not type(value).__module__.startswith("torch") and type(getattr(value, "base", None)).__module__.startswith(
            "torch") and callable(getattr(value, "data_ptr", None)):  # fmt: skip
        base = value.base
    if not type(base).__module__.startswith("torch") or getattr(base, "is_cuda", True) or not hasattr(base, "numpy"):
        return value
    import torch

    t = base.detach()
    if t.dtype == torch.bfloat16:
        return BF16Array(t.view(torch.int16).numpy().view(np.uint16))
    if base is not value:  # a wrapper that reinterprets the tensor's bytes as its own dtype
        reinterpret = _DUCK_NP.get(getattr(value.dtype, "name", ""))
        return value if reinterpret is None else t.view(torch.uint8).numpy().view(reinterpret)
    return t.numpy() if str(t.dtype) in _TORCH_HOST else value


_TORCH_HOST = ("torch.float16", "torch.float32", "torch.float64", "torch.int8", "torch.int16", "torch.int32",
               "torch.int64", "torch.uint8", "torch.bool")  # fmt: skip
_DUCK_NP = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "int8": np.int8, "int16": np.int16,
            "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32}  # fmt: skip


def select_target(args: list[Any]) -> str:
    """'cpu' for NumPy arrays; CUDA arrays select cuda (its runtime plugs in at RUNTIMES)."""
    kinds = set()
    for a in _tensordesc.expand_args(args):
        if isinstance(a, np.ndarray | BF16Array):
            kinds.add("cpu")
        elif _is_cuda_array(a):
            kinds.add("cuda")
    if len(kinds) > 1:
        raise TargetError("the arguments mix NumPy arrays (cpu) with CUDA arrays; pass one kind")
    if kinds == {"cuda"}:
        from .cuda import cuda_target

        return cuda_target(args)
    return kinds.pop() if kinds else "cpu"


def _is_cuda_array(a: Any) -> bool:
    from .cuda import is_cuda_array

    return is_cuda_array(a)


def scalar_type(name: str, value: Any) -> str:
    """Triton's typing of a scalar argument: bool -> i1, int -> i32 (i64/u64 if too large), float -> fp32."""
    if isinstance(value, np.generic):
        t = _NP_TO_TRITON.get(value.dtype.name)
        if t is None:
            raise ArgumentError(f"argument '{name}': unsupported scalar dtype {value.dtype}")
        return t
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return "i32"
        if -(2**63) <= value < 2**63:
            return "i64"
        if value < 2**64:
            return "u64"
        raise ArgumentError(f"argument '{name}': integer {value} does not fit in 64 bits")
    if isinstance(value, float):
        return "fp32"
    raise ArgumentError(
        f"argument '{name}': cannot pass {type(value).__name__} to a kernel (arrays, ints, floats, bools)"
    )


def array_type(name: str, value: np.ndarray | BF16Array) -> str:
    """'*fp32' etc. A view of any strides passes (as in Triton) the address of its first element."""
    arr = value.bits if isinstance(value, BF16Array) else value
    if isinstance(value, BF16Array):
        return "*bf16"
    t = _NP_TO_TRITON.get(arr.dtype.name) or _FP8_ARRAYS.get(arr.dtype.name)
    if t is None:
        raise ArgumentError(f"argument '{name}': unsupported array dtype {arr.dtype}")
    return "*" + t


@dataclass(frozen=True)
class ArgSpec:
    """How one runtime argument specialises the kernel: its Triton type and hints."""

    type: str
    hints: tuple[tuple[str, Any], ...] = ()


def specialise(name: str, value: Any) -> ArgSpec:
    """Triton's specialisation: pointers 16-byte aligned, ints divisible by 16 or equal to 1; a host tensor
    descriptor as its type and its parts' hints (runtime/tensordesc.py)."""
    if _tensordesc.is_descriptor(value):
        base = specialise(name, value.base)
        if not base.type.startswith("*"):
            raise ArgumentError(f"argument '{name}': a tensor descriptor's base must be an array")
        t = _tensordesc.spelling(name, value, base.type)
        return ArgSpec(t, _tensordesc.hints(value, bool(base.hints)))
    if isinstance(value, np.ndarray | BF16Array):
        arr = value.bits if isinstance(value, BF16Array) else value
        t = array_type(name, value)
        return ArgSpec(t, (("divisibility", 16),) if arr.ctypes.data % 16 == 0 else ())
    if _is_cuda_array(value):
        from .cuda import specialise_cuda

        return ArgSpec(*specialise_cuda(name, value))
    t = scalar_type(name, value)
    if t in ("i32", "i64", "u64") and not isinstance(value, bool | np.bool_):
        v = int(value)
        if v == 1:
            return ArgSpec(t, (("equal_to_1", True),))
        if v % 16 == 0:
            return ArgSpec(t, (("divisibility", 16),))
    return ArgSpec(t)


def raw_arg(value: Any) -> Any:
    """The value the runtime packs: an address for arrays, the scalar otherwise."""
    if isinstance(value, BF16Array):
        return value.bits.ctypes.data
    if isinstance(value, np.ndarray):
        return value.ctypes.data
    if isinstance(value, np.generic):
        return value.item()
    return value


def _launch_cpu(art: Artifact, args: list[Any], grid: tuple[int, int, int]) -> None:
    from .cpu import load

    load(art).launch([raw_arg(a) for a in args], grid)


def _launch_cuda(art: Artifact, args: list[Any], grid: tuple[int, int, int]) -> None:
    from .cuda import launch as cuda_launch

    cuda_launch(art, args, grid)


RUNTIMES: dict[str, Callable[[Artifact, list[Any], tuple[int, int, int]], None]] = {
    "cpu": _launch_cpu,
    "cuda": _launch_cuda,
}


def launch(target: str, art: Artifact, args: list[Any], grid: tuple[int, int, int]) -> None:
    """Run a compiled artifact on its target's runtime; args are the kernel's non-constexpr arguments."""
    kind = target.split(":", 1)[0]
    runtime = RUNTIMES.get(kind)
    if runtime is None:
        raise TargetError(f"no runtime for target {target!r}")
    if 0 in grid:  # no programs: nothing to run (Triton launches nothing too)
        return
    flat = _tensordesc.expand_args(args)
    if art.metadata.get("tma"):  # the tensor maps of the boxes the kernel loads with TMA, after the rest
        from .tma import tensor_maps

        flat += tensor_maps(args, art.metadata["tma"])
    runtime(art, flat, grid)
