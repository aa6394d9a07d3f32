"""The GPU bench in its sandbox (runtime/sandbox.py, profile "cuda"): exec'd fresh with only the device-selection
variables, RLIMIT_DATA, CPU and file limits, network/mount/IPC/UTS namespaces and the seccomp filter, applied
after the driver has made its context; it still times, a faulting kernel still fails only its trial, and a
launch of the default largest size (TILEC_MAX_LAUNCH_BYTES, 2 GiB) fits its default memory limit.
Skips with a reason where there is no GPU (CI); the device machine runs it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.tune.launch import LaunchDescription, resolve
from tilec.compiler.tune.stats import Timing
from tilec.runtime.bench import BenchProcess, TrialFault

from .gpu import gpu_reason

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
ADD = (Path(__file__).parents[1] / "kernels" / "vector_add.py").read_text()
SEGFAULT = ADD.replace("tl.load(x_ptr + offsets, mask=mask)", "tl.load(x_ptr + offsets + 10**13)")
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
CONFIG = {"BLOCK_SIZE": 1024}


def _target() -> str:
    from tilec.runtime.cuda import device_sm

    return f"cuda:sm_{device_sm(0)}"


def _launch(n: int):
    desc = LaunchDescription(grid=["cdiv(n_elements, BLOCK_SIZE)"], args={
        "x_ptr": "randn(n_elements)", "y_ptr": "rand(n_elements)", "out_ptr": "empty(n_elements)", "n_elements": n})  # fmt: skip
    return resolve(desc, SIG, list(SIG))


def _cubin(src: str):
    return compile_kernel(src, "add_kernel", signature=SIG, constexprs=CONFIG,
                          options=CompileOptions(target=_target()), emit="cubin")  # fmt: skip


def test_gpu_bench_times_in_its_sandbox_and_survives_a_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEC_SIGNING_KEY", "canary-not-for-the-bench")
    add, bad = _cubin(ADD), _cubin(SEGFAULT)
    with BenchProcess(_target(), _launch(1 << 20), timeout_s=60) as bench:
        t = bench.time(add, CONFIG, max_seconds=0.3)
        assert isinstance(t, Timing) and 0 < t.median_ms < 5, t
        layers = bench.layers
        assert layers["seccomp"] and "net" in layers["namespaces"] and "RLIMIT_DATA" in layers["rlimits"], (
            layers
        )
        with open(f"/proc/{bench.pid}/environ", "rb") as f:
            names = {e.split(b"=", 1)[0] for e in f.read().split(b"\0") if e}
        assert names <= {
            b"CUDA_VISIBLE_DEVICES",
            b"CUDA_DEVICE_ORDER",
            b"NVIDIA_VISIBLE_DEVICES",
            b"LD_LIBRARY_PATH",
        }, names
        targets = [os.readlink(f"/proc/{bench.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{bench.pid}/fd")]
        files = [t for t in targets if t.startswith("/") and not t.startswith("/dev/")]
        assert files == [], f"no host file is open in the bench child: {files}"
        # its sockets are its own: the pipe's end it was given, and what the CUDA driver opens for itself (seen
        # on an H100: one more); none is a descriptor of this process (the server's connections) inherited
        ours = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                ours.add(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
        sockets = {t for t in targets if t.startswith("socket:")}
        assert sockets and not (sockets & {t for t in ours if t.startswith("socket:")}), (targets, ours)
        with pytest.raises(TrialFault) as info:
            bench.time(bad, CONFIG)
        assert info.value.kind in ("fault", "crash"), info.value
        assert isinstance(bench.time(add, CONFIG, max_seconds=0.2), Timing), (
            "a fresh sandboxed child took over"
        )


def test_the_default_largest_launch_fits_the_default_limit() -> None:
    n = (1 << 31) // 12  # three fp32 tensors: 2 GiB, TILEC_MAX_LAUNCH_BYTES' default
    with BenchProcess(_target(), _launch(n), timeout_s=120) as bench:
        assert isinstance(bench.time(_cubin(ADD), CONFIG, max_seconds=0.5), Timing)
