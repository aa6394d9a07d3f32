"""A GPU bench child kept for its owner's next job (runtime/standby.py keep, BenchProcess `owner`): the same
process serves the owner's next launch, of another size, after freeing the last one's GPU memory; another
owner never gets it; a child whose kernel faulted is never kept; keep 0 ends the kept ones.
Skips with a reason where there is no GPU (CI); the device machine runs it."""

from __future__ import annotations

import os

import pytest

from tilec.compiler.tune.stats import Timing
from tilec.runtime import standby as standby_mod
from tilec.runtime.bench import BenchProcess, TrialFault

from .gpu import gpu_reason
from .test_sandbox_cuda import ADD, CONFIG, SEGFAULT, _cubin, _launch, _target

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")


def _free_bytes() -> int:
    from tilec.runtime import cuda as rt

    rt._context(0)
    free, _total = rt.check(rt._driver().cuMemGetInfo())
    return int(free)


def _job(owner: object, n: int, cubin) -> tuple[int, Timing]:
    with BenchProcess(_target(), _launch(n), timeout_s=60, owner=owner) as bench:
        t = bench.time(cubin, CONFIG, max_seconds=0.2)
        return bench.pid, t


@pytest.fixture
def keep():
    standby_mod.keep_standby(0, keep=2)
    yield standby_mod.standby
    standby_mod.keep_standby(0, keep=0)


def test_a_kept_child_serves_its_owner_only_and_frees_each_launch(keep) -> None:
    add, bad = _cubin(ADD), _cubin(SEGFAULT)
    first, t = _job("alice", 1 << 20, add)
    assert 0 < t.median_ms < 5 and len(keep.kept) == 1
    again, t = _job("alice", 1 << 22, add)  # another size: a new bench (arrays) in the same process
    assert again == first and 0 < t.median_ms < 5, "the owner's next job runs in the child kept for it"
    other, _ = _job("bob", 1 << 20, add)
    assert other != first, "another owner's job never gets alice's child"
    assert len(keep.kept) == 2

    # each job's buffers are freed before the child is kept: ten jobs of 768 MiB leave the free memory as it was
    n = (768 << 20) // 12  # three fp32 tensors
    _job("alice", n, add)
    before = _free_bytes()
    for _ in range(10):
        pid, _ = _job("alice", n, add)
        assert pid == first
    assert abs(before - _free_bytes()) < (256 << 20), (before, _free_bytes())

    with BenchProcess(_target(), _launch(1 << 20), timeout_s=60, owner="alice") as bench:
        assert bench.pid == first
        with pytest.raises(TrialFault):
            bench.time(bad, CONFIG)
    assert all(owner != "alice" for (_key, owner) in keep.kept), "a child whose kernel faulted is not kept"
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)
    fresh, t = _job("alice", 1 << 20, add)
    assert fresh != first and 0 < t.median_ms < 5

    kept = [c.pid for c in keep.kept.values()]
    standby_mod.keep_standby(0, keep=0)
    assert not keep.kept
    for pid in kept:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_no_owner_no_keep(keep) -> None:
    pid, _ = _job(None, 1 << 20, _cubin(ADD))
    assert not keep.kept
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
