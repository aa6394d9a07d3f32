"""runtime.bench on the cpu target: timing a compiled vector add on a resolved launch description, launch
refusals and device asserts as typed trial faults, and the bench process surviving a segfaulting kernel
and a hang by replacing its child."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from tilec.compiler.artifact import Artifact, CompileOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.tune.launch import LaunchDescription, ResolvedLaunch, resolve
from tilec.compiler.tune.stats import Timing
from tilec.runtime.bench import BenchProcess, CpuBench, TrialFault, make_bench

ADD = (Path(__file__).parents[1] / "kernels" / "vector_add.py").read_text()
# the same kernel, loading 40 TB past x: unmapped memory, a SIGSEGV on the host
SEGFAULT = ADD.replace("tl.load(x_ptr + offsets, mask=mask)", "tl.load(x_ptr + offsets + 10**13)")
ASSERTING = """
import triton
import triton.language as tl


@triton.jit
def small(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x < 100, "x must be small")
"""
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
CONFIG = {"BLOCK_SIZE": 1024}


def _compile(src: str, name: str, signature: dict, constexprs: dict) -> Artifact:
    return compile_kernel(src, name, signature=signature, constexprs=constexprs,
                          options=CompileOptions(target="cpu"), emit="object")  # fmt: skip


def _add_launch(n: int) -> ResolvedLaunch:
    desc = LaunchDescription(
        grid=["cdiv(n_elements, BLOCK_SIZE)"],
        args={"x_ptr": "randn(n_elements)", "y_ptr": "rand(n_elements)", "out_ptr": "empty(n_elements)",
              "n_elements": n},
    )  # fmt: skip
    return resolve(desc, SIG, list(SIG))


@pytest.fixture(scope="module")
def add() -> Artifact:
    assert "10**13" in SEGFAULT
    return _compile(ADD, "add_kernel", SIG, CONFIG)


@pytest.fixture(scope="module")
def segfault() -> Artifact:
    return _compile(SEGFAULT, "add_kernel", SIG, CONFIG)


def test_cpu_bench_times_vector_add(add: Artifact) -> None:
    bench = CpuBench(_add_launch(5000), seed=3)
    t = bench.time(add, CONFIG, max_seconds=0.3)
    assert isinstance(t, Timing)
    assert 5 <= t.reps <= 200
    # a 5000-element add takes well under a millisecond: the bound only catches seconds taken for ms
    assert 0 < t.lo_ms <= t.median_ms <= t.hi_ms < 1000, t
    a = bench.arrays
    assert np.array_equal(a["out_ptr"], a["x_ptr"] + a["y_ptr"]), "the timed launches ran the kernel"
    # compiler/tune/tuner.py passes configs in this form
    tuner_form = {"kwargs": CONFIG, "num_warps": 4, "num_stages": 3}
    a["out_ptr"][:] = 0
    assert bench.time(add, tuner_form, max_seconds=0.1).reps >= 5
    assert np.array_equal(a["out_ptr"], a["x_ptr"] + a["y_ptr"])
    assert bench.device_info()["arch"] == "cpu"


def test_bigger_grid_takes_longer(add: Artifact) -> None:
    tiny = CpuBench(_add_launch(1 << 10)).time(add, CONFIG, max_seconds=0.2)
    big = CpuBench(_add_launch(1 << 21)).time(add, CONFIG, max_seconds=0.5)
    # 2048 times the elements: medians, robust to a loaded machine's outliers (an interval's ends are not)
    assert big.median_ms > 10 * tiny.median_ms, (tiny, big)


def test_launch_refusals_are_launch_faults(add: Artifact) -> None:
    bench = make_bench("cpu", _add_launch(100))
    assert isinstance(bench, CpuBench)
    with pytest.raises(TrialFault, match="grid") as info:
        bench.time(add, {"BLOCK": 1024})  # the grid names BLOCK_SIZE
    assert info.value.kind == "launch"
    cubin = Artifact(target="cuda:sm_90", kernel_name="add_kernel", binary=b"\x7fELF")
    with pytest.raises(TrialFault, match="not a cpu object") as info:
        bench.time(cubin, CONFIG)
    assert info.value.kind == "launch"


def test_device_assert_is_a_fault() -> None:
    sig = {"x_ptr": "*i32", "n": "i32"}
    art = _compile(ASSERTING, "small", sig, {"BLOCK": 64})
    desc = LaunchDescription(grid=["cdiv(n, BLOCK)"], args={"x_ptr": "randint(200, 300, n)", "n": 256})
    with pytest.raises(TrialFault, match="x must be small") as info:
        CpuBench(resolve(desc, sig, list(sig))).time(art, {"BLOCK": 64})
    assert info.value.kind == "fault"


def test_trial_fault_pickles() -> None:
    fault = pickle.loads(pickle.dumps(TrialFault("crash", "died")))
    assert (fault.kind, fault.message, str(fault)) == ("crash", "died", "crash: died")


def test_bench_process_survives_a_segfault_and_a_hang(add: Artifact, segfault: Artifact) -> None:
    # the parent waits 10 s for an answer: generous for a 0.2 s timing on a loaded machine, and far below
    # the hang below (10^9 launches)
    with BenchProcess("cpu", _add_launch(4096), timeout_s=10.0) as bench:
        t = bench.time(add, CONFIG, max_seconds=0.2)
        assert isinstance(t, Timing) and t.reps >= 5 and 0 < t.median_ms < 1000
        assert bench.device_info()["arch"] == "cpu"
        with pytest.raises(TrialFault, match="SIGSEGV while timing add_kernel") as info:
            bench.time(segfault, CONFIG)
        assert info.value.kind == "crash"
        assert isinstance(bench.time(add, CONFIG, max_seconds=0.1), Timing), "a fresh child took over"
        assert bench.restarts == 1
        # a first batch of 10^9 repetitions cannot end within the 10 s the parent waits (60 s allowed); a
        # tight `rel` alone can converge once the samples' median interval collapses on identical timings
        with pytest.raises(TrialFault, match="no answer in 10 s") as info:
            bench.time(add, CONFIG, rel=1e-12, min_reps=10**9, max_reps=10**9, max_seconds=60)
        assert info.value.kind == "timeout"
        assert isinstance(bench.time(add, CONFIG, max_seconds=0.1), Timing)
        assert bench.restarts == 2
