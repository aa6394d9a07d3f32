"""The block-pointer, descriptor and in-tile-move wild kernels on the cpu target: each table row of
test_wild_kernels.py runs again through client.jit over NumPy arrays (the backend compiles what the frontend
built from existing IR ops), with the same NumPy checks."""

from __future__ import annotations

import pytest

from tilec import client

from .test_wild_kernels import CASES, WILD

CPU_STEMS = ["block_ptr_copy", "block_ptr_matmul", "block_ptr_nan_pad", "block_ptr_helpers", "tensor_desc_transpose",
             "sort_rows", "sort_2d", "flip_cat", "topk_gather"]


@pytest.mark.parametrize("stem", CPU_STEMS)
def test_new_wild_kernels_on_cpu(stem: str) -> None:
    c = CASES[stem]
    kernel = client.jit((WILD / f"{stem}.py").read_text(), c.name)

    def run(args: list, grid: tuple, **constexprs) -> None:
        kernel[grid](*args, **{**c.constexprs, **constexprs})

    assert c.check is not None
    c.check(run)
