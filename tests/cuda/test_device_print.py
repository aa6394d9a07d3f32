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
