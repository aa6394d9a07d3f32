"""The block-pointer matmul (tests/kernels/blockptr_matmul.py) on the cpu target and the interpreter
against NumPy, with row- and column-major operands and sizes that leave partial blocks; and how the
launcher finds a block pointer's tensor (TMA's map, compiler/backends/cuda/tma.py) in the launch's own
arguments (runtime/tma.py), which needs no GPU."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels import source
from tilec import client
from tilec.client import ArgumentError
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.tma import BlockTensor, tensor_maps

NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
         "stride_cm", "stride_cn")  # fmt: skip
CONSTS = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_SIZE_M": 2}


def operands(m: int, n: int, k: int, b_major: str):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    if b_major == "col":  # the same values, stored column-major: strides (1, K)
        b = np.asfortranarray(b)
    c = np.full((m, n), np.nan, np.float16)
    return a, b, c


def strides(*xs: np.ndarray) -> list[int]:
    return [s // x.itemsize for x in xs for s in x.strides]


@pytest.mark.parametrize(("m", "n", "k"), [(64, 64, 64), (70, 50, 90)])
@pytest.mark.parametrize("b_major", ["row", "col"])
def test_blockptr_matmul_on_cpu_against_numpy(m: int, n: int, k: int, b_major: str) -> None:
    a, b, c = operands(m, n, k, b_major)
    kern = client.jit(source("blockptr_matmul"), "matmul_blockptr_kernel")
    grid = (-(-m // 32) * -(-n // 32),)
    kern[grid](a, b, c, m, n, k, *strides(a, b, c), **CONSTS)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_blockptr_matmul_on_the_interpreter() -> None:
    m, n, k = 40, 36, 50
    a, b, c = operands(m, n, k, "row")
    sig = {nm: "*fp16" if nm.endswith("_ptr") else "i32" for nm in NAMES}
    art = compile_kernel(source("blockptr_matmul"), "matmul_blockptr_kernel", signature=sig, constexprs=CONSTS,
                         emit="tir")  # fmt: skip
    assert "desc_box" in art.tir  # the loads carry their box; the interpreter reads them as pointer tiles
    run_kernel(parse_module(art.tir), "matmul_blockptr_kernel", [a, b, c, m, n, k, *strides(a, b, c)], (4,))
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2, atol=2e-2)


ENTRY = {"param": 1, "box": [64, 64], "swizzle": 128, "dtype": "fp16", "elem_bytes": 2,
         "shape": [{"param": 5}, {"param": 4}], "strides": [{"param": 8}, {"value": 1}]}  # fmt: skip


def test_block_tensor_comes_from_the_launch_arguments() -> None:
    b = np.zeros((96, 48), np.float16)
    args = ["a", b, "c", 64, 48, 96, 96, 1, np.int64(48), 1, 48, 1]
    t = BlockTensor.from_args(args, ENTRY)
    assert t.base is b and t.shape == [96, 48] and t.strides == [48, 1] and t.padding == "zero"


@pytest.mark.parametrize(("k", "n", "stride"), [(0, 48, 48), (96, 48, 0), (96, 48, 4), (96, 48, -48)])
def test_block_tensor_tma_cannot_encode_is_an_argument_error(k: int, n: int, stride: int) -> None:
    """Extents TMA cannot encode (an empty dimension) and strides it cannot take (zero, negative, not a
    multiple of 16 bytes) are refused at launch with what was given, before any driver call."""
    args = ["a", np.zeros(16, np.float16), "c", 64, n, k, 96, 1, stride, 1, 48, 1]
    with pytest.raises(ArgumentError, match="with TMA"):
        tensor_maps(args, [ENTRY])
