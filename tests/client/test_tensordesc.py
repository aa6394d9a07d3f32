"""Host tensor descriptors (`tensordesc<fp16[64, 64]>` parameters) on the cpu target and the interpreter,
against NumPy: boxes past the edges (zero or NaN padding on load, dropped on store), desc.shape/strides in
the kernel, rank 1 and 3, Triton's class (duck-typed) and tilec's own, the matmul of Triton's descriptor
tutorials; the frontend's parameters and the refusals of bad descriptors and spellings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from tests.kernels import source
from tilec import client
from tilec.client import ArgumentError, TensorDescriptor
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.tensordesc import expand_args

COPY = """
import triton
import triton.language as tl


@triton.jit
def scale_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    off_m = tl.program_id(0) * BM - 3  # boxes that start before the first row too
    off_n = tl.program_id(1) * BN
    tile = in_desc.load([off_m, off_n])
    out_desc.store([off_m, off_n], tile * 2)
"""

BOX = """
import triton
import triton.language as tl


@triton.jit
def read_box(desc, out_ptr, off_m, off_n, BM: tl.constexpr, BN: tl.constexpr):
    tile = desc.load([off_m, off_n])
    r = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + r, tile)
"""

SHAPES = """
import triton
import triton.language as tl


@triton.jit
def shapes(desc, out_ptr):
    tl.store(out_ptr + 0, desc.shape[0])
    tl.store(out_ptr + 1, desc.shape[1])
    tl.store(out_ptr + 2, desc.strides[0])
    tl.store(out_ptr + 3, desc.strides[1])
    tl.store(out_ptr + 4, desc.block_shape[0] * 1000 + desc.block_shape[1])
"""

RANK3 = """
import triton
import triton.language as tl


