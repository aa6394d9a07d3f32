"""A spin lock between programs on a real GPU (the shape of Triton's layer-norm backward): each program adds
its row's partial sums into one of GROUPS buffers under that group's lock. The sums come out right only if the
lock's acquire and release order the loads and stores inside it (cuda/atomics.py); the build takes one more
resident block than ptxas chose alone (test_occupancy_step.py). Skips where there is no GPU."""

from __future__ import annotations

import pytest

from tests.cuda.gpu import gpu_reason
from tests.cuda.test_occupancy_step import SRC
from tilec import client

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")


@pytest.mark.parametrize("n,block,warps", [(7168, 8192, 8), (1000, 1024, 4)])
def test_partial_sums_under_a_lock_are_exact(n: int, block: int, warps: int) -> None:
    import torch

    rows, groups = 2048, 96
    k = client.jit(SRC, "row_grads")
    torch.manual_seed(0)
    x = torch.randn(rows, n, device="cuda", dtype=torch.float16)
    gy = torch.randn(rows, n, device="cuda", dtype=torch.float16)
    w = torch.rand(n, device="cuda", dtype=torch.float16)
    mu, rs = x.float().mean(1), 1 / (x.float().var(1, unbiased=False) + 1e-5).sqrt()
    gx = torch.empty_like(x)
    pw = torch.zeros(groups, n, device="cuda", dtype=torch.float16)
    pb = torch.zeros(groups, n, device="cuda", dtype=torch.float16)
    lock = torch.zeros(2 * groups, device="cuda", dtype=torch.int32)
    k[(rows,)](gx, gy, pw, pb, x, w, mu, rs, lock, n, n, GROUPS=groups, BLOCK=block, num_warps=warps)
    torch.cuda.synchronize()
    assert int(lock[:groups].sum()) == 0 and int(lock[groups:].sum()) == groups  # every lock released, every group seen
    # each group's buffer holds the sum of its rows' dy in some order of fp16 adds: against the exact sum, within
    # the rounding of as many fp16 adds as the group has rows
    # the rounding of as many fp16 adds as the group has rows (a lost update is off by a whole row's value)
    exact = torch.zeros(groups, n, device="cuda")
    exact.index_add_(0, torch.arange(rows, device="cuda") % groups, gy.float())
    tol = -(-rows // groups) * 2**-10 * exact.abs().max().item()
    assert (pb.float() - exact).abs().max().item() <= tol
    assert int(torch.isnan(pw.float()).sum()) == 0
