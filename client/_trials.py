"""One autotune trial's timing for client.jit's autotuner (client/_jit.py): every array argument snapshotted
and restored around each run, reset_to_zero's arrays zeroed before each, the first run (the compile) untimed;
on a GPU the median of CUDA-event times with the L2 flushed between runs (Triton's do_bench), on the CPU the
median of wall-clock runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tilec.runtime.launch import BF16Array
from tilec.runtime.tensordesc import is_descriptor

_TRIALS = 3


def time_config(
    trial: Callable[[], None], target: str, zero: list[Any], saved: Iterable[tuple[Any, Any]]
) -> float:
    """Seconds one run of `trial` takes: the first run compiles and is not timed; every array is restored
    after each run (after the batch, on the GPU), reset_to_zero's zeroed before each."""
    zero_arrays(zero)
    trial()
    synchronize(target)
    restore(saved)
    if target.startswith("cuda"):
        gpu = _cuda_time(trial, zero)
        if gpu is not None:
            restore(saved)
            return gpu
    times = []
    for _ in range(_TRIALS):
        zero_arrays(zero)
        t0 = time.perf_counter()
        trial()
        synchronize(target)
        times.append(time.perf_counter() - t0)
        restore(saved)
    return sorted(times)[len(times) // 2]


_CUDA_REPS = 10
_SPIN_CYCLES = 20_000_000  # ~10 ms of GPU clock: the launches of a batch queue up behind it
_L2_FLUSH_BYTES = 256 << 20


def _cuda_time(trial: Callable[[], None], zero: list[Any]) -> float | None:
    """The median GPU time of `trial` over _CUDA_REPS runs, as Triton's do_bench takes it (CUDA events around
    each run, the L2 flushed between runs), not counting the host's launch path: the GPU spins first while
    the host queues every run. None without torch (the events and the spin are torch's)."""
    try:
        import torch
    except ImportError:
        return None
    flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(_CUDA_REPS)
    ]
    torch.cuda.synchronize()
    torch.cuda._sleep(_SPIN_CYCLES)
    for start, end in events:
        flush.zero_()
        zero_arrays(zero)
        start.record()
        trial()
        end.record()
    torch.cuda.synchronize()
    ms = sorted(start.elapsed_time(end) for start, end in events)
    return ms[len(ms) // 2] / 1e3


def _data(v: np.ndarray | BF16Array) -> np.ndarray:
    return v.bits if isinstance(v, BF16Array) else v


def snapshot(v: Any) -> Any | None:
    """A copy of an array argument's contents (None for scalars): NumPy/bf16 arrays, torch tensors, CuPy arrays."""
    if is_descriptor(v):
        return snapshot(v.base)
    if isinstance(v, np.ndarray | BF16Array):
        return _data(v).copy()
    if hasattr(v, "clone") and hasattr(v, "copy_"):  # torch
        return v.clone()
    if hasattr(v, "__cuda_array_interface__") and hasattr(v, "copy"):  # CuPy and kin
        return v.copy()
    return None


def restore(saved: Iterable[tuple[Any, Any]]) -> None:
    for v, snap in saved:
        v = v.base if is_descriptor(v) else v
        if hasattr(v, "copy_"):
            v.copy_(snap)
        else:
            _data(v)[...] = snap


def zero_arrays(arrays: list[Any]) -> None:
    for v in arrays:
        if hasattr(v, "zero_"):
            v.zero_()
        else:
            _data(v)[...] = 0


def synchronize(target: str) -> None:
    """GPU launches are asynchronous: wait for the trial to end before reading the clock."""
    if target.startswith("cuda"):
        from tilec.runtime.cuda import synchronize as cuda_synchronize

        cuda_synchronize()
