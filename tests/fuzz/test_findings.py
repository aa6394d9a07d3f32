"""Regression tests for the fuzzer's findings that are not values (tests/conformance/cases_fuzz_found.py
holds the ones that are): what Triton refuses, tilec refuses too, with a located error."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import build_ir, read_kernel

FLOAT_FLOORDIV = """import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x // 2.5)
"""


def test_fuzz_float_floordiv_is_refused_as_in_triton() -> None:
    """Triton's floordiv takes integers only (TypeError on float32); tilec used to compute floor(a / b)."""
    ks = read_kernel(FLOAT_FLOORDIV, filename="k.py")
    with pytest.raises(CompileError) as info:
        build_ir(ks, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 8})
    e = info.value
    assert "`//` needs integer operands" in e.message
    assert (e.filename, e.line, e.col) == ("k.py", 9, 30)


def test_fuzz_float_floordiv_is_refused_by_triton_interpreter() -> None:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from .differential import run_triton_interpreter
    from .kernelgen import Program

    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    res = run_triton_interpreter(Program(FLOAT_FLOORDIV, {"BLOCK": 8}, {}), [x, out], grid=(1,), outputs=(1,))
    assert res.outputs is None and "TypeError" in (res.error or "")
