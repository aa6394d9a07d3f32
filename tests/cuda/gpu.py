"""Helpers for tests that run on a real GPU: NumPy inputs -> torch CUDA tensors, launch with client.jit,
results back to NumPy. `has_gpu()` is false where torch or a CUDA device is missing (CI), and the GPU
tests skip with that reason."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

import numpy as np

from tilec.client import BF16Array


@cache
def gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed (GPU tests run on the device machine)"
    if not torch.cuda.is_available():
        return "no CUDA device here (GPU tests run on the device machine)"
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return "cuda-python is not installed"
    return None


def triton_module(src: str, folder: Path, name: str):
    """`src` imported as module `name` from a file in `folder`: Triton's jit reads a kernel's source from
    its file, so the tests that run Triton itself as the reference write it out first."""
    path = folder / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def to_device(a):
    import torch

    if isinstance(a, BF16Array):
        return torch.from_numpy(a.bits.view(np.int16).copy()).cuda().view(torch.bfloat16)
    if isinstance(a, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(a).copy()).cuda()
    return a


def to_host(t, like):
    import torch

    if isinstance(like, BF16Array):
        return BF16Array(t.view(torch.int16).cpu().numpy().view(np.uint16))
    if isinstance(like, np.ndarray):
        return t.cpu().numpy()
    return like


def run_gpu(kernel, grid, args: list, constexprs: dict | None = None, **options) -> list:
    """Launch `kernel` (a client.JITKernel) on CUDA copies of `args`; the arguments after the run, on the host."""
    import torch

    dev = [to_device(a) for a in args]
    kernel[grid](*dev, **(constexprs or {}), **options)
    torch.cuda.synchronize()
    return [to_host(d, a) for d, a in zip(dev, args, strict=True)]
