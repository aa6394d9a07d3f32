"""The block-pointer, descriptor and in-tile-move wild kernels on a real GPU (target cuda:sm_XX): each table
row of test_wild_kernels.py runs through client.jit on torch CUDA tensors with the same NumPy checks.
Skips with a reason where there is no GPU; the device machine runs it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason, run_gpu
from tilec import client

from .test_wild_cpu import CPU_STEMS
from .test_wild_kernels import CASES, WILD

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
# sort/flip/cat/topk are built on `reshape` (compiler/backends/cuda/shape.py lowers it)


@pytest.mark.parametrize("stem", CPU_STEMS)
def test_new_wild_kernels_on_gpu(stem: str) -> None:
    c = CASES[stem]
    kernel = client.jit((WILD / f"{stem}.py").read_text(), c.name)

    def run(args: list, grid: tuple, **constexprs) -> None:
        got = run_gpu(kernel, grid, args, {**c.constexprs, **constexprs})
        for a, g in zip(args, got, strict=True):
            if isinstance(a, np.ndarray):
                a[...] = g  # the checks read their arrays back, as after a cpu launch

    assert c.check is not None
    c.check(run)