@triton.jit
def add_one_3d(x_desc, y_desc, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    o = [tl.program_id(0) * B0, tl.program_id(1) * B1, tl.program_id(2) * B2]
    y_desc.store(o, x_desc.load(o) + 1)
"""

RANK1 = """
import triton
import triton.language as tl


@triton.jit
def neg_1d(x_desc, y_desc, B: tl.constexpr):
    o = tl.program_id(0) * B
    y_desc.store([o], -x_desc.load([o]))
"""


@dataclass
class TritonStyleDescriptor:
    """Stands for triton.tools.tensor_descriptor.TensorDescriptor (Triton is not a test dependency): the
    same fields, no tilec base class, so the launch path must duck-type it."""

    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"


def _padded_box(x: np.ndarray, m0: int, n0: int, bm: int, bn: int, pad: float) -> np.ndarray:
    out = np.full((bm, bn), pad, x.dtype)
    for i in range(bm):
        for j in range(bn):
            r, c = m0 + i, n0 + j
            if 0 <= r < x.shape[0] and 0 <= c < x.shape[1]:
                out[i, j] = x[r, c]
    return out


def test_copy_with_edges_loads_zero_and_drops_stores_outside() -> None:
    rng = np.random.default_rng(0)
    big = rng.standard_normal((48, 80)).astype(np.float32)
    x = big[:37, :70]  # a view: the descriptor's strides are the parent's
    out = np.full((48, 80), -7.0, np.float32)
    k = client.jit(COPY, "scale_copy")
    src = TensorDescriptor(x, [37, 70], [80, 1], [16, 32])
    dst = TensorDescriptor(out, [37, 70], [80, 1], [16, 32])
    k[(4, 3)](src, dst, BM=16, BN=32)
    np.testing.assert_array_equal(out[:37, :70], 2 * x)
    assert (out[37:, :] == -7).all() and (out[:, 70:] == -7).all()  # outside the descriptor: untouched


@pytest.mark.parametrize(("m0", "n0"), [(0, 0), (30, 60), (-5, -9), (40, 0), (-16, 3)])
@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_load_box_matches_numpy(m0: int, n0: int, padding: str) -> None:
    x = np.arange(37 * 70, dtype=np.float32).reshape(37, 70)
    out = np.empty((16, 32), np.float32)
    k = client.jit(BOX, "read_box")
    k[(1,)](TensorDescriptor.from_tensor(x, [16, 32], padding), out, m0, n0, BM=16, BN=32)
    want = _padded_box(x, m0, n0, 16, 32, 0.0 if padding == "zero" else np.nan)
    np.testing.assert_array_equal(out, want)


def test_triton_style_object_and_desc_attributes() -> None:
    x = np.zeros((37, 70), np.int64)
    out = np.zeros(5, np.int64)
    client.jit(SHAPES, "shapes")[(1,)](TritonStyleDescriptor(x, [37, 70], [70, 1], [8, 16]), out)
    assert out.tolist() == [37, 70, 70, 1, 8016]


def test_rank1_and_rank3() -> None:
    rng = np.random.default_rng(1)
    v = rng.standard_normal(100).astype(np.float32)
    w = np.zeros(100, np.float32)
    client.jit(RANK1, "neg_1d")[(4,)](
        TensorDescriptor.from_tensor(v, [32]), TensorDescriptor.from_tensor(w, [32]), B=32
    )
    np.testing.assert_array_equal(w, -v)
    x = rng.standard_normal((3, 10, 20)).astype(np.float32)
    y = np.zeros_like(x)
    client.jit(RANK3, "add_one_3d")[(2, 3, 3)](
        TensorDescriptor.from_tensor(x, [2, 4, 8]),
        TensorDescriptor.from_tensor(y, [2, 4, 8]),
        B0=2,
        B1=4,
        B2=8,
    )
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize(("m", "n", "k"), [(64, 64, 64), (70, 50, 90)])
def test_descriptor_matmul_against_numpy(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    bm, bn, bk = 32, 32, 32
    kern = client.jit(source("desc_matmul"), "matmul_desc_kernel")
    grid = (-(-m // bm) * -(-n // bn),)
    kern[grid](TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
               TensorDescriptor.from_tensor(c, [bm, bn]), m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
               GROUP_SIZE_M=2)  # fmt: skip
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_interpreter_runs_the_expanded_parameters() -> None:
    x = np.arange(37 * 70, dtype=np.float32).reshape(37, 70)
    out = np.empty((16, 32), np.float32)
    sig = {"desc": "tensordesc<fp32[16, 32]>", "out_ptr": "*fp32", "off_m": "i32", "off_n": "i32"}
    art = compile_kernel(BOX, "read_box", signature=sig, constexprs={"BM": 16, "BN": 32}, emit="tir")
    module = parse_module(art.tir)
    run_kernel(
        module, "read_box", expand_args([TensorDescriptor.from_tensor(x, [16, 32]), out, 25, 50]), (1,)
    )
    np.testing.assert_array_equal(out, _padded_box(x, 25, 50, 16, 32, 0.0))


def test_frontend_parameters_and_hints() -> None:
    sig = {"desc": "tensordesc<fp16[64, 32]>", "out_ptr": "*fp16", "off_m": "i32", "off_n": "i32"}
    hints = {"desc": {"base.divisibility": 16, "stride0.divisibility": 16}}
    art = compile_kernel(
        BOX, "read_box", signature=sig, constexprs={"BM": 64, "BN": 32}, hints=hints, emit="tir"
    )
    head = art.tir.splitlines()[1]
    assert '%desc_base: ptr<f16> {divisibility = 16, tensordesc = "tensordesc<fp16[64, 32]>"}' in head
    assert "%desc_shape0: i32, %desc_shape1: i32, %desc_stride0: i64 {divisibility = 16}" in head
    assert "desc_stride1" not in head  # the last stride is the constant 1


@pytest.mark.parametrize(("spelled", "message"), [
    ("tensordesc<fp16[64, 48]>", "power of two"),
    ("tensordesc<i32[64, 64],nan>", "NaN padding"),
    ("tensordesc<fp16>", "not a descriptor type"),
    ("tensordesc<fp99[64]>", "unknown element type"),
    ("tensordesc<fp16[2, 2, 2, 2, 2, 2]>", "1 to 5 dimensions"),
])  # fmt: skip
def test_bad_spellings_are_compile_errors(spelled: str, message: str) -> None:
    sig = {"desc": spelled, "out_ptr": "*fp16", "off_m": "i32", "off_n": "i32"}
    with pytest.raises(CompileError, match=message):
        compile_kernel(BOX, "read_box", signature=sig, constexprs={"BM": 64, "BN": 64}, emit="tir")


def test_block_shape_must_match_the_kernel_rank() -> None:
    sig = {"desc": "tensordesc<fp32[16]>", "out_ptr": "*fp32", "off_m": "i32", "off_n": "i32"}
    with pytest.raises(CompileError, match="needs 1 values"):
        compile_kernel(BOX, "read_box", signature=sig, constexprs={"BM": 16, "BN": 16}, emit="tir")


@pytest.mark.parametrize(("make", "message"), [
    (lambda x: TensorDescriptor(x, [8, 8], [1, 8], [8, 8]), "contiguous"),
    (lambda x: TensorDescriptor(x, [8, 8], [8, 1], [8, 6]), "powers of two"),
    (lambda x: TensorDescriptor(x, [8], [8, 1], [8, 8]), "same length"),
    (lambda x: TensorDescriptor(x, [8, 8], [8, 1], [8, 8], padding="one"), "padding"),
    (lambda x: TritonStyleDescriptor(x, [8, 8], [8, 1], [8, 8], padding="nan"), "NaN padding"),
])  # fmt: skip
def test_bad_descriptors_are_argument_errors(make, message: str) -> None:
    x = np.zeros((8, 8), np.int32)
    with pytest.raises(ArgumentError, match=message):
        client.jit(BOX, "read_box")[(1,)](make(x), np.zeros((8, 8), np.int32), 0, 0, BM=8, BN=8)


def test_sm80_ptx_assembles() -> None:
    """On targets without TMA a descriptor is the pointer path: masked global loads and stores, vectorised
    (and A copied by cp.async) when the launch's hints say the shapes and strides divide by 16."""
    sig = {"a_desc": "tensordesc<fp16[64, 32]>", "b_desc": "tensordesc<fp16[32, 64]>",
           "c_desc": "tensordesc<fp16[64, 64]>", "M": "i32", "N": "i32", "K": "i32"}  # fmt: skip
    parts = ("base", "shape0", "shape1", "stride0")
    hints = {d: {f"{p}.divisibility": 16 for p in parts} for d in ("a_desc", "b_desc", "c_desc")}
    art = compile_kernel(source("desc_matmul"), "matmul_desc_kernel", signature=sig, hints=hints,
                         constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_SIZE_M": 8},
                         options=CompileOptions(target="cuda:sm_80", num_warps=4, num_stages=3),
                         emit="cubin")  # fmt: skip
    assert art.binary.startswith(b"\x7fELF")
    assert "cp.async.cg" in art.ptx and "mma.sync" in art.ptx and "st.global.v4" in art.ptx
    assert "cp.async.bulk.tensor" not in art.ptx
