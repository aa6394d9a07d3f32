"""tl.device_print on cuda (compiler/backends/cuda/printing.py): vprintf from the thread holding each element.
The PTX is checked here (ptxas); on a GPU the lines are those the cpu target and the interpreter print
(as a set: threads print in the order the GPU runs them)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.client.test_jit_cpu import PRINTING, _print_lines
from tests.cuda.gpu import gpu_reason, to_device
from tilec import client
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_device_print_assembles_with_vprintf(sm: str) -> None:
    art = compile_kernel(PRINTING, "show", signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 4},
                         options=CompileOptions(target=f"cuda:{sm}"), emit="cubin")  # fmt: skip
    assert art.binary.startswith(b"\x7fELF") and "vprintf" in art.ptx


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
def test_device_print_on_the_gpu_prints_the_cpu_lines(capfd: pytest.CaptureFixture) -> None:
    import torch

    x = np.array([0.5, 1.5, 2.5, -3.0], np.float32)
    client.jit(PRINTING, "show")[(2,)](to_device(x), 4, BLOCK=4)
    torch.cuda.synchronize()
    got = capfd.readouterr().out.splitlines()
    assert sorted(got) == sorted(_print_lines(0, x) + _print_lines(1, x))


ASSERTING = """
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1)
    tl.device_assert(x > 0, "x must be positive")
    tl.store(x_ptr + offs, x + 1, mask=offs < n)
"""


@pytest.mark.parametrize("debug", [False, True])
def test_device_assert_is_checked_in_debug_builds_only(debug: bool) -> None:
    """As in Triton: without debug a device assert costs nothing; with it (TRITON_DEBUG=1 under the
    drop-in, JITKernel.debug) a false element calls __assertfail."""
    art = compile_kernel(ASSERTING, "k", signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 128},
                         options=CompileOptions(target="cuda:sm_90", debug=debug), emit="cubin")  # fmt: skip
    assert ("__assertfail" in art.ptx) == debug


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
def test_a_failing_device_assert_in_debug_stops_the_launch(tmp_path) -> None:
    """In a fresh process: a device assert leaves the CUDA context unusable, as it does under Triton."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import torch
        from tilec import client
        k = client.jit({ASSERTING!r}, "k")
        k.debug = True
        x = torch.ones(100, device="cuda")
        k[(1,)](x, 100, BLOCK=128)
        torch.cuda.synchronize()
        print("passing launch ok")
        x[7] = -1.0
        k[(1,)](x, 100, BLOCK=128)
        torch.cuda.synchronize()
        print("failing launch did not fail")
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "passing launch ok" in out.stdout and "did not fail" not in out.stdout, out.stdout + out.stderr
    assert out.returncode != 0 and "x must be positive" in out.stdout + out.stderr, out.stderr
