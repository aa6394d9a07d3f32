"""Float division, square roots, logs and libdevice as Triton compiles them, checked in the PTX (assembled by
ptxas) without a GPU: f32 `/` is div.full.f32 (Triton's default), tl.math.div_rn is div.rn.f32, f64 `/`
div.rn.f64, fp16 and bf16 operands divide in f32 (Triton's promotion for `/` and `%`); libdevice is linked
with its flush-to-zero paths (nvvm-reflect-ftz, as Triton sets it), and the math ops Triton leaves to
libdevice (sqrt, log, log2, ...) go there too. The interpreter and the cpu target agree on the
quotients (correctly rounded there; div.full is within 2 ulp on the GPU, tests/cuda/test_division_gpu.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilec import client
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir.parser import parse_module
from tilec.compiler.ir.printer import print_module
from tilec.compiler.pipeline import compile_kernel

SRC = """
import triton
import triton.language as tl


@triton.jit
def quot(X, Y, Out, Precise, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + i)
    y = tl.load(Y + i)
    tl.store(Out + i, x / y)
    tl.store(Precise + i, tl.math.div_rn(x.to(tl.float32), y.to(tl.float32)))
"""

RSQRT = """
import triton
import triton.language as tl


@triton.jit
def k(X, Out, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Out + i, tl.math.rsqrt(tl.load(X + i)))
"""


def ptx(src: str, name: str, sig: dict) -> str:
    art = compile_kernel(src, name, signature=sig, constexprs={"BLOCK": 128},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"
    return art.ptx


def _sig(dtype: str, out: str | None = None) -> dict:
    return {"X": f"*{dtype}", "Y": f"*{dtype}", "Out": f"*{out or dtype}", "Precise": "*fp32"}


def test_f32_division_is_div_full_and_div_rn_is_precise() -> None:
    text = ptx(SRC, "quot", _sig("fp32"))
    full, rn = re.findall(r"\bdiv\.full\.f32\b", text), re.findall(r"\bdiv\.rn\.f32\b", text)
    assert full and len(full) == len(rn)  # one of each per element a thread holds


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_half_precision_divides_in_f32(dtype: str) -> None:
    text = ptx(SRC, "quot", _sig(dtype))
    assert re.search(r"\bdiv\.full\.f32\b", text) and not re.search(r"\bdiv\.(rn|full)\.f16\b", text)


def test_f64_division_is_div_rn_f64() -> None:
    text = ptx(SRC, "quot", _sig("fp64"))
    assert re.search(r"\bdiv\.rn\.f64\b", text) and not re.search(r"\bdiv\.full\b", text)


def test_half_division_returns_f32() -> None:
    """Triton: fp16 / fp16 computes and returns fp32 (the IR's div is on f32, and so is what is stored)."""
    text = print_module(build_ir(read_kernel(SRC, "quot"), _sig("fp16", "fp32"), {"BLOCK": 128}))
    assert re.search(r"= div %\d+, %\d+ : tile<128xf32>", text)
    assert re.search(r"= div %\d+, %\d+ \{precise = true\} : tile<128xf32>", text)
    assert print_module(parse_module(text)) == text


def test_libdevice_takes_its_flush_to_zero_paths() -> None:
    text = ptx(RSQRT, "k", {"X": "*fp32", "Out": "*fp32"})
    assert "rsqrt.approx.ftz.f32" in text


def test_interpreter_and_cpu_agree_on_quotients() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(128).astype(np.float32)
    y = rng.standard_normal(128).astype(np.float32)
    x[:4], y[:4] = [1.0, 3.0, 1e-38, 7.0], [3.0, 7.0, 3.0, 0.0]
    with np.errstate(divide="ignore"):
        want = x / y
    out, precise = np.zeros(128, np.float32), np.zeros(128, np.float32)
    client.jit(SRC, "quot")[(1,)](x, y, out, precise, BLOCK=128)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(precise, want)
    ks = read_kernel(SRC, "quot")
    mod = build_ir(ks, _sig("fp32"), {"BLOCK": 128})
    host = [x.copy(), y.copy(), np.zeros(128, np.float32), np.zeros(128, np.float32)]
    run_kernel(mod, "quot", host, (1, 1, 1))
    np.testing.assert_array_equal(host[2], want)
    np.testing.assert_array_equal(host[3], want)


MATH = """
import triton
import triton.language as tl


@triton.jit
def k(X, Out, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + i)
    tl.store(Out + i, OP)
"""

# Triton's lowering of each (f32): exp is ex2.approx of x * log2(e), sqrt_rn is sqrt.rn, the rest libdevice
# under flush-to-zero (sqrt: sqrt.approx.ftz; exp2: ex2.approx.ftz; log, log2: libdevice's polynomials)
MATH_PTX = {
    "tl.sqrt(x)": (["sqrt.approx.ftz.f32"], ["sqrt.rn"]),
    "tl.math.sqrt_rn(x)": (["sqrt.rn.f32"], ["sqrt.approx"]),
    "tl.exp(x)": (["ex2.approx.f32"], ["ex2.approx.ftz"]),
    "tl.exp2(x)": (["ex2.approx.ftz.f32"], []),
    "tl.log(x)": (["fma.rn.ftz.f32"], ["lg2.approx"]),
    "tl.log2(x)": (["fma.rn.ftz.f32"], ["lg2.approx"]),
    "tl.math.rsqrt(x)": (["rsqrt.approx.ftz.f32"], []),
}


@pytest.mark.parametrize("expr", list(MATH_PTX))
def test_math_lowers_as_triton_does(expr: str) -> None:
    text = ptx(MATH.replace("OP", expr), "k", {"X": "*fp32", "Out": "*fp32"})
    present, absent = MATH_PTX[expr]
    assert all(p in text for p in present), [p for p in present if p not in text]
    assert not any(a in text for a in absent), [a for a in absent if a in text]


def test_sqrt_rn_is_a_precise_sqrt_that_round_trips() -> None:
    src = MATH.replace("OP", "tl.math.sqrt_rn(x) + tl.sqrt(x)")
    text = print_module(build_ir(read_kernel(src, "k"), {"X": "*fp32", "Out": "*fp32"}, {"BLOCK": 128}))
    assert re.search(r"= sqrt %\d+ \{precise = true\} : tile<128xf32>", text)
    assert re.search(r"= sqrt %\d+ : tile<128xf32>", text)
    assert print_module(parse_module(text)) == text
